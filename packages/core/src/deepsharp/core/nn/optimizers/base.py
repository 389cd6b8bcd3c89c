"""What every optimizer shares: its memory laid out on the engine, its settings checked, its
learning rate (a number or a schedule), and gradient clipping.

`apply` is what a trainer calls: the gradients clipped where the optimizer was asked to
(`clip_norm`: each slot's gradient to that norm at most; `global_clip_norm`: every slot's
together, as Keras's `clipnorm` and `global_clipnorm` do — g·c / max(‖g‖, c)), then `update`.
The trainer calls it once every hook has had the gradients: under data parallelism the norm
is the summed gradient's, under a loss scale the unscaled one's. Both clippings are fast paths
with references (`deepsharp.core.engine.fused`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from deepsharp.core.edits import Checked, Settled
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ConfigurationError
from deepsharp.core.nn.optimizers.schedules import Schedule
from deepsharp.core.reals import brief, finite_real

__all__ = [
    "LearningRate",
    "Optimizer",
    "OptimizerState",
    "checked",
    "learning_rate_setting",
    "setting",
]

LearningRate = float | Schedule
"""What an optimizer's `learning_rate` takes: a number, or a schedule of the step."""


class OptimizerState:
    """An optimizer's memory of each slot (handles on the engine), the updates applied so far
    (`steps`: what a schedule reads), and `rate_scale`, the factor the run's callbacks have put
    on the learning rate (`ReduceOnPlateau`): kept in checkpoints, so a resumed run takes the
    rates the uninterrupted one takes."""

    def __init__(
        self, memory: dict[str, list[Handle]], steps: int, rate_scale: float = 1.0
    ) -> None:
        self.memory = memory
        self.steps = steps
        self.rate_scale = rate_scale


class Optimizer(Settled):
    """Holds its settings; its memory (`memories`, one tensor of each a slot, starting at zero)
    is made on an engine by `start`, laid out as the slots are: the parts of one flat tensor.

    An optimizer of one's own sets `learning_rate` (through `learning_rate_setting`), reads the
    step's rate with `self.rate(state)` in its `update` (the updates applied so far are
    `state.steps`, counted after each update where the update does not count it itself), and
    lists its settings in `config()`; clipping is the base class's (`clipping(clip_norm,
    global_clip_norm)` in its constructor, its settings in `config()` through
    `clipping_config()`).
    """

    memories: tuple[str, ...] = ()
    learning_rate = Checked(
        lambda optimizer, rate: learning_rate_setting(type(optimizer).__name__, rate),
        default=0.001,
    )
    """A number or a schedule (`LearningRate`), checked as it is assigned (`Checked`)."""
    clip_norm = Checked(lambda optimizer, norm: _norm(optimizer, "clip_norm", norm), default=None)
    """The largest norm of each slot's gradient (None: not clipped), checked as assigned."""
    global_clip_norm = Checked(
        lambda optimizer, norm: _norm(optimizer, "global_clip_norm", norm), default=None
    )
    """The largest norm of all the gradients together (None: not clipped)."""

    def clipping(self, clip_norm: float | None, global_clip_norm: float | None) -> None:
        """Set (and check) the gradient clipping: None leaves it off."""
        self.clip_norm = clip_norm
        self.global_clip_norm = global_clip_norm

    def rate(self, state: OptimizerState) -> float:
        """The learning rate of the update about to be applied: the number, or the schedule at
        the updates applied so far, times what the run's callbacks put on it."""
        rate = self.learning_rate
        base = _scheduled(rate, state.steps) if isinstance(rate, Schedule) else rate
        return base * state.rate_scale if state.rate_scale != 1.0 else base

    def apply(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        """The step's update: the gradients clipped as asked, then `update`, counted in
        `state.steps` (what a schedule reads): an `update` of one's own that does not count its
        updates (SGD's and Adam's do, to read the count in their arithmetic) is counted here."""
        if self.clip_norm is not None:
            grads = fused.clip_norm(engine, grads, clip_norm=self.clip_norm)
        if self.global_clip_norm is not None:
            grads = fused.global_clip_norm(engine, grads, clip_norm=self.global_clip_norm)
        before = state.steps
        self.update(engine, slots, grads, state)
        if state.steps == before:
            state.steps += 1

    def clipping_config(self) -> dict[str, Any]:
        """The clipping settings for `config()` (none where clipping is off: older records hold
        none)."""
        found: dict[str, Any] = {}
        if self.clip_norm is not None:
            found["clip_norm"] = self.clip_norm
        if self.global_clip_norm is not None:
            found["global_clip_norm"] = self.global_clip_norm
        return found

    def rate_config(self) -> Any:
        """The learning rate as a checkpoint records it: the number, or the schedule's kind and
        settings."""
        rate = self.learning_rate
        return rate.record() if isinstance(rate, Schedule) else rate

    def start(self, engine: Engine, shapes: Sequence[tuple[int, ...]]) -> OptimizerState:
        total = sum(math.prod(shape) for shape in shapes)
        return OptimizerState(
            {name: fused.parts(engine, engine.zeros((total,)), shapes) for name in self.memories},
            0,
        )

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        """Change the slots in place from their gradients (and the memory in `state`)."""
        raise NotImplementedError(
            f"{type(self).__name__}: an Optimizer of one's own writes update(self, engine, "
            "slots, grads, state), changing each slot in place (fused.sgd_update, say)"
        )

    def config(self) -> dict[str, Any]:
        """The settings, as the constructor takes them (checkpoints record them)."""
        raise NotImplementedError(
            f"{type(self).__name__}: an Optimizer of one's own writes config(self), its "
            "settings as its constructor takes them ({'learning_rate': self.rate_config(), ...}): "
            "checkpoints and saved runs record them"
        )

    def __repr__(self) -> str:
        settings = self.config()
        if isinstance(self.learning_rate, Schedule) and "learning_rate" in settings:
            settings["learning_rate"] = self.learning_rate  # as it is written (trial TT4)
        args = ", ".join(f"{k}={v!r}" for k, v in settings.items())
        return f"{type(self).__name__}({args})"


def learning_rate_setting(optimizer: str, value: Any) -> LearningRate:
    """A learning rate: a finite number above 0, or a `Schedule`; refused otherwise (a
    callback such as `ReduceOnPlateau` is named for what it is: it goes to `fit`)."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, type) and issubclass(value, Schedule):
        raise TypeError(
            f"{optimizer}'s learning_rate is the class {value.__name__}, not a schedule: write "
            f"{value.__name__}(...) with its settings"
        )
    if hasattr(value, "on_epoch_end"):  # a callback (ReduceOnPlateau) where a rate belongs
        raise TypeError(
            f"{optimizer}'s learning_rate is a number or a schedule (CosineDecay, StepDecay); "
            f"{type(value).__name__} is a callback of the run: give the rate it starts from "
            f"here and the callback to fit, fit(..., callbacks=[{type(value).__name__}(...)])"
        )
    return setting(optimizer, "learning_rate", value, above=0.0)


def setting(
    optimizer: str,
    name: str,
    value: Any,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
) -> float:
    """`value` as a float, refused unless it is a finite real number (not a bool) in range:
    > `above`, >= `at_least`, < `below` (a TypeError for the wrong kind, a ValueError for a
    value out of range, each naming the optimizer, the setting and what it must be)."""
    wanted = []
    if above is not None:
        wanted.append(f"> {above:g}")
    if at_least is not None:
        wanted.append(f">= {at_least:g}")
    if below is not None:
        wanted.append(f"< {below:g}")
    must = "a finite number" + (f" {' and '.join(wanted)}" if wanted else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{optimizer}'s {name} must be {must}, not {value!r} ({type(value).__name__})"
        )
    number = finite_real(value)
    if (
        number is None
        or (above is not None and not number > above)
        or (at_least is not None and not number >= at_least)
        or (below is not None and not number < below)
    ):
        raise ValueError(f"{optimizer}'s {name} must be {must}, not {brief(value)}")
    return number


def checked(
    name: str,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
) -> Checked:
    """An optimizer's number setting, checked (`setting`) whenever it is assigned."""
    return Checked(
        lambda optimizer, value: setting(
            type(optimizer).__name__, name, value, above=above, at_least=at_least, below=below
        )
    )


def _norm(optimizer: object, name: str, norm: Any) -> float | None:
    """A clipping norm: None (off) or a finite number above 0 (trial S2: clip_norm = -1
    assigned after construction was taken, and trained the slots the wrong way)."""
    return None if norm is None else setting(type(optimizer).__name__, name, norm, above=0.0)


def _scheduled(schedule: Schedule, steps: int) -> float:
    """A schedule's rate at `steps`, checked as a number given is where it is made (a schedule
    of one's own may give anything): a finite number of at least 0 (a warm-up starts at 0)."""
    value = schedule.rate(steps)
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (math.isfinite(value) and value >= 0)
    ):
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        why = (  # (trial TT4: a NaN or a text was said to climb the loss)
            "below 0 each update would climb the loss"
            if number and value < 0
            else "it is the number each update multiplies its step by"
        )
        raise ConfigurationError(
            f"{type(schedule).__name__}.rate({steps}) gave {brief(value)}: a schedule's rate is a "
            f"finite number of at least 0 ({why}): mend its rate()"
        )
    return float(value)

"""Loss scaling: gradients that would underflow the half format, multiplied into its range.

Under `mixed_float16` the products' inputs are rounded to float16, whose smallest normal value is
2^-14 (6.1e-5) and smallest value at all 2^-24 (6e-8): the small gradients a network sends back
lose their bits there, or turn to 0, and the slots they belong to stop learning. A loss scale S
multiplies the loss before the way back, so every gradient on the way is S times larger (the rules
are linear in the gradient they are handed); before the update the gradients are divided by S
again (exactly where S is a power of two, as every scale of the dynamic rule is from a
power-of-two start such as the default; another S, `LossScale(3.0)`, is taken, and its
gradients are rounded once more by the multiplication by 1/S). A gradient S times too large may overflow instead: a step
whose gradients hold inf or NaN is skipped — the optimizer does not see it — and counted
(`trainer.skipped_steps`, `run.report.skipped_steps`).

`LossScale(initial=2**16)` is dynamic, PyTorch's `GradScaler` rule: S starts at 2^16; a step that
overflows halves it (and is skipped); 2,000 steps in a row without overflow double it (unless
doubling would make it infinite). `LossScale(S, dynamic=False)` keeps S fixed (steps that overflow
are still skipped). The engine does the arithmetic; each step reads one more number, whether its
gradients are finite, in the same transfer that brings back its loss (`Trainer.read`).

What a run takes (`FitOptions(loss_scale=...)`, `Trainer(..., loss_scale=...)`):

- `"auto"` (the default): dynamic under `mixed_float16`, none otherwise (bfloat16 has float32's
  range, and float32 needs none);
- `"dynamic"`: `LossScale()`; a number: `LossScale(number, dynamic=False)`; a `LossScale`: itself;
  `None`: no scaling.

Its scale and its count of good steps go into checkpoints, so a resumed run ends bit for bit
where the uninterrupted one does; a checkpoint taken with another loss scale is refused.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from deepsharp.core.autodiff.functions import mul
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Handle
from deepsharp.core.errors import CheckpointMismatchError, FileFormatError
from deepsharp.core.reals import finite_real, is_whole
from deepsharp.core.training.hooks import Share, StepHook

if TYPE_CHECKING:
    from deepsharp.core.training.trainer import Trainer

__all__ = ["LOSS_SCALES", "LossScale", "LossScaleSetting", "check_loss_scale", "loss_scale_for"]

LossScaleSetting = Union[str, float, "LossScale", None]
"""What a run may be given: "auto", "dynamic", a number, a `LossScale`, or None."""

LOSS_SCALES = ("auto", "dynamic")
"""The settings given by name (beside a number, a `LossScale` and None)."""

SCALED_BY_DEFAULT = ("mixed_float16",)
"""The precisions a run scales its loss under when it is not told: their half format's range."""

SETTINGS = ("initial", "dynamic", "growth", "backoff", "interval")
"""What a checkpoint records of a loss scale's rule, beside its scale and count."""

LEAST = 2.0**-126
"""The least scale: float32's least normal number (its inverse, 2**126, is one too). The dynamic
rule backs off no lower: a scale halved on from there reached 0, and unscaling divided by it."""


class LossScale(StepHook):
    """A loss scale: the loss times `scale` before the way back, the gradients divided by it
    before the update, and a step with inf or NaN gradients skipped.

    Dynamic (PyTorch's GradScaler rule, its settings by default): an overflow multiplies the
    scale by `backoff` (down to 2**-126, where steps that overflow are still skipped);
    `interval` good steps in a row multiply it by `growth`."""

    name = "loss_scale"

    def __init__(
        self,
        initial: float = 2.0**16,
        *,
        dynamic: bool = True,
        growth: float = 2.0,
        backoff: float = 0.5,
        interval: int = 2000,
    ) -> None:
        for what, value, low in (("initial", initial, 0.0), ("growth", growth, 1.0)):
            if not _positive_number(value) or value <= low:
                raise ValueError(
                    f"LossScale: {what} must be a finite number above {low:g}, not {value!r}"
                )
        _in_range(float(initial), "LossScale: initial")
        if not math.isfinite(_float32(growth)):
            raise ValueError(f"LossScale: growth {growth!r} is beyond float32's range (3.4e38)")
        if not _positive_number(backoff) or backoff >= 1.0:
            raise ValueError(f"LossScale: backoff must be a number in (0, 1), not {backoff!r}")
        # The rule multiplies in float32: a factor that rounds to 1 there never moves the scale
        # (a "dynamic" scale that skipped every step, trial M).
        start = _float32(float(initial))
        for what, value in (("growth", growth), ("backoff", backoff)):
            if any(_float32(at * float(value)) == at for at in (2.0**16, start)):
                raise ValueError(
                    f"LossScale: {what} {value!r} rounds to 1 in float32, where the scale is "
                    "multiplied by it: the scale would never move (PyTorch's: growth 2, "
                    "backoff 0.5)"
                )
        if not is_whole(interval) or interval < 1:
            raise ValueError(f"LossScale: interval must be a whole number from 1, not {interval!r}")
        if not isinstance(dynamic, bool):
            raise TypeError(f"LossScale: dynamic is True or False, not {dynamic!r}")
        self.initial = _float32(float(initial))
        self.dynamic = dynamic
        self.growth = float(growth)
        self.backoff = float(backoff)
        self.interval = int(interval)
        self.scale = self.initial
        """The scale the next step's loss is multiplied by."""
        self.good_steps = 0
        """Steps in a row without overflow since the scale last changed (dynamic only)."""

    def __repr__(self) -> str:
        if not self.dynamic:
            return f"LossScale({self.initial:g}, dynamic=False)"
        return (
            f"LossScale({self.initial:g}, growth={self.growth:g}, backoff={self.backoff:g}, "
            f"interval={self.interval})"
        )

    def settings(self) -> dict[str, Any]:
        """What a checkpoint records of the rule (a run goes on only under the same)."""
        return {key: getattr(self, key) for key in SETTINGS}

    # --- the step -------------------------------------------------------------------------------

    def objective(self, trainer: Trainer, value: Tensor, share: Share | None) -> Tensor:
        return mul(value, self.scale * divided(trainer))

    def objective_key(self) -> float:
        return self.scale

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        engine = trainer.engine
        # The largest |g| of each is inf (or NaN) where it holds inf or NaN: that times 0 is
        # NaN, a finite one's 0, and their total says (a total of the largest values could
        # overflow where every gradient is finite).
        flag: Handle | None = None
        for grad in grads:
            axes = tuple(range(len(engine.shape(grad))))
            part = engine.mul(engine.max(engine.abs(grad), axes) if axes else engine.abs(grad), 0.0)
            flag = part if flag is None else engine.add(flag, part)
        finite = flag is None or math.isfinite(trainer.read(flag))
        # as GradScaler: 1/S rounded to float32 (a power of two more: the same mantissa)
        inverse = float(np.float32(1.0 / (self.scale * divided(trainer))))
        self.update(finite)
        if not finite:
            return None
        return [engine.mul(grad, inverse) for grad in grads]

    def update(self, finite: bool) -> None:
        """The rule, after a step whose gradients were finite or not."""
        if not self.dynamic:
            return
        if not finite:
            self.scale = max(_float32(self.scale * self.backoff), LEAST)
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.interval:
            grown = _float32(self.scale * self.growth)
            if math.isfinite(grown):
                self.scale = grown
            self.good_steps = 0

    # --- checkpoints ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {**self.settings(), "scale": self.scale, "good_steps": self.good_steps}

    def restore(self, state: Mapping[str, Any]) -> None:
        scale, good = state.get("scale"), state.get("good_steps")
        if not _positive_number(scale):
            raise FileFormatError(
                f"checkpoint: its loss scale must be a finite number above 0, not {scale!r}"
            )
        if isinstance(good, bool) or not isinstance(good, int) or not 0 <= good < self.interval:
            raise FileFormatError(
                f"checkpoint: its loss scale's good steps must be a whole number in "
                f"0..{self.interval - 1}, not {good!r}"
            )
        assert isinstance(scale, (int, float, np.floating, np.integer))
        try:  # a checkpoint's scale as the settings' (was taken as it was: trial M)
            _in_range(float(scale), "checkpoint: its loss scale")
        except ValueError as error:
            raise FileFormatError(str(error)) from None
        self.scale, self.good_steps = float(scale), good


def _float32(value: Any) -> float:
    """A scale as GradScaler holds it: a float32 number (beyond float32's range, infinite)."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _positive_number(value: object) -> bool:
    number = finite_real(value)
    return number is not None and number > 0


def check_setting(setting: object, where: str) -> None:
    """Refuse what is no loss scale setting (TypeError or ValueError, saying what is)."""
    if setting is None or isinstance(setting, LossScale):
        return
    if isinstance(setting, str):
        if setting not in LOSS_SCALES:
            raise ValueError(
                f"{where}: loss_scale is 'auto', 'dynamic', a number, a LossScale or None, not "
                f"{setting!r}"
            )
        return
    if not _positive_number(setting):
        number = isinstance(setting, numbers.Real) and not isinstance(setting, bool)
        raise (ValueError if number else TypeError)(  # a number of the wrong value, or no number
            f"{where}: loss_scale is 'auto', 'dynamic', a finite number above 0, a LossScale or "
            f"None, not {setting!r}"
        )
    _in_range(float(setting), f"{where}: loss_scale")  # type: ignore[arg-type]


def _in_range(scale: float, where: str) -> None:
    """Refuse a scale float32 cannot hold, or whose inverse (what the gradients are multiplied
    by) it cannot: the first overflowed to inf, the second made every slot NaN, blamed on the
    learning rate."""
    if not math.isfinite(_float32(scale)):
        raise ValueError(
            f"{where} {scale!r} is beyond float32's range (3.4e38), in which the loss is "
            "scaled: give a power of two such as 2**16"
        )
    if not _float32(scale) >= LEAST:
        raise ValueError(
            f"{where} {scale!r} is below 2**-126, the least scale (float32's least normal "
            "number; below it scales lose their bits): give a power of two of at least 2**-126"
        )


def loss_scale_for(setting: LossScaleSetting, precision: str) -> LossScale | None:
    """The loss scale a run on an engine of `precision` takes for `setting` (a fresh one: a
    `LossScale` handed in is copied, so a run never changes what its caller holds)."""
    check_setting(setting, "loss scale")
    if setting == "auto":
        setting = "dynamic" if precision in SCALED_BY_DEFAULT else None
    if setting is None:
        return None
    if setting == "dynamic":
        return LossScale()
    if isinstance(setting, LossScale):
        return LossScale(
            setting.initial,
            dynamic=setting.dynamic,
            growth=setting.growth,
            backoff=setting.backoff,
            interval=setting.interval,
        )
    assert isinstance(setting, (int, float, np.floating, np.integer))
    return LossScale(float(setting), dynamic=False)


def check_loss_scale(hooks: Mapping[str, Any], scale: LossScale | None, where: str) -> None:
    """Refuse a checkpoint's hook states taken under another loss scale than `scale` (or with
    one where this run has none, or the other way round): CheckpointMismatchError naming both."""
    state = hooks.get(LossScale.name)
    ours = None if scale is None else scale.settings()
    kept = None if state is None else {key: state.get(key) for key in SETTINGS}
    if kept == ours:
        return
    raise CheckpointMismatchError(
        f"{where} was taken with {_described(kept)}; this run has {_described(ours)}: resume "
        "with the loss scale it was taken with (FitOptions(loss_scale=...)), or start afresh"
    )


def _described(settings: Mapping[str, Any] | None) -> str:
    if settings is None:
        return "no loss scale"
    if not settings.get("dynamic"):
        return f"the fixed loss scale {settings.get('initial')!r}"
    return (
        f"the dynamic loss scale (from {settings.get('initial')!r}, x{settings.get('growth')!r} "
        f"after {settings.get('interval')!r} good steps, x{settings.get('backoff')!r} on overflow)"
    )


def divided(trainer: Trainer) -> float:
    """The power of two nearest 1 over the parts a step's batch is cut into (its processes
    times the batches it accumulates), the scale's factor on each part: a part's loss is the
    mean over its own rows, so its way back's values in the half format are as large as one
    batch of all the rows gives them only so; scaled by the scale alone, they overflowed at
    half the scale on two processes or under accumulate=2 (other steps skipped than one
    process's: trial W). A power of two: the unscaled gradients keep their bits where nothing
    overflows or falls below the half format's range."""
    parts = trainer.processes * trainer.accumulate
    return 1.0 if parts == 1 else 2.0 ** -round(math.log2(parts))

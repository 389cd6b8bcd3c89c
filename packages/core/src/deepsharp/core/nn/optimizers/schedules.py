"""Learning-rate schedules: the rate an optimizer takes at each step, a function of the step.

An optimizer's `learning_rate` is a number or a `Schedule`. The step is the trainer's count of
updates applied before this one (0 for the first), kept in checkpoints with the optimizer's
memory: a run resumed mid-schedule takes the rates the uninterrupted run takes, bit for bit.
A step a loss scale skips applies no update and so does not count. Under gradient accumulation
a step is one update (of `accumulate` batches).

A schedule of one's own subclasses `Schedule` and says its `rate(step)` and its `config()`
(the settings a checkpoint records: a run goes on only under the same schedule)::

    class Halving(Schedule):
        def __init__(self, initial: float, every: int) -> None:
            self.initial, self.every = initial, every

        def rate(self, step: int) -> float:
            return self.initial / 2 ** (step // self.every)

        def config(self) -> dict[str, Any]:
            return {"initial": self.initial, "every": self.every}

`ReduceOnPlateau` (which reads the validation loss) is a callback of the run:
`deepsharp.core.training.callbacks`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["CosineDecay", "Schedule", "StepDecay", "check_schedule_count", "check_schedule_number"]


class Schedule:
    """A learning rate that changes with the step: `rate(step)`, step the updates applied
    before this one (0 for the first)."""

    def rate(self, step: int) -> float:
        """The learning rate of the update after `step` updates."""
        raise NotImplementedError(
            f"{type(self).__name__}: a Schedule of one's own writes rate(self, step), the "
            "learning rate after `step` updates"
        )

    def config(self) -> dict[str, Any]:
        """Its settings, as JSON values (checkpoints record them, with the schedule's kind)."""
        raise NotImplementedError(
            f"{type(self).__name__}: a Schedule of one's own writes config(self), its settings "
            "as JSON values (checkpoints record them)"
        )

    def record(self) -> dict[str, Any]:
        """What an optimizer's settings hold of it: its kind and its settings."""
        return {"schedule": type(self).__name__, **self.config()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, Schedule)
            and (other.config() == self.config())
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(sorted(self.config().items()))))


def check_schedule_number(
    kind: str,
    name: str,
    value: object,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> float:
    """A schedule's setting, refused (TypeError or ValueError naming the schedule, the setting
    and what it must be) unless it is a finite number in range."""
    must = _must("a finite number", above, at_least, at_most)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{kind}'s {name} must be {must}, not {value!r}")
    number = float(value)
    if (
        not math.isfinite(number)
        or (above is not None and not number > above)
        or (at_least is not None and not number >= at_least)
        or (at_most is not None and not number <= at_most)
    ):
        raise ValueError(f"{kind}'s {name} must be {must}, not {value!r}")
    return number


def check_schedule_count(kind: str, name: str, value: object, at_least: int) -> int:
    """A schedule's count of steps: a whole number from `at_least` (TypeError or ValueError
    naming the schedule and the setting otherwise)."""
    must = _must("a whole number", None, at_least, None)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{kind}'s {name} must be {must}, not {value!r}")
    if int(value) < at_least:
        raise ValueError(f"{kind}'s {name} must be {must}, not {value!r}")
    return int(value)


def _must(what: str, above: float | None, at_least: float | None, at_most: float | None) -> str:
    wanted = []
    if above is not None:
        wanted.append(f"> {above:g}")
    if at_least is not None:
        wanted.append(f">= {at_least:g}")
    if at_most is not None:
        wanted.append(f"<= {at_most:g}")
    return what + (f" {' and '.join(wanted)}" if wanted else "")


def _check_step(schedule: Schedule, step: object) -> None:
    """A count of updates: a whole number of 0 or more."""
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ValueError(
            f"{type(schedule).__name__}.rate takes the updates applied so far, a whole number of "
            f"0 or more, not {step!r}"
        )


class CosineDecay(Schedule):
    """A warm-up then a cosine decay, as Keras's `CosineDecay` and optax's
    `warmup_cosine_decay_schedule` take them: for the first `warmup` steps the rate rises in a
    straight line from 0 to `initial` (initial·step/warmup); over the next `steps` it falls
    along half a cosine to `final`, final + (initial - final)·(1 + cos(π·t/steps))/2 with t the
    steps since the warm-up; after that it stays `final`."""

    def __init__(self, initial: float, steps: int, warmup: int = 0, final: float = 0.0) -> None:
        self.initial = check_schedule_number("CosineDecay", "initial", initial, above=0.0)
        self.steps = check_schedule_count("CosineDecay", "steps", steps, 1)
        self.warmup = check_schedule_count("CosineDecay", "warmup", warmup, 0)
        self.final = check_schedule_number(
            "CosineDecay", "final", final, at_least=0.0, at_most=self.initial
        )

    def rate(self, step: int) -> float:
        _check_step(self, step)
        if step < self.warmup:
            return self.initial * step / self.warmup
        t = min(step - self.warmup, self.steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * t / self.steps))
        return self.final + (self.initial - self.final) * cosine

    def config(self) -> dict[str, Any]:
        return {
            "initial": self.initial,
            "steps": self.steps,
            "warmup": self.warmup,
            "final": self.final,
        }


class StepDecay(Schedule):
    """The rate times `factor` every `every` steps: initial·factor^(step // every) (Keras's
    `ExponentialDecay(staircase=True)`)."""

    def __init__(self, initial: float, every: int, factor: float) -> None:
        self.initial: float = check_schedule_number("StepDecay", "initial", initial, above=0.0)
        self.every: int = check_schedule_count("StepDecay", "every", every, 1)
        # a decay: a factor above 1 grew the rate until a float overflowed (OverflowError)
        self.factor: float = check_schedule_number(
            "StepDecay", "factor", factor, above=0.0, at_most=1.0
        )

    def rate(self, step: int) -> float:
        _check_step(self, step)
        return float(self.initial * self.factor ** (step // self.every))

    def config(self) -> dict[str, Any]:
        return {"initial": self.initial, "every": self.every, "factor": self.factor}

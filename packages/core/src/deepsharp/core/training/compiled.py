"""The compiled step: a trainer's forward pass and way back traced once, then replayed as a
plan for every later batch of the same shapes.

A step's part (its rows' loss and every slot's gradient, `Trainer.part`) is what a plan stands
for (`deepsharp.core.autodiff.plan`): the first batch of each kind — the shapes and dtypes of its
inputs and targets, whether it weighs its rows, where its rows lie in the whole batch, and what
the step hooks' objectives read (a loss scale's scale) — runs as recorded while its engine calls
are captured; later batches of that kind replay the calls (`Plan`), with the same bits. What
follows the way back (the hooks, clipping and the optimizer's update) reads the run's state on
the host (a schedule's rate, a loss scale's decision) and runs as it is, after the plan.

A step a plan cannot stand for runs as recorded, and `why` says what stops it: a transfer during
the pass that no host step makes (a layer reading a value on the host), a step hook that changes
the objective without saying what it reads (`StepHook.objective_key`), `compile=False`. The run's
report says how many steps replayed a plan and why any could not.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepsharp.core.autodiff.plan import Plan, capture
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Handle
from deepsharp.core.random import Generator
from deepsharp.core.training.hooks import StepHook

if TYPE_CHECKING:
    from deepsharp.core.training.trainer import Trainer

__all__ = ["OFF", "CompiledSteps", "Part", "StepsRun"]

Part = tuple[Tensor, list[Handle]]
"""A part of a step: its loss (on the engine) and every slot's gradient."""

KEPT = 16
"""Plans a trainer keeps (the least recently used goes first): a run's batch sizes (its last
batch is smaller), accumulated parts, a dynamic loss scale's values."""

OFF = "compile=False"


@dataclass(frozen=True)
class StepsRun:
    """How a run's steps ran (`report.steps`): `compiled` whether the run asked for compiled
    steps; `replayed` the steps whose every pass replayed a plan; `recorded` the steps run as
    recorded (each kind of batch's first, traced into its plan, among them); `plans` how many
    plans were made; `why` what stopped a step being compiled, where something did."""

    compiled: bool
    replayed: int
    recorded: int
    plans: int
    why: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """What a report says of it."""
        if not self.compiled:
            return [f"steps: {self.recorded:,} ran as recorded ({OFF.split(': ')[0]})"]
        said = (
            f"steps: {self.replayed:,} replayed a compiled plan ({self.plans} made), "
            f"{self.recorded:,} ran as recorded"
        )
        return [said, *(f"  not compiled: {why}" for why in self.why)]


class CompiledSteps:
    """A trainer's plans, one for each kind of batch it has met, and what it knows of the steps
    it could not compile: `replayed` counts the steps whose every part replayed a plan,
    `recorded` the others (each kind's first, traced, among them)."""

    def __init__(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"compile is True or False, not {enabled!r}")
        self.enabled = enabled
        self.plans: OrderedDict[Hashable, tuple[Plan, int] | None] = OrderedDict()
        self.why: list[str] = []
        self.replayed = 0
        self.recorded = 0
        self.made = 0
        self._whole = True  # every part of the step under way replayed a plan

    def begin(self) -> None:
        """A step's parts begin."""
        self._whole = True

    def end(self) -> None:
        """A step's parts are done: count the step."""
        if self._whole:
            self.replayed += 1
        else:
            self.recorded += 1

    def record(self) -> StepsRun:
        """How the steps so far ran, for a report."""
        return StepsRun(self.enabled, self.replayed, self.recorded, self.made, tuple(self.why))

    def clear(self) -> None:
        """Forget every plan (the values they read are gone: the trainer let go of them)."""
        self.plans.clear()

    def part(
        self,
        trainer: Trainer,
        inputs: Sequence[Tensor | None],
        masks: Generator | None,
        share: tuple[int, int, int] | None,
        recorded: Callable[[], Part],
    ) -> Part:
        """A step's part: replayed from its plan, traced into one, or run as `recorded()`."""
        key = self._key(trainer, inputs, share) if self.enabled else None
        if key is None:
            self._whole = False
            return recorded()
        handles = [*(t.handle for t in inputs if t is not None), masks]
        engine = trainer.engine
        if key in self.plans:
            found = self.plans[key]
            self.plans.move_to_end(key)
            if found is not None:
                plan, rules = found
                loss, grads = plan(*handles)
                trainer.rules_applied += rules
                return Tensor(loss, (), engine), list(grads)
            self._whole = False
            return recorded()
        self._whole = False
        before = trainer.rules_applied
        held = trainer.held
        fixed = [*held.kept, *(h for kind in held.state.memory.values() for h in kind)]
        captured = capture(
            engine, recorded, handles, fixed, lambda part: (part[0].handle, part[1])
        )
        if captured.plan is None:
            self._because(str(captured.why))
            self.plans[key] = None
        else:
            self.plans[key] = (captured.plan, trainer.rules_applied - before)
            self.made += 1
        while len(self.plans) > KEPT:
            self.plans.popitem(last=False)
        result: Part = captured.result
        return result

    def _key(
        self, trainer: Trainer, inputs: Sequence[Tensor | None], share: tuple[int, int, int] | None
    ) -> Hashable | None:
        """What a batch's plan depends on, or None (and why) where a hook's objective cannot say."""
        read = []
        for hook in trainer.hooks:
            if _changes_objective(hook) and type(hook).objective_key is StepHook.objective_key:
                self._because(
                    f"the step hook {type(hook).__name__} changes the objective and does not say "
                    "what it reads (StepHook.objective_key): its steps ran as recorded"
                )
                return None
            read.append(hook.objective_key())
        shapes = tuple(None if t is None else (t.shape, t.dtype) for t in inputs)
        return (shapes, share, tuple(read))

    def _because(self, why: str) -> None:
        if why not in self.why:
            self.why.append(why)

    def summary(self) -> str:
        """What ran, in a line or a few."""
        return "\n".join(self.record().lines())


def _changes_objective(hook: StepHook) -> bool:
    return type(hook).objective is not StepHook.objective


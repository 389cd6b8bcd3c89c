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
from typing import TYPE_CHECKING, Any, Literal

from deepsharp.core.autodiff.plan import DREW, Plan, capture
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine, Handle
from deepsharp.core.random import Generator
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.watch import (
    Snapshot,
    class_settings,
    every_edited,
    every_layer,
    own_classes,
)

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
        self.plans: OrderedDict[Hashable, _Found | None] = OrderedDict()
        self.why: list[str] = []
        self.replayed = 0
        self.recorded = 0
        self.made = 0
        self._whole = True  # every part of the step under way replayed a plan
        self._known: dict[int, _Settings] = {}  # a network's settings (and its loss's)
        self._stateful = False  # a layer or the loss changes its state in a pass: no plans
        self._dropped: OrderedDict[Hashable, None] = OrderedDict()  # kinds let go (the last)

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
        key = self._key(trainer, inputs, share) if self.enabled and not self._stateful else None
        if key is None:
            self._whole = False
            return recorded()
        handles = [*(t.handle for t in inputs if t is not None), masks]
        engine = trainer.engine
        if key in self.plans:
            found = self.plans[key]
            self.plans.move_to_end(key)
            if found is not None:
                if found.graphed is None:
                    self._graph(engine, found, handles)
                run = found.graphed or found.plan
                loss, grads = run(*handles)
                if found.graphed:  # the graph's outputs are its own: the next replay rewrites
                    loss = engine.copy(loss)  # them; the gradients too, where a hook or an
                    if not _keeps_none(trainer):  # optimizer of one's own may keep them (trial C)
                        grads = [engine.copy(grad) for grad in grads]
                trainer.rules_applied += found.rules
                return Tensor(loss, (), engine), list(grads)
            self._whole = False
            return recorded()
        self._whole = False
        before = trainer.rules_applied
        held = trainer.held
        fixed = [*held.kept, *(h for kind in held.state.memory.values() for h in kind)]
        state = Snapshot([*every_layer(trainer.network.layers), trainer.loss])
        if state.too_much is not None:
            self._stateful = True
            self._because(state.too_much)
            self.plans[key] = None
            return recorded()
        captured = capture(engine, recorded, handles, fixed, lambda part: (part[0].handle, part[1]))
        changed = state.changed()
        if changed is not None:  # no pass is traced again: a quiet pass after it proves
            self._stateful = True  # nothing (a change on every other pass would be baked in)
        why = captured.why or changed
        if changed is not None and captured.why == DREW:  # the state named: which generator
            why = changed
        if captured.plan is None or why is not None:
            self._because(str(why))
            self.plans[key] = None
        else:
            settings = self._settings(trainer)
            self.plans[key] = _Found(captured.plan, trainer.rules_applied - before, settings)
            self.made += 1
        if key in self._dropped:
            self._because(
                f"more kinds of batch came in turn than the {KEPT} plans a trainer keeps (the "
                "least recently used let go): a kind's plan was made again where it would have "
                "been replayed. A kind is a batch's size, its part of an accumulated step and "
                "each value a loss scale takes (a scale that moves often: a fixed one, or "
                "bfloat16, makes one); batches of fewer sizes (a last batch of its own only) "
                "replay"
            )
        if self.made == 4 * KEPT:
            self._because(
                f"{self.made} plans were made: each kind of batch, and each change of a "
                "layer's or the loss's setting, traces its step again. A setting assigned at "
                "every step (a loss's weight on a schedule) keeps the steps from replaying: "
                "keep what changes every step in a buffer, or in the step hook's objective_key"
            )
        while len(self.plans) > KEPT:
            self._dropped[self.plans.popitem(last=False)[0]] = None
            if len(self._dropped) > 4 * KEPT:  # (a setting assigned every step: a key a step)
                self._dropped.popitem(last=False)
        result: Part = captured.result
        return result

    def _graph(self, engine: Engine, found: _Found, handles: Sequence[Any]) -> None:
        """Where the engine captures plans as graphs (`engine.graphs`, `engine.graph_plan`: a
        card's CUDA graphs), the plan captured as one launch once it has run as a plan; said
        why not where it cannot be."""
        found.graphed = False
        graph_plan = getattr(engine, "graph_plan", None)
        if graph_plan is None or not getattr(engine, "graphs", False):
            return
        if found.plan.hosts:
            self._because(
                "a plan with host steps (dropout masks, a sum over processes) runs as a plan, "
                "not as one CUDA graph: its host work comes between its launches"
            )
            return
        try:
            graphed = graph_plan(found.plan, handles)
        except Exception as error:  # the engine's capture refused: the plan runs as it is
            self._because(f"the plan could not be captured as a CUDA graph ({error!r})")
            return
        found.graphed = graphed or False

    def _key(
        self, trainer: Trainer, inputs: Sequence[Tensor | None], share: tuple[int, int, int] | None
    ) -> Hashable | None:
        """What a batch's plan depends on, or None (and why) where a hook's objective cannot say."""
        key: list[Hashable] = [share]
        for hook in trainer.hooks:
            if _changes_objective(hook) and type(hook).objective_key is StepHook.objective_key:
                self._because(
                    f"the step hook {type(hook).__name__} changes the objective and does not say "
                    "what it reads (StepHook.objective_key): its steps ran as recorded"
                )
                return None
            key.append(hook.objective_key())
        for tensor in inputs:
            if tensor is None:
                key.append(None)
            else:
                key += (tensor.shape, tensor.dtype)
        key.append(self._settings(trainer).key)
        return tuple(key)

    def _settings(self, trainer: Trainer) -> _Settings:
        """The settings of the trainer's network and loss as they stand: found again where a
        setting was assigned (a layer held in an attribute may be another now)."""
        network, loss = trainer.network, trainer.loss
        known = self._known.get(id(network))
        if known is not None and known.loss is loss and known.network is network:
            if known.stamps() == known.key[1] and class_settings(known.classes) == known.key[2]:
                return known
        known = self._known[id(network)] = _Settings(network, loss)
        return known

    def _because(self, why: str) -> None:
        if why not in self.why:
            self.why.append(why)

    def summary(self) -> str:
        """What ran, in a line or a few."""
        return "\n".join(self.record().lines())


class _Settings:
    """What a plan's key reads of a network's and its loss's settings: every object whose
    settings are counted (`Edited`: the layers, their parts and the layers and losses they
    hold, the loss and what it holds), by identity and by how often each was assigned (a sum
    of the counts met an earlier plan's when a layer held in an attribute was replaced: trial
    C), and what their classes of one's own hold (`class_settings`). The objects are held while
    a plan keyed by them is (`_Found`), so no other takes an id its key holds."""

    __slots__ = ("classes", "key", "loss", "network", "objects")

    def __init__(self, network: Any, loss: Any) -> None:
        self.network, self.loss = network, loss
        self.objects = every_edited([*network.layers, loss])
        self.classes = own_classes(self.objects)
        ids = tuple(map(id, self.objects))
        self.key = (ids, self.stamps(), class_settings(self.classes))

    def stamps(self) -> tuple[int, ...]:
        """How often each object's settings were assigned."""
        return tuple([vars(held).get("_edits", 0) for held in self.objects])


class _Found:
    """A plan of one kind of batch: the rules its trace applied, the settings it was traced
    with (held), and its graph where the engine captured one (None: not tried yet; False:
    none)."""

    __slots__ = ("graphed", "plan", "rules", "settings")

    def __init__(self, plan: Plan, rules: int, settings: _Settings) -> None:
        self.plan = plan
        self.rules = rules
        self.settings = settings  # held: no other layer or loss takes an id its key holds
        self.graphed: Callable[..., Any] | Literal[False] | None = None


def _keeps_none(trainer: Trainer) -> bool:
    """Whether the step's gradients go only to deepsharp's own hooks and optimizer, which keep
    none of them past the step."""
    return all(
        type(held).__module__.startswith("deepsharp.")
        for held in (*trainer.hooks, trainer.optimizer)
    )


def _changes_objective(hook: StepHook) -> bool:
    return type(hook).objective is not StepHook.objective

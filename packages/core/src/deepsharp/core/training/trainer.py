"""The trainer: one training step as the loop takes it, on the engine that holds the run.

The trainer owns what a run keeps on its engine — the network's slots and buffers (bound there),
the optimizer's memory (`deepsharp.core.training.state.Held`) — and the run's generator. The
loop asks it for steps, evaluations, snapshots and what a checkpoint holds of it; the loop never
touches an engine tensor.

A step: the batch is checked on the host and put on the engine (a transfer in for each of the
network's inputs, one for the targets, and one for the rows' weights where a run weighs them);
the forward pass and the way back give the loss and every slot's gradient (a training pass may
also move the buffers: BatchNorm's running statistics); each `StepHook` then sees the gradients
in turn — where a distributed run sums them over its processes, where a loss scale unscales
them and may skip the update, and the user's own —; the optimizer clips them where it was asked
to and applies its update; the loss comes back (1 transfer out). A hook that must know a number
on the host to decide (whether a loss scale's gradients are finite) reads it with
`Trainer.read`, in the same transfer as the loss. The whole step holds the bound values' lock,
so a read of the network's slots from another thread sees one step's, whole.

Gradient accumulation (`accumulate=K`): a step's rows (this process's share of the batch) are
taken as K parts, each with its own forward pass and way back; their gradients, each weighted
by its part of the rows, are added in order before the hooks see them, so a step's memory is a
part's, and the optimizer applies one update. Each part's rows keep their place in the whole
batch (dropout masks are the whole batch's).
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine, Handle, fused, make_engine
from deepsharp.core.errors import (
    ConfigurationError,
    DataError,
    DeepSharpWarning,
    ShapeError,
    StateError,
    described,
    listed,
    outside,
)
from deepsharp.core.nn.layer import Pass
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Features, Network, in_order
from deepsharp.core.nn.optimizers import Optimizer, OptimizerState
from deepsharp.core.nn.predicting import Batch, measured
from deepsharp.core.random import Generator, Streams
from deepsharp.core.training.accumulation import added, part_rows, parts_of
from deepsharp.core.training.checks import (
    check_parts,
    checked_rows,
    checked_weights,
    quiet,
    rows_in,
)
from deepsharp.core.training.compiled import CompiledSteps
from deepsharp.core.training.hooks import Share, StepHook, check_hooks
from deepsharp.core.training.scaling import (
    LossScale,
    LossScaleSetting,
    check_loss_scale,
    loss_scale_for,
)
from deepsharp.core.training.state import (
    Held,
    Snapshot,
    TrainerState,
    check_sides,
    optimizer_record,
    own_attributes,
    warn_of_attributes,
)

__all__ = ["Trainer"]


UPDATES_WATCHED = 10
"""How many of its first updates (at a rate above 0) an update of one's own is watched for
changing no slot (one that adds up a few steps' gradients before it changes them: up to 9)."""


def _rate(optimizer: Optimizer, state: Any) -> float | None:
    """The optimizer's rate now, where it says one (None where it cannot)."""
    try:
        return float(optimizer.rate(state))
    except Exception:  # an optimizer of one's own without a learning_rate
        return None


class Trainer:
    """Trains `network` on `engine` (the light engine when none is named).

    Slots the network does not have yet are drawn from `seed`. A step puts the batch's features
    and targets on the engine (a transfer in an input, and one for the targets) and brings back
    the loss (1 transfer out). Used in a `with` block, the slots come back to the network at its
    end (as `close()` does). `hooks`: step hooks, run in order after the loss scale's (and after
    a distributed run's sum, which goes first). `loss_scale` ("auto": dynamic under
    mixed_float16, none otherwise; "dynamic"; a number; a `LossScale`; None) scales the loss for
    the way back (`deepsharp.core.training.scaling`); `trainer.loss_scale` is the scale in use
    (None without). `accumulate`: how many parts a step's rows are taken in, one update for all.
    `compile` (True by default): each kind of batch's forward pass and way back is traced once and
    replayed as a flat plan after (`deepsharp.core.training.compiled`), with the same bits;
    False runs every step as recorded.
    """

    def __init__(
        self,
        network: Network,
        loss: Loss,
        optimizer: Optimizer,
        engine: Engine | str | None = None,
        seed: int = 0,
        streams: Streams | None = None,
        hooks: Sequence[StepHook] = (),
        loss_scale: LossScaleSetting = "auto",
        accumulate: int = 1,
        compile: bool = True,
    ) -> None:
        check_parts(network, loss, optimizer, "Trainer")
        loss.check_network(network)
        hooks = listed(hooks, "hooks", "Trainer")
        for hook in hooks:
            if not isinstance(hook, StepHook):
                raise TypeError(
                    f"a step hook is a StepHook (from deepsharp.core), not {hook!r}: subclass "
                    "StepHook and override gradients (or objective)"
                )
            if isinstance(hook, LossScale):  # it would scale on top of the run's own, and its
                raise ConfigurationError(  # state overwrite the run's in checkpoints
                    f"{hook!r} is given as a step hook: a run's loss scale is its setting, "
                    "loss_scale= (FitOptions(loss_scale=...), Trainer(loss_scale=...)), so that "
                    "it scales once and its checkpoints resume"
                )
        if isinstance(accumulate, bool) or not isinstance(accumulate, (int, np.integer)):
            raise TypeError(f"accumulate is a whole number of batches a step, not {accumulate!r}")
        if accumulate < 1:
            raise ValueError(f"accumulate is 1 or more batches a step, not {accumulate!r}")
        if accumulate > 1 and network.whole_batch:
            raise ConfigurationError(
                f"accumulate={accumulate}: this network's BatchNorm takes its statistics from "
                "the whole batch, and an accumulated step sees a part of it at a time: train it "
                "with a larger batch_size instead (or LayerNorm, which needs no batch)"
            )
        self.network = network
        self.loss = loss
        self.optimizer = optimizer
        self.engine: Engine = make_engine(engine)
        if getattr(self.engine, "identity", None) is None:
            raise ConfigurationError(
                f"the engine {getattr(self.engine, 'name', type(self.engine).__name__)!r} has "
                "no identity: a run takes its precision from it and records it in checkpoints "
                "and the report; give the engine an `identity` (deepsharp.core.EngineIdentity) "
                "naming its precision (docs/writing-an-engine.md)"
            )
        self.streams = streams if streams is not None else Streams(seed)
        self.accumulate = int(accumulate)
        self.loss_scale: LossScale | None = loss_scale_for(
            loss_scale, str(self.engine.identity.precision)
        )
        # The loss scale first: every later hook sees the gradients unscaled.
        self.hooks: list[StepHook] = [*([self.loss_scale] if self.loss_scale else []), *hooks]
        self.reducer: Callable[[Engine, Handle], Handle] | None = None
        """How a pass's statistics of the batch are summed over processes, in rank order (a
        data-parallel run sets it, and `processes`; None: this process's rows are the batch)."""
        self.processes = 1
        self.compiled = CompiledSteps(compile)
        """The step's plans (`deepsharp.core.training.compiled`): what ran, and why a step could
        not be compiled."""
        self.step_share: Share | None = None
        """Where the rows of the step whose hooks run lie in the whole batch (None: all of it)."""
        self._value: Tensor | None = None  # the step's loss, while its hooks run
        self._value_read: float | None = None  # the loss, where a hook's read brought it back
        self.skipped_steps = 0
        update = getattr(type(optimizer), "update", None)  # deepsharp's, or a subclass's
        self._watching = not getattr(update, "__module__", "").startswith("deepsharp.")
        self._own_update = self._watching  # handed slots whose places cannot be bound anew
        self._optimizer_was = own_attributes(optimizer)  # (a checkpoint holds none of them)
        self._handed: _Slots | None = None
        self._watched_updates = self._watch_calls = 0  # an update of one's own: watched
        self.rules_applied = 0
        self._held: Held | None = None
        self._slots: list[Tensor] = []
        self.closed = False
        if network.built:
            self.start()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, inputs: tuple[int, ...] | None = None) -> None:
        """Build the network (a chain for rows of shape `inputs`), draw its slots if it has none,
        bind it."""
        self._check_open("start")
        if self._held is not None:
            return
        self.network.build(inputs)
        if not self.network.specs:
            raise ConfigurationError(
                f"{self.network!r} has no slots: there is nothing to train (a network needs a "
                "layer with slots, such as Dense or Conv2D)"
            )
        if not self.network.initialized:
            self.network.initialize(self.streams.slots)
        bound = self.network.bind(self.engine)
        self._slots = list(bound.tensors.values())
        try:
            state = self.optimizer.start(self.engine, [t.shape for t in self._slots])
        except BaseException:  # (out of memory): the network was left bound, every later
            self._slots = []  # trainer refused "close the other trainer" (trial TX)
            self.network.release()
            raise
        self._held = Held(self.engine, bound, state)

    @property
    def held(self) -> Held:
        """What the trainer holds on its engine (slots, buffers, the optimizer's memory)."""
        if self._held is None:
            raise RuntimeError("the trainer has not started: take a step, or call start(inputs)")
        return self._held

    @property
    def bound(self) -> Any:
        """The network's slots and buffers on the engine (`deepsharp.core.nn.binding.Bound`)."""
        return self.held.bound

    @property
    def state(self) -> OptimizerState | None:
        """The optimizer's memory and step count (None before the trainer starts)."""
        return None if self._held is None else self._held.state

    @property
    def slot_names(self) -> list[str]:
        return self.held.slot_names

    @property
    def kept_names(self) -> list[str]:
        """The slots' names, then the buffers': what a snapshot holds, in its order."""
        return self.held.kept_names

    @property
    def step_loss(self) -> Tensor:
        """The loss of the step whose hooks are running (the whole step's, every part's)."""
        if self._value is None:
            raise RuntimeError("Trainer.step_loss is for step hooks, while their step runs")
        return self._value

    # --- steps ---------------------------------------------------------------------------------

    def step(
        self,
        features: Any,
        targets: Any,
        share: Share | None = None,
        weights: Any = None,
    ) -> float:
        """One step: forward, the way back towards the slots, the hooks, the optimizer's update.
        The loss (of these rows: a process's own, under a distributed run). `weights`: one
        number a row (None: every row weighs 1), weighting the loss as Keras does — the mean
        over the rows of weight·loss. The features' arrays are read while the step runs, never
        changed, and not kept after it: an engine may take a float32 array as it is, without a
        copy (as `torch.from_numpy` does). A step its rows refuse changes nothing; one stopped
        after its forward pass (a step hook's error, an interrupt) has taken its dropout masks
        and moved BatchNorm's statistics, as PyTorch's forward does: `fit` resumed from a
        checkpoint gives the uninterrupted run's bits."""
        value = self.step_tensor(features, targets, share, weights)
        if self._value_read is not None:  # a hook's read brought it back already
            return self._value_read
        return float(self.engine.get(value.handle))

    def step_tensor(
        self,
        features: Any,
        targets: Any,
        share: Share | None = None,
        weights: Any = None,
    ) -> Tensor:
        """A step whose loss stays on the engine (the caller reads it when it chooses).

        An empty share of a non-empty batch (a process of a distributed run left no rows) takes
        no forward pass: its gradients are zeros, and still go through the hooks and the update.
        """
        # An overflow is looked for where it matters (a loss scale skips the step; the loop
        # stops a run whose loss is not finite, naming epoch and step): NumPy need not warn.
        # One context for the whole step: each costs a few microseconds.
        with quiet():
            return self._step(features, targets, share, weights)

    def _step(self, features: Any, targets: Any, share: Share | None, weights: Any) -> Tensor:
        self._check_open("step")
        self._value_read = None
        if share is not None and share[2] < self.processes and self.network.whole_batch:
            raise ConfigurationError(
                f"a batch of {share[2]} rows over {self.processes} processes leaves some of them "
                "no rows, and this network's BatchNorm sums its statistics over every process's "
                "rows: give batches of at least as many rows as processes (batch_size, and rows "
                "that leave a last batch as large, or drop a few rows)"
            )
        arranged = self._arranged(features, empty=share is not None and share[2] > 0, finite=False)
        engine = self.engine
        rows = arranged[0].shape[0]
        if rows:  # checked before anything changes: a step refused is no step (trial K)
            wanted = self.loss.targets(targets, self.network.outputs)
            if len(wanted) != rows:
                raise DataError(f"{rows} rows of features but {len(wanted)} targets")
            places = wanted.shape[1] if self.loss.task == "classes" and wanted.ndim == 2 else None
            given = (
                None
                if weights is None
                else checked_weights(weights, rows, "the batch's weights", places)
            )
            xs = self._put_features(features, arranged)  # (refuses NaN and infinity)
            y = Tensor.put(engine, wanted)
            w = None if given is None else Tensor.put(engine, given)
        # Every step, rows or none, takes its own key: masks stay in step across processes.
        dropout = self.streams.dropout.next_key()
        with self.held.bound.lock:
            grads: list[Handle] | None
            if rows == 0:
                value = Tensor(engine.zeros(()), (), engine)
                grads = [engine.zeros(t.shape) for t in self._slots]
            else:
                value, grads = self._way_back(xs, y, w, share, dropout)
            self._value, self.step_share = value, share
            try:
                for hook in self.hooks:
                    assert grads is not None
                    grads = hook.gradients(self, grads)
                    if grads is None:
                        self.skipped_steps += 1
                        return value
                    if not isinstance(grads, (list, tuple)) or len(grads) != len(self._slots):
                        raise ConfigurationError(
                            f"the step hook {type(hook).__name__}: gradients() gave "
                            + (
                                f"{len(grads)} gradients"
                                if isinstance(grads, (list, tuple))
                                else described(grads)
                            )
                            + "; it gives a list of one gradient a slot "
                            f"({len(self._slots)}, in the order it was given them), or None "
                            "to skip the step"
                        )
                    if not type(hook).__module__.startswith("deepsharp."):
                        self._check_hooked(hook, grads)
            finally:
                self._value, self.step_share = None, None
            assert grads is not None
            self.update(grads)
        return value

    def _check_hooked(self, hook: StepHook, grads: Sequence[Handle]) -> None:
        """A step hook of one's own gives each slot's gradient its slot's shape (else the
        optimizer's update failed deep in the engine, naming neither: trial XP)."""
        for name, slot, grad in zip(self.slot_names, self._slots, grads):
            shape = tuple(self.engine.shape(grad))
            if shape != tuple(slot.shape):
                raise ConfigurationError(
                    f"the step hook {type(hook).__name__}: gradients() gave the slot {name!r} "
                    f"a gradient of shape {shape}, and the slot has shape {tuple(slot.shape)}"
                )

    def _way_back(
        self,
        xs: list[Tensor],
        y: Tensor,
        w: Tensor | None,
        share: Share | None,
        dropout: Generator,
    ) -> tuple[Tensor, list[Handle]]:
        """The loss of the step's rows and every slot's gradient: in one pass, or in
        `accumulate` parts added up (each part's loss and gradients weighted by its rows)."""
        rows = y.shape[0]
        parts = parts_of(rows, self.accumulate)
        first, _, total = share if share is not None else (0, rows, rows)
        value: Tensor | None = None
        summed: list[Handle] | None = None
        self.compiled.begin()
        for start, stop in parts:
            if len(parts) == 1:
                part_xs, part_y, part_w, where, masks = xs, y, w, share, dropout
            else:  # the part's rows, where they lie in the whole batch, and the step's masks
                part_xs = [part_rows(x, start, stop) for x in xs]
                part_y = part_rows(y, start, stop)
                part_w = None if w is None else part_rows(w, start, stop)
                where = (first + start, first + stop, total)
                masks = copy.copy(dropout)  # each part draws its rows' places of the same draw
            loss, grads = self.compiled.part(
                self,
                [*part_xs, part_y, part_w],
                masks,
                where,
                functools.partial(self._recorded, part_xs, part_y, part_w, where, masks, share),
            )
            if len(parts) == 1:
                self.compiled.end()
                return loss, grads
            weight = (stop - start) / rows
            value, summed = added(self.engine, value, summed, loss, grads, weight)
        self.compiled.end()
        assert value is not None and summed is not None
        return value, summed

    def _recorded(
        self,
        xs: list[Tensor],
        y: Tensor,
        w: Tensor | None,
        where: Share | None,
        masks: Generator,
        share: Share | None,
    ) -> tuple[Tensor, list[Handle]]:
        """A part of a step as recorded: the forward pass, the loss, the hooks' objective and
        the way back towards the slots."""
        context = Pass(self.engine, True, masks, where, self.reducer)
        with Recording(self._slots) as recording:
            outputs = self.network.forward(xs, self.held.bound, context)
            loss = self._loss(outputs, y, w)
            objective = loss
            for hook in self.hooks:  # (a data-parallel run's sum may come before the scale)
                if hook is not self.loss_scale:
                    objective = hook.objective(self, objective, share)
            if self.loss_scale:  # the whole objective scaled, the hooks' terms too: its
                # gradients come back unscaled before the other hooks see them
                objective = self.loss_scale.objective(self, objective, share)
            grads = recording.gradients(objective, self._slots)
            self.rules_applied += recording.rules_applied
        return loss, grads

    def _loss(self, outputs: Tensor, targets: Tensor, weights: Tensor | None) -> Tensor:
        value = (
            self.loss.value(outputs, targets)
            if weights is None
            else self.loss.value(outputs, targets, weights)
        )
        if not isinstance(value, Tensor) or value.shape != ():
            shape = value.shape if isinstance(value, Tensor) else type(value).__name__
            raise ShapeError(
                f"the loss {type(self.loss).__name__}: value() gave {shape}, where one number "
                "belongs (the way back starts from it): end it in weighted_mean(terms, weights) "
                "(deepsharp.core.nn.losses), the mean of each value's terms"
            )
        return value

    def _put_features(self, features: Any, arranged: Features) -> list[Tensor]:
        """The batch's features on the engine, each float input checked finite as it is put
        (`fused.put_checked`: one pass in libtorch), each taken as it is where the engine can
        (`owned`: a step reads its features only while it runs, and no operation changes its
        inputs). A value that is not finite is refused as `Network.arrange` refuses it, naming
        its row and feature."""
        engine = self.engine
        xs = []
        for array in arranged:
            if array.dtype.kind != "f":
                xs.append(Tensor.put(engine, array))
                continue
            handle, finite = fused.put_checked(engine, array, owned=True)
            if not finite:
                self.network.arrange(features, "the batch")  # raises, saying where
            xs.append(Tensor(handle, array.shape, engine))
        return xs

    def _arranged(self, features: Any, empty: bool = False, finite: bool = True) -> Features:
        """The batch's features as the network takes them (checked; whether they are finite
        left to the put where `finite` is False); the network built and bound for their rows
        where it is not yet."""
        network = self.network
        if self._held is not None and not empty:
            return network.arrange(features, "the batch", finite=finite)
        if not network.built and len(network.input_specs) == 1:
            rows = features[0] if in_order(features) else features
            first = checked_rows(rows, "the batch", empty)
            self.start(tuple(first.shape[1:]))
        elif self._held is None:
            self.start()
        if empty and rows_in(features) == 0:
            return tuple(
                np.zeros(
                    (0, *(spec.shape or ())), np.int64 if spec.dtype == "int64" else np.float32
                )
                for spec in network.input_specs
            )
        return network.arrange(features, "the batch", finite=finite)

    def read(self, handle: Handle) -> float:
        """A number a hook needs on the host to decide on this step (one value on the engine),
        brought back in one transfer with the step's loss: a step still makes one transfer
        out, and `step` gives that loss without reading it again."""
        engine, value = self.engine, self._value
        if value is None:
            raise RuntimeError("Trainer.read is for step hooks, while their step runs")
        both = engine.get(
            engine.concatenate(
                [engine.reshape(value.handle, (1,)), engine.reshape(handle, (1,))], 0
            )
        )
        self._value_read = float(both[0])
        return float(both[1])

    def update(self, grads: Sequence[Handle]) -> None:
        """The one place in a step where every gradient exists before the slots change: the
        optimizer clips them (where asked) and applies its update."""
        held = self.held
        if self._watching:
            self._watch_update(grads)
            return
        self.optimizer.apply(self.engine, self._slots_handed(), grads, held.state)

    def _slots_handed(self) -> Sequence[Handle]:
        """The slots an optimizer's update is handed: the trainer's own list, or for an update
        of one's own the same slots in a sequence whose places cannot be bound anew
        (`slots[i] = ...` changed no slot, and the run learned nothing, silently: trial X)."""
        slots = self.held.slots
        if not self._own_update:
            return slots
        handed = self._handed
        if handed is None or len(handed) != len(slots) or any(map(operator.is_not, handed, slots)):
            handed = self._handed = _Slots(slots)
            handed.kind = type(self.optimizer).__name__
        return handed

    def _watch_update(self, grads: Sequence[Handle]) -> None:
        """An update of one's own is watched over its first updates: where UPDATES_WATCHED of
        them at a rate above 0 changed no slot though the gradients were not all zero, it binds
        new values to names instead of changing the slots in place, and the run learns
        nothing, silently (trial XP): warned once. Watched for 5 x UPDATES_WATCHED updates at
        most (each copies the slots to the host)."""
        engine, held = self.engine, self.held
        rate = _rate(self.optimizer, held.state)  # before the update moves the count on
        before = [engine.get(slot) for slot in held.slots]
        self.optimizer.apply(engine, self._slots_handed(), grads, held.state)
        self._watch_calls += 1
        if any(
            engine.get(slot).tobytes() != kept.tobytes() for slot, kept in zip(held.slots, before)
        ):
            self._watching = False  # it changes them
        elif rate != 0 and any(np.any(engine.get(grad)) for grad in grads):
            self._watched_updates += 1  # (a rate held at 0 changes nothing, rightly)
            if self._watched_updates == UPDATES_WATCHED:
                self._watching = False
                warnings.warn(
                    f"the optimizer {type(self.optimizer).__name__} changed no slot in "
                    f"{UPDATES_WATCHED} updates at a rate above 0, though their gradients were "
                    "not zero: an update changes each slot in place (engine.assign(slot, new "
                    "value)); one that binds new values to names changes nothing",
                    DeepSharpWarning,
                    stacklevel=outside(),
                )
        if self._watch_calls >= 5 * UPDATES_WATCHED:
            self._watching = False

    def evaluate(self, features: Any, targets: Any) -> tuple[float, NDArray[np.float32]]:
        """The loss and the predictions (the link applied) for a batch, without recording."""
        value, predicted, _ = self.measured(features, targets)
        return value, predicted

    def measured(self, features: Any, targets: Any) -> Batch:
        """The loss, the predictions and the positions the loss counts (`Loss.counted`) for a
        batch, without recording: how a run measures its validation and test rows."""
        self._check_open("evaluate")
        arranged = self._arranged(features)
        context = Pass(self.engine, False, None)
        with self.held.bound.lock:
            return measured(self.network, self.loss, self.held.bound, context, arranged, targets)

    # --- state: what the trainer holds (Held), as the loop and checkpoints ask for it ----------

    def snapshot(self, into: Snapshot | None = None) -> Snapshot:
        """A copy of the slots and buffers as they are now, kept on the engine."""
        return self.held.snapshot(into)

    def restore(self, snapshot: Snapshot) -> None:
        """Put the slots and buffers of a snapshot back."""
        self.held.restore(snapshot)

    def put_slots(
        self,
        values: Mapping[str, NDArray[np.float32]],
        buffers: Mapping[str, NDArray[np.float32]] | None = None,
    ) -> None:
        """Replace every slot's values (and every buffer's, where given) on the engine, names and
        shapes checked first: how a distributed run gives every process rank 0's."""
        self.held.put_values(values, buffers)

    def host(
        self, snapshot: Snapshot
    ) -> tuple[dict[str, NDArray[np.float32]], dict[str, NDArray[np.float32]]]:
        """A snapshot's slots and buffers brought to the host (for a checkpoint)."""
        return self.held.host(snapshot)

    def snapshot_of(
        self, slots: Mapping[str, NDArray[np.float32]], buffers: Mapping[str, NDArray[np.float32]]
    ) -> Snapshot:
        """A snapshot holding these slot and buffer values (a checkpoint's best epoch), checked."""
        return self.held.snapshot_of(slots, buffers)

    def export_state(self) -> TrainerState:
        """What a checkpoint holds of the trainer: slots and buffers, optimizer memory, steps and
        rate scale, the generator's counters and the hooks' states."""
        held = self.held
        scale = held.state.rate_scale
        number = isinstance(scale, numbers.Real) and not isinstance(scale, bool)
        if not (number and math.isfinite(scale) and scale >= 0):  # what a checkpoint refuses
            raise ConfigurationError(
                f"the optimizer's rate scale (state.rate_scale, the factor callbacks put on the "
                f"learning rate) is {scale!r}: it is a finite number of 0 or more"
            )
        if warn_of_attributes(self.optimizer, self._optimizer_was):
            self._optimizer_was = None  # said once
        slots, buffers = self.network.values()
        return TrainerState(
            slots=slots,
            memory=held.memory(),
            optimizer={
                **optimizer_record(self.optimizer),
                "steps": held.state.steps,
                "rate_scale": float(scale),
            },
            generator=self.streams.state,
            hooks={hook.name: hook.state() for hook in self.hooks if hook.name},
            skipped_steps=self.skipped_steps,
            buffers=buffers,
        )

    def check_state(self, state: TrainerState, where: str) -> None:
        """Refuse a state another run made (CheckpointMismatchError naming both sides)."""
        check_sides(state, self.optimizer, self.streams.seed, where)
        check_loss_scale(state.hooks, self.loss_scale, where)
        check_hooks(state.hooks, self.hooks, where, apart=(LossScale.name,))

    def load_state(self, state: TrainerState, where: str) -> None:
        """Go on from a checkpoint's state (checked first: nothing changes when it is refused)."""
        self.check_state(state, where)
        self.held.load(state, where)
        self.streams.restore(state.generator)
        hooks = {hook.name: hook for hook in self.hooks if hook.name}
        for name, hook_state in state.hooks.items():
            if name in hooks:
                hooks[name].restore(hook_state)
        self.skipped_steps = state.skipped_steps

    def __reduce__(self) -> Any:
        raise TypeError(
            "a Trainer is not pickled or copied: it holds its engine's memory for a run under "
            "way. Save what it trains (trainer.network after close(), Network.save) or take "
            "checkpoints (fit's checkpoint_dir), and make a new Trainer from them"
        )

    def close(self) -> None:
        """Bring the slots and buffers back to the host network and let go of the engine's
        memory. A closed trainer takes no more steps (StateError); closing it again does
        nothing."""
        self.network.release()
        self.compiled.clear()
        self._held = None
        self._slots = []
        self._handed = None  # (it held the slots: a review)
        self.closed = True

    def _check_open(self, asked: str) -> None:
        if self.closed:
            raise StateError(
                f"{asked}: this Trainer of {self.network!r} is closed (close() or the end of its "
                "with block brought its slots back and let go of its optimizer's memory); make "
                "a new Trainer(network, loss, optimizer, ...) to train the network further"
            )


class _Slots(list):  # type: ignore[type-arg]
    """The slots handed to an optimizer's update of one's own: a place in it cannot be bound to
    another value (the update changes each slot in place; `slots[i] -= step`, which changes the
    slot in place and puts it back, is taken)."""

    kind = "the optimizer"

    def __setitem__(self, index: Any, value: Any) -> None:
        held = self[index]
        same = (
            len(held) == len(value) and all(map(operator.is_, held, value))
            if isinstance(index, slice) and isinstance(value, (list, tuple))
            else held is value
        )
        if not same:
            raise TypeError(
                f"{self.kind}.update: slots[{index!r}] = ... binds a new value to a place in "
                "the list the update is handed and changes no slot (the run would learn "
                "nothing): change each slot in place, engine.assign(slot, new value)"
            )

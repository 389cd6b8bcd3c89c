"""The trainer: one training step as the loop takes it, and the state of a run on its engine.

The trainer owns what a run keeps on its engine — the network's slots and buffers (bound there),
the optimizer's memory — and the run's generator. The loop asks it for steps, evaluations,
snapshots and what a checkpoint holds of it; the loop never touches an engine tensor.

A step: the batch is checked on the host and put on the engine (a transfer in for each of the
network's inputs and one for the targets); the forward pass and the way back give the loss and
every slot's gradient (a training pass may also move the buffers: BatchNorm's running
statistics); each `StepHook` then sees the gradients in turn — where a distributed run sums them
over its processes, and where a loss scale unscales them and may skip the update —; `update`
applies the optimizer; the loss comes back (1 transfer out). A hook that must know a number on
the host to decide (whether a loss scale's gradients are finite) reads it with `Trainer.read`,
in the same transfer as the loss. The whole step holds the bound values' lock, so a read of
the network's slots from another thread sees one step's, whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine, Handle, make_engine
from deepsharp.core.errors import (
    ConfigurationError,
    DataError,
    FileFormatError,
    ShapeError,
    StateError,
    described,
)
from deepsharp.core.nn.binding import Bound
from deepsharp.core.nn.layer import Pass
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Features, Network, in_order
from deepsharp.core.nn.optimizers import Optimizer, OptimizerState
from deepsharp.core.random import Streams
from deepsharp.core.training.hooks import Share, StepHook
from deepsharp.core.training.scaling import (
    LossScale,
    LossScaleSetting,
    check_loss_scale,
    loss_scale_for,
)
from deepsharp.core.training.state import (
    Snapshot,
    TrainerState,
    check_sides,
    optimizer_record,
)

__all__ = [
    "Snapshot",
    "StepHook",
    "Trainer",
    "TrainerState",
    "check_parts",
    "check_sides",
    "optimizer_record",
]


class Trainer:
    """Trains `network` on `engine` (the light engine when none is named).

    Slots the network does not have yet are drawn from `seed`. A step puts the batch's features
    and targets on the engine (a transfer in an input, and one for the targets) and brings back
    the loss (1 transfer out). Used in a `with` block, the slots come back to the network at its
    end (as `close()` does). `loss_scale` ("auto": dynamic under mixed_float16, none otherwise;
    "dynamic"; a number; a `LossScale`; None) scales the loss for the way back
    (`deepsharp.core.training.scaling`); `trainer.loss_scale` is the scale in use (None without).
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
    ) -> None:
        check_parts(network, loss, optimizer, "Trainer")
        loss.check_network(network)
        self.network = network
        self.loss = loss
        self.optimizer = optimizer
        self.engine: Engine = make_engine(engine)
        self.streams = streams if streams is not None else Streams(seed)
        self.hooks: list[StepHook] = list(hooks)
        self.loss_scale: LossScale | None = loss_scale_for(
            loss_scale, str(self.engine.identity.precision)
        )
        if self.loss_scale is not None:
            self.hooks.append(self.loss_scale)
        self.reducer: Callable[[Engine, Handle], Handle] | None = None
        """How a pass's statistics of the batch are summed over processes, in rank order (a
        data-parallel run sets it, and `processes`; None: this process's rows are the batch)."""
        self.processes = 1
        self._value: Tensor | None = None  # the step's loss, while its hooks run
        self._value_read: float | None = None  # the loss, where a hook's read brought it back
        self.skipped_steps = 0
        self.rules_applied = 0
        self._bound: Bound | None = None
        self._slots: list[Tensor] = []
        self._kept: list[Tensor] = []  # the slots', then the buffers' tensors
        self.state: OptimizerState | None = None
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
        if self._bound is not None:
            return
        self.network.build(inputs)
        if not self.network.specs:
            raise ConfigurationError(
                f"{self.network!r} has no slots: there is nothing to train (a network needs a "
                "layer with slots, such as Dense or Conv2D)"
            )
        if not self.network.initialized:
            self.network.initialize(self.streams.slots)
        self._bound = self.network.bind(self.engine)
        self._slots = list(self._bound.tensors.values())
        self._kept = [*self._slots, *self._bound.buffers.values()]
        self.state = self.optimizer.start(self.engine, [t.shape for t in self._slots])

    @property
    def bound(self) -> Bound:
        if self._bound is None:
            raise RuntimeError("the trainer has not started: take a step, or call start(inputs)")
        return self._bound

    @property
    def slot_names(self) -> list[str]:
        return list(self.bound.tensors)

    @property
    def kept_names(self) -> list[str]:
        """The slots' names, then the buffers': what a snapshot holds, in its order."""
        return [*self.bound.tensors, *self.bound.buffers]

    # --- steps ---------------------------------------------------------------------------------

    def step(self, features: Any, targets: Any, share: Share | None = None) -> float:
        """One step: forward, the way back towards the slots, the hooks, the optimizer's update.
        The loss (of these rows: a process's own, under a distributed run)."""
        value = self.step_tensor(features, targets, share)
        if self._value_read is not None:  # a hook's read brought it back already
            return self._value_read
        return float(self.engine.get(value.handle))

    def step_tensor(self, features: Any, targets: Any, share: Share | None = None) -> Tensor:
        """A step whose loss stays on the engine (the caller reads it when it chooses).

        An empty share of a non-empty batch (a process of a distributed run left no rows) takes
        no forward pass: its gradients are zeros, and still go through the hooks and the update.
        """
        # An overflow is looked for where it matters (a loss scale skips the step; the loop
        # stops a run whose loss is not finite, naming epoch and step): NumPy need not warn.
        # One context for the whole step: each costs a few microseconds.
        with quiet():
            return self._step(features, targets, share)

    def _step(self, features: Any, targets: Any, share: Share | None) -> Tensor:
        self._check_open("step")
        self._value_read = None
        if share is not None and share[2] < self.processes and self.network.whole_batch:
            raise ConfigurationError(
                f"a batch of {share[2]} rows over {self.processes} processes leaves some of them "
                "no rows, and this network's BatchNorm sums its statistics over every process's "
                "rows: give batches of at least as many rows as processes (batch_size, and rows "
                "that leave a last batch as large, or drop a few rows)"
            )
        arranged = self._arranged(features, empty=share is not None and share[2] > 0)
        engine = self.engine
        # Every step, rows or none, takes its own key: masks stay in step across processes.
        dropout = self.streams.dropout.next_key()
        with self.bound.lock:
            grads: list[Handle] | None
            if arranged[0].shape[0] == 0:
                value = Tensor(engine.zeros(()), (), engine)
                grads = [engine.zeros(t.shape) for t in self._slots]
            else:
                rows = arranged[0].shape[0]
                wanted = self.loss.targets(targets, self.network.outputs)
                if len(wanted) != rows:
                    raise DataError(f"{rows} rows of features but {len(wanted)} targets")
                xs = [Tensor.put(engine, a) for a in arranged]
                y = Tensor.put(engine, wanted)
                context = Pass(engine, True, dropout, share, self.reducer)
                with Recording(self._slots) as recording:
                    value = self.loss.value(self.network.forward(xs, self.bound, context), y)
                    objective = value
                    for hook in self.hooks:
                        objective = hook.objective(self, objective, share)
                    grads = recording.gradients(objective, self._slots)
                    self.rules_applied += recording.rules_applied
            self._value = value
            try:
                for hook in self.hooks:
                    assert grads is not None
                    grads = hook.gradients(self, grads)
                    if grads is None:
                        self.skipped_steps += 1
                        return value
            finally:
                self._value = None
            assert grads is not None
            self.update(grads)
        return value

    def _arranged(self, features: Any, empty: bool = False) -> Features:
        """The batch's features as the network takes them (checked); the network built and bound
        for their rows where it is not yet."""
        network = self.network
        if self._bound is not None and not empty:
            return network.arrange(features, "the batch")
        if not network.built and len(network.input_specs) == 1:
            rows = features[0] if in_order(features) else features
            first = checked_rows(rows, "the batch", empty)
            self.start(tuple(first.shape[1:]))
        elif self._bound is None:
            self.start()
        if empty and _rows(features) == 0:
            return tuple(
                np.zeros(
                    (0, *(spec.shape or ())), np.int64 if spec.dtype == "int64" else np.float32
                )
                for spec in network.input_specs
            )
        return network.arrange(features, "the batch")

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
        """The one place in a step where every gradient exists before the slots change."""
        assert self.state is not None
        self.optimizer.update(self.engine, [t.handle for t in self._slots], grads, self.state)

    def evaluate(self, features: Any, targets: Any) -> tuple[float, NDArray[np.float32]]:
        """The loss and the predictions (the link applied) for a batch, without recording."""
        self._check_open("evaluate")
        arranged = self._arranged(features)
        engine = self.engine
        xs = [Tensor.put(engine, a) for a in arranged]
        y = Tensor.put(engine, self.loss.targets(targets, self.network.outputs))
        with quiet(), self.bound.lock:  # a loss that is not finite is the caller's to judge
            outputs = self.network.forward(xs, self.bound, Pass(engine, False, None))
            value = self.loss.value(outputs, y)
            rows = arranged[0].shape[0]
            predicted = self.loss.predictions(engine, outputs.handle, rows, self.network.outputs)
            return float(engine.get(value.handle)), engine.get(predicted)

    # --- state ---------------------------------------------------------------------------------

    def snapshot(self, into: Snapshot | None = None) -> Snapshot:
        """A copy of the slots and buffers as they are now, kept on the engine (in `into`'s
        memory when given: a run keeps one snapshot of its best epoch and refreshes it)."""
        engine = self.engine
        if into is None:
            return Snapshot(engine, [engine.copy(t.handle) for t in self._kept])
        for keep, tensor in zip(into.handles, self._kept, strict=True):
            engine.assign(keep, tensor.handle)
        return into

    def restore(self, snapshot: Snapshot) -> None:
        """Put the slots and buffers of a snapshot back."""
        with self.bound.lock:
            for tensor, keep in zip(self._kept, snapshot.handles, strict=True):
                self.engine.assign(tensor.handle, keep)

    def put_slots(
        self,
        values: Mapping[str, NDArray[np.float32]],
        buffers: Mapping[str, NDArray[np.float32]] | None = None,
    ) -> None:
        """Replace every slot's values (and every buffer's, where given) on the engine, names and
        shapes checked first: how a distributed run gives every process rank 0's."""
        kinds = [(self.bound.tensors, values, "slot")]
        if buffers is not None:
            kinds.append((self.bound.buffers, buffers, "buffer"))
        for held, given, what in kinds:
            for name, tensor in held.items():
                value = given.get(name)
                if value is None or tuple(np.shape(value)) != tensor.shape:
                    raise ShapeError(
                        f"{what} {name!r}: {'missing' if value is None else np.shape(value)}, the "
                        f"network's is {tensor.shape}"
                    )
        with self.bound.lock:
            for held, given, _ in kinds:
                for name, tensor in held.items():
                    put = self.engine.put(np.asarray(given[name], np.float32))
                    self.engine.assign(tensor.handle, put)

    def host(
        self, snapshot: Snapshot
    ) -> tuple[dict[str, NDArray[np.float32]], dict[str, NDArray[np.float32]]]:
        """A snapshot's slots and buffers brought to the host (for a checkpoint)."""
        got = {name: self.engine.get(h) for name, h in zip(self.kept_names, snapshot.handles)}
        slots = set(self.slot_names)
        return (
            {n: v for n, v in got.items() if n in slots},
            {n: v for n, v in got.items() if n not in slots},
        )

    def snapshot_of(
        self, slots: Mapping[str, NDArray[np.float32]], buffers: Mapping[str, NDArray[np.float32]]
    ) -> Snapshot:
        """A snapshot holding these slot and buffer values (a checkpoint's best epoch), checked."""
        snapshot = self.snapshot()
        every = {**slots, **buffers}
        for name, keep in zip(self.kept_names, snapshot.handles):
            self._put_into(keep, every, name, "best slot" if name in slots else "best buffer")
        return snapshot

    def export_state(self) -> TrainerState:
        """What a checkpoint holds of the trainer: slots and buffers, optimizer memory and steps,
        the generator's counters and the hooks' states."""
        assert self.state is not None
        names, engine = self.slot_names, self.engine
        slots, buffers = self.network.values()
        return TrainerState(
            slots=slots,
            memory={
                kind: {name: engine.get(h) for name, h in zip(names, handles)}
                for kind, handles in self.state.memory.items()
            },
            optimizer={**optimizer_record(self.optimizer), "steps": self.state.steps},
            generator=self.streams.state,
            hooks={hook.name: hook.state() for hook in self.hooks if hook.name},
            skipped_steps=self.skipped_steps,
            buffers=buffers,
        )

    def check_state(self, state: TrainerState, where: str) -> None:
        """Refuse a state another run made (CheckpointMismatchError naming both sides)."""
        check_sides(state, self.optimizer, self.streams.seed, where)
        check_loss_scale(state.hooks, self.loss_scale, where)

    def load_state(self, state: TrainerState, where: str) -> None:
        """Go on from a checkpoint's state (checked first: nothing changes when it is refused)."""
        self.check_state(state, where)
        assert self.state is not None
        missing = set(self.state.memory) ^ set(state.memory)
        if missing:
            raise FileFormatError(f"{where}: its optimizer memory holds {sorted(state.memory)}")
        for name, tensor in self.bound.tensors.items():
            self._put_into(tensor.handle, state.slots, name, "slot")
        for name, tensor in self.bound.buffers.items():
            self._put_into(tensor.handle, state.buffers, name, "buffer")
        for kind, handles in self.state.memory.items():
            for name, handle in zip(self.slot_names, handles):
                self._put_into(handle, state.memory[kind], name, f"{kind} memory of")
        self.state.steps = int(state.optimizer["steps"])
        self.streams.restore(state.generator)
        hooks = {hook.name: hook for hook in self.hooks if hook.name}
        for name, hook_state in state.hooks.items():
            if name in hooks:
                hooks[name].restore(hook_state)
        self.skipped_steps = state.skipped_steps

    def _put_into(
        self, handle: Handle, values: Mapping[str, NDArray[np.float32]], name: str, what: str
    ) -> None:
        value = values.get(name)
        shape = self.engine.shape(handle)
        if value is None or tuple(value.shape) != shape:
            found = "missing" if value is None else f"of shape {tuple(value.shape)}"
            raise FileFormatError(f"checkpoint: {what} {name!r} is {found}, expected {shape}")
        self.engine.assign(handle, self.engine.put(value))

    def close(self) -> None:
        """Bring the slots and buffers back to the host network and let go of the engine's
        memory. A closed trainer takes no more steps (StateError); closing it again does
        nothing."""
        self.network.release()
        self._bound = None
        self._slots = []
        self._kept = []
        self.state = None
        self.closed = True

    def _check_open(self, asked: str) -> None:
        if self.closed:
            raise StateError(
                f"{asked}: this Trainer of {self.network!r} is closed (close() or the end of its "
                "with block brought its slots back and let go of its optimizer's memory); make "
                "a new Trainer(network, loss, optimizer, ...) to train the network further"
            )


def check_parts(network: Any, loss: Any, optimizer: Any, where: str) -> None:
    """Refuse a network, loss or optimizer of the wrong kind, and a class handed where one of its
    instances belongs (`BinaryCrossEntropy` for `BinaryCrossEntropy()`), saying what to write."""
    for what, value, kind in (
        ("network", network, Network),
        ("loss", loss, Loss),
        ("optimizer", optimizer, Optimizer),
    ):
        if isinstance(value, kind):
            continue
        if isinstance(value, type) and issubclass(value, kind):
            raise ConfigurationError(
                f"{where}: the {what} is the class {value.__name__}, not one of its instances: "
                f"write {value.__name__}(...) — e.g. {value.__name__}() — with the parentheses"
            )
        raise TypeError(f"{where}: the {what} must be a {kind.__name__}, not {described(value)}")


def quiet() -> Any:
    """NumPy's floating-point warnings off, where a value that is not finite is looked for."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


def checked_rows(features: Any, where: str, empty: bool = False) -> NDArray[Any]:
    """One input's batch as an array, at least 2-D with a row (unless it may be empty)."""
    array = np.asarray(features) if not isinstance(features, np.ndarray) else features
    if array.ndim < 2 or (array.shape[0] == 0 and not empty):
        raise DataError(
            f"{where}: a batch is (rows, ...) with at least one row, not of shape {array.shape}"
        )
    return array


def _rows(features: Any) -> int:
    if isinstance(features, Mapping):
        features = next(iter(features.values()))
    elif in_order(features):
        features = features[0]
    return int(np.shape(features)[0]) if np.ndim(features) else 0

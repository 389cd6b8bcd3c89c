"""What a trainer keeps beside its step: what it holds on its engine (`Held`: the slots and
buffers bound there, the optimizer's memory), snapshots of them (the best epoch's), and what a
checkpoint holds of it on the host (`TrainerState`), checked against the run that would go on
from it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Engine, Handle
from deepsharp.core.errors import (
    CheckpointMismatchError,
    DeepSharpWarning,
    FileFormatError,
    ShapeError,
    json_values,
    outside,
)
from deepsharp.core.nn.binding import Bound
from deepsharp.core.nn.optimizers import Optimizer, OptimizerState

__all__ = [
    "Held",
    "Snapshot",
    "TrainerState",
    "check_sides",
    "optimizer_record",
    "own_attributes",
    "warn_of_attributes",
]


class Snapshot:
    """A copy of the slots and buffers on the trainer's engine, taken at one moment (the best
    epoch's): `handles` the slots' then the buffers', in the network's order."""

    def __init__(self, engine: Engine, handles: list[Handle]) -> None:
        self.engine = engine
        self.handles = handles


class Held:
    """What a trainer holds on its engine: the network's slots and buffers (`bound`) and the
    optimizer's memory (`state`), with their copies (snapshots), restores and host copies."""

    def __init__(self, engine: Engine, bound: Bound, state: OptimizerState) -> None:
        self.engine = engine
        self.bound = bound
        self.state = state
        self.slots = [tensor.handle for tensor in bound.tensors.values()]
        self.kept = [*self.slots, *(tensor.handle for tensor in bound.buffers.values())]
        """The slots', then the buffers' handles: what a snapshot holds, in its order."""

    @property
    def slot_names(self) -> list[str]:
        return list(self.bound.tensors)

    @property
    def kept_names(self) -> list[str]:
        """The slots' names, then the buffers': what a snapshot holds, in its order."""
        return [*self.bound.tensors, *self.bound.buffers]

    def snapshot(self, into: Snapshot | None = None) -> Snapshot:
        """A copy of the slots and buffers as they are now, kept on the engine (in `into`'s
        memory when given: a run keeps one snapshot of its best epoch and refreshes it)."""
        engine = self.engine
        if into is None:
            return Snapshot(engine, [engine.copy(handle) for handle in self.kept])
        for keep, handle in zip(into.handles, self.kept, strict=True):
            engine.assign(keep, handle)
        return into

    def restore(self, snapshot: Snapshot) -> None:
        """Put the slots and buffers of a snapshot back."""
        with self.bound.lock:
            for handle, keep in zip(self.kept, snapshot.handles, strict=True):
                self.engine.assign(handle, keep)

    def put_values(
        self,
        values: Mapping[str, NDArray[np.float32]],
        buffers: Mapping[str, NDArray[np.float32]] | None = None,
    ) -> None:
        """Replace every slot's values (and every buffer's, where given), names and shapes
        checked first (ShapeError naming the first that differs)."""
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
            self.put_into(keep, every, name, "best slot" if name in slots else "best buffer")
        return snapshot

    def memory(self) -> dict[str, dict[str, NDArray[np.float32]]]:
        """The optimizer's memory brought to the host, by kind and slot."""
        names = self.slot_names
        return {
            kind: {name: self.engine.get(h) for name, h in zip(names, handles)}
            for kind, handles in self.state.memory.items()
        }

    def load(self, state: TrainerState, where: str) -> None:
        """A checkpoint's slots, buffers and optimizer memory put on the engine (each checked:
        FileFormatError naming what is missing or of another shape)."""
        missing = set(self.state.memory) ^ set(state.memory)
        if missing:
            raise FileFormatError(f"{where}: its optimizer memory holds {sorted(state.memory)}")
        for name, tensor in self.bound.tensors.items():
            self.put_into(tensor.handle, state.slots, name, "slot")
        for name, tensor in self.bound.buffers.items():
            self.put_into(tensor.handle, state.buffers, name, "buffer")
        for kind, handles in self.state.memory.items():
            for name, handle in zip(self.slot_names, handles):
                self.put_into(handle, state.memory[kind], name, f"{kind} memory of")
        self.state.steps = int(state.optimizer["steps"])
        self.state.rate_scale = float(state.optimizer.get("rate_scale", 1.0))

    def put_into(
        self, handle: Handle, values: Mapping[str, NDArray[np.float32]], name: str, what: str
    ) -> None:
        value = values.get(name)
        shape = self.engine.shape(handle)
        if value is None or tuple(value.shape) != shape:
            found = "missing" if value is None else f"of shape {tuple(value.shape)}"
            raise FileFormatError(f"checkpoint: {what} {name!r} is {found}, expected {shape}")
        self.engine.assign(handle, self.engine.put(value))


@dataclass
class TrainerState:
    """What a checkpoint holds of a trainer, on the host."""

    slots: dict[str, NDArray[np.float32]]
    memory: dict[str, dict[str, NDArray[np.float32]]]
    optimizer: dict[str, Any]  # {"kind", "config", "steps", "rate_scale"}
    generator: dict[str, Any]  # the streams' seed and counters
    hooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped_steps: int = 0
    buffers: dict[str, NDArray[np.float32]] = field(default_factory=dict)


def optimizer_record(optimizer: Optimizer) -> dict[str, Any]:
    """An optimizer's kind and settings, as a checkpoint records them: JSON values (a tuple a
    list, as a checkpoint reads it back), else a ConfigurationError naming the setting (a
    NumPy number in a schedule's config stopped the run at its first checkpoint with json's
    own error, naming nothing)."""
    whose = f"the optimizer {type(optimizer).__name__}: its settings (config(), a schedule's too)"
    config = json_values(optimizer.config(), whose)
    return {"kind": type(optimizer).__name__, "config": config}


def check_sides(state: TrainerState, optimizer: Optimizer, seed: int, where: str) -> None:
    """Refuse a checkpoint's trainer state taken with another optimizer (kind or settings) or
    another seed: such a run would not go on where it stopped (CheckpointMismatchError)."""
    ours = optimizer_record(optimizer)
    theirs = {key: state.optimizer.get(key) for key in ("kind", "config")}
    if theirs != ours:
        raise CheckpointMismatchError(
            f"{where} was taken with the optimizer {_optimizer_text(theirs)}; this run's is "
            f"{_optimizer_text(ours)}: resume with the optimizer it was taken with, or start "
            "the run afresh"
        )
    if state.generator.get("seed") != seed:
        raise CheckpointMismatchError(
            f"{where} was taken by a run of seed {state.generator.get('seed')!r}; this run's "
            f"seed is {seed!r}: resume with that seed, or start the run afresh"
        )


def _optimizer_text(record: Mapping[str, Any]) -> str:
    config = record.get("config") or {}
    args = ", ".join(f"{k}={v!r}" for k, v in config.items()) if isinstance(config, dict) else ""
    return f"{record.get('kind')}({args})"


def own_attributes(optimizer: Optimizer) -> dict[str, str] | None:
    """What an optimizer of one's own holds in its attributes, as text (None for deepsharp's,
    whose state is all in `OptimizerState`)."""
    if type(optimizer).__module__.startswith("deepsharp."):
        return None
    return {name: _text(value) for name, value in vars(optimizer).items()}


def _text(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # a value whose repr raises: by identity
        return f"<{type(value).__name__} at {id(value):#x}>"


def warn_of_attributes(optimizer: Optimizer, before: dict[str, str] | None) -> bool:
    """Warn where an optimizer of one's own changed its attributes since the run began (a
    count kept on itself): a checkpoint holds its settings (config()), its memory and its step
    count, not its attributes, so a resumed run starts them anew (trial X). Whether it warned."""
    now = own_attributes(optimizer)
    if before is None or now is None:
        return False
    # Those it held at the start (one made at its first update, a cache, is made again)
    changed = sorted(name for name in before if before[name] != now.get(name))
    if not changed:
        return False
    warnings.warn(
        f"the optimizer {type(optimizer).__name__} changed its attribute(s) "
        f"{', '.join(map(repr, changed))} during the run: a checkpoint keeps an optimizer's "
        "settings (config()), its memory (memories, one tensor a slot) and its step count "
        "(state.steps), not its attributes, so a run resumed from it starts them anew; keep "
        "what an update changes in its memory, or read state.steps",
        DeepSharpWarning,
        stacklevel=outside(),
    )
    return True

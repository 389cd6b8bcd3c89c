"""What a trainer keeps beside its step: snapshots of the slots and buffers on its engine (the
best epoch's), and what a checkpoint holds of it on the host, checked against the run that would
go on from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Engine, Handle
from deepsharp.core.errors import CheckpointMismatchError
from deepsharp.core.nn.optimizers import Optimizer

__all__ = ["Snapshot", "TrainerState", "check_sides", "optimizer_record"]


class Snapshot:
    """A copy of the slots and buffers on the trainer's engine, taken at one moment (the best
    epoch's): `handles` the slots' then the buffers', in the network's order."""

    def __init__(self, engine: Engine, handles: list[Handle]) -> None:
        self.engine = engine
        self.handles = handles


@dataclass
class TrainerState:
    """What a checkpoint holds of a trainer, on the host."""

    slots: dict[str, NDArray[np.float32]]
    memory: dict[str, dict[str, NDArray[np.float32]]]
    optimizer: dict[str, Any]  # {"kind", "config", "steps"}
    generator: dict[str, Any]  # the streams' seed and counters
    hooks: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped_steps: int = 0
    buffers: dict[str, NDArray[np.float32]] = field(default_factory=dict)


def optimizer_record(optimizer: Optimizer) -> dict[str, Any]:
    """An optimizer's kind and settings, as a checkpoint records them."""
    return {"kind": type(optimizer).__name__, "config": optimizer.config()}


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

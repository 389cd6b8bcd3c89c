"""Checkpoints: everything a run needs to go on, bit for bit, where it stopped.

One safetensors file: the epoch's slots, the optimizer's memory, the best epoch's slots, the
generator's state, the history and the engine's identity. Written atomically (a temporary
file, flushed, renamed), so a crash leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import EngineIdentity
from deepsharp.core.errors import FileFormatError
from deepsharp.core.files import read_safetensors, write_safetensors
from deepsharp.core.nn.network import check_format
from deepsharp.core.version import __version__

__all__ = ["Checkpoint", "EpochRecord"]

CHECKPOINT_FORMAT = "deepsharp.checkpoint"


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of a run: its mean training loss, its validation loss, and how long it took."""

    epoch: int
    loss: float
    validation_loss: float
    seconds: float

    def to_json(self) -> list[float]:
        return [self.epoch, self.loss, self.validation_loss, self.seconds]

    @classmethod
    def from_json(cls, data: Any) -> EpochRecord:
        epoch, loss, validation, seconds = data
        return cls(int(epoch), float(loss), float(validation), float(seconds))


@dataclass
class Checkpoint:
    """A run's state after `epoch` epochs (1 after the first), taken on `engine`."""

    epoch: int
    engine: EngineIdentity
    slots: dict[str, NDArray[np.float32]]
    best_slots: dict[str, NDArray[np.float32]]
    memory: dict[str, dict[str, NDArray[np.float32]]]
    optimizer_steps: int
    generator: dict[str, Any]
    history: list[EpochRecord]
    best_epoch: int
    best_loss: float
    waited: int
    network: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def save(self, path: str | os.PathLike[str]) -> None:
        tensors: dict[str, NDArray[Any]] = {}
        for name, value in self.slots.items():
            tensors[f"slots/{name}"] = value
        for name, value in self.best_slots.items():
            tensors[f"best/{name}"] = value
        for kind, values in self.memory.items():
            for name, value in values.items():
                tensors[f"memory/{kind}/{name}"] = value
        state = {
            "epoch": self.epoch,
            "engine": self.engine.to_json(),
            "optimizer_steps": self.optimizer_steps,
            "generator": self.generator,
            "history": [record.to_json() for record in self.history],
            "best_epoch": self.best_epoch,
            "best_loss": self.best_loss,
            "waited": self.waited,
        }
        metadata = {
            "format": CHECKPOINT_FORMAT,
            "format_version": "1",
            "state": json.dumps(state),
            "network": json.dumps(self.network),
            "deepsharp_version": __version__,
        }
        write_safetensors(path, tensors, metadata)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Checkpoint:
        tensors, metadata = read_safetensors(path, "checkpoint")
        where = f"checkpoint {os.fspath(path)!r}"
        check_format(metadata, where, CHECKPOINT_FORMAT)
        try:
            state = json.loads(metadata["state"])
            network = json.loads(metadata.get("network", "{}"))
            slots: dict[str, NDArray[np.float32]] = {}
            best: dict[str, NDArray[np.float32]] = {}
            memory: dict[str, dict[str, NDArray[np.float32]]] = {}
            for key, value in tensors.items():
                part, _, name = key.partition("/")
                if part == "slots":
                    slots[name] = value
                elif part == "best":
                    best[name] = value
                elif part == "memory":
                    kind, _, slot = name.partition("/")
                    memory.setdefault(kind, {})[slot] = value
                else:
                    raise ValueError(f"unexpected tensor {key!r}")
            return cls(
                epoch=int(state["epoch"]),
                engine=EngineIdentity.from_json(state["engine"]),
                slots=slots,
                best_slots=best,
                memory=memory,
                optimizer_steps=int(state["optimizer_steps"]),
                generator=dict(state["generator"]),
                history=[EpochRecord.from_json(r) for r in state["history"]],
                best_epoch=int(state["best_epoch"]),
                best_loss=float(state["best_loss"]),
                waited=int(state["waited"]),
                network=network,
                path=os.fspath(path),
            )
        except (KeyError, ValueError, TypeError, json.JSONDecodeError) as error:
            raise FileFormatError(f"{where}: its state cannot be read ({error})") from None

    @staticmethod
    def path_in(folder: str | os.PathLike[str]) -> Path:
        """Where a run keeps its checkpoint in `folder` (the latest one; each replaces the last)."""
        return Path(folder) / "checkpoint.safetensors"

"""Checkpoints: everything a run needs to go on, bit for bit, where it stopped.

One safetensors file a checkpoint, named by its epoch (`checkpoint-000007.safetensors`): the
epoch's slots, the optimizer's memory, the best epoch's slots; in its metadata the optimizer's
kind, settings and step count, the generator's counters, the history, the states of the run's
callbacks and step hooks, the engine's identity, the architecture and the checkpoint format's own
version. Written atomically (a temporary file, flushed, renamed), so a crash leaves the previous
checkpoint whole. `Checkpoint.load` checks every part against the others, so a file whose
contents lie is refused there, with a FileFormatError saying what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import EngineIdentity
from deepsharp.core.errors import FileFormatError
from deepsharp.core.files import Declared, Expectation, read_safetensors, write_safetensors
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Optimizer
from deepsharp.core.nn.saving import (
    check_declared,
    check_format,
    check_tensors,
    renamed_from_format_1,
)
from deepsharp.core.random import Streams
from deepsharp.core.reals import brief, finite_real
from deepsharp.core.training.resuming import checked_record
from deepsharp.core.training.state import TrainerState
from deepsharp.core.version import __version__

__all__ = ["CHECKPOINT_FORMAT", "Checkpoint", "EpochRecord"]

CHECKPOINT_FORMAT = "deepsharp.checkpoint"
CHECKPOINT_VERSION = "5"
READS = ("2", "3", "4", "5")
"""The checkpoint versions this deepsharp reads: 2 (before graphs: slots named by position, no
buffers), 3 (the history in the state's JSON), 4 (the history a float64 tensor: a run of
14,000 epochs outgrew the 1 MiB header, and its next checkpoint ended it: trial HG) and 5 (its
architecture of network format 4: LSTM and GRU pass over padding)."""

ARCHITECTURES = {"2": "1", "3": "3", "4": "3", "5": "4"}
"""The network format of each checkpoint version's architecture."""
HISTORY = "history"
"""The tensor of a version-4 checkpoint's history: a row an epoch, [epoch, loss, validation
loss, seconds, *metrics] (NaN where a metric has no value), the metrics' names in the state."""
_NAME = re.compile(r"checkpoint-([0-9]+)\.safetensors")  # (\d: any script's digits, trial H)
_LARGEST = 2**62  # counters and epochs beyond this are a file's lie, not a run's


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of a run: its mean training loss, its validation loss, how long it took, and
    the run's metrics on the validation rows (`FitOptions(metrics=...)`; NaN where a metric has
    no value, such as AUC on rows of one class)."""

    epoch: int
    loss: float
    validation_loss: float
    seconds: float
    metrics: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> list[Any]:
        kept: list[Any] = [self.epoch, self.loss, self.validation_loss, self.seconds]
        if self.metrics:  # NaN has no JSON: null stands for it
            kept.append({k: v if math.isfinite(v) else None for k, v in self.metrics.items()})
        return kept

    @classmethod
    def from_json(cls, data: Any) -> EpochRecord:
        if not (isinstance(data, list) and len(data) in (4, 5)):
            raise ValueError(
                f"an epoch's record is [epoch, loss, validation, seconds] (and its metrics), "
                f"not {brief(data)}"
            )
        epoch, loss, validation, seconds = data[:4]
        metrics = data[4] if len(data) == 5 else {}
        if not isinstance(metrics, dict) or not all(
            isinstance(k, str) and (v is None or _finite(v)) for k, v in metrics.items()
        ):
            raise ValueError(
                f"epoch {epoch}: its metrics must map names to numbers, not {metrics!r}"
            )
        if not _whole(epoch, 1):
            raise ValueError(f"an epoch's number must be a whole number from 1, not {brief(epoch)}")
        for what, value in (("loss", loss), ("validation loss", validation), ("seconds", seconds)):
            if not _finite(value):
                raise ValueError(
                    f"epoch {brief(epoch)}: its {what} must be a finite number, not {brief(value)}"
                )
        if seconds < 0:
            raise ValueError(
                f"epoch {brief(epoch)}: its seconds must be 0 or more, not {brief(seconds)}"
            )
        figures = {k: math.nan if v is None else float(v) for k, v in metrics.items()}
        return cls(epoch, float(loss), float(validation), float(seconds), figures)


def _whole(value: object, low: int = 0, high: int = _LARGEST) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _finite(value: object) -> bool:
    return finite_real(value) is not None


@dataclass
class Checkpoint:
    """A run's state after `epoch` epochs (1 after the first), taken on `engine`."""

    epoch: int
    engine: EngineIdentity
    trainer: TrainerState
    best_slots: dict[str, NDArray[np.float32]]
    history: list[EpochRecord]
    best_epoch: int
    network: dict[str, Any]
    callbacks: dict[str, dict[str, Any]] = field(default_factory=dict)
    distribution: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    best_buffers: dict[str, NDArray[np.float32]] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    """What the run is made of beyond the trainer (`deepsharp.core.training.resuming`): a
    resumed run is checked against it; empty in a checkpoint written before it was kept."""

    @property
    def best_loss(self) -> float:
        return self.history[self.best_epoch - 1].validation_loss

    # --- files ---------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        tensors: dict[str, NDArray[Any]] = {}
        for name, value in self.trainer.slots.items():
            tensors[f"slots/{name}"] = value
        for name, value in self.best_slots.items():
            tensors[f"best/{name}"] = value
        for name, value in self.trainer.buffers.items():
            tensors[f"buffers/{name}"] = value
        for name, value in self.best_buffers.items():
            tensors[f"best_buffers/{name}"] = value
        for kind, values in self.trainer.memory.items():
            for name, value in values.items():
                tensors[f"memory/{kind}/{name}"] = value
        state = {
            "epoch": self.epoch,
            "engine": self.engine.to_json(),
            "optimizer": self.trainer.optimizer,
            "generator": self.trainer.generator,
            "hooks": self.trainer.hooks,
            "skipped_steps": self.trainer.skipped_steps,
            "history": {"metrics": _history_table(self.history, tensors)},
            "best_epoch": self.best_epoch,
            "callbacks": self.callbacks,
            "distribution": self.distribution,
            "run": self.run,
        }
        metadata = {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "state": json.dumps(state, allow_nan=False),
            "network": json.dumps(self.network),
            "deepsharp_version": __version__,
        }
        write_safetensors(path, tensors, metadata)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Checkpoint:
        """A checkpoint from its file (or a folder's latest), every part checked against the
        others."""
        if not os.path.isdir(path):
            return cls._load(path)
        found = cls.in_folder(path)
        if not found:
            raise FileNotFoundError(f"no checkpoint in {os.fspath(path)!r}")
        try:
            return cls._load(found[-1][1])
        except FileFormatError as error:
            # A damaged latest (a copy cut short) stopped every resume from the folder, and
            # the refusal said nothing of the earlier ones still whole (trial RS); said only
            # where the one before loads (a refusal both share is no damage: review).
            if len(found) < 2 or not _loads(found[-2][1]):
                raise
            earlier = os.fspath(found[-2][1])
            raise FileFormatError(
                f"{error}. It is the folder's latest; the one before it, {earlier!r}, loads: "
                "resume from that file, or move the damaged one out of the folder"
            ) from None

    @classmethod
    def _load(cls, path: str | os.PathLike[str]) -> Checkpoint:
        where = f"checkpoint {os.fspath(path)!r}"
        tensors, metadata = read_safetensors(path, "checkpoint", expect=_expectation(where))
        state, network, version = _contents(metadata, where)
        if version == "2":  # slots named by their layer's position, then: name them as today
            names = renamed_from_format_1(network)
            tensors = {_renamed(key, names): value for key, value in tensors.items()}
        try:
            return _read(where, state, tensors, network.to_json(), network, os.fspath(path))
        except (KeyError, ValueError, TypeError) as error:
            raise FileFormatError(f"{where}: {_said(error)}") from None

    # --- where they lie ------------------------------------------------------------------------

    @staticmethod
    def path_in(folder: str | os.PathLike[str], epoch: int | None = None) -> Path:
        """The checkpoint of `epoch` in `folder`, or (None) the latest one there."""
        if epoch is not None:
            return Path(folder) / f"checkpoint-{epoch:06d}.safetensors"
        found = Checkpoint.in_folder(folder)
        if not found:
            raise FileNotFoundError(f"no checkpoint in {os.fspath(folder)!r}")
        return found[-1][1]

    @staticmethod
    def in_folder(folder: str | os.PathLike[str]) -> list[tuple[int, Path]]:
        """The checkpoints in `folder`, by epoch (oldest first)."""
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = [(int(m.group(1)), Path(folder) / n) for n in names if (m := _NAME.fullmatch(n))]
        return sorted(found)


def _loads(path: Path) -> bool:
    """Whether the checkpoint at `path` loads."""
    try:
        Checkpoint._load(path)
    except (FileFormatError, OSError):
        return False
    return True


def _contents(metadata: Mapping[str, str], where: str) -> tuple[dict[str, Any], Network, str]:
    """A checkpoint's state, the network its architecture makes, and its format version."""
    version = check_format(metadata, where, CHECKPOINT_FORMAT, READS)
    try:
        state = json.loads(metadata["state"])
        architecture = json.loads(metadata["network"])
    except (KeyError, ValueError, RecursionError) as error:
        raise FileFormatError(f"{where}: its state cannot be read ({error})") from None
    if not isinstance(state, dict):
        raise FileFormatError(f"{where}: its state must be a JSON object")
    network = Network.from_json(architecture, where, ARCHITECTURES[version])
    if not network.built:
        raise FileFormatError(f"{where}: its architecture names no inputs")
    return state, network, version


def _expectation(where: str) -> Expectation:
    """What a checkpoint must declare before its values are read: every slot (and buffer) of
    its architecture in each part (slots, best, the optimizer's memories), float32 at its
    shape."""

    def expect(metadata: Mapping[str, str], declared: Mapping[str, Declared]) -> None:
        state, network, version = _contents(metadata, where)
        if version == "2":
            names = renamed_from_format_1(network)
            declared = {_renamed(key, names): value for key, value in declared.items()}
        try:
            memories = _optimizer(state["optimizer"])["memories"]
            table = _history_declared(state, version, dict(declared))
            if table is not None:  # its size checked before a byte of it is read
                declared = {k: v for k, v in declared.items() if k != HISTORY}
            _parts(declared, network, memories, declared=True)
        except (KeyError, ValueError, TypeError) as error:
            if isinstance(error, FileFormatError) and str(error).startswith(where):
                raise
            raise FileFormatError(f"{where}: {_said(error)}") from None

    return expect


def _read(
    where: str,
    state: dict[str, Any],
    tensors: Mapping[str, NDArray[Any]],
    architecture: dict[str, Any],
    network: Network,
    path: str,
) -> Checkpoint:
    epoch = state["epoch"]
    if not _whole(epoch, 1):
        raise ValueError(f"its epoch must be a whole number from 1, not {brief(epoch)}")
    optimizer = _optimizer(state["optimizer"])
    generator = _generator(state["generator"])
    tensors = dict(tensors)
    history = _history(state["history"], tensors.pop(HISTORY, None), epoch)
    if len(history) != epoch or any(r.epoch != i for i, r in enumerate(history, start=1)):
        raise ValueError(f"its history must record epochs 1 to {epoch}, in order")
    best_epoch = state["best_epoch"]
    if not _whole(best_epoch, 1, epoch):
        raise ValueError(f"its best epoch must lie in 1..{epoch}, not {brief(best_epoch)}")
    skipped = state.get("skipped_steps", 0)
    if not _whole(skipped):
        raise ValueError(f"its skipped steps must be a whole number, not {brief(skipped)}")
    run = checked_record(state.get("run", {}))
    _metrics_of_the_run(history, run)
    parts = _parts(tensors, network, optimizer["memories"])
    buffers, best_buffers = parts.pop("buffers"), parts.pop("best_buffers")
    return Checkpoint(
        epoch=epoch,
        engine=EngineIdentity.from_json(state["engine"]),
        trainer=TrainerState(
            slots=parts["slots"],
            memory={kind: parts[f"memory/{kind}"] for kind in optimizer["memories"]},
            optimizer={k: optimizer[k] for k in ("kind", "config", "steps", "rate_scale")},
            generator=generator,
            hooks=_objects(state.get("hooks", {}), "hooks"),
            skipped_steps=skipped,
            buffers=buffers,
        ),
        best_slots=parts["best"],
        best_buffers=best_buffers,
        history=history,
        best_epoch=best_epoch,
        network=architecture,
        callbacks=_objects(state.get("callbacks", {}), "callbacks"),
        distribution=_object(state.get("distribution", {}), "distribution"),
        path=path,
        run=run,
    )


def _metrics_of_the_run(history: Sequence[EpochRecord], run: Mapping[str, Any]) -> None:
    """Each epoch's metrics are among those the run records it measured: a history of others
    (a file changed since) went on into the resumed run's report, its epochs' columns unlike
    (trial: a history of 'foo' resumed into a run of no metrics)."""
    if "metrics" not in run:  # a checkpoint from before runs were recorded
        return
    measured = set(run["metrics"])
    for record in history:
        other = sorted(set(record.metrics) - measured)
        if other:
            raise ValueError(
                f"its history's epoch {record.epoch} holds the metric(s) "
                f"{', '.join(map(repr, other))}, which its run did not measure "
                f"({', '.join(map(repr, sorted(measured))) or 'none'})"
            )


def _history_table(history: Sequence[EpochRecord], tensors: dict[str, NDArray[Any]]) -> list[str]:
    """The history as the float64 table a version-4 checkpoint holds (into `tensors`); the
    names of its metrics, in the order the epochs first name them."""
    names = list(dict.fromkeys(name for record in history for name in record.metrics))
    rows = [
        [record.epoch, record.loss, record.validation_loss, record.seconds]
        + [record.metrics.get(name, math.nan) for name in names]
        for record in history
    ]
    tensors[HISTORY] = np.array(rows, np.float64).reshape(len(history), 4 + len(names))
    return names


def _history_declared(state: Mapping[str, Any], version: str, declared: dict[str, Any]) -> Any:
    """The history table's declaration (version 4), checked float64 of one row an epoch (where
    the state's epoch and metrics can say: else the state is refused as it is read); None for
    version 3 and before, which hold none."""
    if version in ("2", "3"):
        return None
    table = declared.get(HISTORY)
    if table is None:
        raise ValueError(f"it holds no {HISTORY!r} tensor (its history)")
    recorded, rows = state.get("history"), state.get("epoch")
    names = recorded.get("metrics") if isinstance(recorded, dict) else None
    wanted = (rows, 4 + len(names)) if isinstance(names, list) and _whole(rows, 1) else None
    if table.dtype != np.float64 or (wanted is not None and table.shape != wanted):
        raise ValueError(
            f"its history is {table.dtype} of shape {table.shape}, not a table of float64, one "
            f"row an epoch of 4 figures and its metrics{'' if wanted is None else f' {wanted}'}"
        )
    return table


def _history(recorded: object, table: NDArray[Any] | None, epoch: int) -> list[EpochRecord]:
    """The epochs' records: the state's JSON list (version 3 and before), or the table and its
    metrics' names (version 4), each checked as `EpochRecord.from_json` checks one."""
    if table is None:
        return [EpochRecord.from_json(record) for record in _list(recorded, "history")]
    names = _object(recorded, "history").get("metrics")
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise ValueError(f"its history's metrics must be a list of names, not {brief(names)}")
    if len(set(names)) != len(names) or table.shape != (epoch, 4 + len(names)):
        raise ValueError(
            f"its history is a table of shape {table.shape}, not one row an epoch of 4 figures "
            f"and its {len(names)} metrics ({epoch}, {4 + len(names)})"
        )
    records = []
    for row in table.tolist():
        number = int(row[0]) if math.isfinite(row[0]) and row[0].is_integer() else row[0]
        metrics = {name: None if math.isnan(v) else v for name, v in zip(names, row[4:])}
        records.append(EpochRecord.from_json([number, *row[1:4], *([metrics] if names else [])]))
    return records


def _said(error: Exception) -> str:
    """A refusal's words: a missing key named as one (it was the key alone, "'epoch'": trial
    HG)."""
    if type(error) is KeyError:
        return f"its state lacks the entry {error.args[0]!r}"
    return str(error)


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"its {what} must be a list, not {type(value).__name__}")
    return value


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"its {what} must be an object, not {brief(value)}")
    return value


def _objects(value: object, what: str) -> dict[str, dict[str, Any]]:
    found = _object(value, what)
    for name, part in found.items():
        _object(part, f"{what} entry {name!r}")
    return found


def _optimizer_kinds() -> dict[str, type[Optimizer]]:
    kinds: dict[str, type[Optimizer]] = {}
    pending: list[type[Optimizer]] = [Optimizer]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            kinds.setdefault(sub.__name__, sub)
            pending.append(sub)
    return kinds


def _optimizer(value: object) -> dict[str, Any]:
    record = _object(value, "optimizer")
    kind, config, steps = record["kind"], record["config"], record["steps"]
    cls = _optimizer_kinds().get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"its optimizer {brief(kind)} is not one deepsharp knows (imported)")
    _object(config, "optimizer's config")
    if not _whole(steps):
        raise ValueError(f"its optimizer's step count must be a whole number, not {brief(steps)}")
    scale = record.get("rate_scale", 1.0)
    if not _finite(scale) or scale < 0:  # a warm-up raises it, reductions may reach 0
        raise ValueError(
            f"its optimizer's rate scale must be a finite number of 0 or more, not {brief(scale)}"
        )
    return {
        "kind": kind,
        "config": config,
        "steps": steps,
        "rate_scale": float(scale),
        "memories": list(cls.memories),
    }


def _generator(value: object) -> dict[str, Any]:
    record = _object(value, "generator")
    if not (isinstance(record.get("seed"), int) and not isinstance(record["seed"], bool)):
        raise ValueError(
            f"its generator's seed must be a whole number, not {brief(record.get('seed'))}"
        )
    for name in Streams.PURPOSES:
        if not _whole(record.get(name)):
            raise ValueError(
                f"its generator's {name!r} counter must be a whole number in 0..2**62, not "
                f"{brief(record.get(name))}"
            )
    return {"seed": record["seed"], **{name: record[name] for name in Streams.PURPOSES}}


_Value = TypeVar("_Value")


def _parts(
    tensors: Mapping[str, _Value], network: Network, memories: list[str], declared: bool = False
) -> dict[str, dict[str, _Value]]:
    """The tensors (or, `declared`, what the header declares of them) by part (slots and
    buffers, best and best_buffers, memory/<kind>), each holding every slot (or buffer) of the
    network at its shape, float32 (and finite, for values); nothing else."""
    groups = ["slots", "best", "buffers", "best_buffers", *(f"memory/{kind}" for kind in memories)]
    parts: dict[str, dict[str, _Value]] = {group: {} for group in groups}
    for key, value in tensors.items():
        group, _, name = key.rpartition("/")
        if group not in parts:
            raise ValueError(f"it holds a tensor {key!r} that no part of a checkpoint names")
        parts[group][name] = value
    for group in groups:
        if group in ("buffers", "best_buffers"):
            continue
        if group.startswith("memory/"):
            _check_memory(network, parts[group], f"its {group}")
            continue
        # The slots with the network's buffers beside them, checked together.
        kept = "best_buffers" if group == "best" else "buffers"
        values: Any = {**parts[group], **parts[kept]}
        (check_declared if declared else check_tensors)(network, values, f"its {group}")
    return parts


def _check_memory(network: Network, values: Mapping[str, Any], where: str) -> None:
    """An optimizer's memory: one tensor a slot, float32 at its shape and finite (for values;
    a header's declarations are checked for dtype and shape), nothing else."""
    for name, spec in network.specs.items():
        value = values.get(name)
        if value is None:
            raise ValueError(f"{where}: slot {name!r} is missing")
        if tuple(value.shape) != spec.shape or value.dtype != np.float32:
            raise ValueError(
                f"{where}: slot {name!r} is {value.dtype} of shape {tuple(value.shape)}, the "
                f"architecture needs float32 of shape {spec.shape}"
            )
        if isinstance(value, np.ndarray) and not np.all(np.isfinite(value)):
            raise ValueError(f"{where}: slot {name!r} holds NaN or infinite values")
    extra = sorted(set(values) - set(network.specs))
    if extra:
        raise ValueError(f"{where}: slots the architecture does not hold: {extra}")


def _renamed(key: str, names: Mapping[str, str]) -> str:
    """A version-2 checkpoint's tensor key with its slot named as today."""
    group, _, name = key.rpartition("/")
    return f"{group}/{names.get(name, name)}" if group else key

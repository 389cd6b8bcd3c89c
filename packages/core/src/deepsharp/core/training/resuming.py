"""What a run is made of beyond its trainer's state, kept in its checkpoints, so that a run
resumed from one is the run that took it: the loss, the batch size and accumulation, the class
weights, the data (its rows' counts in each part, a digest of each part's rows — training,
validation and test — where they are held in memory, and the pipeline's learned statistics — a
vocabulary learned again on other rows gives its ids to other words), and the callbacks whose
state the checkpoint holds. A resumed run that differs in any of them would not end where the
uninterrupted one does (other validation rows judge its epochs otherwise: early stopping, the
best epoch kept), so `fit` refuses it (`CheckpointMismatchError`, naming both sides) before
anything is restored. A checkpoint written before this record was kept holds none and is
checked as before; one written before the validation and test rows' digests were kept
("validation_rows", "test_rows": entries the record may lack, so the format's version is
the same) has its training rows checked alone.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any

import numpy as np

from deepsharp.core.engine import Engine
from deepsharp.core.errors import (
    CheckpointMismatchError,
    DeepSharpWarning,
    json_values,
    outside,
)
from deepsharp.core.nn.losses import Loss, loss_to_json
from deepsharp.core.training.feeds import ArrayFeed, Feeds
from deepsharp.core.training.weights import ClassWeights

if TYPE_CHECKING:
    from deepsharp.core.training.callbacks import Callback

__all__ = ["check_run", "checked_record", "loss_record", "run_record"]

_UNCHECKED = ("checkpoints",)
"""Callbacks whose state a checkpoint holds and a resumed run may go without: writing
checkpoints (a run may go on without writing more)."""


def run_record(
    loss: Loss,
    batch_size: int,
    accumulate: int,
    class_weights: ClassWeights | None,
    feeds: Feeds,
    metrics: Sequence[str] = (),
    engine: Engine | None = None,
) -> dict[str, Any]:
    """What a checkpoint records of the run: each entry JSON, compared as it is (but the
    threads, `thread_bits`: warned of)."""
    return {
        # The thread count the engine's bits depend on (libtorch's at float32), or None.
        "threads": getattr(engine, "thread_bits", None),
        "loss": loss_record(loss),
        "metrics": sorted(metrics),  # their order is the report's columns' alone
        "batch_size": batch_size,
        "accumulate": accumulate,
        "class_weight": None if class_weights is None else class_weights.weights.tolist(),
        "rows": [_rows(feeds.train), _rows(feeds.validation), _rows(feeds.test)],
        "training_rows": _digest_of(feeds.train),
        "validation_rows": _digest_of(feeds.validation, weighed=False),
        "test_rows": _digest_of(feeds.test, weighed=False),
        "buffer_rows": getattr(feeds.train, "buffer_rows", None),
        "pipeline": _digest(json.dumps(feeds.pipeline.to_json(), sort_keys=True).encode()),
    }


def loss_record(loss: Loss) -> dict[str, Any]:
    """What a checkpoint records of the loss: its kind and settings, as they are when it is
    taken (a callback may have changed them: trial CK6)."""
    return {"kind": type(loss).__name__, "config": loss_to_json(loss)["config"]}


def check_run(
    kept: Mapping[str, Any],
    record: Mapping[str, Any],
    kept_callbacks: Mapping[str, Mapping[str, Any]],
    callbacks: Sequence[Callback],
    where: str,
) -> None:
    """Refuse to resume from a checkpoint whose run (`kept`, as `run_record` made it) differs
    from this one's (`record`), or that holds the state of a callback this run lacks or has
    with other settings (those its state records as "settings"). A run at another thread count
    than the one the engine's bits depend on is warned of: it goes on, within its bound."""
    threads, ours = kept.get("threads"), record.get("threads")
    if threads is not None and ours is not None and threads != ours:
        warnings.warn(
            f"{where} was taken at {threads} thread(s) of the engine and this run has {ours}: "
            "its totals depend on the thread count, so the run goes on within its precision's "
            "bound but not bit for bit the uninterrupted run; for its bits give it "
            f"{threads} (OMP_NUM_THREADS={threads}, or torch.set_num_threads({threads}))",
            DeepSharpWarning,
            stacklevel=outside(),
        )
    scanned = kept.get("buffer_rows", 0), record["buffer_rows"]
    if "buffer_rows" in kept and (scanned[0] is None) != (scanned[1] is None):  # one side's
        # rows in memory

        def read(rows: Any) -> str:
            return "rows held in memory" if rows is None else "rows scanned from a file"

        raise CheckpointMismatchError(
            f"{where} was taken by a run on {read(scanned[0])}; this run's are "
            f"{read(scanned[1])}, which are split and shuffled another way: resume on the rows "
            "as the run had them, or start the run afresh"
        )
    for name, said in (
        ("loss", "the loss"),
        ("batch_size", "a batch size of"),
        ("accumulate", "gradients accumulated over (batches)"),
        ("class_weight", "class weights"),
        ("metrics", "the metrics (each epoch's, in its history and report)"),
        ("buffer_rows", "scanned rows shuffled in buffers (buffer_rows, each epoch's order) of"),
    ):
        if name in kept and kept[name] != record[name]:
            raise CheckpointMismatchError(
                f"{where} was taken by a run of {said} {_shown(name, kept[name])}; this run's "
                f"is {_shown(name, record[name])}: resume with the run's own settings, or "
                "start the run afresh"
            )
    if "rows" in kept and list(kept["rows"]) != record["rows"]:
        raise CheckpointMismatchError(
            f"{where} was taken by a run of {_parts(kept['rows'])} rows; this run has "
            f"{_parts(record['rows'])}: its split would put other rows in each part; resume "
            "on the rows it was taken on, or start the run afresh"
        )
    for name, what in (
        ("pipeline", "a pipeline that learned other statistics (other training rows, "
         "another recipe: a vocabulary learned again gives its ids to other words; or a scan "
         "read in parts of another size, read_rows, whose statistics are added part by part)"),
        ("training_rows", "other training rows (the same count, other values or order) or "
         "other sample weights (or none where it had some)"),
        ("validation_rows", "other validation rows (the same count, other values, labels or "
         "order: they judge each epoch, for early stopping and the best epoch kept)"),
        ("test_rows", "other test rows (the same count, other values, labels or order: they "
         "are the report's measures)"),
    ):  # fmt: skip
        ours = record.get(name)
        if kept.get(name) is not None and ours is not None and kept[name] != ours:
            raise CheckpointMismatchError(
                f"{where} was taken by a run on {what}: resume on the data it was taken on, or "
                "start the run afresh"
            )
    named = {callback.name: callback for callback in callbacks if callback.name}
    lacking = sorted(set(kept_callbacks) - set(named) - set(_UNCHECKED))
    if lacking:
        raise CheckpointMismatchError(
            f"{where} holds the state of the callback(s) {', '.join(map(repr, lacking))}, which "
            "this run lacks: give the run the callbacks it was taken with (their settings too), "
            "or start the run afresh"
        )
    extra = sorted(set(named) - set(kept_callbacks) - set(_UNCHECKED))
    if kept and extra:  # (a checkpoint written before the run's record was kept: not checked)
        raise CheckpointMismatchError(
            f"this run has the callback(s) {', '.join(map(repr, extra))}, and {where} was taken "
            "without: resume with the callbacks it was taken with, or start the run afresh"
        )
    for name, state in kept_callbacks.items():
        settings = state.get("settings")
        ours = named[name].state().get("settings") if name in named else None
        if ours is not None:  # as the checkpoint holds it: JSON (a tuple read back a list)
            ours = json_values(ours, f"the callback {name!r}'s settings")
        if settings is not None and ours is not None and settings != ours:
            raise CheckpointMismatchError(
                f"{where} was taken with the callback {name!r} set {settings}; this run's is "
                f"set {ours}: resume with the settings it was taken with, or start the run "
                "afresh"
            )


def first_difference(kept: Any, ours: Any, where: str = "") -> str | None:
    """Where two architectures (JSON values: a checkpoint's and this run's) first differ, and
    how, in words: "layer 'dense_3' (Dense): its units: 8 there and 9 here"; None where
    they are the same."""
    if isinstance(kept, dict) and isinstance(ours, dict):
        for key in [*kept, *(k for k in ours if k not in kept)]:
            if key not in ours or key not in kept:
                return f"{where or 'the network'}: {key!r} is {'only there' if key in kept else 'only here'}"
            found = first_difference(kept[key], ours[key], _step(where, key, kept))
            if found:
                return found
        return None
    if isinstance(kept, list) and isinstance(ours, list):
        for index, (one, other) in enumerate(zip(kept, ours)):
            named = one.get("name") if isinstance(one, dict) else None
            step = (
                f"{where.removesuffix('s') or 'item'} {named!r}" if named else f"{where}[{index}]"
            )
            if isinstance(one, dict) and "kind" in one:
                step += f" ({one['kind']})"
            found = first_difference(one, other, step)
            if found:
                return found
        if len(kept) != len(ours):
            return f"{where or 'the network'}: {len(kept)} there and {len(ours)} here"
        return None
    if kept != ours:
        return f"{where or 'the network'}: {kept!r} there and {ours!r} here"
    return None


def _step(where: str, key: str, within: Mapping[str, Any]) -> str:
    if key == "config":
        return where
    if where and not isinstance(within.get(key), (dict, list)):
        return f"{where}: its {key}"
    return f"{where}, {key}" if where else key


def checked_record(value: object) -> dict[str, Any]:
    """A checkpoint's run record, each entry of its kind (ValueError naming the first that is
    not: the file was written otherwise, or changed)."""
    if not isinstance(value, dict):
        raise ValueError(f"its run must be an object, not {type(value).__name__}")
    for name, fits in (
        ("loss", lambda v: isinstance(v, dict) and isinstance(v.get("config"), dict)),
        ("batch_size", _whole),
        ("accumulate", _whole),
        ("class_weight", lambda v: v is None or (isinstance(v, list) and all(map(_real, v)))),
        ("metrics", lambda v: isinstance(v, list) and all(isinstance(m, str) for m in v)),
        ("rows", lambda v: isinstance(v, list) and len(v) == 3 and all(map(_count, v))),
        ("training_rows", lambda v: v is None or isinstance(v, str)),
        ("validation_rows", lambda v: v is None or isinstance(v, str)),
        ("test_rows", lambda v: v is None or isinstance(v, str)),
        ("buffer_rows", lambda v: v is None or _whole(v)),
        ("pipeline", lambda v: v is None or isinstance(v, str)),
    ):
        if name in value and not fits(value[name]):
            raise ValueError(f"its run's {name} is {str(value[name])[:60]!r}")
    return value


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= -1


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _digest_of(feed: object, weighed: bool = True) -> str | None:
    """A digest of the rows a feed holds (features, targets and, where `weighed`, weights):
    in memory, or as a scan spilled them; None for a feed of one's own (or none). Weights of
    one are digested as none: the same run, bit for bit. The validation and test rows' weights
    weigh nothing in the run (their losses weigh every row alike): not `weighed`."""
    spill = getattr(feed, "spill", None)
    if spill is not None:
        return str(spill.digest.hexdigest()[:32])
    if not isinstance(feed, ArrayFeed):
        return None
    weights = feed.weights if weighed else None
    if weights is not None and bool(np.all(np.asarray(weights) == 1)):
        weights = None  # weights of one are no weights
    made = hashlib.sha256()
    for array in (*feed.features, feed.targets, weights):
        if array is None:
            continue
        held = np.ascontiguousarray(array)
        made.update(f"{held.dtype.str}{held.shape}".encode())
        made.update(held.view(np.uint8).reshape(-1).data if held.size else b"")
    return made.hexdigest()[:32]


def _rows(feed: object) -> int:
    """How many rows a feed holds (-1 for a feed of your own that does not say)."""
    return len(feed) if isinstance(feed, Sized) else -1


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _parts(rows: Sequence[int]) -> str:
    training, validation, test = rows
    return f"{training:,} training, {validation:,} validation and {test:,} test"


def _shown(name: str, value: Any) -> str:
    if name == "loss" and isinstance(value, Mapping):
        config = value.get("config") or {}
        args = ", ".join(f"{k}={v!r}" for k, v in config.items())
        return f"{value.get('kind')}({args})"
    return repr(value)

"""How a run is spread over processes: the one place the loop asks about them.

A run in one process uses `OneProcess`, which changes nothing. A data-parallel run is given
settings (`FitOptions(distributed=...)`: a `Spread`, e.g. deepsharp-distributed's
`DataParallel`), which make the run's `Distribution` when it starts (`Spread.for_run`): the
settings stay settings, and the live part of the run — its place in a job of processes — is an
object of its own, made for the run and let go at its end. The loop calls the distribution at
these points, and only these:

1. `check(checkpoint.distribution, where)` before anything is read or restored, when resuming;
2. `check_data(seed, feeds)` before anything else a process does with the others: every
   process must run from the same seed and hold the same data (`data_fingerprint`), or the
   run ends on every process before its first step, naming the processes that differ;
3. `start(trainer)` once the trainer holds its slots (drawn, or restored from a checkpoint) and
   before the first step: make the slots identical (broadcast from rank 0, checked), and put a
   `StepHook` first in `trainer.hooks` that weighs the loss by the process's share of the batch
   (`objective`) and reduces the gradients over processes (`gradients`);
4. `share(count)` for every batch (training, validation, test) of `count` rows: the rows this
   process takes, [start, stop) — contiguous, so a row's place in the batch is known;
5. `all_finite(loss)` after every step: whether the step's loss is finite on every process, so
   that all stop together when a run diverges;
6. `combine(sums)` after each pass over a part (an epoch's training rows, the validation rows,
   the test rows): the sums over every process; where the run takes metrics, `gather(arrays)`
   too: every process's predictions and targets, in rank order;
7. `writes`: whether this process writes checkpoints and draws the progress bar (rank 0);
8. `state()` into every checkpoint (the world size, ...), `finish()` after the run.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import CheckpointMismatchError

if TYPE_CHECKING:
    from deepsharp.core.training.feeds import Feeds
    from deepsharp.core.training.trainer import Trainer

__all__ = ["Distribution", "OneProcess", "Spread", "Sums", "data_fingerprint"]


def data_fingerprint(feeds: Feeds) -> dict[str, Any]:
    """What must be the same on every process of a run, to tell data apart without sending it:
    the rows of each part (training, validation, test), the recipe the pipeline learned, and a
    SHA-256 digest of every row's features (each input's), targets and own weights (held in
    memory, or as they were spilled)."""
    values = hashlib.sha256()
    rows = []
    for feed in (feeds.train, feeds.validation, feeds.test):
        rows.append(len(feed))  # type: ignore[arg-type]
        spill = getattr(feed, "spill", None)
        if spill is not None:
            values.update(spill.digest.digest())
            continue
        weights = getattr(feed, "weights", None)  # the rows' own weights, where given
        if weights is not None and bool(np.all(np.asarray(weights) == 1)):
            weights = None  # weights of one are no weights: the same run
        arrays = [*getattr(feed, "features", ()), getattr(feed, "targets", None), weights]
        for array in arrays:
            if array is not None:
                values.update(repr((array.dtype.str, array.shape)).encode())
                values.update(np.ascontiguousarray(array).data.cast("B"))
    recipe = json.dumps(feeds.pipeline.to_json(), sort_keys=True, default=repr)
    return {
        "rows": rows,
        "recipe": hashlib.sha256(recipe.encode()).hexdigest(),
        "values": values.hexdigest(),
    }


@dataclass
class Sums:
    """What one pass over a part of the rows adds up: the loss summed over what it counts, the
    rows predicted right (for losses that measure accuracy), the rows, and what the loss and
    the accuracy count (`counted`: the rows, or the positions a class a position counts, its
    padding left out: `Loss.counted`)."""

    loss: float = 0.0
    right: float = 0.0
    rows: int = 0
    counted: int = 0

    def add(
        self, mean_loss: float, rows: int, right: float = 0.0, counted: int | None = None
    ) -> None:
        counted = rows if counted is None else counted
        self.loss += mean_loss * counted
        self.right += right
        self.rows += rows
        self.counted += counted

    @property
    def mean_loss(self) -> float:
        return self.loss / self.counted if self.counted else math.nan

    @property
    def accuracy(self) -> float:
        return self.right / self.counted if self.counted else math.nan


class Spread:
    """How a run is to be spread over processes, as `FitOptions(distributed=...)` takes it:
    settings, which make the run's `Distribution` when the run starts."""

    def for_run(self) -> Distribution:
        """The distribution of one run (joining its processes where it must)."""
        raise NotImplementedError


class Distribution(Spread):
    """How a run is spread over processes (see the module's docstring for when each is called).
    A distribution handed to `FitOptions` is its own run's."""

    def for_run(self) -> Distribution:
        return self

    @property
    def rank(self) -> int:
        """This process's place in the run: 0 .. world_size - 1."""
        return 0

    @property
    def world_size(self) -> int:
        """How many processes the run is spread over."""
        return 1

    @property
    def writes(self) -> bool:
        """Whether this process writes checkpoints and shows progress."""
        return self.rank == 0

    def share(self, count: int) -> tuple[int, int]:
        """The rows [start, stop) of a batch of `count` rows that this process takes."""
        return 0, count

    def check_settings(self, settings: Mapping[str, str]) -> None:
        """Before anything else: refuse a run whose processes were given different run settings
        (`settings`, each named, in words: the batch size, the epochs, the class weights ...),
        on every process, naming the first that differs."""

    def check_data(self, seed: int, feeds: Feeds) -> None:
        """Before anything else: refuse a run whose processes were given different seeds or
        different data (`data_fingerprint(feeds)`), on every process, naming them."""

    def start(self, trainer: Trainer) -> None:
        """Before the first step, with the trainer's slots in place."""

    def all_finite(self, loss: float) -> bool:
        """Whether a step's loss is finite on every process: its whole batch's loss is."""
        return math.isfinite(self.batch_loss(loss))

    def batch_loss(self, loss: float) -> float:
        """The whole batch's loss of the step this process's share of it gave `loss` (what a
        diverged run's message quotes: one process's share may be finite where the batch's
        is not)."""
        return loss

    def combine(self, sums: Sums) -> Sums:
        """The sums of every process."""
        return sums

    def any_process(self, flag: bool) -> bool:
        """Whether `flag` holds on any process (a callback's `run.stop`: one process's decision
        to end the run is every process's, so that their steps stay in step)."""
        return flag

    def gather(self, arrays: Sequence[NDArray[Any]]) -> list[NDArray[Any]]:
        """Each array's rows from every process, joined in rank order (each process passes
        arrays of the same kinds and widths, of any number of rows)."""
        return list(arrays)

    def state(self) -> dict[str, Any]:
        """What a checkpoint records of the run's processes."""
        return {"world_size": self.world_size}

    def check(self, state: Mapping[str, Any], where: str) -> None:
        """Refuse a checkpoint taken at another world size (CheckpointMismatchError)."""
        theirs = state.get("world_size", 1)
        if theirs != self.world_size:
            raise CheckpointMismatchError(
                f"{where} was taken by a run of {theirs} process(es); this run has "
                f"{self.world_size}: resume at the world size it was taken at, or start afresh"
            )

    def check_replicas(self, trainer: Trainer, when: str) -> None:
        """After an epoch (`when` says which) and after the run: refuse processes whose slots
        or optimizer have parted (a callback deciding on this process's values alone)."""

    def finish(self) -> None:
        """After the run (its report made)."""


class OneProcess(Distribution):
    """A run in this process alone."""

"""`DataParallel`: how a run trains on several processes, given as `FitOptions(distributed=...)`.

It is the training loop's `Distribution` for such a run: `fit` asks it for this process's
share of each batch, the start, each step's sum; it joins the job at the first question
(`deepsharp.distributed.training` answers them) and leaves it when the run is done.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deepsharp.core.training.distribution import Distribution, Sums

if TYPE_CHECKING:
    from deepsharp.core.training.feeds import Feeds
    from deepsharp.core.training.trainer import Trainer
    from deepsharp.distributed.job import Job
    from deepsharp.distributed.training import Place

__all__ = ["BACKENDS", "DEFAULT_TIMEOUT", "REDUCTIONS", "DataParallel"]

BACKENDS = ("auto", "gloo", "nccl")
"""torch.distributed's backends: gloo carries processors' tensors, NCCL cards'; "auto" takes
gloo for processors and, where torch can use a card, NCCL for cards."""

REDUCTIONS = ("ordered", "fast")
"""How the processes' gradients are added: "ordered" in rank order, the same bits whatever the
backend's algorithm; "fast" by the backend's all_reduce, in whatever order it adds."""

DEFAULT_TIMEOUT = 300.0
"""Seconds a process waits in one collective for the others before the job is ended."""


class _Joined:
    """What a DataParallel knows of the job it trains in: the run's place while one runs, and
    the rank and world size it had (still answered once the run is done)."""

    def __init__(self) -> None:
        self.place: Place | None = None
        self.rank: int | None = None
        self.world_size: int | None = None
        self.local_rank: int | None = None

    def __reduce__(self) -> tuple[type[_Joined], tuple[()]]:
        return (_Joined, ())  # a configuration handed to new processes carries no job


@dataclass(frozen=True)
class DataParallel(Distribution):
    """Data-parallel training: every process holds the whole network, takes its contiguous
    share of each global batch, and the processes add their gradients before every update.

    `backend`: "auto", "gloo" or "nccl". `reduction`: "ordered" (a step's sum is the same bits
    at a given world size whatever the backend's algorithm) or "fast" (the backend's
    all_reduce). `timeout`: seconds one process waits for the others in a collective before
    the job is ended with an error (never a hang), where this process starts the job (under
    torchrun; `launch` takes a timeout of its own).

    Given to `fit`, it joins the job at the run's first question and leaves it at the run's
    end; `rank`, `world_size` and `writes` (rank 0: the process that writes files and shows
    the report) answer for this process, during a run and after it.
    """

    backend: str = "auto"
    reduction: str = "ordered"
    timeout: float = DEFAULT_TIMEOUT
    _joined: _Joined = field(init=False, repr=False, compare=False, default_factory=_Joined)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(
                f"DataParallel's backend is one of {', '.join(map(repr, BACKENDS))}, "
                f"not {self.backend!r}"
            )
        if self.reduction not in REDUCTIONS:
            raise ValueError(
                f"DataParallel's reduction is 'ordered' (the same bits whatever the backend's "
                f"algorithm) or 'fast' (the backend's all_reduce), not {self.reduction!r}"
            )
        timeout = self.timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValueError(
                f"DataParallel's timeout is a number of seconds above 0, not {timeout!r}"
            )

    def join(self) -> Job:
        """This process's place in the job: the group `launch` started, or, under torchrun,
        the one its environment describes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT)."""
        from deepsharp.distributed.job import join

        return join(self)

    # --- the training loop's Distribution ------------------------------------------------------
    def _place(self) -> Place:
        """This run's place in the job, joining it at the first question."""
        joined = self._joined
        if joined.place is None:
            from deepsharp.distributed.training import Place

            joined.place = Place(self.join())
            job = joined.place.job
            joined.rank, joined.world_size, joined.local_rank = (
                job.rank,
                job.world_size,
                job.local_rank,
            )
        return joined.place

    @property
    def rank(self) -> int:
        rank = self._joined.rank
        return rank if rank is not None else self._place().job.rank

    @property
    def world_size(self) -> int:
        size = self._joined.world_size
        return size if size is not None else self._place().job.world_size

    @property
    def local_rank(self) -> int:
        """This process's place among the job's processes on its machine: the card it trains
        on (`torch:cuda:{local_rank}`)."""
        local = self._joined.local_rank
        return local if local is not None else self._place().job.local_rank

    def share(self, count: int) -> tuple[int, int]:
        return self._place().share(count)

    def check_data(self, seed: int, feeds: Feeds) -> None:
        self._place().check_data(seed, feeds)

    def start(self, trainer: Trainer) -> None:
        self._place().start(trainer)

    def all_finite(self, loss: float) -> bool:
        return self._place().all_finite(loss)

    def combine(self, sums: Sums) -> Sums:
        return self._place().combine(sums)

    def state(self) -> dict[str, Any]:
        return self._place().state()

    def check(self, state: Mapping[str, Any], where: str) -> None:
        self._place().check(state, where)

    def finish(self) -> None:
        """Leave the job (its group ends here where this process started it: under torchrun)."""
        place, self._joined.place = self._joined.place, None
        if place is not None:
            place.job.close()

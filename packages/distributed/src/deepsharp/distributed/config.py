"""`DataParallel`: how a run trains on several processes, given as `FitOptions(distributed=...)`.

Settings, and only settings: frozen, and carried unchanged into new processes. When a run
starts, `fit` asks them for the run's `Distribution` (`for_run`): this process's place in the
job (`deepsharp.distributed.training.Place`, holding the `Job`), which answers the loop's
questions — this process's share of each batch, the start, each step's sum — and leaves the
job when the run is done. The settings hold no job: `rank`, `world_size` and `local_rank` are
read from the job this process belongs to (torchrun's or launch's environment, or the group
torch.distributed runs), before a run, during it and after it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from deepsharp.core.training.distribution import Spread
from deepsharp.distributed._torch import require_torch
from deepsharp.distributed.errors import DistributedError
from deepsharp.distributed.job import TORCHRUN_VARIABLES, Job, environment_place, join
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


@dataclass(frozen=True)
class DataParallel(Spread):
    """Data-parallel training: every process holds the whole network, takes its contiguous
    share of each global batch, and the processes add their gradients before every update.

    `backend`: "auto", "gloo" or "nccl". `reduction`: "ordered" (a step's sum is the same bits
    at a given world size whatever the backend's algorithm) or "fast" (the backend's
    all_reduce). `timeout`: seconds one process waits for the others in a collective before
    the job is ended with an error (never a hang), where this process starts the job (under
    torchrun; `launch` takes a timeout of its own).

    Given to `fit`, the run joins the job when it starts (a group started from torchrun's
    environment stays for the process's later runs, which join it again); `rank`,
    `world_size` and `writes` (rank 0: the process that writes files and shows the report)
    answer for this process, before a run, during it and after it.
    """

    backend: str = "auto"
    reduction: str = "ordered"
    timeout: float = DEFAULT_TIMEOUT

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
        return join(self)

    def for_run(self) -> Place:
        """The run's distribution: this process's place in the job, joined now."""
        return Place(self.join())

    @property
    def rank(self) -> int:
        """This process's place in the job: 0 .. world_size - 1."""
        return _in_job()[0]

    @property
    def world_size(self) -> int:
        """How many processes the job holds."""
        return _in_job()[1]

    @property
    def local_rank(self) -> int:
        """This process's place among the job's processes on its machine: the card it trains
        on (`torch:cuda:{local_rank}`)."""
        return _in_job()[2]

    @property
    def writes(self) -> bool:
        """Whether this process writes the run's files and shows its report (rank 0)."""
        return self.rank == 0


def _in_job() -> tuple[int, int, int]:
    """This process's rank, the world size and its local rank: from torchrun's (or launch's)
    environment, else from the group torch.distributed runs; refused outside any job."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return environment_place()
    _, dist = require_torch()
    if dist.is_initialized():
        rank = dist.get_rank()
        return rank, dist.get_world_size(), rank
    missing = ", ".join(name for name in TORCHRUN_VARIABLES if name not in os.environ)
    raise DistributedError(
        f"this process is in no data-parallel job ({missing} not set, and no group started): "
        "start the script with torchrun (`torchrun --standalone --nproc-per-node 2 "
        "script.py` on one machine), or call deepsharp.distributed.launch(function, nprocs, "
        "...) to start the processes"
    )

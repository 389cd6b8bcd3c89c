"""`DataParallel`: how a run trains on several processes, given as `FitOptions(distributed=...)`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepsharp.distributed.job import Job

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
class DataParallel:
    """Data-parallel training: every process holds the whole network, takes its contiguous
    share of each global batch, and the processes add their gradients before every update.

    `backend`: "auto", "gloo" or "nccl". `reduction`: "ordered" (a step's sum is the same bits
    at a given world size whatever the backend's algorithm) or "fast" (the backend's
    all_reduce). `timeout`: seconds one process waits for the others in a collective before
    the job is ended with an error (never a hang).
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
        from deepsharp.distributed.job import join

        return join(self)

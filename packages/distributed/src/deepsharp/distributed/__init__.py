"""deepsharp's data-parallel training on torch.distributed (gloo on processors, NCCL on cards).

Every process holds the whole network and takes its contiguous share of each global batch; the
processes add their gradients before every update, in rank order ("ordered": the same bits at
a given world size whatever the backend's algorithm) or by the backend's all_reduce ("fast").
Light and test-engine tensors cross as CPU tensors sharing their memory, the torch engine's as
they are. See docs/distributed.md.

- `DataParallel(backend="auto", reduction="ordered")` (binding): given as
  `FitOptions(distributed=...)`, it is the training loop's `Distribution` (answered by
  `deepsharp.distributed.training`); `DataParallel().join()` gives this process's `Job`.
- `launch(function, nprocs, *args)` (binding): local processes already in a group; rank 0's
  result, or `ProcessFailedError` with the failing rank's traceback, never a hang.
- `Job`: the collectives a training loop calls (`start_identical`, `reduce_gradients`,
  `totals`, `means`) and the work's shares (`share`). `share_of`, `uniform_for_share` and
  `check_world_size` are the pure rules beneath.

torch is not a declared dependency: the application brings the build it runs on.
"""

from deepsharp.distributed.config import BACKENDS, DEFAULT_TIMEOUT, REDUCTIONS, DataParallel
from deepsharp.distributed.errors import (
    DistributedError,
    ProcessFailedError,
    ReplicasDifferError,
    WorldSizeMismatchError,
)
from deepsharp.distributed.job import Job
from deepsharp.distributed.launch import launch
from deepsharp.distributed.shares import Share, check_world_size, share_of, uniform_for_share

__all__ = [
    "BACKENDS",
    "DEFAULT_TIMEOUT",
    "REDUCTIONS",
    "DataParallel",
    "DistributedError",
    "Job",
    "ProcessFailedError",
    "ReplicasDifferError",
    "Share",
    "WorldSizeMismatchError",
    "check_world_size",
    "launch",
    "share_of",
    "uniform_for_share",
]


def __dir__() -> list[str]:
    """The public names only: the submodules stay importable (`deepsharp.core.engine`, ...) but
    are not the API a user browses."""
    return sorted(__all__)

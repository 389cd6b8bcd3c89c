"""How an engine's tensors cross to torch.distributed: in place where the engine's memory can be
shared, through one counted transfer each way where it cannot.

- The torch engine's handles are torch tensors: they cross as they are.
- The light engine's handles are NumPy arrays, and the test engine's own malloc'd buffers are
  seen through NumPy views: both cross as CPU tensors over the same memory (torch.from_numpy).
- Any other engine: `engine.get` (one transfer out), and `engine.put` for the way back.

Only tensors this package made on the engine (a flat copy of the gradients or slots, and the
buffer the sum lands in) are written through shared memory; slots change by `engine.assign`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deepsharp.core.engine import Engine, Handle
from deepsharp.distributed._torch import require_torch

__all__ = ["host_bytes", "shared_tensor"]


def _numpy_view(handle: Handle) -> np.ndarray[Any, Any] | None:
    """A NumPy array over the handle's own memory, where the handle is or offers one."""
    if isinstance(handle, np.ndarray):
        return handle
    if type(handle).__module__.startswith("deepsharp.engines.testbuffer"):
        # The test engine's buffers offer no array interface of their own (yet): its view does.
        from deepsharp.engines.testbuffer._memory import view

        array: np.ndarray[Any, Any] = view(handle)
        return array
    if hasattr(handle, "__array_interface__"):
        return np.asarray(handle)
    return None


def shared_tensor(handle: Handle) -> Any | None:
    """A torch tensor over `handle`'s own memory (no copy), or None where the engine's memory
    cannot be shared (then the handle crosses by `engine.get` and `engine.put`)."""
    torch, _ = require_torch()
    if isinstance(handle, torch.Tensor):
        return handle if handle.is_contiguous() else None
    array = _numpy_view(handle)
    if (
        array is None
        or array.dtype != np.float32
        or not array.flags.c_contiguous
        or not array.flags.writeable
    ):
        return None
    return torch.from_numpy(array)


def host_bytes(engine: Engine, handle: Handle) -> bytes:
    """The handle's values as bytes on the host: read in place where they live on the host,
    brought by `engine.get` (one counted transfer) where they do not (a card, another engine)."""
    tensor = shared_tensor(handle)
    if tensor is not None and tensor.device.type == "cpu":
        return bytes(tensor.numpy().tobytes())
    return bytes(np.ascontiguousarray(engine.get(handle)).tobytes())

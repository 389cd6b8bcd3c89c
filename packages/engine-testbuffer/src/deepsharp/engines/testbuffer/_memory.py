"""Buffers from the C library's allocator, the handles that own them, and what is counted."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Counters

__all__ = ["BufferCounters", "TestBuffer", "allocate", "memmove", "view"]


def _load_libc() -> ctypes.CDLL:
    """The C library whose malloc/free the buffers come from."""
    if sys.platform == "win32":  # pragma: no cover - not where the tests run
        return ctypes.CDLL(ctypes.util.find_library("msvcrt") or "msvcrt")
    try:
        library = ctypes.CDLL(None)
        library.malloc  # noqa: B018 - probe: the process image exports the allocator
        return library
    except (OSError, AttributeError):  # pragma: no cover - e.g. statically linked oddities
        name = ctypes.util.find_library("c")
        if name is None:
            raise
        return ctypes.CDLL(name)


_libc = _load_libc()
_malloc = _libc.malloc
_malloc.restype = ctypes.c_void_p
_malloc.argtypes = [ctypes.c_size_t]
_free = _libc.free
_free.restype = None
_free.argtypes = [ctypes.c_void_p]


@dataclass
class BufferCounters(Counters):
    """Transfers (as every engine counts them) and the engine's buffers alive now and at most."""

    live_buffers: int = 0
    live_bytes: int = 0
    max_live_buffers: int = 0

    def allocated(self, nbytes: int) -> None:
        self.live_buffers += 1
        self.live_bytes += nbytes
        if self.live_buffers > self.max_live_buffers:
            self.max_live_buffers = self.live_buffers

    def freed(self, nbytes: int) -> None:
        self.live_buffers -= 1
        self.live_bytes -= nbytes


_DTYPES: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.int64): np.dtype(np.int64),
}
"""What a buffer may hold, each the one dtype object its handles share (looked up by dtype, not
by name: a dtype's name is worked out in Python at every call)."""


class TestBuffer:
    """One tensor on the test engine: it owns one malloc'd buffer and frees it when collected.

    Holds no reference to other handles or to the engine (only to the engine's counters), so a
    handle lives exactly as long as its users hold it.
    """

    __test__ = False  # not a pytest test class, despite the name
    __slots__ = ("_counters", "address", "dtype", "nbytes", "shape")

    address: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    nbytes: int
    _counters: BufferCounters | None

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype[Any], counters: BufferCounters):
        self._counters = None
        self.address = 0
        self.shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in self.shape):
            raise ValueError(f"a tensor's shape cannot hold negative sizes: {self.shape}")
        self.dtype = dtype
        count = 1
        for n in self.shape:
            count *= n
        self.nbytes = count * dtype.itemsize
        # malloc(0) may answer NULL: always ask for at least one byte.
        address = _malloc(max(self.nbytes, 1))
        if not address:
            raise MemoryError(
                f"malloc could not give {self.nbytes} bytes for a {self.shape} tensor"
            )
        self.address = int(address)
        self._counters = counters
        counters.allocated(self.nbytes)

    def __del__(self, _release: Any = _free) -> None:
        # `_release` is bound at definition: at interpreter shutdown module globals may be gone.
        address, counters = self.address, self._counters
        if address:
            self.address = 0
            try:
                _release(address)
            finally:
                if counters is not None:
                    counters.freed(self.nbytes)

    def __repr__(self) -> str:
        return (
            f"TestBuffer(shape={self.shape}, dtype={self.dtype.name}, address=0x{self.address:x})"
        )

    @property
    def size(self) -> int:
        count = 1
        for n in self.shape:
            count *= n
        return count


class _Interface:
    """What NumPy reads to see a buffer as an array; it keeps the owning handle alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, owner: TestBuffer) -> None:
        self.owner = owner
        self.__array_interface__ = {
            "data": (owner.address, False),
            "shape": owner.shape,
            "typestr": owner.dtype.str,
            "version": 3,
        }


def view(handle: TestBuffer) -> NDArray[Any]:
    """A NumPy array over the handle's buffer (no copy), keeping the handle alive while it lives."""
    if not isinstance(handle, TestBuffer):
        raise TypeError(f"the test engine works on its handles, not {type(handle).__name__}")
    if not handle.address:
        raise ValueError("this tensor's buffer has been freed")
    return np.asarray(_Interface(handle))


def allocate(
    shape: tuple[int, ...], dtype: str | np.dtype[Any], counters: BufferCounters
) -> TestBuffer:
    """A new handle owning an uninitialised buffer of `shape` and `dtype` (float32 or int64)."""
    kind = _DTYPES.get(np.dtype(dtype))
    if kind is None:
        raise TypeError(
            f"the test engine holds float32 and int64 tensors, not {np.dtype(dtype).name}"
        )
    return TestBuffer(shape, kind, counters)


def memmove(target: TestBuffer, source: TestBuffer) -> None:
    """Copy source's bytes onto target's (same number of bytes)."""
    if target.nbytes != source.nbytes:
        raise ValueError(f"cannot copy {source.nbytes} bytes onto {target.nbytes}")
    if source.nbytes:
        ctypes.memmove(target.address, source.address, source.nbytes)

"""Keeping freed memory in the process's heap, so a training step does not fault it in again.

NumPy and libtorch allocate an array's memory with the C library's malloc and free it as soon
as nothing holds the array; neither keeps a cache of its own on the processor (on a card
torch's caching allocator does). glibc's malloc moves its limits as a program runs: a block
larger than its *mmap threshold* gets pages of its own from the system and gives them back when
freed, and when more than its *trim threshold* lies free at the top of the heap it gives that
back too. A step that makes and frees tens of megabytes of activations and gradients can thus
hand its memory to the system at the end of each step and take it back, one page fault for each
4 KiB page, in the next: on the benchmarks' 256-image convolution step, 10,784 faults a step
on torch:cpu (float32) and 2,503 on light:float32, a quarter to a third of the
step's time, depending on what the process did before.

So the first CPU engine a process makes (light, or torch on the processor) asks glibc
(``mallopt``) to serve blocks under 32 MiB from its heap and to keep up to 256 MiB free at the
top of the heap rather than give it back. This is the whole process's malloc, not the engine's
alone: freed memory up to that much stays with the process (reused by the next step, by NumPy,
PyTorch or anything else), as it does with the caching allocators (jemalloc, tcmalloc) that
PyTorch's CPU performance guide advises. Nothing is changed:

- where the C library is not glibc (macOS, Windows, musl) or has no ``mallopt``;
- where the application has set malloc's limits itself (``MALLOC_TRIM_THRESHOLD_``,
  ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TOP_PAD_``, or ``glibc.malloc`` in ``GLIBC_TUNABLES``);
- where ``DEEPSHARP_KEEP_FREED_MEMORY=0`` is set (leave malloc as the process has it).

`heap_policy()` says what was done.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["HEAP_MMAP_THRESHOLD", "HEAP_TRIM_THRESHOLD", "heap_policy", "keep_freed_memory"]

HEAP_MMAP_THRESHOLD = 32 << 20
"""Blocks under this many bytes come from the heap (glibc's largest allowed value)."""

HEAP_TRIM_THRESHOLD = 256 << 20
"""Up to this many free bytes stay at the top of the heap rather than go back to the system."""

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_OWN_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_OPT_OUT = "DEEPSHARP_KEEP_FREED_MEMORY"

_policy: str | None = None


def heap_policy() -> str | None:
    """What `keep_freed_memory` did in this process: None before it ran, else one line."""
    return _policy


def keep_freed_memory() -> str:
    """Ask glibc's malloc to keep freed memory for reuse (once a process); says what it did."""
    global _policy
    if _policy is None:
        _policy = _apply()
    return _policy


def _apply() -> str:
    if os.environ.get(_OPT_OUT, "").strip() in ("0", "false", "no", "off"):
        return f"left as the process has it: {_OPT_OUT}={os.environ[_OPT_OUT]}"
    own = [name for name in _OWN_SETTINGS if name in os.environ]
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        own.append("GLIBC_TUNABLES")
    if own:
        return f"left as the application set it ({', '.join(own)})"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "left as it is: the C library is not glibc"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "left as it is: this C library has no mallopt"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if not (
        mallopt(_M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD)
        and mallopt(_M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD)
    ):
        return "left as it is: glibc refused the limits"
    return (
        f"kept: blocks under {HEAP_MMAP_THRESHOLD >> 20} MiB from the heap, up to "
        f"{HEAP_TRIM_THRESHOLD >> 20} MiB of it kept when free"
    )

"""The light engine's threads: large passes split across the process's cores.

NumPy lets go of Python's lock inside its loops over large arrays, so parts of one pass run at
once on several cores. What is split gives each element the same bits as one thread does:
value-by-value passes (ReLU and its way back, a bias added, the optimizer's updates) compute
each element alone, whatever its company (`LightEngine`'s docstring); a convolution's images
go in blocks whose products are the same calls either way; where parts are added up (a
convolution's filter gradient, over its blocks of images), each part is made on its own
thread and the parts are added in the one order a single thread adds them.

How many threads: `LightEngine(threads=N)`; else `OMP_NUM_THREADS` where it is set (the
convention libtorch and OpenBLAS follow: one number for every thread pool of the process), else
one a core this process may run on. A pass under `PARALLEL` values stays on one thread: handing
it to another costs more than it saves.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["PARALLEL", "Pool", "pool", "thread_count"]

PARALLEL = 1 << 17
"""The fewest values (131,072: half a MiB of float32) a pass is split for."""

T = TypeVar("T")


def thread_count(asked: int | None = None) -> int:
    """The threads a light engine uses: `asked`, else OMP_NUM_THREADS, else this process's
    cores (those it may run on)."""
    if asked is not None:
        if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
            raise ValueError(f"LightEngine: threads is a whole number from 1, not {asked!r}")
        return asked
    said = os.environ.get("OMP_NUM_THREADS", "").strip()
    cores = _cores()
    if said:
        try:
            number = int(said.split(",")[0])  # OpenMP allows a list, one a nesting level
        except ValueError:
            number = 0
        if number >= 1:
            return number
        _unread(said, cores)
    return cores


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this system
        return max(1, os.cpu_count() or 1)


_WARNED: set[str] = set()


def _unread(said: str, cores: int) -> None:
    """OMP_NUM_THREADS set to what is no number of threads: said once a value (OpenMP's own
    runtime says so too, and goes on with its default, as the light engine does)."""
    if said in _WARNED:
        return
    _WARNED.add(said)
    warnings.warn(
        f"OMP_NUM_THREADS={said!r} is not a number of threads (a whole number from 1): the "
        f"light engine uses one a core, {cores}",
        RuntimeWarning,
        stacklevel=4,
    )


class Pool:
    """`threads` threads: this one, and `threads - 1` workers made on first use (again in a
    process forked from one that had them: a fork keeps no threads)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        """Pickled (or copied) as its count of threads: the process's own pool of that count."""
        return pool, (self.threads,)

    def _workers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None or self._pid != os.getpid():
                self._executor = ThreadPoolExecutor(
                    self.threads - 1, thread_name_prefix="deepsharp-light"
                )
                self._pid = os.getpid()
            return self._executor

    def map(self, function: Callable[[T], Any], items: Sequence[T]) -> list[Any]:
        """`function` of each item, at once across the threads (this one takes the first);
        the results in the items' order. One item, or one thread, runs here alone."""
        if self.threads == 1 or len(items) < 2:
            return [function(item) for item in items]
        workers = self._workers()
        waiting: list[Future[Any]] = [workers.submit(function, item) for item in items[1:]]
        first = function(items[0])
        return [first, *(future.result() for future in waiting)]

    def spans(self, count: int, values_each: int = 1) -> list[slice]:
        """0 .. count - 1 as contiguous spans, one a thread where each holds at least
        `PARALLEL` values (`values_each` a place); one span where that is not worth it."""
        parts = min(self.threads, count, max(1, count * values_each // PARALLEL))
        if parts <= 1:
            return [slice(0, count)]
        base, extra = divmod(count, parts)
        spans, start = [], 0
        for index in range(parts):
            stop = start + base + (1 if index < extra else 0)
            spans.append(slice(start, stop))
            start = stop
        return spans


_pools: dict[int, Pool] = {}
_made = threading.Lock()


def pool(threads: int) -> Pool:
    """The process's pool of `threads` threads (one for each count asked)."""
    with _made:
        found = _pools.get(threads)
        if found is None:
            found = _pools[threads] = Pool(threads)
        return found

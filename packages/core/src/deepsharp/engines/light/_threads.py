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

NumPy's BLAS is held to one thread (`one_blas_thread`) while the engine works on an operation
large enough for OpenBLAS to share among its own threads (`SHARED`), and a large product is
split into pieces its shape alone sets (`PRODUCT`), run on the engine's threads: the light
engine's threads are all the threads it uses. So its bits never depend on BLAS's count of
threads (OpenBLAS 0.3.31 adds a product of 64 x 5,000 by 5,000 x 10 in another order on two
threads than on one), nor on another thread's engine holding BLAS meanwhile. And the cores are
its own: left to its own threads, OpenBLAS ran a product on both cores and kept its threads
spinning after it, waiting for more, while the engine's next passes wanted those cores
(measured on the benchmarks' 256-image convolution: the step's value-by-value passes took half
as long again, and a second thread gained the step nothing). The hold is the process's: NumPy
products the application runs in another thread meanwhile run on one thread too.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import numpy as np

__all__ = ["PARALLEL", "PRODUCT", "SHARED", "Pool", "one_blas_thread", "pool", "thread_count"]

PARALLEL = 1 << 17
"""The fewest values (131,072: half a MiB of float32) a pass is split for."""

PRODUCT = 1 << 24
"""The fewest multiply-adds (rows x inner x columns: 16.8 M, a millisecond's work on one core) a
piece of a split product has. A smaller product runs whole on the calling thread: a Python
pool hands work over slowly (a dense layer's way back, 32 x 10 by 10 x 5,408: 80 us on one
thread, 130 us in pieces on the light engine's two; 49 us on OpenBLAS's own two threads, whose
bits are not one thread's)."""

SHARED = 1 << 18
"""The fewest multiply-adds an operation has for NumPy's BLAS to be held to one thread while
the engine works on it: where OpenBLAS begins to share a product among its threads (its
GEMM_MULTITHREAD_THRESHOLD of 4, times 65,536); below it, OpenBLAS keeps a product on the
calling thread anyway, and a hold (a few microseconds) would cost more than the product."""

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
        the results in the items' order. One item, or one thread, runs here alone. A part
        must not call `map` on its own pool: a worker would wait on work queued behind it."""
        if self.threads == 1 or len(items) < 2:
            return [function(item) for item in items]
        workers = self._workers()
        settings = np.geterr()  # the caller's: a mixed precision's products let overflow be

        def there(item: T) -> Any:  # NumPy's error settings are the thread's own
            with np.errstate(**settings):
                return function(item)

        waiting: list[Future[Any]] = []
        here = [items[0]]
        for index, item in enumerate(items[1:], 1):
            try:
                waiting.append(workers.submit(there, item))
            except RuntimeError:  # the interpreter is shutting down (an atexit handler): no
                here = [items[0], *items[index:]]  # new work for threads, the rest here
                break
        try:
            done = [function(item) for item in here]
            wait(waiting)
        except BaseException:  # a failure here, or Ctrl-C while waiting: the caller hears of
            for future in waiting:  # it once no part is at work (one still running would
                future.cancel()  # write on after the hold on BLAS ended)
            _settled(waiting)
            raise
        return [done[0], *(future.result() for future in waiting), *done[1:]]

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


def _settled(waiting: Sequence[Future[Any]]) -> None:
    """Wait for the parts already at work, through a Ctrl-C (said after, once they are done)."""
    interrupted = False
    while True:
        try:
            wait(waiting)
        except KeyboardInterrupt:
            interrupted = True
        else:
            break
    if interrupted:
        raise KeyboardInterrupt


_pools: dict[int, Pool] = {}
_made = threading.Lock()


def _pools_forked() -> None:
    """In a forked child the pools' locks are new: a thread the child has not may have held one
    (a pool making its workers), and the child's first pass would wait for it forever."""
    global _made
    _made = threading.Lock()
    for found in _pools.values():
        found._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pools_forked)


def pool(threads: int) -> Pool:
    """The process's pool of `threads` threads (one for each count asked)."""
    with _made:
        found = _pools.get(threads)
        if found is None:
            found = _pools[threads] = Pool(threads)
        return found


class _Blas:
    """NumPy's BLAS libraries' own threads (found by threadpoolctl, which reads the loaded
    libraries: OpenBLAS, MKL, BLIS, FlexiBLAS), held to one while any light engine works on a
    large operation, and given back their count when the last hold ends."""

    def __init__(self) -> None:
        # Reentrant: a signal handler that forks may run in a thread inside hold or release.
        self._lock = threading.RLock()
        self._holders: dict[int, int] = {}  # a thread's id -> its holds
        self._libraries: list[_Count] | None = None
        self._counts: list[int] = []

    def _found(self) -> list[_Count]:
        if self._libraries is None:
            try:
                from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
            except ImportError:  # a dependency of deepsharp's: an install that lost it
                self._libraries = []
                warnings.warn(
                    "threadpoolctl is not installed (deepsharp depends on it): the light engine "
                    "cannot hold NumPy's BLAS to one thread, so its float32 and mixed bits may "
                    "follow OPENBLAS_NUM_THREADS, and OpenBLAS's threads may take its cores. "
                    "pip install threadpoolctl",
                    RuntimeWarning,
                    stacklevel=5,
                )
            else:
                controllers = ThreadpoolController().lib_controllers
                self._libraries = [_Count(lib) for lib in controllers if lib.user_api == "blas"]
        return self._libraries

    @property
    def _held(self) -> int:
        """The holds on now, every thread's."""
        return sum(self._holders.values())

    def hold(self) -> None:
        with self._lock:
            if not self._holders:
                libraries = self._found()
                self._counts = [library.get() for library in libraries]
                for library, count in zip(libraries, self._counts, strict=True):
                    if count != 1:
                        library.set(1)
            me = threading.get_ident()
            self._holders[me] = self._holders.get(me, 0) + 1

    def release(self) -> None:
        with self._lock:
            me = threading.get_ident()
            if self._holders.get(me, 0) == 0:
                return  # a hold a forked child let go of already (`forked`)
            self._holders[me] -= 1
            if not self._holders[me]:
                del self._holders[me]
                if not self._holders:
                    self._give_back()

    def _give_back(self) -> None:
        """Each library's count back, unless the application set another than one meanwhile
        (a count of one it set is not told apart from the hold's own)."""
        for library, count in zip(self._found(), self._counts, strict=True):
            if count != 1 and library.get() == 1:
                library.set(count)

    def forking(self) -> None:
        self._lock.acquire()

    def forked_parent(self) -> None:
        self._lock.release()

    def forked(self) -> None:
        """In a child forked while threads held BLAS: only the forking thread is there to let
        go of its holds; the others' go now, and the count with them where it held none (the
        lock is new: the parent's may have been held by a thread the child has not)."""
        self._lock = threading.RLock()
        me = threading.get_ident()
        mine = self._holders.get(me, 0)
        others = self._held - mine
        self._holders = {me: mine} if mine else {}
        if others and not mine:
            self._give_back()


class _Count:
    """One BLAS library's count of threads, read and set.

    OpenBLAS with its own threads (NumPy's wheels) is set through its C functions, found in
    the library threadpoolctl found: threadpoolctl's own setter (3.7 and later) lets only the
    first thread that sets it set it while that thread lives, so a hold taken in another thread
    (the light engine in a server's worker thread) set nothing and the product ran on BLAS's
    threads. Other libraries go through threadpoolctl's controller."""

    def __init__(self, library: Any) -> None:
        self.get: Callable[[], int] = library.get_num_threads
        self.set: Callable[[int], Any] = library.set_num_threads
        dynlib = getattr(library, "dynlib", None)
        if getattr(library, "internal_api", None) != "openblas" or dynlib is None:
            return
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                get = getattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
                parallel = getattr(dynlib, f"{prefix}openblas_get_parallel{suffix}", None)
                if get is None or put is None:
                    continue
                if parallel is not None and parallel() == 2:
                    return  # OpenMP's threads: threadpoolctl sets them a thread at a time
                self.get, self.set = get, put
                return


_BLAS = _Blas()
if hasattr(os, "register_at_fork"):  # a fork waits for a hold or a release under way: the child
    os.register_at_fork(  # sees the count and the holds in step (else it might keep one thread)
        before=_BLAS.forking, after_in_parent=_BLAS.forked_parent, after_in_child=_BLAS.forked
    )


class _Held:
    """A hold on NumPy's BLAS as a `with` block (a class: a generator's context manager costs a
    microsecond more, and a replayed LSTM step makes some 300 holds)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _BLAS.hold()

    def __exit__(self, *exc: object) -> None:
        _BLAS.release()


_HELD = _Held()


def one_blas_thread() -> _Held:
    """NumPy's BLAS on one thread while the block runs (for the whole process: a product that
    another of the application's threads starts meanwhile runs on one thread too)."""
    return _HELD

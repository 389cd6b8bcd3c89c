"""`launch`: start a job of local processes already in a group, run a function in each, and
return rank 0's result — or end every process and raise the failing one's error. Never a hang.

The processes meet through a file in a temporary folder (torch.distributed's FILE rendezvous),
so there is no port to pick. Each reports to this process through a pipe of its own: its
result, or its error with the traceback's text. When one fails, the others are ended (they
may be waiting for it in a collective); when one stops answering, the others' collectives
time out after `timeout` seconds and it is ended too.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from deepsharp.distributed._torch import require_torch, resolve_backend
from deepsharp.distributed.config import DEFAULT_TIMEOUT, DataParallel
from deepsharp.distributed.errors import DistributedError, ProcessFailedError

__all__ = ["launch"]

T = TypeVar("T")

GRACE = 2.0
"""Seconds to wait, after a process failed in a collective, for the report of the process that
caused it (which may arrive a moment later) before ending the job."""

_COMMUNICATION = os.sep + os.path.join("torch", "distributed") + os.sep


_HELD: set[Connection] = set()
"""The write ends of the lifelines of the launches running in this process (`_end_with`)."""


def _let_go_of_lifelines() -> None:
    """In a process forked from a launcher (a rank under fork, a pool's worker, another
    thread's process): its copies of the lifelines' write ends closed, or a rank would not see
    its launcher end while that process lived (a review)."""
    for held in list(_HELD):
        held.close()
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_let_go_of_lifelines)


def launch(
    function: Callable[..., T],
    nprocs: int,
    *args: Any,
    timeout: float = DEFAULT_TIMEOUT,
    backend: str = "auto",
    start_method: str = "spawn",
) -> T:
    """Run `function(*args)` in `nprocs` new local processes, already in one torch.distributed
    group (ranks 0 .. nprocs-1), and return rank 0's result.

    In each process RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE are set as torchrun sets
    them; unless the application set OMP_NUM_THREADS, each process gets the processor's cores
    shared out (at least 1) as its OMP_NUM_THREADS and torch's thread count, as torchrun caps
    them. `DataParallel().join()` inside `function` finds the group.

    A process that raises, exits or stops answering ends the job on every rank: the others are
    ended and `ProcessFailedError` is raised here, naming the rank and carrying its traceback's
    text. `timeout` bounds each collective's wait (seconds). With start_method "spawn" (the
    default) `function` and `args` must be importable by the new processes: a function at the
    top level of a module, not one made in a notebook cell ("fork" takes those, on Linux).
    """
    try:  # DataParallel's checks, said as launch's (they named DataParallel: trial DS)
        DataParallel(backend=backend, timeout=timeout)
    except (TypeError, ValueError) as error:
        raise type(error)(str(error).replace("DataParallel's", "launch's")) from None
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"launch starts 1 or more processes, not nprocs={nprocs!r}")
    if start_method not in multiprocessing.get_all_start_methods():
        raise ValueError(
            f"start_method {start_method!r} is not offered here: use one of "
            f"{', '.join(multiprocessing.get_all_start_methods())}"
        )
    require_torch()
    started_with = resolve_backend(backend)
    work: Any = (function, args)
    if start_method != "fork":
        try:
            work = pickle.dumps(work)
        except Exception as error:
            raise DistributedError(
                f"launch cannot hand {getattr(function, '__qualname__', function)!r} and its "
                f"arguments to new processes ({type(error).__name__}: {error}): with "
                f"start_method={start_method!r} they must be importable, so define the function "
                "at the top level of a module (not in a notebook cell or inside another "
                "function), or pass start_method='fork' (Linux)"
            ) from error
    context: Any = multiprocessing.get_context(start_method)
    threads = None if "OMP_NUM_THREADS" in os.environ else max(1, (os.cpu_count() or 1) // nprocs)
    with tempfile.TemporaryDirectory(prefix="deepsharp-launch-") as folder:
        meeting = "file://" + os.path.join(folder, "rendezvous")
        ranks = [_Rank(rank) for rank in range(nprocs)]
        # Held by this process alone: a rank reads its end until the launcher ends.
        lifeline, held = context.Pipe(duplex=False)
        _HELD.add(held)
        try:
            with _threads_set(threads):
                for place in ranks:
                    reader, writer = context.Pipe(duplex=False)
                    place.pipe = reader
                    process = context.Process(
                        target=_run_rank,
                        args=(
                            place.rank,
                            nprocs,
                            meeting,
                            started_with,
                            timeout,
                            threads,
                            work,
                            writer,
                            lifeline,
                        ),
                        name=f"deepsharp-rank-{place.rank}",
                    )
                    process.start()
                    place.process = process  # only a started process is ended and reaped
                    writer.close()
            lifeline.close()
            _watch(ranks, timeout)
        finally:
            _end(ranks)
            _HELD.discard(held)
            held.close()
        return _outcome(ranks, timeout, start_method)  # type: ignore[no-any-return]


@dataclass
class _Rank:
    """What the launching process knows of one rank."""

    rank: int
    process: Any = None
    pipe: Connection | None = None
    report: tuple[Any, ...] | None = None
    exit_code: int | None = None
    ended: bool = False  # still running when the job was ended: it was stopped from here

    @property
    def done(self) -> bool:
        return self.report is not None and self.report[0] == "result"

    @property
    def failed(self) -> bool:
        if self.report is not None:
            return bool(self.report[0] == "error")
        return self.exit_code is not None  # exited without a word

    @property
    def own_failure(self) -> bool:
        """Failed of itself: raised outside a collective, or exited without a word."""
        if self.report is not None:
            return bool(self.report[0] == "error" and not self.report[4])
        return self.exit_code is not None


def _watch(ranks: list[_Rank], timeout: float) -> None:
    """Read reports until every rank has returned, or the job must end: at once where a rank
    failed of itself; GRACE seconds after a failure in a collective (its cause may be on the
    way); `timeout` seconds after the first rank returned while another has not."""
    failed_at: float | None = None
    finished_at: float | None = None
    while True:
        waiting = [r.pipe for r in ranks if r.pipe is not None and r.report is None]
        waiting += [r.process.sentinel for r in ranks if r.exit_code is None]
        if waiting:
            wait(waiting, timeout=0.2)
        for place in ranks:
            _read(place)
        now = time.monotonic()
        if all(place.done for place in ranks):
            return
        if any(place.own_failure for place in ranks):
            return
        if any(place.failed for place in ranks):
            failed_at = failed_at if failed_at is not None else now
            if now - failed_at > GRACE:
                return
        if any(place.done for place in ranks):
            finished_at = finished_at if finished_at is not None else now
            if now - finished_at > timeout + GRACE:
                return


def _read(place: _Rank) -> None:
    """Take the rank's report if it has sent one, and its exit code if it has exited (a report
    is sent before the exit, so one read after the exit code finds it)."""
    code = place.process.exitcode if place.process is not None else None
    if place.report is None and place.pipe is not None and place.pipe.poll():
        try:
            place.report = place.pipe.recv()
        except (EOFError, OSError):  # closed without a word
            place.pipe.close()
            place.pipe = None
    if code is not None:
        place.exit_code = code


def _end(ranks: list[_Rank]) -> None:
    """Let the ranks that reported leave of themselves; stop every other one still running
    (SIGTERM, then SIGKILL); reap them all."""
    deadline = time.monotonic() + GRACE
    for place in ranks:
        if place.process is not None and place.report is not None:
            place.process.join(max(0.0, deadline - time.monotonic()))
    for place in ranks:
        if place.process is not None and place.process.is_alive():
            _read(place)
            place.ended = place.report is None
            place.process.terminate()
    deadline = time.monotonic() + 5.0
    for place in ranks:
        if place.process is None:
            continue
        place.process.join(max(0.0, deadline - time.monotonic()))
        if place.process.is_alive():
            place.process.kill()
            place.process.join()
        if not place.ended:
            _read(place)
        if place.pipe is not None:
            place.pipe.close()


def _outcome(ranks: list[_Rank], timeout: float, start_method: str = "spawn") -> Any:
    """Rank 0's result, or ProcessFailedError blaming the rank that caused the failure: one that
    raised of itself (earliest first), else one that exited without a word, else one that
    stopped answering, else the first that failed in a collective."""
    if all(place.done for place in ranks):
        assert ranks[0].report is not None
        return ranks[0].report[2]
    size = len(ranks)
    raised, waited = _raised(ranks, in_collective=False), _raised(ranks, in_collective=True)
    silent = [p for p in ranks if p.report is None and not p.ended and p.exit_code is not None]
    hung = [p for p in ranks if p.ended]
    if raised:
        raise _reported(raised[0], "failed", ranks)
    if silent:
        blamed = silent[0]
        message = (
            f"rank {blamed.rank} of {size} exited {_how(blamed.exit_code)} before its function "
            "returned, without a Python error (os._exit, a crash, or a signal)"
        )
        if blamed.exit_code == 1 and start_method != "fork":  # (trial DM4: said nothing of it)
            message += (
                "; where the script that calls launch does so at its top level, put the call "
                'under `if __name__ == "__main__":` — each new process imports the script '
                "again, and multiprocessing refuses to start processes from there (its words "
                "are on the standard error)"
            )
        raise ProcessFailedError(
            _with_others(message, None, blamed, ranks), blamed.rank, blamed.exit_code
        )
    if hung:
        blamed = hung[0]
        witness = waited[0] if waited else None
        why = (
            f"rank {witness.rank} waited {timeout:g} s for it in a collective"
            if witness is not None
            else f"the other ranks had finished {timeout:g} s before"
        )
        message = f"rank {blamed.rank} of {size} stopped answering ({why}); it was ended"
        text = witness.report[3] if witness is not None and witness.report is not None else None
        raise ProcessFailedError(_with_others(message, text, blamed, ranks), blamed.rank)
    raise _reported(waited[0], "failed in a collective", ranks)


def _raised(ranks: list[_Rank], in_collective: bool) -> list[_Rank]:
    """The ranks that reported a Python error raised in a collective (or outside one), earliest
    first."""
    return sorted(
        (
            p
            for p in ranks
            if p.report is not None and p.report[0] == "error" and p.report[4] == in_collective
        ),
        # a rank whose function returned while another's waited says why the others' failed
        key=lambda p: (
            (not str(p.report[2]).startswith(ReturnedEarlyError.__name__), float(p.report[5]))
            if p.report is not None
            else (True, 0.0)
        ),
    )


def _reported(blamed: _Rank, how: str, ranks: list[_Rank]) -> ProcessFailedError:
    """The error blaming a rank that reported a Python error; `how` says what it did ('failed',
    'failed in a collective')."""
    assert blamed.report is not None
    _, _, said, text, _, _ = blamed.report
    message = f"rank {blamed.rank} of {len(ranks)} {how}: {said}"
    return ProcessFailedError(
        _with_others(message, text, blamed, ranks), blamed.rank, blamed.exit_code, text
    )


def _with_others(message: str, text: str | None, blamed: _Rank, ranks: list[_Rank]) -> str:
    """The message, what every other rank did, and the traceback's text."""
    others = []
    for place in ranks:
        if place is blamed:
            continue
        if place.done:
            others.append(f"rank {place.rank} returned")
        elif place.report is not None and place.report[0] == "error":
            where = " in a collective" if place.report[4] else ""
            others.append(f"rank {place.rank} failed{where}: {place.report[2]}")
        elif place.ended:
            others.append(f"rank {place.rank} was ended")
        else:
            others.append(f"rank {place.rank} exited {_how(place.exit_code)}")
    lines = [message]
    if others:
        lines.append("the other ranks: " + "; ".join(others))
    lines.append("every rank of the job has ended")
    if text:
        lines.append(f"\ntraceback of the rank quoted above:\n{text.rstrip()}")
    return "\n".join(lines)


def _how(code: int | None) -> str:
    if code is None:
        return "(still running)"
    if code < 0:
        try:
            return f"on signal {signal.Signals(-code).name}"
        except ValueError:
            return f"on signal {-code}"
    return f"with code {code}"


class _threads_set:
    """OMP_NUM_THREADS in the environment while new processes start (so libraries that read it
    when they load see it, in processes that load them afresh), put back after."""

    def __init__(self, threads: int | None) -> None:
        self.threads = threads

    def __enter__(self) -> None:
        if self.threads is not None:
            os.environ["OMP_NUM_THREADS"] = str(self.threads)

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            os.environ.pop("OMP_NUM_THREADS", None)


def _run_rank(
    rank: int,
    nprocs: int,
    meeting: str,
    backend: str,
    timeout: float,
    threads: int | None,
    work: Any,
    report: Connection,
    lifeline: Connection,
) -> None:
    """One process of the job: join the group, run the function, report, leave at once."""
    _end_with(lifeline)
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nprocs),
        LOCAL_WORLD_SIZE=str(nprocs),
        GROUP_RANK="0",
    )
    code = 0
    try:
        import torch
        import torch.distributed as dist

        if threads is not None:  # as torchrun does: the cores shared out, unless the app said
            os.environ["OMP_NUM_THREADS"] = str(threads)
            torch.set_num_threads(threads)
        try:
            function, args = pickle.loads(work) if isinstance(work, bytes) else work
        except AttributeError as error:  # pickled by name in the parent, absent here
            raise DistributedError(
                f"a new process cannot find the function or an argument's class ({error}): "
                "what launch runs is imported by name in each new process, and a function "
                'defined under `if __name__ == "__main__":` (or after it runs) is not there '
                "when the script is imported: define it at the top level of the script or of "
                "a module"
            ) from None

        dist.init_process_group(
            backend,
            init_method=meeting,
            rank=rank,
            world_size=nprocs,
            timeout=timedelta(seconds=timeout),
        )
        result = function(*args)
        try:
            dist.barrier()  # no rank leaves while another still reads what it sent
        except Exception as error:  # (gloo's words alone, the blame on either rank: trial W)
            raise ReturnedEarlyError(
                f"rank {rank}'s function returned while another rank's had not, and that one "
                f"waited in a collective this rank never made ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}): every rank must make the "
                "same collectives — fit with the same distributed= on every rank, and no rank "
                "returning before the others"
            ) from None
        try:
            report.send(("result", rank, result if rank == 0 else None))
        except Exception as error:
            raise DistributedError(
                f"rank 0's result ({type(result).__name__}) cannot be sent back: {error}"
            ) from error
    except BaseException as error:  # every failure is reported, SystemExit included
        code = error.code if isinstance(error, SystemExit) and isinstance(error.code, int) else 1
        code = code or 1
        said = f"{type(error).__name__}: {error}"
        text = traceback.format_exc()
        try:
            waited = _in_collective(error) or isinstance(error, ReturnedEarlyError)
            report.send(("error", rank, said, text, waited, time.time()))
        except Exception:
            pass  # the launching process sees the exit code
    finally:
        report.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no interpreter teardown: nothing may wait on a broken group


def _end_with(lifeline: Connection) -> None:
    """End this process as soon as the launching process ends in any way, a signal included
    (the only writer of `lifeline` is gone: its reading ends): a rank whose launcher was
    stopped (a scheduler's SIGTERM, `timeout`, `docker stop`) trained on to its last epoch,
    writing checkpoints into the folder a restarted run resumes from (trial DS). Its parent is
    no guide: under forkserver it is the fork server, which outlived the launcher (review).
    Nothing is left to report to."""

    def watch() -> None:
        try:
            while True:
                lifeline.recv()  # nothing is ever sent
        except (EOFError, OSError):
            os._exit(1)

    threading.Thread(target=watch, name="deepsharp-launcher-watch", daemon=True).start()


class ReturnedEarlyError(DistributedError):
    """A rank's function returned while another rank's waited in a collective it never made
    (the barrier every rank meets once its function returned failed): counted as a failure in
    a collective, blamed before the others' (gloo's words alone, their blame on either rank)."""


def _in_collective(error: BaseException) -> bool:
    """Whether the error came out of torch.distributed (a collective that failed or timed out
    because another rank did), rather than from the function itself."""
    tail = error.__traceback__
    if tail is None:
        return False
    while tail.tb_next is not None:
        tail = tail.tb_next
    return _COMMUNICATION in tail.tb_frame.f_code.co_filename

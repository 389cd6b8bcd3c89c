"""launch starts local processes already in a group and returns rank 0's result; a process that
raises, exits or stops answering ends the job on every rank, and its error is raised here with
the rank and the traceback's text, within the timeout: never a hang."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import distributed_workers as workers
import pytest

from deepsharp.distributed import ProcessFailedError, launch
from deepsharp.distributed.launch import _outcome, _Rank

pytest.importorskip("torch")

TIMEOUT = 3.0
SLACK = 30.0
"""How long past the timeout a failing job may take to end here: starting processes and
importing torch on a loaded machine, never a hang."""


@pytest.mark.parametrize("start_method", ["spawn", workers.START])
def test_it_returns_rank_0_s_result_with_the_environment_torchrun_sets(start_method: str) -> None:
    found = launch(workers.environment, 3, start_method=start_method)
    assert found["rank"] == 0 and found["world_size"] == 3 and found["writes"]
    assert found["mean rank"] == 1.0  # every rank took part in a collective
    environment = found["environment"]
    assert environment["RANK"] == "0" and environment["LOCAL_RANK"] == "0"
    assert environment["WORLD_SIZE"] == "3" and environment["LOCAL_WORLD_SIZE"] == "3"
    assert environment["OMP_NUM_THREADS"] is not None


def _failure(function: object, rank: int) -> tuple[ProcessFailedError, float]:
    began = time.monotonic()
    with pytest.raises(ProcessFailedError) as caught:
        launch(function, 2, rank, timeout=TIMEOUT, start_method=workers.START)  # type: ignore[arg-type]
    assert not multiprocessing.active_children(), "a rank of the failed job is still running"
    return caught.value, time.monotonic() - began


def test_a_rank_that_raises_ends_the_job_with_its_error_and_traceback() -> None:
    error, took = _failure(workers.raises_on, 1)
    assert error.rank == 1
    assert "rank 1 of 2 failed: ValueError: rank 1 found a broken row" in str(error)
    assert error.remote_traceback is not None
    assert "raises_on" in error.remote_traceback and "ValueError" in error.remote_traceback
    assert "raises_on" in str(error)  # the traceback's text is in the message too
    assert took < TIMEOUT + SLACK


def test_a_rank_that_exits_without_a_word_ends_the_job_naming_its_code() -> None:
    error, took = _failure(workers.exits_on, 1)
    assert error.rank == 1 and error.exit_code == 7
    assert "rank 1 of 2 exited with code 7 before its function returned" in str(error)
    assert took < TIMEOUT + SLACK


def test_a_rank_that_stops_answering_is_ended_when_the_others_time_out() -> None:
    error, took = _failure(workers.hangs_on, 1)
    assert error.rank == 1
    assert "rank 1 of 2 stopped answering (rank 0 waited 3 s for it in a collective)" in str(error)
    assert "it was ended" in str(error)
    assert took < TIMEOUT + SLACK


def test_a_rank_that_hangs_after_the_others_returned_is_ended_too() -> None:
    error, took = _failure(workers.returns_early_but, 0)
    assert error.rank == 0 and "stopped answering" in str(error)
    assert took < 2 * TIMEOUT + SLACK


def test_a_rank_whose_function_returned_while_another_waited_is_blamed_saying_so() -> None:
    """Failed before (trial W): gloo's words alone ("Timed out waiting for recv", "Connection
    closed by peer"), blaming rank 0 or rank 1 from run to run."""
    error, took = _failure(workers.fits_but, 1)
    assert error.rank == 1, str(error)
    assert "rank 1's function returned while another rank's had not" in str(error)
    assert "fit with the same distributed= on every rank" in str(error)
    assert took < 2 * TIMEOUT + SLACK


def test_when_every_rank_failed_in_a_collective_the_earliest_is_blamed() -> None:
    """No rank failed of itself (each raised inside torch.distributed): the first to fail is
    blamed, with its error and traceback, and the others' errors are named."""
    ranks = [
        _Rank(0, report=("error", 0, "RuntimeError: later", "trace 0", True, 20.0), exit_code=1),
        _Rank(1, report=("error", 1, "RuntimeError: first", "trace 1", True, 10.0), exit_code=1),
    ]
    with pytest.raises(ProcessFailedError) as caught:
        _outcome(ranks, TIMEOUT)
    error = caught.value
    assert error.rank == 1 and error.exit_code == 1 and error.remote_traceback == "trace 1"
    assert str(error).startswith("rank 1 of 2 failed in a collective: RuntimeError: first")
    assert "rank 0 failed in a collective: RuntimeError: later" in str(error)


def test_a_function_defined_under_the_main_guard_is_said_to_be_so(tmp_path: Path) -> None:
    """Failed before (trial BA): it pickled in the parent and each new process failed with
    pickle's raw "AttributeError: Can't get attribute 'closure' on <module '__mp_main__'>"."""
    script = tmp_path / "guarded.py"
    script.write_text(
        "from deepsharp.distributed import launch\n"
        "if __name__ == '__main__':\n"
        "    def closure():\n"
        "        return 1\n"
        "    try:\n"
        "        launch(closure, 2, timeout=60)\n"
        "    except Exception as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    done = _ran(script)
    assert "ProcessFailedError" in done.stdout, done.stdout + done.stderr[-2000:]
    assert 'defined under `if __name__ == "__main__":`' in done.stdout


def _ran(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )


def test_a_script_calling_launch_without_the_main_guard_is_told_of_it(tmp_path: Path) -> None:
    """Failed before (trial DM4): it said only that a rank exited 'without a Python error (os._exit,
    a crash, or a signal)', where each new process importing the script again had launched."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from deepsharp.distributed import launch\n"
        "def work():\n"
        "    return 1\n"
        "launch(work, 2, timeout=60)\n"
    )
    done = _ran(script)
    said = done.stderr[-3000:]
    assert done.returncode == 1 and "ProcessFailedError" in said, said
    assert 'put the call under `if __name__ == "__main__":`' in said


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("how", "start"),
    [(signal.SIGTERM, "spawn"), (signal.SIGKILL, "spawn"), (signal.SIGKILL, "forkserver"),
     (signal.SIGKILL, "fork"), (signal.SIGKILL, "spawn+forked")],
    ids=["SIGTERM", "SIGKILL", "SIGKILL-forkserver", "SIGKILL-fork", "SIGKILL-forked-beside"],
)  # fmt: skip
def test_ranks_end_when_their_launcher_is_stopped(
    tmp_path: Path, how: signal.Signals, start: str
) -> None:
    """Failed before (trial DS): a launcher stopped by a signal (a scheduler's SIGTERM,
    `timeout`) left its ranks training to their last epoch, writing checkpoints; a rank's
    parent is no guide under forkserver (the fork server outlived the launcher: review), and
    a process the launcher forked beside its ranks (launch in a thread, a pool's worker) held
    their lifeline open (review)."""
    script = tmp_path / "long.py"
    script.write_text(
        "import os, sys, time\n"
        "from deepsharp.distributed import launch\n"
        "def work(folder):\n"
        "    with open(os.path.join(folder, f'rank-{os.environ[\"RANK\"]}'), 'w') as f:\n"
        "        f.write(str(os.getpid()))\n"
        "    time.sleep(120)\n"
        "if __name__ == '__main__':\n"
        "    method, beside = (sys.argv[2].split('+') + [''])[:2]\n"
        "    if not beside:\n"
        "        launch(work, 2, sys.argv[1], timeout=300, start_method=method)\n"
        "    import multiprocessing, threading\n"
        "    threading.Thread(target=launch, args=(work, 2, sys.argv[1]),\n"
        "                     kwargs={'timeout': 300, 'start_method': method}, daemon=True).start()\n"
        "    while not os.path.exists(os.path.join(sys.argv[1], 'rank-1')):\n"
        "        time.sleep(0.05)\n"
        "    helper = multiprocessing.get_context('fork').Process(target=time.sleep, args=(20,))\n"
        "    helper.start()\n"
        "    open(os.path.join(sys.argv[1], 'helper'), 'w').close()\n"
        "    time.sleep(300)\n"
    )
    launcher = subprocess.Popen([sys.executable, str(script), str(tmp_path), start])
    ranks: list[int] = []
    try:
        files = [tmp_path / "rank-0", tmp_path / "rank-1"]
        began = time.monotonic()
        helper = [tmp_path / "helper"] if "+" in start else []  # forked before the kill
        while not all(f.exists() and f.read_text() for f in files) or not all(
            f.exists() for f in helper
        ):
            assert time.monotonic() - began < 120 and launcher.poll() is None
            time.sleep(0.1)
        ranks = [int(f.read_text()) for f in files]
        launcher.send_signal(how)
        launcher.wait(timeout=60)
        ended = time.monotonic() + 10
        while any(_running(pid) for pid in ranks) and time.monotonic() < ended:
            time.sleep(0.1)
        assert not any(_running(pid) for pid in ranks)
    finally:
        launcher.kill()
        launcher.wait()
        for pid in ranks:  # what a failure left running
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether the process `pid` runs (a zombie, ended and not reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

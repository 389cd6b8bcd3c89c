"""Runs killed (SIGKILL) at random moments while they write checkpoints, and disks that fill
during a save: the latest checkpoint always loads, and resumes to the uninterrupted run's
bits; a full disk leaves the earlier file as it was."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from deepsharp.core import Adam, BinaryCrossEntropy, Dense, Network, Relu
from deepsharp.core.samples import titanic
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.core.training.loop import FitOptions, Run, fit

TRIALS = 20
MORE_TRIALS = 60
EPOCHS = 30
ROWS = 200
# A wide layer on few rows: an epoch's arithmetic is short beside its checkpoint's write, so
# many random moments fall inside one. One process imports deepsharp once and forks a run
# for each trial (what is killed); the kill comes from this process, as an outside one would.
RUNS = f"""
import os, sys
from deepsharp.core import Adam, BinaryCrossEntropy, Dense, Network, Relu
from deepsharp.core.samples import titanic
from deepsharp.core.training.loop import FitOptions, fit
rows = titanic.rows()[:{ROWS}]
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        options = FitOptions(seed=5, epochs={EPOCHS}, patience=1000, progress=False,
                             checkpoint_dir=line.strip(), checkpoint_every=1)
        fit(titanic.pipeline(), rows, Network([Dense(512), Relu(), Dense(1)]),
            BinaryCrossEntropy(), Adam(0.01), options)
        os._exit(0)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print("killed" if os.WIFSIGNALED(status) else "finished", flush=True)
"""


def _fit(resume_from: Checkpoint | None = None, **options: Any) -> Run:
    settings: dict[str, Any] = {"seed": 5, "epochs": EPOCHS, "patience": 1000, "progress": False}
    return fit(
        titanic.pipeline(),
        titanic.rows()[:ROWS],
        Network([Dense(512), Relu(), Dense(1)]),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(**{**settings, **options}),
        resume_from=resume_from,
    )


def _bits(run: Run) -> bytes:
    slots = run.trained.network.slots
    return b"".join(slots[name].tobytes() for name in sorted(slots))


def _latest(folder: Path) -> Path | None:
    """The newest checkpoint in `folder` (their names sort by epoch), or None."""
    found = sorted(folder.glob("checkpoint*.safetensors"))
    return found[-1] if found else None


def _temporaries(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if path.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def uninterrupted() -> bytes:
    return _bits(_fit())


class Runs:
    """A process that starts a run on request, writing checkpoints into a folder."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", RUNS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def _line(self) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 120)
        line = self.process.stdout.readline().strip() if ready else ""
        assert line, self.process.stderr.read() if self.process.stderr else "no answer"
        return line

    def kill_one(self, folder: Path, delay: float) -> str:
        """Start a run into `folder`, SIGKILL it `delay` seconds after its first checkpoint:
        'killed', or 'finished' when it ended first."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{folder}\n")
        self.process.stdin.flush()
        pid = int(self._line())
        waited = time.monotonic()
        while _latest(folder) is None and time.monotonic() - waited < 120:
            time.sleep(0.001)
        time.sleep(delay)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self._line()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.mark.once  # runs killed and resumed in processes: the same on every Python
def test_runs_killed_while_writing_checkpoints_resume_to_the_same_bits(
    uninterrupted: bytes, tmp_path: Path
) -> None:
    rng = random.Random(20261203)
    counts = {"killed": 0, "finished": 0, "mid-write": 0}
    runs = Runs()
    try:
        # TRIALS kills at random moments, then more (up to MORE_TRIALS in all) until half of
        # TRIALS have landed before the run ended and one mid-write: how many do depends on
        # the machine's speed and load.
        trial = 0
        while trial < MORE_TRIALS and (
            trial < TRIALS or counts["killed"] < TRIALS // 2 or counts["mid-write"] == 0
        ):
            trial += 1
            folder = tmp_path / f"trial-{trial}"
            folder.mkdir()
            counts[runs.kill_one(folder, rng.uniform(0.0, 0.15))] += 1
            counts["mid-write"] += bool(_temporaries(folder))
            latest = _latest(folder)
            assert latest is not None
            checkpoint = Checkpoint.load(latest)  # whole, whenever the kill came
            assert 1 <= checkpoint.epoch <= EPOCHS
            resumed = _fit(resume_from=checkpoint, checkpoint_dir=folder, checkpoint_every=1)
            assert _bits(resumed) == uninterrupted, (trial, checkpoint.epoch)
            assert not _temporaries(folder), trial  # the killed writer's went with the resumed run
    finally:
        runs.close()
    print(f"\n{trial} runs: {counts}")
    assert counts["killed"] >= TRIALS // 2, counts
    assert counts["mid-write"] >= 1, counts


LIMITED = """
import resource, signal, sys
from deepsharp.core import Adam, BinaryCrossEntropy, Dense, Network, Relu
from deepsharp.core.samples import titanic
from deepsharp.core.training.loop import FitOptions, fit
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
options = FitOptions(seed=5, epochs=4, patience=1000, progress=False,
                     checkpoint_dir=sys.argv[1], checkpoint_every=1)
fit(titanic.pipeline(), titanic.rows()[:200], Network([Dense(512), Relu(), Dense(1)]),
    BinaryCrossEntropy(), Adam(0.01), options, resume_from=sys.argv[3])
"""


def test_a_disk_that_fills_during_a_checkpoint_leaves_the_earlier_one_whole(
    tmp_path: Path,
) -> None:
    _fit(epochs=2, checkpoint_dir=tmp_path, checkpoint_every=1)
    latest = _latest(tmp_path)
    assert latest is not None
    before = latest.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, str(tmp_path), str(len(before) // 2), str(latest)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "File too large" in done.stderr, done.stderr[-2000:]
    assert latest.read_bytes() == before
    assert Checkpoint.load(latest).epoch == 2
    assert not _temporaries(tmp_path)

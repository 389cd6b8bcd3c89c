"""The benchmark scripts refuse what they cannot measure, before they measure anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _refused(script: str, *arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / script), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def test_a_profile_of_no_goal_s_workload_is_refused(tmp_path: Path) -> None:
    """Failed before (trial CP): --only nosuch wrote a file of no profiles (and the page,
    made from it, lost its "Where the time goes") and exited 0."""
    out = tmp_path / "profiles.json"
    said = _refused("profile_steps.py", "--only", "nosuch", "--out", str(out))
    assert "--only nosuch: no goal of that workload; they are titanic," in said
    assert not out.exists()


def test_no_rounds_are_refused_before_any_is_timed() -> None:
    """Failed before (trial CP): --rounds -1 timed nothing, then min() of no values."""
    assert "argument --rounds: a whole number of 1 or more, not '-1'" in _refused(
        "mixed_speed.py", "titanic", "--rounds", "-1"
    )
    assert "argument --epochs: a whole number of 1 or more, not '0'" in _refused(
        "streaming.py", "speed", "--epochs", "0"
    )

"""The three loaders against mutated and hostile files: FileFormatError, or a file that loads
to exactly what was saved; in bounded memory; never a hang. fuzz_files.py is the fuzzer;
`nox -s fuzz` runs it long (docs/reliability.md has its figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FUZZER = Path(__file__).with_name("fuzz_files.py")
FILES, SEED = 3000, 20261203  # the CI-sized run: a few seconds, the same files every time

# Content the loop's code parses (the architecture, the pipeline, the loss, the checkpoint's
# state) still fails the fuzzer this way: (exception, the file it was raised in). Remove an
# entry when it is mended; a kind not listed here fails the test.
KNOWN_ELSEWHERE: set[tuple[str, str]] = set()
"""Failure kinds found in other modules' parsers and not yet mended (none now)."""
OURS = ("files.py", "cli.py")


def _fuzz(*arguments: str) -> Any:
    done = subprocess.run(
        [sys.executable, str(FUZZER), *arguments],
        capture_output=True,
        text=True,
        timeout=600,  # hang detection only; the run takes seconds
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done


@pytest.mark.once  # thousands of files: test_files.py takes each refusal on every Python
def test_every_mutated_file_is_refused_with_file_format_error_or_loads_unchanged(
    tmp_path: Path,
) -> None:
    summary_path = tmp_path / "fuzz.json"
    _fuzz("--files", str(FILES), "--seed", str(SEED), "--json", str(summary_path))
    summary = json.loads(summary_path.read_text())
    failures: list[dict[str, Any]] = summary["failures"]
    assert summary["largest_file_bytes"] < 1 << 20
    assert summary["peak_rss_growth_mib"] < 100, summary
    changed = [f for f in failures if f["error"] == "loaded changed"]
    assert not changed, changed[:5]  # a copy not sealed again never loads other values
    ours = [f for f in failures if f["where"].split(":")[0].endswith(OURS)]
    assert not ours, ours[:5]
    kinds = {(f["error"], f["where"].split(":")[0]) for f in failures}
    unknown = [f for f in failures if (f["error"], f["where"].split(":")[0]) not in KNOWN_ELSEWHERE]
    assert not unknown, unknown[:5]
    if failures:
        shown = "; ".join(f"{error} in {where}" for error, where in sorted(kinds))
        pytest.xfail(f"{len(failures)} of {FILES} files fail in the loop's parsers: {shown}")


def test_what_is_no_regular_file_is_refused_at_once_in_bounded_memory() -> None:
    done = _fuzz("--special")
    said: dict[str, dict[str, Any]] = json.loads(done.stdout)
    assert len(said) >= 30
    for case, outcome in said.items():
        expected = {"FileNotFoundError"} if case.startswith("no file") else {"FileFormatError"}
        if case == "a folder / checkpoint":  # a loader may look in a folder for its file
            expected.add("FileNotFoundError")
        assert outcome["outcome"] in expected, (case, outcome)
        assert outcome["growth_mib"] < 100, (case, outcome)


@pytest.mark.once  # thousands of files: test_files.py takes each refusal on every Python
def test_a_flipped_bit_in_any_byte_of_a_trained_file_is_refused_or_changes_nothing() -> None:
    done = _fuzz("--flips")
    census = json.loads(done.stdout)
    assert census["flips"] == census["file_bytes"]
    assert census["failures"] == []  # before: 164 of 3,852 flips loaded, with other predictions
    assert census["refused"] + census.get("loaded, identical", 0) == census["flips"]


@pytest.mark.once  # thousands of files: test_files.py takes each refusal on every Python
def test_every_number_of_the_metadata_made_hostile_is_refused_or_used_cleanly() -> None:
    done = _fuzz("--numbers")
    census = json.loads(done.stdout)
    assert census["places"] >= 150  # every number of eight files' metadata (32 of them floats)
    assert census["loads"] == census["places"] * 16
    # before: 106 raw OverflowErrors (10**400 in a split fraction, a fill, an image scale, a
    # checkpoint's history, a loss scale)
    assert census["failures"] == [], census["failures"][:5]

"""The plugin names no engine: with no `--engine`, every installed engine runs at the default
spec its entry point describes, and one that cannot be made here is skipped, saying why."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepsharp.contracts.measure import Measurements
from deepsharp.contracts.plugin import choose_engines, default_spec, summary_lines
from deepsharp.core.engine import available_engines, describe_engine, rescan_engines

ENGINES = """
from deepsharp.core.engine import EngineDescription
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.engines.light import LightEngine


def make_mine(option):
    if option != "cpu":
        raise EngineUnavailableError(f"mine takes only cpu, not {option!r}")
    return LightEngine()


def make_absent(option):
    raise EngineUnavailableError("absent needs a card, and none is here")


MINE = EngineDescription("mine", make_mine, default_spec="mine:cpu")
ABSENT = EngineDescription("absent", make_absent, default_spec="absent:card")
"""


@pytest.fixture
def two_more_engines(tmp_path: Path) -> Iterator[None]:
    """Two engines installed for the test (a distribution on sys.path with entry points):
    `mine`, made at its default spec mine:cpu only, and `absent`, which cannot be made here."""
    (tmp_path / "outside_engines.py").write_text(ENGINES, encoding="utf-8")
    info = tmp_path / "outside_engines-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: outside-engines\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[deepsharp.engines]\nmine = outside_engines:MINE\nabsent = outside_engines:ABSENT\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    rescan_engines()
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("outside_engines", None)
        rescan_engines()


def test_with_no_engine_named_every_installed_engine_runs_at_its_default_spec(
    two_more_engines: None,
) -> None:
    chosen, skipped = choose_engines([])
    assert "mine:cpu" in chosen and "mine" not in chosen
    assert [reason for reason in skipped if reason.startswith("absent")] == [
        "absent:card: absent needs a card, and none is here"
    ]
    others = [name for name in available_engines() if name not in ("mine", "absent")]
    assert set(chosen) - {"mine:cpu"} <= {describe_engine(name).default_spec for name in others}
    assert default_spec("mine") == "mine:cpu"


def test_engines_named_run_as_named_in_order_once() -> None:
    chosen, skipped = choose_engines(["light:float32", "light", "light:float32"])
    assert (chosen, skipped) == (["light:float32", "light"], [])


def test_a_run_with_no_engine_named_says_which_ran_and_why_others_were_skipped(
    two_more_engines: None, tmp_path: Path
) -> None:
    # A fresh process sees the two engines on its path, as an installed distribution.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "deepsharp.contracts.test_identity", "-q"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    assert result.returncode == 0, out[-2000:]
    assert "deepsharp contracts" in out
    held = next(line for line in out.splitlines() if line.startswith("held to the contract:"))
    assert "mine:cpu" in held and "light" in held
    assert "skipped absent:card: absent needs a card, and none is here" in out


def test_a_named_engine_that_cannot_be_made_stops_the_run_saying_why_once(
    tmp_path: Path,
) -> None:
    """Failed before: every check of the suite erred on its own, each with the traceback (about
    33,000 lines), and the summary still said the engine was held to the contract."""
    (tmp_path / "unmade.py").write_text(
        "def make():\n    raise RuntimeError('my-library: driver not found')\n", encoding="utf-8"
    )
    suite = ["--pyargs", "deepsharp.contracts", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *suite, "--engine", "unmade:make"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, said[-2000:]
    assert len(said.splitlines()) < 10, said[-2000:]
    assert "--engine unmade:make: the engine could not be made, so no check ran" in said
    assert "my-library: driver not found" in said
    assert "held to the contract" not in said


def test_with_nothing_to_hold_the_summary_says_so() -> None:
    assert summary_lines([], ["absent:card: needs a card"]) == [
        "no engine was held to the contract: install one, or name one with --engine SPEC",
        "skipped absent:card: needs a card",
    ]


def _report_of(tmp_path: Path, name: str, *options: str) -> tuple[dict[str, Any], str]:
    folder = tmp_path / name
    folder.mkdir()
    modules = [f"deepsharp.contracts.{m}" for m in ("test_moves", "test_totals")]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            *modules,
            "--engine",
            "light:float32",
            "--engine",
            "light",
            "-q",
            "-p",
            "no:cacheprovider",
            "--contracts-report",
            str(folder / "report.json"),
            *options,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    return json.loads((folder / "report.json").read_text(encoding="utf-8")), result.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed"
)
def test_a_run_over_workers_writes_the_report_of_one_process(tmp_path: Path) -> None:
    """Failed before: under `-n 2` each worker and the controller wrote the report in turn, the
    controller last, having run nothing: a report of no engine, and no closing summary."""
    alone, _ = _report_of(tmp_path, "alone")
    shared, said = _report_of(tmp_path, "shared", "-n", "2")
    assert set(shared["engines"]) == {"light", "light:float32"}
    assert shared == alone
    assert "held to the contract: light:float32, light" in said


def test_a_nan_worst_stays_the_worst_whatever_comes_after_it() -> None:
    """Failed before: a NaN kept as the worst was replaced by the next finite value, so a run
    that met a NaN could report a worst within the bound (by the order checks ran in)."""
    first, second = Measurements(), Measurements()
    first.record("e", "values", "tanh", float("nan"))
    first.record("e", "values", "tanh", 0.5)
    second.record("e", "values", "tanh", 0.25)
    assert math.isnan(first.to_json()["engines"]["e"]["operations"]["tanh"]["worst"])
    one, other = Measurements(), Measurements()  # a worker's measurements, in either order
    one.merge(second.parts())
    one.merge(first.parts())
    other.merge(first.parts())
    other.merge(second.parts())
    for kept in (one, other):
        entry = kept.to_json()["engines"]["e"]
        assert math.isnan(entry["operations"]["tanh"]["worst"])
        assert math.isnan(entry["families"]["values"]["worst"])
        assert entry["operations"]["tanh"]["checks"] == 3


PLANTED = {
    "wide_sums": (
        "    def sum(self, x, axes, keepdims=False):\n"
        "        return np.sum(x, axis=tuple(axes), keepdims=keepdims, dtype=np.float64)\n",
        "deepsharp.contracts.test_totals",
        "test_reduction_within_totals_bound and sum",
        "sum: dtype float64, expected float32",
    ),
    "kept_puts": (
        "    def put(self, array):\n"
        "        if isinstance(array, np.ndarray) and array.dtype == np.float32:\n"
        "            return array\n"
        "        return super().put(array)\n",
        "deepsharp.contracts.test_transfers",
        "put_keeps",
        "put on kept_puts:make kept the caller's memory: writing into the array that was put "
        "changed 232 bits of the engine's tensor",
    ),
}
"""Engines broken in one operation: the check that fails them, and what it must say."""


@pytest.mark.parametrize("name", list(PLANTED))
def test_a_check_that_fails_says_its_own_message(tmp_path: Path, name: str) -> None:
    """Failed before: an engine whose sum gave float64 failed the sums' check with "assert 1 <=
    0" from inside Hypothesis's explain phase (the pinned version's shrinker), never the
    check's own "sum: dtype float64, expected float32"; a put that kept the caller's array was
    caught only by other operations' checks, each blaming itself (no check of put's copy)."""
    body, module, selected, said = PLANTED[name]
    (tmp_path / f"{name}.py").write_text(
        "import numpy as np\n"
        "from example_engine import ExampleEngine\n"
        "class Planted(ExampleEngine):\n"
        f"    name = {name!r}\n" + body + "def make():\n    return Planted()\n",
        encoding="utf-8",
    )
    here = Path(__file__).parent
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            module,
            "--engine",
            f"{name}:make",
            "-k",
            selected,
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(here)])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout[-3000:]
    assert said in result.stdout, result.stdout[-3000:]
    assert "shrinker" not in result.stdout

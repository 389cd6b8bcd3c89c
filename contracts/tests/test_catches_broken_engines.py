"""The contract can fail: engines broken on purpose are caught, each by the check meant for it,
and engines that keep the contract pass it. Each runs as users run it:
`pytest --pyargs deepsharp.contracts --engine module:factory`, in a subprocess.

Only the honest engines (the example engine and the light one) run the whole suite; the broken
ones run just the checks meant to catch them (and each must fail exactly those), which keeps these
tests to a few seconds beyond two full passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

import deepsharp.contracts

HERE = Path(__file__).parent
SUITE = Path(deepsharp.contracts.__file__).parent
"""The suite's folder, the runs' rootdir: their test ids then name the module, `test_totals.py::`."""

# spec -> the checks that must catch it (every other check a broken engine runs must pass)
BROKEN: dict[str, set[str]] = {
    "broken_engines:float16_products": {
        "test_totals::test_matmul_within_totals_bound",
        "test_totals::test_matmul_with_every_transpose_of_a_long_total",
        "test_totals::test_large_totals_within_bound",
    },
    "broken_engines:float32_large_products": {"test_totals::test_large_totals_within_bound"},
    "broken_engines:drops_last_term": {
        "test_totals::test_sum_within_totals_bound",
        "test_totals::test_large_totals_within_bound",
    },
    "broken_engines:float32_totals_drops_last_term": {
        "test_totals::test_sum_within_totals_bound",
        "test_totals::test_large_totals_within_bound",
    },
    "broken_engines:flips_a_bit": {"test_moves::test_reshape_moves_every_bit"},
    "broken_engines:round_trips": {
        "test_training::test_a_titanic_step_makes_two_transfers_in_and_one_out"
    },
}
# The broken rule breaks the rulebook of the process it runs in, so it runs alone, on the nudging
# check only: every matmul case must fail it, every other rule's case pass.
HALF_GRADIENT = "broken_engines:half_gradient_rule"
NUDGING = "test_rules::test_rule_agrees_with_nudging"
MATMUL_CASES = {"matmul", "matmul-ta", "matmul-tb", "matmul-tab"}

# Every run: a name -> (the engine specs, what to run, more options). The broken engines' runs
# leave Hypothesis's shrinking out (no_shrinking.py): their failures need no minimal example.
RUNS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "example": (["example_engine:make"], ["deepsharp.contracts"], []),
    "light": (["light"], ["deepsharp.contracts"], []),
    "broken": (
        list(BROKEN),
        sorted({f"deepsharp.contracts.{check}" for checks in BROKEN.values() for check in checks}),
        ["-p", "no_shrinking"],
    ),
    "half-gradient": ([HALF_GRADIENT], [f"deepsharp.contracts.{NUDGING}"], []),
}


def _run(
    specs: list[str], targets: list[str], options: list[str], folder: Path
) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            f"--rootdir={SUITE}",
            "--pyargs",
            *targets,
            *(f"--engine={spec}" for spec in specs),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *options,
            f"--junitxml={folder / 'junit.xml'}",
            f"--contracts-report={folder / 'report.json'}",
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


class Outcome:
    """What one run passed and failed, as `module::test[id]`, and the report it wrote."""

    def __init__(self, folder: Path, output: str) -> None:
        self.output = output
        self.failed: set[str] = set()
        self.passed: set[str] = set()
        for case in ElementTree.parse(folder / "junit.xml").iter("testcase"):
            bad = case.find("failure") is not None or case.find("error") is not None
            module = case.get("classname", "").rsplit(".", 1)[-1]
            (self.failed if bad else self.passed).add(f"{module}::{case.get('name', '')}")
        self.report: dict[str, Any] = json.loads((folder / "report.json").read_text())

    def of(self, spec: str, tests: set[str]) -> set[str]:
        """The tests among `tests` run on `spec`, their ids' engine part taken off."""
        found = set()
        for test in tests:
            check, _, rest = test.partition("[")
            if rest == f"{spec}]":
                found.add(check)
            elif rest.startswith(f"{spec}-"):
                found.add(f"{check}[{rest[len(spec) + 1 : -1]}]")
        return found


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every run at once (the honest engines' full passes take the time; each has a process)."""
    started = {}
    for name, (specs, targets, options) in RUNS.items():
        folder = tmp_path_factory.mktemp(name)
        started[name] = (folder, _run(specs, targets, options, folder))
    results = {}
    for name, (folder, process) in started.items():
        output, _ = process.communicate(timeout=600)
        results[name] = Outcome(folder, output.decode(errors="replace"))
    return results


def test_an_engine_that_keeps_the_contract_passes_it(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["example"]
    assert not outcome.failed, outcome.output[-4000:]
    assert len(outcome.passed) > 90, "the whole suite ran"
    families = outcome.report["engines"]["example_engine:make"]["families"]
    assert families["moves"] == 0 and families["totals"] <= 3 and families["values"] <= 1


def test_the_light_engine_passes_the_whole_contract(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["light"]
    assert not outcome.failed, (
        f"the light engine fails {sorted(outcome.failed)}:\n" + outcome.output[-4000:]
    )
    assert len(outcome.passed) > 90, "the whole suite ran"


@pytest.mark.parametrize("spec", list(BROKEN))
def test_a_broken_engine_is_caught_by_the_check_meant_for_it(
    outcomes: dict[str, Outcome], spec: str
) -> None:
    outcome = outcomes["broken"]
    failed, passed = outcome.of(spec, outcome.failed), outcome.of(spec, outcome.passed)
    assert failed == BROKEN[spec], (
        f"{spec} should fail {sorted(BROKEN[spec])} and pass the rest; it failed {sorted(failed)}"
        f" and passed {sorted(passed)}\n" + outcome.output[-3000:]
    )
    assert len(failed | passed) == len({c for checks in BROKEN.values() for c in checks})


def test_a_broken_rule_is_caught_by_nudging(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["half-gradient"]
    failed = outcome.of(HALF_GRADIENT, outcome.failed)
    passed = outcome.of(HALF_GRADIENT, outcome.passed)
    assert failed == {f"{NUDGING}[{case}]" for case in MATMUL_CASES}, (
        f"{HALF_GRADIENT} should fail the matmul cases only; it failed {sorted(failed)}\n"
        + outcome.output[-3000:]
    )
    assert len(passed) > 30, "every rule's case ran"


def test_the_report_measures_what_was_broken(outcomes: dict[str, Outcome]) -> None:
    engines = outcomes["broken"].report["engines"]
    assert engines["broken_engines:flips_a_bit"]["operations"]["reshape"]["worst"] >= 1
    assert engines["broken_engines:float16_products"]["operations"]["matmul"]["worst"] > 3
    nudged = outcomes["half-gradient"].report["engines"][HALF_GRADIENT]["operations"]
    assert nudged["nudged matmul"]["worst"] > 1 and nudged["nudged tanh"]["worst"] <= 1

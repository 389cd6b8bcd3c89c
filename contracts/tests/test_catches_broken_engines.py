"""The contract can fail: engines broken on purpose are caught, each by the check meant for it,
and engines that keep the contract pass it. Each runs as users run it:
`pytest --pyargs deepsharp.contracts --engine module:factory`, in a subprocess of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent

# spec -> (what to run, the test ids that must fail)
BROKEN: dict[str, tuple[str, set[str]]] = {
    "broken_engines:float16_products": (
        "deepsharp.contracts.test_totals",
        {"test_matmul_within_totals_bound", "test_matmul_with_every_transpose_of_a_long_total"},
    ),
    "broken_engines:drops_last_term": (
        "deepsharp.contracts.test_totals",
        {"test_sum_within_totals_bound"},
    ),
    "broken_engines:flips_a_bit": (
        "deepsharp.contracts.test_moves",
        {"test_reshape_moves_every_bit"},
    ),
    "broken_engines:round_trips": (
        "deepsharp.contracts.test_training",
        {"test_a_titanic_step_makes_two_transfers_in_and_one_out"},
    ),
    "broken_engines:half_gradient_rule": (
        "deepsharp.contracts.test_rules",
        {"test_rule_agrees_with_nudging[{spec}-matmul]"},
    ),
}

# What the light engine may fail while a bug reported against the core is open (see
# docs/contracts.md, "Known breaks"); an entry can go once the light engine passes it.
LIGHT_KNOWN_BREAKS = {
    # adam_update on a 0-d slot raises; its one-pass path mixes up slots handed out of order.
    "test_adam_update_follows_its_formula[light]",
    "test_fused_updates_of_parts_of_one_tensor_in_any_order[light]",
}


def _run(spec: str, target: str, folder: Path) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            target,
            "--engine",
            spec,
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            f"--junitxml={folder / 'junit.xml'}",
            f"--contracts-report={folder / 'report.json'}",
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


class Outcome:
    def __init__(self, folder: Path, output: str) -> None:
        self.output = output
        self.failed: set[str] = set()
        self.passed: set[str] = set()
        for case in ElementTree.parse(folder / "junit.xml").iter("testcase"):
            bad = case.find("failure") is not None or case.find("error") is not None
            (self.failed if bad else self.passed).add(case.get("name", ""))
        self.report: dict[str, Any] = json.loads((folder / "report.json").read_text())


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every run at once (they take seconds each, and there are cores to spare)."""
    runs = {"example_engine:make": "deepsharp.contracts", "light": "deepsharp.contracts"}
    runs.update({spec: target for spec, (target, _) in BROKEN.items()})
    started = {}
    for spec, target in runs.items():
        folder = tmp_path_factory.mktemp(spec.replace(":", "-"))
        started[spec] = (folder, _run(spec, target, folder))
    results = {}
    for spec, (folder, process) in started.items():
        output, _ = process.communicate(timeout=600)
        results[spec] = Outcome(folder, output.decode(errors="replace"))
    return results


def test_an_engine_that_keeps_the_contract_passes_it(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["example_engine:make"]
    assert not outcome.failed, outcome.output[-4000:]
    assert len(outcome.passed) > 90, "the whole suite ran"
    families = outcome.report["engines"]["example_engine:make"]["families"]
    assert families["moves"] == 0 and families["totals"] <= 3 and families["values"] <= 1


def test_the_light_engine_passes_but_for_its_known_breaks(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["light"]
    assert outcome.failed <= LIGHT_KNOWN_BREAKS, (
        f"the light engine newly fails {sorted(outcome.failed - LIGHT_KNOWN_BREAKS)}:\n"
        + outcome.output[-4000:]
    )
    assert len(outcome.passed) > 90, "the whole suite ran"


@pytest.mark.parametrize("spec", list(BROKEN))
def test_a_broken_engine_is_caught_by_the_check_meant_for_it(
    outcomes: dict[str, Outcome], spec: str
) -> None:
    _, expected = BROKEN[spec]
    outcome = outcomes[spec]
    for name in expected:
        test_id = name.format(spec=spec) if "[" in name else f"{name}[{spec}]"
        assert test_id in outcome.failed, (
            f"{spec} should fail {test_id}; it failed {sorted(outcome.failed)}\n"
            + outcome.output[-3000:]
        )


def test_the_report_measures_what_was_broken(outcomes: dict[str, Outcome]) -> None:
    bits = outcomes["broken_engines:flips_a_bit"].report["engines"]["broken_engines:flips_a_bit"]
    assert bits["operations"]["reshape"]["worst"] >= 1
    half = outcomes["broken_engines:float16_products"].report["engines"][
        "broken_engines:float16_products"
    ]
    assert half["operations"]["matmul"]["worst"] > 3

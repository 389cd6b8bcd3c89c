"""The mixed precisions' contract can fail: engines that claim `mixed_bfloat16` but compute
otherwise are caught, each by the checks meant for it, and an honest engine that keeps products'
outputs in the half format (as torch's does) passes. Each runs as users run it,
`pytest --pyargs deepsharp.contracts --engine mixed_broken_engines:NAME`, in one subprocess: the
honest engine on the totals, mixed, value and layer checks, each broken one on the checks meant
to catch it (only_checks.py; mixed_broken_engines.py says what each breaks)."""

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
MODULES = ["test_totals", "test_mixed", "test_values", "test_layer_operations"]

TOTALS, MIXED, LAYERS = "test_totals::", "test_mixed::", "test_layer_operations::"
RANGE = {
    *(
        f"{MIXED}test_products_across_float32s_range_within_totals_bound[{seed}]"
        for seed in range(4)
    ),
    *(
        f"{MIXED}test_convolutions_across_float32s_range_within_totals_bound[{sign}]"
        for sign in ("mixed", "positive")
    ),
}
READ_IN_HALF = (
    {
        f"{MIXED}test_a_products_output_is_read_exactly_by_value_operations[{operation}]"
        for operation in ("exp", "log", "log1p", "softplus", "sqrt", "tanh", "sigmoid")
    }
    | {
        f"{MIXED}test_a_products_output_meets_float32_operands_as_float32[{other}-{operation}]"
        for other in ("tensor", "row", "float", "output")
        for operation in ("sub", "mul", "div")
    }
    | {f"{LAYERS}test_a_products_output_meets_the_layer_operations"}
)  # erf of a product's output

MEANT: dict[str, set[str]] = {
    # float16's range, not bfloat16's: 1e10 is infinite, 1e-10 loses its bits
    "mixed_broken_engines:float16_claims_bfloat16": RANGE,
    "mixed_broken_engines:four_bits_claims_bfloat16": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_convolution_within_totals_bound",
        f"{TOTALS}test_large_totals_within_bound",
        *(f"{TOTALS}test_short_products_within_totals_bound[{n}]" for n in (1, 2, 8)),
        *RANGE,
    },
    "mixed_broken_engines:half_sums": {
        f"{TOTALS}test_reduction_within_totals_bound[sum]",
        f"{TOTALS}test_reduction_within_totals_bound[mean]",
        f"{TOTALS}test_large_totals_within_bound",
        f"{MIXED}test_totals_of_a_products_output_hold_their_bounds",
    },
    "mixed_broken_engines:half_accumulation": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_large_totals_within_bound",
    },
    "mixed_broken_engines:half_stack_accumulation": {
        f"{LAYERS}test_batch_matmul_within_totals_bound",
        f"{LAYERS}test_a_products_output_meets_the_layer_operations",
    },
    # exact on float32 inputs: only a product's output gives it away
    "mixed_broken_engines:half_values": READ_IN_HALF,
}
"""Each broken engine -> checks that must fail on it (others may fail too: a broken engine is
broken; only what is meant is required)."""

HONEST = "mixed_broken_engines:half_outputs"

ONLY = {
    spec: sorted(
        {check.partition("[")[0] for check in meant}
        | ({"test_values"} if spec == "mixed_broken_engines:half_values" else set())
    )
    for spec, meant in MEANT.items()
}
"""What each broken engine runs (only_checks.py): the checks meant to catch it, every case of
each; half values also every value check, which it must pass."""


class Outcome:
    """What the run passed and failed per engine, as `module::test[id]` with the engine's part of
    the id taken off, and the report it wrote."""

    def __init__(self, folder: Path, output: str) -> None:
        self.output = output
        self.failed: dict[str, set[str]] = {}
        self.passed: dict[str, set[str]] = {}
        for case in ElementTree.parse(folder / "junit.xml").iter("testcase"):
            bad = case.find("failure") is not None or case.find("error") is not None
            module = case.get("classname", "").rsplit(".", 1)[-1]
            name = case.get("name", "")
            check, _, rest = name.partition("[")
            spec, _, params = rest.rstrip("]").partition("-")
            if not spec.startswith("mixed_broken_engines:"):
                continue
            test = f"{module}::{check}" + (f"[{params}]" if params else "")
            (self.failed if bad else self.passed).setdefault(spec, set()).add(test)
        self.report: dict[str, Any] = json.loads((folder / "report.json").read_text())


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    folder = tmp_path_factory.mktemp("mixed")
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    command = [
        sys.executable,
        "-m",
        "pytest",
        f"--rootdir={SUITE}",
        "--pyargs",
        *(f"deepsharp.contracts.{module}" for module in MODULES),
        *(f"--engine={spec}" for spec in [*MEANT, HONEST]),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-p",
        "no_shrinking",
        "-p",
        "only_checks",
        f"--junitxml={folder / 'junit.xml'}",
        f"--contracts-report={folder / 'report.json'}",
    ]
    (folder / "only.json").write_text(json.dumps(ONLY), encoding="utf-8")
    done = subprocess.run(
        command,
        cwd=folder,
        env=dict(os.environ, PYTHONPATH=path, DEEPSHARP_CONTRACTS_ONLY=str(folder / "only.json")),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
        check=False,
    )
    return Outcome(folder, done.stdout.decode(errors="replace"))


def test_an_engine_that_keeps_outputs_in_the_half_format_honestly_passes(outcome: Outcome) -> None:
    assert not outcome.failed.get(HONEST), (
        f"{HONEST} failed {sorted(outcome.failed.get(HONEST, set()))}\n" + outcome.output[-3000:]
    )
    assert len(outcome.passed[HONEST]) > 80, "every check ran"
    engine = outcome.report["engines"][HONEST]
    assert engine["precision"] == "mixed_bfloat16"
    # its bias additions were rounded once more, and the allowance for it was used
    bias = engine["operations"]["add of a product's output and a row"]
    assert 0 < bias["worst"] <= 1


@pytest.mark.parametrize("spec", list(MEANT))
def test_a_broken_mixed_engine_is_caught_by_the_checks_meant_for_it(
    outcome: Outcome, spec: str
) -> None:
    failed = outcome.failed.get(spec, set())
    missed = MEANT[spec] - failed
    assert not missed, (
        f"{spec} should fail {sorted(missed)}; it failed {sorted(failed)}\n"
        + outcome.output[-3000:]
    )


def test_half_values_pass_every_check_on_float32_inputs(outcome: Outcome) -> None:
    """Its fault shows only where a product's output is read: the value checks, which put float32
    inputs, pass it."""
    spec = "mixed_broken_engines:half_values"
    value_checks = {
        test for test in outcome.failed.get(spec, set()) if test.startswith("test_values")
    }
    assert not value_checks
    assert any(test.startswith("test_values") for test in outcome.passed[spec])


def test_the_report_measures_how_far_each_strayed(outcome: Outcome) -> None:
    engines = outcome.report["engines"]
    float16 = engines["mixed_broken_engines:float16_claims_bfloat16"]["operations"]
    assert float16["matmul across float32's range"]["of_bound"] > 1  # inf: beyond 65,504
    four = engines["mixed_broken_engines:four_bits_claims_bfloat16"]["operations"]["matmul"]
    assert four["of_bound"] > 4  # 2^-5 against 2^-8: about 8 times the bound
    exp = engines["mixed_broken_engines:half_values"]["operations"]["exp of a product's output"]
    assert exp["worst"] > 100  # bfloat16's 2^-8 against 1.3e-6

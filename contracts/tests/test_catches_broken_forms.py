"""The contract catches broken ONNX forms: the onnx engine runs each operation as the form the
exporter writes, so a form written wrong — a product transposed, a padding's odd zero put
before the image, a softmax's total over the wrong axis — fails the checks of its operation,
each engine run as users run the suite (`--engine broken_forms:transposed_gemm`), in a
subprocess, and every other check it runs passes."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import deepsharp.contracts

HERE = Path(__file__).parent
SUITE = Path(deepsharp.contracts.__file__).parent
TOTALS, FAST = "test_totals::", "test_fast_paths::"

CAUGHT: dict[str, set[str]] = {
    "broken_forms:transposed_gemm": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_large_totals_within_bound",
        f"{TOTALS}test_totals_near_float32_s_range_within_bound[matmul]",
        *(f"{TOTALS}test_short_products_within_totals_bound[{n}]" for n in (1, 2, 8)),
        *(
            f"{TOTALS}test_products_of_square_operands_take_each_transpose[{m}-{k}-{n}]"
            for m, k, n in ((3, 3, 3), (5, 5, 2), (2, 4, 4), (33, 33, 33))
        ),
        *(
            f"{TOTALS}test_adversarial_products_within_totals_bound[{n}]"
            for n in (16, 256, 4096, 16384)
        ),
    },
    "broken_forms:odd_pad_before": {
        f"{TOTALS}test_convolution_within_totals_bound",
        f"{TOTALS}test_totals_near_float32_s_range_within_bound[conv2d]",
        *(
            f"{TOTALS}test_fixed_convolution_within_totals_bound[{case}-{sign}]"
            for case in ("1x1-stride-3-padded", "3x3-stride-2-same")
            for sign in ("mixed", "positive")
        ),
        f"{FAST}test_offered_convolution_fast_paths_match_the_reference",
        *(
            f"{FAST}test_offered_convolution_fast_paths_match_the_reference_on_fixed_cases[{case}]"
            for case in ("1x1-stride-3-padded", "3x3-stride-2-same")
        ),
    },
    "broken_forms:softmax_wrong_axis": {
        f"{TOTALS}test_reduction_within_totals_bound[sum]",
        f"{TOTALS}test_large_totals_within_bound",
        *(
            f"{TOTALS}test_adversarial_sums_and_means_within_totals_bound[{n}]"
            for n in (16, 256, 4096, 16384)
        ),
    },
}
"""Each broken form -> the checks that must catch it (every other check it runs passes)."""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[set[str], set[str]]]:
    """Each engine's failed and passed checks (`module::test[case]`, the engine's id taken off)."""
    folder = tmp_path_factory.mktemp("broken-forms")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"--rootdir={SUITE}",
            "--pyargs",
            "deepsharp.contracts.test_totals",
            "deepsharp.contracts.test_fast_paths",
            *(f"--engine={spec}" for spec in CAUGHT),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no_shrinking",
            f"--junitxml={folder / 'junit.xml'}",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        timeout=600,
        check=False,
    )
    found: dict[str, tuple[set[str], set[str]]] = {spec: (set(), set()) for spec in CAUGHT}
    for case in ElementTree.parse(folder / "junit.xml").iter("testcase"):
        if case.find("skipped") is not None:
            continue
        failed = case.find("failure") is not None or case.find("error") is not None
        module = case.get("classname", "").rsplit(".", 1)[-1]
        name, _, rest = case.get("name", "").partition("[")
        for spec in CAUGHT:
            if rest == f"{spec}]":
                test = f"{module}::{name}"
            elif rest.startswith(f"{spec}-"):
                test = f"{module}::{name}[{rest[len(spec) + 1 : -1]}]"
            else:
                continue
            found[spec][0 if failed else 1].add(test)
    return found


@pytest.mark.parametrize("spec", sorted(CAUGHT))
def test_a_broken_form_fails_the_checks_of_its_operation_and_no_other(
    spec: str, outcome: dict[str, tuple[set[str], set[str]]]
) -> None:
    failed, passed = outcome[spec]
    assert passed, f"{spec} ran no check"
    assert failed == CAUGHT[spec], (
        f"{spec}: not caught by {sorted(CAUGHT[spec] - failed)}; "
        f"failed beyond them: {sorted(failed - CAUGHT[spec])}"
    )

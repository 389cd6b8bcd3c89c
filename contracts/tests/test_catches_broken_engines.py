"""The contract can fail: engines broken on purpose are caught, each by the check meant for it,
and engines that keep the contract pass it. Each runs as users run it:
`pytest --pyargs deepsharp.contracts --engine module:factory`, in a subprocess.

Only the honest engines (the example engine and one written before the layer operations) run the
whole suite; the broken ones run the checks meant to catch them, in the modules their faults are
meant to show in (only_checks.py), and each must fail exactly those it is meant to fail there.
The light engine's whole pass is the nox sessions' own (`_contracts`); here its drawn checks run
twice, to show the report reproduces.
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

TOTALS, VALUES, MOVES = "test_totals::", "test_values::", "test_moves::"
ADVERSARIAL_SUMS = {
    f"{TOTALS}test_adversarial_sums_and_means_within_totals_bound[{n}]"
    for n in (16, 256, 4096, 16384)
}
ADVERSARIAL_PRODUCTS = {
    f"{TOTALS}test_adversarial_products_within_totals_bound[{n}]" for n in (16, 256, 4096, 16384)
}
SHORT_PRODUCTS = {f"{TOTALS}test_short_products_within_totals_bound[{n}]" for n in (1, 2, 8)}
POINTWISE_STRIDES = {
    f"{TOTALS}test_fixed_convolution_within_totals_bound[{case}-{sign}]"
    for case in ("1x1-stride-2", "1x1-stride-2-same", "1x1-stride-3-padded")
    for sign in ("mixed", "positive")
}
TAIL = f"{VALUES}test_tail_within_relative_tolerance"
FAST = "test_fast_paths::"
LAYERS = "test_layer_operations::"
ADVERSARIAL_ROWS = {
    f"{LAYERS}test_adversarial_rows_within_totals_bound[{n}]" for n in (16, 256, 4096, 16384)
}
SQUARE = f"{TOTALS}test_products_of_square_operands_take_each_transpose"
SQUARES = {f"{SQUARE}[{m}-{k}-{n}]" for m, k, n in ((3, 3, 3), (5, 5, 2), (2, 4, 4), (33, 33, 33))}
OUTPUTS = f"{LAYERS}test_a_products_output_meets_the_layer_operations"
NEAR = f"{TOTALS}test_totals_near_float32_s_range_within_bound"

DENSE_CASES = ("titanic", "one-output", "narrow-tall", "projection")
DENSE = {
    f"{FAST}test_offered_matmul_bias_matches_the_reference",
    *(
        f"{FAST}test_offered_matmul_bias_matches_the_reference_on_fixed_cases[{c}]"
        for c in DENSE_CASES
    ),
}
"""A dense layer's product with its bias: light's own runs the engine's `matmul`, so a broken
product is caught there too."""

CHANGED = "test_a_value_changed_in_place_is_read_anew_by_later_operations"
HOLDS = "test_identity::test_the_engine_s_identity_holds_still_and_is_its_own"

LAYER_NORM = "test_normalization::test_layer_norm_and_its_way_back_hold_their_reference_s_bound"
LATER = "test_operation_s_result_and_inputs_keep_their_bits_after_its_next_call"

EVERY = frozenset({"every check"})
"""An engine that must fail every check it runs: one that does not say what it is."""

# spec -> the checks that must catch it (every other check a broken engine runs must pass)
BROKEN: dict[str, set[str] | frozenset[str]] = {
    "broken_engines:float16_products": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_large_totals_within_bound",
        *ADVERSARIAL_PRODUCTS,
        *SHORT_PRODUCTS,
        f"{NEAR}[matmul]",  # float16 overflows at 65,504
        *DENSE,
        *SQUARES,
    },
    "broken_engines:guesses_square_transposes": {
        *(f"{SQUARE}[{m}-{k}-{n}]" for m, k, n in ((3, 3, 3), (5, 5, 2), (33, 33, 33))),
        f"{LAYERS}test_batch_products_of_square_operands_take_each_transpose[3-3-3]",
        f"{LAYERS}test_batch_products_of_square_operands_take_each_transpose[4-4-2]",
    },
    "broken_engines:float32_large_products": {
        f"{TOTALS}test_large_totals_within_bound",
        f"{FAST}test_offered_matmul_bias_matches_the_reference_on_fixed_cases[projection]",
        f"{SQUARE}[33-33-33]",
    },
    "broken_engines:drops_last_term": {
        f"{TOTALS}test_reduction_within_totals_bound[sum]",
        f"{TOTALS}test_large_totals_within_bound",
        *ADVERSARIAL_SUMS,
        f"{NEAR}[sum]",
        LAYER_NORM,  # its scale's and shift's gradients are sums over the positions
    },
    "broken_engines:float32_drops_last_term": {
        f"{TOTALS}test_reduction_within_totals_bound[sum]",
        f"{TOTALS}test_large_totals_within_bound",
        *ADVERSARIAL_SUMS,
        f"{NEAR}[sum]",
        LAYER_NORM,  # its scale's and shift's gradients are sums over the positions
    },
    "broken_engines:flips_a_bit": {
        f"{MOVES}test_reshape_moves_every_bit",
        f"{LAYERS}test_moves_of_int64_handles_move_every_bit",
        OUTPUTS,  # the stacks and images made of a product's output by reshaping it
    },
    "broken_engines:round_trips": {
        "test_training::test_a_titanic_step_makes_two_transfers_in_and_one_out"
    },
    "broken_engines:float32_claims_strict": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_reduction_within_totals_bound[sum]",
        f"{TOTALS}test_reduction_within_totals_bound[mean]",
        f"{TOTALS}test_large_totals_within_bound",
        *ADVERSARIAL_SUMS,
        *ADVERSARIAL_PRODUCTS,
        f"{NEAR}[mean]",  # NumPy's float32 mean overflows where its sum would
        f"{SQUARE}[33-33-33]",
    },
    "broken_engines:tf32_products": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_large_totals_within_bound",
        *SHORT_PRODUCTS,
        f"{NEAR}[matmul]",
        *DENSE,
        *SQUARES,
    },
    "broken_engines:bfloat16_products": {
        f"{TOTALS}test_matmul_within_totals_bound",
        f"{TOTALS}test_large_totals_within_bound",
        *SHORT_PRODUCTS,
        f"{NEAR}[matmul]",
        *DENSE,
        *SQUARES,
    },
    # the same products stated as mixed: the mixed bound holds them, so nothing fails
    "broken_engines:mixed_bfloat16_products": set(),
    "broken_engines:float32_trailing_sums": {
        # the drawn sums catch it at 1.25 times the bound, the adversarial ones at 5 times
        f"{TOTALS}test_reduction_within_totals_bound[sum]",
        *(
            f"{TOTALS}test_adversarial_sums_and_means_within_totals_bound[{n}]"
            for n in (256, 4096, 16384)
        ),
    },
    "broken_engines:stride_blind_pointwise_weight_grad": POINTWISE_STRIDES,
    "broken_engines:overwrites_its_input": {
        "test_inputs::test_operation_leaves_its_inputs_unchanged[tanh]",
        f"test_inputs::{LATER}[tanh]",  # its first call already changes it
    },
    "broken_engines:loses_the_tails": {
        f"{TAIL}[{operation}]" for operation in ("sigmoid", "exp", "softplus", "log1p")
    },
    "broken_engines:clips_without_the_root": {
        "test_training_tools::test_offered_clipping_matches_the_reference[global_clip_norm]"
    },
    "broken_engines:decays_only_the_first_slot": {
        f"{FAST}test_offered_decay_update_matches_the_reference",
        f"{VALUES}test_decay_update_follows_its_formula",
        *(
            f"{VALUES}test_fused_updates_of_parts_of_one_tensor_in_any_order[{order}]"
            for order in ("laid-out", "other", "some")
        ),
    },
    "broken_engines:float32_add_rows": {
        f"{LAYERS}test_add_rows_within_totals_bound",
        *ADVERSARIAL_ROWS,
        OUTPUTS,
    },
    "broken_engines:add_rows_in_turned_order": {
        f"{LAYERS}test_add_rows_gives_the_same_bits_every_time"
    },
    "broken_engines:stacks_paired_backwards": {
        f"{LAYERS}test_batch_matmul_within_totals_bound",
        f"{LAYERS}test_offered_batch_matmul_matches_the_reference",
        OUTPUTS,
        *(
            f"{LAYERS}test_batch_products_of_square_operands_take_each_transpose[{m}-{k}-{n}]"
            for m, k, n in ((3, 3, 3), (4, 4, 2), (2, 5, 5))
        ),
    },
    "broken_engines:tanh_erf": {
        f"{LAYERS}test_erf_within_value_tolerance",
        f"{LAYERS}test_offered_erf_matches_the_reference",
        f"{LAYERS}test_gelu_and_its_way_back_within_value_tolerance",  # GELU's reference: erf
        f"{LAYERS}test_offered_gelu_pair_matches_the_reference",  # light's own: the reference's
        OUTPUTS,
    },
    "broken_engines:gelu_forgets_its_density": {
        f"{LAYERS}test_gelu_and_its_way_back_within_value_tolerance",
        f"{LAYERS}test_offered_gelu_pair_matches_the_reference",
        OUTPUTS,
    },
    "broken_engines:layer_norm_forgets_the_spread": {LAYER_NORM},
    "broken_engines:bias_in_bfloat16": {
        f"{FAST}test_offered_matmul_bias_matches_the_reference",
        # (the other fixed cases' biases are too small beside their terms for bfloat16 to show)
        *(
            f"{FAST}test_offered_matmul_bias_matches_the_reference_on_fixed_cases[{name}]"
            for name in ("titanic", "projection")
        ),
    },
    "broken_engines:last_maximum_pair": {
        f"{LAYERS}test_maxpool2d_pair_moves_maxima_selects_the_first_and_sends_gradients_back",
        f"{LAYERS}test_offered_maxpool2d_pair_matches_the_reference_bit_for_bit",
    },
    "broken_engines:flat_take_rows": {
        f"{LAYERS}test_take_rows_with_indices_of_any_shape_moves_every_bit"
    },
    "broken_engines:integers_through_float64": {
        f"{LAYERS}test_put_and_get_of_int64_move_every_bit",
        f"{LAYERS}test_moves_of_int64_handles_move_every_bit",
    },
    "broken_engines:mean_overflows": {
        f"{TOTALS}test_totals_near_float32_s_range_within_bound[mean]"
    },
    "broken_engines:shares_its_memory": {"test_transfers::test_get_gives_memory_the_caller_owns"},
    "broken_engines:ignores_small_momentum": {
        f"{FAST}test_offered_sgd_update_matches_the_reference",
        f"{VALUES}test_sgd_update_follows_its_formula",
    },
    "broken_engines:lstm_forgets_the_forget_slope": {
        "test_recurrent::test_an_lstm_position_s_way_back_holds_its_reference_s_bound"
    },
    "broken_engines:no_identity": EVERY,
    "broken_engines:unknown_precision": EVERY,
    **{
        f"reusing_engines:{name}": {f"test_inputs::{LATER}[exp]"}
        for name in ("reuses_its_output", "changes_an_input_later")
    },
    **{
        f"quiet_engines:{name}": {f"{VALUES}test_a_nan_goes_through_every_operation_as_nan"}
        for name in ("relu_by_fmax", "sums_leave_nan_out", "maximum_by_fmax")
    },
    "reusing_engines:keeps_widened_operands": {f"{MOVES}{CHANGED}"},
    "reusing_engines:shares_zeros": {
        "test_transfers::test_zeros_are_made_on_the_engine_without_a_transfer"
    },
    "reusing_engines:stamped_identity": {HOLDS},
    "reusing_engines:claims_light": {HOLDS},
    "reusing_engines:batch_products_in_one_buffer": {
        f"{LAYERS}test_batch_matmul_within_totals_bound",
        *(
            f"{LAYERS}test_batch_products_of_square_operands_take_each_transpose[{m}-{k}-{n}]"
            for m, k, n in ((3, 3, 3), (4, 4, 2), (2, 5, 5))
        ),
        OUTPUTS,
        f"{LAYERS}test_offered_batch_matmul_matches_the_reference",
    },
}


def _totals(operation: str, precision: str) -> str:
    return f"{operation} on {{spec}} ({precision}) breaks the totals contract"


def _dense(precision: str) -> str:
    return _totals("fast matmul_bias", precision)


REASONS: dict[str, str | tuple[str, ...]] = {
    "broken_engines:float16_products": (_totals("matmul", "strict"), _dense("strict")),
    "broken_engines:float32_large_products": (_totals("matmul", "strict"), _dense("strict")),
    "broken_engines:guesses_square_transposes": (
        _totals("matmul", "strict"),
        _totals("batch_matmul", "strict"),
    ),
    "broken_engines:drops_last_term": (
        _totals("sum", "strict"),
        "layer_norm_back (the scale's gradient) on {spec} (strict) breaks the values contract",
    ),
    "broken_engines:float32_drops_last_term": (
        _totals("sum", "float32"),
        "layer_norm_back (the scale's gradient) on {spec} (float32) breaks the values contract",
    ),
    "broken_engines:flips_a_bit": "on {spec}: 1 bits differ (a move must be exact)",
    "broken_engines:round_trips": "a step puts the rows and targets (2 in) and gets the loss",
    "broken_engines:float32_claims_strict": "on {spec} (strict) breaks the totals contract",
    "broken_engines:tf32_products": (_totals("matmul", "float32"), _dense("float32")),
    "broken_engines:bfloat16_products": (_totals("matmul", "float32"), _dense("float32")),
    "broken_engines:float32_trailing_sums": _totals("sum", "strict"),
    "broken_engines:stride_blind_pointwise_weight_grad": _totals("conv2d_weight_grad", "strict"),
    "broken_engines:overwrites_its_input": "tanh on {spec} changed its input (argument 1)",
    "broken_engines:loses_the_tails": "tail on {spec} (strict) breaks the tails contract",
    "broken_engines:clips_without_the_root": "fast global_clip_norm on {spec} (strict) breaks "
    "the values contract",
    "broken_engines:decays_only_the_first_slot": "decay_update on {spec} (strict) breaks the "
    "values contract",
    "broken_engines:float32_add_rows": "on {spec} (strict) breaks the totals contract",
    "broken_engines:add_rows_in_turned_order": "add_rows run again on {spec}",
    "broken_engines:stacks_paired_backwards": "on {spec} (strict) breaks the totals contract",
    "broken_engines:tanh_erf": "on {spec} (strict) breaks the values contract",
    "broken_engines:gelu_forgets_its_density": "on {spec} (strict) breaks the values contract",
    "broken_engines:bias_in_bfloat16": _dense("strict"),
    "broken_engines:layer_norm_forgets_the_spread": "fast layer_norm_back (x's gradient) on "
    "{spec} (strict) breaks the values contract",
    "broken_engines:last_maximum_pair": "bits differ (a move must be exact)",
    "broken_engines:flat_take_rows": "take_rows of indices of any shape: shape",
    "broken_engines:integers_through_float64": "of int64 on {spec}",
    "broken_engines:mean_overflows": _totals("mean", "strict"),
    "broken_engines:shares_its_memory": "get on {spec} gave memory the engine still uses",
    "broken_engines:ignores_small_momentum": "sgd_update on {spec} (strict) breaks the values "
    "contract",
    "broken_engines:lstm_forgets_the_forget_slope": "fast lstm_cell_back (the gates' gradient) "
    "on {spec} (strict) breaks the values contract",
    "reusing_engines:reuses_its_output": "exp on {spec}: a later call changed what an earlier "
    "call handed out",
    "reusing_engines:changes_an_input_later": "exp on {spec}: a later call changed what an "
    "earlier call handed out or was handed",
    "quiet_engines:relu_by_fmax": "relu on {spec}: a NaN in gave 0.0 out",
    "quiet_engines:sums_leave_nan_out": "sum over each row on {spec}: the row of a NaN gave",
    "quiet_engines:maximum_by_fmax": "maximum on {spec}: a NaN as its first operand gave",
    "reusing_engines:keeps_widened_operands": "matmul after assign on {spec} (strict) breaks "
    "the totals contract",
    "reusing_engines:shares_zeros": "zeros (two of one shape, one assigned into) on {spec}",
    "reusing_engines:stamped_identity": "read twice",
    "reusing_engines:claims_light": "the identity names deepsharp's 'light' engine",
    "reusing_engines:batch_products_in_one_buffer": "batch_matmul on {spec}: a later call "
    "changed what an earlier call handed out",
}
"""What every check that catches a broken engine must say (`{spec}`: the engine's spec): the
fault it was built with, not some other failure on the way (one of several, where the fault
shows in more than one operation: a broken sum in LayerNorm's way back)."""

BY_THE_MACHINE: dict[str, set[str]] = {"broken_engines:float32_claims_strict": DENSE}
"""Checks a broken engine fails or passes by the luck of float32 rounding in the processor's BLAS
kernels (OpenBLAS picks them by the processor: AVX2 or AVX-512 add in other orders), either
outcome right; short float32 dense products under the strict bound."""

IDENTITY = "test_identity::test_the_engine_states_its_name_and_precision"

TARGETS = sorted(
    {
        check.partition("[")[0]
        for checks in BROKEN.values()
        if checks is not EVERY
        for check in checks
    }
    | {IDENTITY}
)
"""What the broken engines' run collects: every check meant to catch one of them."""


def _checked(spec: str) -> set[str]:
    """What a broken engine runs of `TARGETS`: those of the modules its fault is meant to show in
    (where a check too eager would fail it for a fault it does not have), and its identity; every
    target where it is meant to fail none or all of them."""
    expected = BROKEN[spec]
    if expected is EVERY or not expected:
        return set(TARGETS)
    modules = {check.partition("::")[0] for check in expected}
    return {check for check in TARGETS if check.partition("::")[0] in modules} | {IDENTITY}


ONLY = {spec: sorted(_checked(spec)) for spec in BROKEN}
"""The checks each broken engine runs, for only_checks.py (the file DEEPSHARP_CONTRACTS_ONLY
names)."""

# The broken rule breaks the rulebook of the process it runs in, so it runs alone, on the nudging
# check only: every matmul case must fail it, every other rule's case pass.
HALF_GRADIENT = "broken_engines:half_gradient_rule"
NUDGING = "test_rules::test_rule_agrees_with_nudging"
MATMUL_CASES = {"matmul", "matmul-ta", "matmul-tb", "matmul-tab"}

BEFORE = "engine_before:make"
"""An engine of the primitives as they stood before the layer operations (engine_before.py)."""

DRAWN = ["test_totals", "test_values", "test_moves"]
"""The modules whose inputs Hypothesis draws: run twice on light, their reports must agree."""

# Every run: a name -> (the engine specs, what to run, more options, more environment). Every
# run leaves Hypothesis's shrinking out (no_shrinking.py): a failure here needs no minimal
# example. The drawn checks run twice on light, with other hash seeds and from another rootdir
# (so other node ids), to show the report reproduces.
RUNS: dict[str, tuple[list[str], list[str], list[str], dict[str, str]]] = {
    "example": (["example_engine:make"], ["deepsharp.contracts"], [], {}),
    "before": ([BEFORE], ["deepsharp.contracts"], [], {}),
    "light": (
        ["light"],
        [f"deepsharp.contracts.{module}" for module in DRAWN],
        [],
        {"PYTHONHASHSEED": "1"},
    ),
    "light-again": (
        ["light"],
        [f"deepsharp.contracts.{module}" for module in DRAWN],
        [f"--rootdir={HERE}"],
        {"PYTHONHASHSEED": "2"},
    ),
    "broken": (
        list(BROKEN),
        [f"deepsharp.contracts.{check}" for check in TARGETS],
        ["-p", "only_checks"],
        {},
    ),
    "half-gradient": ([HALF_GRADIENT], [f"deepsharp.contracts.{NUDGING}"], [], {}),
}


def _run(
    specs: list[str], targets: list[str], options: list[str], more: dict[str, str], folder: Path
) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path, **more)
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
            "-p",
            "no_shrinking",
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
        self.messages: dict[str, str] = {}
        """What each failed test said (`module::test[id]` -> its failure's message)."""
        for case in ElementTree.parse(folder / "junit.xml").iter("testcase"):
            bad = case.find("failure")
            bad = case.find("error") if bad is None else bad
            module = case.get("classname", "").rsplit(".", 1)[-1]
            test = f"{module}::{case.get('name', '')}"
            (self.failed if bad is not None else self.passed).add(test)
            if bad is not None:
                self.messages[test] = bad.get("message", "")
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
    for name, (specs, targets, options, more) in RUNS.items():
        folder = tmp_path_factory.mktemp(name)
        if "only_checks" in options:
            (folder / "only.json").write_text(json.dumps(ONLY), encoding="utf-8")
            more = {**more, "DEEPSHARP_CONTRACTS_ONLY": str(folder / "only.json")}
        started[name] = (folder, _run(specs, targets, options, more, folder))
    results = {}
    for name, (folder, process) in started.items():
        output, _ = process.communicate(timeout=600)
        results[name] = Outcome(folder, output.decode(errors="replace"))
    return results


def test_an_engine_that_keeps_the_contract_passes_it(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["example"]
    failed = outcome.of("example_engine:make", outcome.failed)
    assert not failed, (
        f"the example engine should pass every check; it failed {sorted(failed)}\n"
        + outcome.output[-4000:]
    )
    assert len(outcome.passed) > 150, "the whole suite ran"
    families = outcome.report["engines"]["example_engine:make"]["families"]
    assert families["moves"]["worst"] == 0 and families["inputs"]["worst"] == 0
    assert families["totals"]["of_bound"] <= 1 and families["values"]["worst"] <= 1


def test_an_engine_written_before_the_layer_operations_passes_the_whole_contract(
    outcomes: dict[str, Outcome],
) -> None:
    """The primitives alone, as an engine written from docs/writing-an-engine.md before
    batch_matmul, add_rows, erf, the pair max-pooling and an LSTM's position had them: the core runs each as its
    reference in those primitives, and every check holds, those of the new operations too."""
    outcome = outcomes["before"]
    failed = outcome.of(BEFORE, outcome.failed)
    assert not failed, (
        f"an engine written before the layer operations should pass every check; it failed "
        f"{sorted(failed)}\n" + outcome.output[-4000:]
    )
    passed = {check.partition("[")[0] for check in outcome.of(BEFORE, outcome.passed)}
    taken_as_the_core_takes_them = {
        f"{LAYERS}test_batch_matmul_within_totals_bound",
        f"{LAYERS}test_add_rows_within_totals_bound",
        f"{LAYERS}test_adversarial_rows_within_totals_bound",
        f"{LAYERS}test_erf_within_value_tolerance",
        f"{LAYERS}test_maxpool2d_pair_moves_maxima_selects_the_first_and_sends_gradients_back",
        f"{LAYERS}test_a_products_output_meets_the_layer_operations",
        "test_recurrent::test_an_lstm_position_holds_its_reference_s_bound",
        "test_recurrent::test_an_lstm_position_s_way_back_holds_its_reference_s_bound",
    }
    assert taken_as_the_core_takes_them <= passed, sorted(taken_as_the_core_takes_them - passed)
    assert len(outcome.passed) > 150, "the whole suite ran"
    operations = outcome.report["engines"][BEFORE]["operations"]
    assert not any(name.startswith("fast ") for name in operations), "it offers no fast path"


def test_the_report_is_the_same_run_to_run(outcomes: dict[str, Outcome]) -> None:
    """The inputs are pinned (a seed of each check's own, no database), so two runs of the drawn
    checks on one engine, from other folders, measure the same worsts to the last bit."""
    first_two = ("light", "light-again")
    first = outcomes["light"].report["engines"]["light"]["operations"]
    second = outcomes["light-again"].report["engines"]["light"]["operations"]
    # (every check watches the inputs of what it calls: those counts depend on what else ran)
    drawn = {name for name, entry in second.items() if entry["family"] != "inputs"}
    assert len(drawn) > 30
    assert {name: first[name] for name in drawn} == {name: second[name] for name in drawn}
    light, again = ({test.partition("::")[2] for test in outcomes[run].passed} for run in first_two)
    assert again and again == light, "the same checks pass"


@pytest.mark.parametrize("spec", list(BROKEN))
def test_a_broken_engine_is_caught_by_the_check_meant_for_it(
    outcomes: dict[str, Outcome], spec: str
) -> None:
    outcome = outcomes["broken"]
    failed, passed = outcome.of(spec, outcome.failed), outcome.of(spec, outcome.passed)
    expected = BROKEN[spec]
    if expected is EVERY:
        assert failed and not passed, f"{spec} should fail every check it runs\n" + outcome.output
        return
    ran = failed | passed
    luck = BY_THE_MACHINE.get(spec, set())
    assert failed - luck == expected, (
        f"{spec} should fail {sorted(expected)} and pass the rest; it failed {sorted(failed)}"
        f" and passed {sorted(passed)}\n" + outcome.output[-3000:]
    )
    assert {check.partition("[")[0] for check in ran} == _checked(spec)
    if expected:  # and each for the fault it was built with
        given = REASONS[spec]
        reasons = [r.format(spec=spec) for r in ((given,) if isinstance(given, str) else given)]
        said = {test: text for test, text in outcome.messages.items() if outcome.of(spec, {test})}
        wrong = {
            test: text[:600] for test, text in said.items() if not any(r in text for r in reasons)
        }
        assert not wrong, f"{spec} failed for other reasons than {reasons!r}: {wrong}"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("broken_engines:no_identity", "broken_engines:no_identity has no identity"),
        (
            "broken_engines:unknown_precision",
            "names the precision 'fast', which is none of the precisions there are",
        ),
    ],
)
def test_an_engine_that_does_not_state_its_precision_fails_saying_so(
    outcomes: dict[str, Outcome], spec: str, says: str
) -> None:
    output = outcomes["broken"].output
    assert says in output, output[-3000:]
    assert "strict, float32, mixed_bfloat16, mixed_float16" in output


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
    assert engines["broken_engines:float16_products"]["operations"]["matmul"]["of_bound"] > 1
    # float32 added in order strays far beyond 3 units on the adversarial totals, at every size
    sizes = engines["broken_engines:float32_claims_strict"]["operations"]["sum"]["by_size"]
    assert all(sizes[size]["worst"] > 3 for size in ("n ≤ 16", "n ≤ 256", "n ≤ 4096", "n > 4096"))
    inputs = engines["broken_engines:overwrites_its_input"]["operations"]["inputs of tanh"]
    assert inputs["worst"] > 0
    decay = engines["broken_engines:decays_only_the_first_slot"]["operations"]
    assert decay["fast decay_update"]["worst"] > 1 and decay["decay_update"]["worst"] > 1
    nudged = outcomes["half-gradient"].report["engines"][HALF_GRADIENT]["operations"]
    assert nudged["nudged matmul"]["worst"] > 1 and nudged["nudged tanh"]["worst"] <= 1

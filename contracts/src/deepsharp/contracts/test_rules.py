"""Every rule of the rulebook, nudged, and its way back on the engine under test.

The cases and the nudging are `deepsharp.contracts.nudging` (the check the core's own tests
run): on the suite's float64 reference (`deepsharp.contracts.reference`), each rule's way back
for the loss sum(out * r) must agree with central differences of its float64 forward. On the
engine under test, the rule's forward and way back, from the same inputs and r rounded to
float32, must agree with the reference's within 1e-5 + 1.3e-6*|ref| + f*u*S, where S is the
same computation in float64 with every total taken over absolute values (the sum(|terms|) of
the totals inside the rule) and f the precision's totals factor (3 for strict; n + 1 for
float32, and 3u_h/u + n + 1 for mixed, with n the size of the rule's largest input or output).

A rule that chains many operations (an LSTM over a sequence: at each position a product and a
dozen operations value by value, each position reading the last) is held instead to the bound
its operations propagate: the rule forward and back on the suite's `Propagated` engine at the
engine's precision (`deepsharp.contracts.propagated`), each output within its bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from deepsharp.contracts.measure import UNIT, Contract, value_tolerance
from deepsharp.contracts.nudging import (
    CASES,
    RuleCase,
    nudged,
    projection_for,
    rule_gradients,
    sent_back,
    worst_nudge_error,
)
from deepsharp.contracts.propagated import Bounded, Propagated
from deepsharp.contracts.reference import AbsoluteTotals, Float64Engine
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine

Array = NDArray[np.float64]

CHAINS = {"lstm"}
"""Rules held to the bound their operations propagate, not to one rule's tolerance."""


def _in_float32(case: RuleCase) -> RuleCase:
    """The case with its float arrays rounded to float32: inputs every engine holds exactly."""
    inputs = [np.asarray(v, np.float32).astype(np.float64) if nudged(v) else v for v in case.inputs]
    return RuleCase(case.rule, inputs, case.attrs, case.label)


def _forward_and_back(engine: Engine, case: RuleCase, r: Array) -> tuple[Array, list[Array]]:
    """The rule's output and the gradient it sends to each nudged input for sum(out * r)."""
    inputs = tuple(Tensor.put(engine, v) if isinstance(v, np.ndarray) else v for v in case.inputs)
    out = ops.apply(ops.RULES[case.rule], inputs, **case.attrs)
    output = np.asarray(engine.get(out.handle), np.float64)
    grads = rule_gradients(engine, case, r)
    arrays = [v for v in case.inputs if nudged(v)]
    assert len(grads) == len(arrays), f"{case.id}: {len(grads)} gradients for {len(arrays)} inputs"
    checked = []
    for value, grad in zip(arrays, grads, strict=True):
        assert grad is not None, f"{case.id}: no gradient sent to an input that needs one"
        assert grad.shape == value.shape, (
            f"{case.id}: gradient of shape {grad.shape} for {value.shape}"
        )
        checked.append(grad)
    return output, checked


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_rule_agrees_with_nudging(contract: Contract, case: RuleCase) -> None:
    contract.measured(
        "nudging",
        f"nudged {case.rule}",
        worst_nudge_error(case),
        f"of the nudging tolerance 1e-7 + 1e-5·|nudged| (case {case.id})",
    )


def _propagated(precision: str, case: RuleCase, r: Array) -> list[Bounded]:
    """The rule's output and the gradient it sends to each nudged input for sum(out * r), each
    with the bound an engine of `precision` is held to, run on the `Propagated` engine."""
    bounded: Any = Propagated(precision)  # an engine of Bounded values
    out, sent = sent_back(bounded, case, r)
    return [out, *sent]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_rule_on_the_engine_matches_the_reference(
    engine: Engine, contract: Contract, case: RuleCase
) -> None:
    case = _in_float32(case)
    r = np.asarray(projection_for(Float64Engine(), case), np.float32).astype(np.float64)
    out, grads = _forward_and_back(engine, case, r)
    name = f"rule {case.rule}"
    if case.rule in CHAINS:
        expected = _propagated(contract.precision.name, case, r)
        for index, (got, bounded) in enumerate(zip([out, *grads], expected, strict=True)):
            what = "forward" if index == 0 else f"gradient to input {index - 1}"
            contract.within(
                "rules",
                name,
                got,
                bounded.value,
                bounded.bound,
                f"of the bound its operations propagate ({case.id}, {what})",
            )
        return
    ref_out, ref_grads = _forward_and_back(Float64Engine(), case, r)
    scale_out, scale_grads = _forward_and_back(AbsoluteTotals(), case, r)
    # No total inside a rule adds more terms than its largest input or output holds values.
    longest = max(np.size(v) for v in [*case.inputs, out])
    factor = contract.totals_factor(longest, product=True)
    allowed = value_tolerance(ref_out) + factor * UNIT * np.abs(scale_out)
    contract.within(
        "rules", name, out, ref_out, allowed, f"of the rule's tolerance ({case.id}, forward)"
    )
    for index, (got, ref, scale) in enumerate(zip(grads, ref_grads, scale_grads, strict=True)):
        allowed = value_tolerance(ref) + factor * UNIT * np.abs(scale)
        contract.within(
            "rules",
            name,
            got,
            ref,
            allowed,
            f"of the rule's tolerance ({case.id}, gradient to input {index})",
        )


def test_every_rule_has_a_case(contract: Contract) -> None:
    own = {
        name for name, rule in ops.RULES.items() if type(rule).__module__.startswith("deepsharp.")
    }
    missing = sorted(own - {case.rule for case in CASES})
    assert not missing, (
        f"rules without a nudging case (add them to deepsharp.contracts.nudging.CASES): {missing}"
    )

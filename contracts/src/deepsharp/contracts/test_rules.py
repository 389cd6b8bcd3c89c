"""Every rule of the rulebook, nudged.

On the float64 reference engine, each rule's way back must agree with central differences of a
float64 evaluation of its forward (loss: a random projection sum(out * r)). On the engine under
test, the rule's forward and way back, from the same float32 inputs and r, must agree with the
reference's within 1e-5 + 1.3e-6*|ref| + 3u*S, where S is the same computation in float64 with
every total taken over absolute values (the sum(|terms|) of the totals inside the rule).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deepsharp.contracts.measure import UNIT, Contract, value_tolerance
from deepsharp.contracts.rule_cases import CASES, Case
from deepsharp.core.engine import Engine
from deepsharp.core.ops import RULES, Rule, apply
from deepsharp.core.tensor import Recording, Tensor
from deepsharp.engines.light import ReferenceEngine

NUDGE = 1e-6
NUDGING_TOLERANCE = 1e-6


class _AbsoluteTotals(ReferenceEngine):
    """float64, with every total over absolute values: what S is made of."""

    def matmul(self, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
        return super().matmul(np.abs(a), np.abs(b), transpose_a, transpose_b)

    def sum(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        return super().sum(np.abs(x), axes, keepdims)

    def mean(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        return super().mean(np.abs(x), axes, keepdims)

    def conv2d(self, x: Any, w: Any, stride: int, padding: Any) -> Any:
        return super().conv2d(np.abs(x), np.abs(w), stride, padding)

    def conv2d_weight_grad(self, x: Any, gy: Any, kernel: Any, stride: int, padding: Any) -> Any:
        return super().conv2d_weight_grad(np.abs(x), np.abs(gy), kernel, stride, padding)

    def conv2d_fold(self, gy: Any, w: Any, image: Any, stride: int, padding: Any) -> Any:
        return super().conv2d_fold(np.abs(gy), np.abs(w), image, stride, padding)


def _cases(name: str) -> list[tuple[Case, np.ndarray]]:
    """The rule's cases, each with its projection r (drawn after the inputs, same seed)."""
    if name not in CASES:
        pytest.fail(
            f"rule {name!r} has no case in deepsharp.contracts.rule_cases.CASES: every rule of "
            "the rulebook must be nudged; add one"
        )
    rng = np.random.default_rng(sum(map(ord, name)))
    cases = CASES[name](rng)
    engine = ReferenceEngine()
    projected = []
    for case in cases:
        out, _ = RULES[name].forward(engine, *_handles(engine, case), **case.attrs)
        projected.append((case, rng.uniform(-1.0, 1.0, engine.shape(out)).astype(np.float32)))
    return projected


def _handles(engine: Engine, case: Case) -> list[Any]:
    return [engine.put(x) if isinstance(x, np.ndarray) else x for x in case.inputs]


def _forward_and_back(
    engine: Engine, rule: Rule, case: Case, r: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """The rule's output and the gradient it sends to each tensor input for sum(out * r)."""
    inputs = [Tensor.put(engine, x) if isinstance(x, np.ndarray) else x for x in case.inputs]
    with Recording([x for x in inputs if isinstance(x, Tensor)]):
        out = apply(rule, tuple(inputs), **case.attrs)
        assert out.node is not None, f"{rule.name}: nothing was recorded"
        sent = rule.backward(engine, out.node, engine.put(r))
        output = engine.get(out.handle)
        grads = [
            None if part is None else np.asarray(engine.get(part), np.float64) for part in sent
        ]
    assert len(grads) == len(inputs), (
        f"{rule.name}: {len(grads)} gradients for {len(inputs)} inputs"
    )
    for x, grad in zip(inputs, grads, strict=True):
        if isinstance(x, Tensor):
            assert grad is not None, f"{rule.name}: no gradient sent to an input that needs one"
            assert grad.shape == x.shape, (
                f"{rule.name}: gradient of shape {grad.shape} for {x.shape}"
            )
    return np.asarray(output, np.float64), grads


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_agrees_with_nudging(contract: Contract, name: str) -> None:
    engine, rule = ReferenceEngine(), RULES[name]
    for case, r in _cases(name):
        _, grads = _forward_and_back(engine, rule, case, r)
        for index, x in enumerate(case.inputs):
            if not isinstance(x, np.ndarray):
                continue
            numeric = np.zeros(x.shape)
            base = x.astype(np.float64)
            for place in np.ndindex(*x.shape):
                step = NUDGE * max(1.0, abs(base[place]))
                losses = []
                for sign in (1.0, -1.0):
                    nudged = list(case.inputs)
                    moved = base.copy()
                    moved[place] += sign * step
                    nudged[index] = moved
                    out, _ = rule.forward(
                        engine, *_handles(engine, Case(tuple(nudged))), **case.attrs
                    )
                    losses.append(float(np.sum(np.asarray(out) * r)))
                numeric[place] = (losses[0] - losses[1]) / (2.0 * step)
            allowed = np.full(x.shape, NUDGING_TOLERANCE * (1.0 + np.abs(numeric).max(initial=0.0)))
            analytic = grads[index]
            assert analytic is not None
            contract.within(
                "nudging",
                f"nudged {name}",
                analytic,
                numeric,
                allowed,
                f"of the nudging tolerance (input {index}, attrs {case.attrs})",
            )


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_on_the_engine_matches_the_reference(
    engine: Engine, contract: Contract, name: str
) -> None:
    rule = RULES[name]
    for case, r in _cases(name):
        out, grads = _forward_and_back(engine, rule, case, r)
        ref_out, ref_grads = _forward_and_back(ReferenceEngine(), rule, case, r)
        scale_out, scale_grads = _forward_and_back(_AbsoluteTotals(), rule, case, r)
        allowed = value_tolerance(ref_out) + 3 * UNIT * np.abs(scale_out)
        contract.within(
            "rules", f"rule {name}", out, ref_out, allowed, "of the rule's tolerance (forward)"
        )
        for index, (got, ref, scale) in enumerate(zip(grads, ref_grads, scale_grads, strict=True)):
            if ref is None:
                continue
            assert got is not None and scale is not None
            allowed = value_tolerance(ref) + 3 * UNIT * np.abs(scale)
            contract.within(
                "rules",
                f"rule {name}",
                got,
                ref,
                allowed,
                f"of the rule's tolerance (gradient to input {index})",
            )


def test_every_rule_has_a_case(contract: Contract) -> None:
    missing = sorted(set(RULES) - set(CASES))
    assert not missing, f"rules without a nudging case (add them to rule_cases.CASES): {missing}"

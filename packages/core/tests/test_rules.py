"""The rulebook: every rule sends back what nudging its inputs says it should."""

from __future__ import annotations

from typing import Any

import pytest

from deepsharp.core import ops
from deepsharp.core.engine import Engine
from deepsharp.core.gradcheck import CASES, RuleCase, worst_nudge_error
from deepsharp.core.tensor import Node


def test_every_rule_has_a_nudging_case() -> None:
    assert set(ops.RULES) == {case.rule for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_the_rule_agrees_with_nudging(case: RuleCase) -> None:
    assert worst_nudge_error(case) <= 1.0


class HalfTanh(ops.Rule):
    """A deliberately wrong rule: tanh's way back, halved."""

    name = "tanh"

    def forward(self, engine: Engine, x: Any) -> tuple[Any, Any]:
        return engine.tanh(x), None

    def backward(self, engine: Engine, node: Node, grad: Any) -> tuple[Any, ...]:
        out = node.saved[0]
        return (engine.mul(engine.mul(grad, engine.sub(1.0, engine.mul(out, out))), 0.5),)


class ForgetsTranspose(ops.Rule):
    """A deliberately wrong rule: matmul's way back that ignores transpose_b."""

    name = "matmul"

    def forward(self, engine: Engine, a: Any, b: Any, **attrs: Any) -> tuple[Any, Any]:
        return engine.matmul(
            a, b, attrs.get("transpose_a", False), attrs.get("transpose_b", False)
        ), None

    def backward(self, engine: Engine, node: Node, grad: Any) -> tuple[Any, ...]:
        a, b = node.inputs
        return (
            engine.matmul(grad, b.handle, False, False),  # type: ignore[union-attr]
            engine.matmul(a.handle, grad, True, False),  # type: ignore[union-attr]
        )


@pytest.mark.parametrize(
    ("wrong", "case_id"), [(HalfTanh(), "tanh"), (ForgetsTranspose(), "matmul-tb")]
)
def test_a_planted_wrong_rule_is_caught(
    monkeypatch: pytest.MonkeyPatch, wrong: ops.Rule, case_id: str
) -> None:
    case = next(case for case in CASES if case.id == case_id)
    assert worst_nudge_error(case) <= 1.0
    monkeypatch.setitem(ops.RULES, wrong.name, wrong)
    assert worst_nudge_error(case) > 1.0

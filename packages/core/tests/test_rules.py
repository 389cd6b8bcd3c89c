"""The rulebook: every rule sends back what nudging its inputs says it should."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest

from deepsharp.contracts.nudging import CASES, RuleCase, worst_nudge_error
from deepsharp.contracts.reference import Float64Engine
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Node, Recording, Tensor
from deepsharp.core.engine import Engine
from deepsharp.engines.light import LightEngine


def test_every_rule_has_a_nudging_case() -> None:
    own = {
        name for name, rule in ops.RULES.items() if type(rule).__module__.startswith("deepsharp.")
    }
    assert own == {case.rule for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_the_rule_agrees_with_nudging(case: RuleCase) -> None:
    """On the contract suite's float64 reference: the core names no engine for its rules."""
    assert worst_nudge_error(case, Float64Engine) <= 1.0


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
    assert worst_nudge_error(case, Float64Engine) <= 1.0
    monkeypatch.setitem(ops.RULES, wrong.name, wrong)
    assert worst_nudge_error(case, Float64Engine) > 1.0


def test_a_node_keeps_only_what_its_way_back_reads() -> None:
    """A convolution's output, once ReLU has read it, is held by nothing on the tape: ReLU's way
    back reads its own output, the convolution's reads its inputs. Its memory goes at once."""
    engine = LightEngine()
    rng = np.random.default_rng(0)
    x = Tensor.put(engine, rng.standard_normal((2, 1, 6, 6)).astype(np.float32))
    w = Tensor.put(engine, rng.standard_normal((3, 1, 3, 3)).astype(np.float32))
    with Recording([w]) as recording:
        convolved = ops.conv2d(x, w)
        gone = weakref.ref(convolved.handle)
        loss = ops.sum(ops.relu(convolved))
        del convolved
        assert gone() is None
        (grad,) = recording.gradients(loss, [w])

    # the same gradient as working it out here: Σ over images and places of x · [conv > 0]
    xs, ws = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(xs, (3, 3), axis=(2, 3))[:, 0]
    positive = np.einsum("nhwij,fij->nfhw", windows, ws[:, 0]) > 0
    expected = np.einsum("nhwij,nfhw->fij", windows, positive)[:, None]
    np.testing.assert_allclose(engine.get(grad), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "rule",
    [
        *(ops.neg, ops.exp, ops.log, ops.log1p, ops.sqrt, ops.tanh, ops.sigmoid, ops.relu),
        *(ops.abs, ops.log_softmax, ops.maxpool2d),
    ],
    ids=lambda rule: rule.__name__,
)
def test_a_rule_goes_back_the_same_from_a_made_input_as_from_a_leaf(rule: Any) -> None:
    """Applied to a tensor made in the same pass, a rule that keeps no inputs keeps a stand-in
    without values; its gradient must be the one it sends back from a leaf, kept whole."""
    engine = LightEngine()
    rng = np.random.default_rng(2)
    x = Tensor.put(engine, rng.random((2, 3, 4, 4)).astype(np.float32) + 0.5)

    def gradient(made: bool) -> np.ndarray:
        with Recording([x]) as recording:
            value = ops.mul(x, 1.0) if made else x
            loss = ops.sum(ops.mul(rule(value), rule(value)))  # a gradient that is not all ones
            (grad,) = recording.gradients(loss, [x])
        return np.asarray(engine.get(grad))

    assert gradient(made=True).tobytes() == gradient(made=False).tobytes()

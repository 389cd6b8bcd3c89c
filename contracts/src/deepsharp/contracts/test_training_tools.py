"""The training tools: the losses, whole, and gradient clipping's fast paths.

Losses (`deepsharp.contracts.losses`): every loss in every setting it takes (weighted rows,
pos_weight, label smoothing, Huber's delta, probabilities), its gradient towards the outputs
nudged on the suite's float64 reference; and on the engine under test, its value and gradient
from the same float32 inputs held to the reference's within the loss's tolerance — a loss is a
chain of a few value-by-value operations around a total or two: LINKS·(1e-5 + 1.3e-6·|ref|) +
f·u·S, S the same loss taken with every total over absolute values, f the precision's totals
factor.

Clipping (`clip_norm`, `global_clip_norm` in `deepsharp.core.engine.fused`): an engine's own,
where it offers one, against the core's reference on the float64 engine from the same values:
each clipped gradient within 1e-5 + 1.3e-6·|ref| + (f + 4)·u·|ref| — the squares' total taken
at the engine's precision (f for its n terms), its root, the factor and the product adding a
rounding each. An engine that offers neither passes with the checks skipped: the reference
then runs in its primitives, which the other checks hold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepsharp.contracts.data import draw, pinned, seeds
from deepsharp.contracts.losses import LOSS_CASES, LossCase, worst_loss_nudge_error
from deepsharp.contracts.measure import UNIT, Contract, value_tolerance
from deepsharp.contracts.reference import AbsoluteTotals, Float64Engine
from deepsharp.contracts.test_values import slot_shapes
from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine, fused

CHECKED = {"clip_norm", "global_clip_norm"}
"""The fast paths this module holds (test_fast_paths holds the others)."""

LINKS = 8
"""The value-by-value operations a loss chains, at most (BinaryCrossEntropy with pos_weight
from probabilities: clip, log, log, sub, softplus's four, the weighting)."""


@pytest.mark.parametrize("case", LOSS_CASES, ids=lambda case: case.id)
def test_the_loss_agrees_with_nudging(contract: Contract, case: LossCase) -> None:
    contract.measured(
        "nudging",
        f"nudged loss {case.loss!r}",
        worst_loss_nudge_error(case),
        f"of the nudging tolerance 1e-7 + 1e-5·|nudged| (case {case.id})",
    )


def _in_float32(case: LossCase) -> LossCase:
    """The case with its outputs and weights rounded to float32: inputs every engine holds."""

    def rounded(value: Any) -> Any:
        return None if value is None else np.asarray(value, np.float32).astype(np.float64)

    targets = case.targets if case.targets.dtype.kind in "iub" else rounded(case.targets)
    return LossCase(case.loss, rounded(case.outputs), targets, rounded(case.weights), case.label)


def _value_and_gradient(engine: Engine, case: LossCase) -> tuple[np.ndarray, np.ndarray]:
    out = Tensor.put(engine, case.outputs)
    targets = Tensor.put(engine, case.targets)
    weights = None if case.weights is None else Tensor.put(engine, case.weights)
    with Recording([out]) as recording:
        value = (
            case.loss.value(out, targets)
            if weights is None
            else case.loss.value(out, targets, weights)
        )
        (gradient,) = recording.gradients(value, [out])
    return (
        np.asarray(engine.get(value.handle), np.float64),
        np.asarray(engine.get(gradient), np.float64),
    )


@pytest.mark.parametrize("case", LOSS_CASES, ids=lambda case: case.id)
def test_the_loss_on_the_engine_matches_the_reference(
    engine: Engine, contract: Contract, case: LossCase
) -> None:
    case = _in_float32(case)
    value, gradient = _value_and_gradient(engine, case)
    ref_value, ref_gradient = _value_and_gradient(Float64Engine(), case)
    scale_value, scale_gradient = _value_and_gradient(AbsoluteTotals(), case)
    factor = contract.totals_factor(case.outputs.size, product=False)
    name = f"loss {case.loss!r}"
    for what, got, ref, scale in (
        ("value", value, ref_value, scale_value),
        ("gradient", gradient, ref_gradient, scale_gradient),
    ):
        allowed = LINKS * value_tolerance(ref) + factor * UNIT * np.abs(scale)
        contract.within(
            "rules", name, got, ref, allowed, f"of the loss's tolerance ({case.id}, {what})"
        )


def _own(engine: Engine, name: str) -> Any:
    method = getattr(engine, name, None)
    if not callable(method):
        pytest.skip(f"the engine offers no {name} of its own: the core's reference runs")
    return method


def check_clipping(
    engine: Engine, contract: Contract, name: str, grads: list[np.ndarray], clip: float
) -> None:
    """The engine's own clipping against the reference on the float64 engine, and the
    gradients handed to it left as they were."""
    handles = [engine.put(g) for g in grads]
    got = _own(engine, name)(handles, clip_norm=clip)
    f64 = Float64Engine()
    expected = fused.FAST_PATHS[name](f64, [f64.put(g) for g in grads], clip_norm=clip)
    assert len(got) == len(grads), f"{name} gave {len(got)} gradients for {len(grads)}"
    for given_grad, handle in zip(grads, handles, strict=True):
        contract.moves(
            f"fast {name}: the gradients given", engine.get(handle), given_grad, family="inputs"
        )
    terms = sum(g.size for g in grads) if name == "global_clip_norm" else None
    for grad, out, ref in zip(grads, got, expected, strict=True):
        reference = np.asarray(f64.get(ref), np.float64)
        count = terms if terms is not None else grad.size
        factor = contract.totals_factor(max(count, 1), product=False) + 4
        allowed = value_tolerance(reference) + factor * UNIT * np.abs(reference)
        contract.within(
            "values",
            f"fast {name}",
            np.asarray(engine.get(out)),
            reference,
            allowed,
            "of the tolerance (with the squares' total)",
        )


@pytest.mark.parametrize("name", sorted(CHECKED))
@pinned
@given(shapes=slot_shapes, seed=seeds, clip=st.sampled_from([1e-3, 0.5, 1.0, 7.0, 1e6]))
def test_offered_clipping_matches_the_reference(
    engine: Engine,
    contract: Contract,
    name: str,
    shapes: list[tuple[int, ...]],
    seed: int,
    clip: float,
) -> None:
    _own(engine, name)  # skipped (before any example is drawn) where the engine offers none
    grads = [draw(seed + i, shape, low=-4, high=2) for i, shape in enumerate(shapes)]
    check_clipping(engine, contract, name, grads, clip)


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_offered_clipping_leaves_gradients_within_the_norm_as_they_are(
    engine: Engine, contract: Contract, name: str
) -> None:
    """Within the norm the factor is c / c: exactly 1, the gradients' own bits."""
    grads = [np.array([[0.5, -0.25], [0.125, 0.0]], np.float32), np.array([0.75], np.float32)]
    handles = [engine.put(g) for g in grads]
    got = _own(engine, name)(handles, clip_norm=math.sqrt(2.0))
    for out, grad in zip(got, grads, strict=True):
        contract.moves(f"fast {name} (within the norm)", np.asarray(engine.get(out)), grad)

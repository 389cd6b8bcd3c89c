"""Checking the losses whole: each loss's value and its gradient towards the network's outputs,
nudged, with and without rows' weights, for every setting a loss takes (pos_weight, label
smoothing, delta, probabilities instead of logits).

A loss is written in the rulebook's operations, each rule nudge-checked on its own
(`deepsharp.contracts.nudging`); here the composition is checked too: each output value is
nudged up and down on a float64 engine (the suite's reference unless another is handed in),
and the change in the loss compared with the gradient the recording sends back. The same cases
serve the contract suite, which also holds each loss's value and gradient on an engine to the
reference's (`test_training_tools`), and the core's tests of its losses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.contracts.reference import Float64Engine
from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine
from deepsharp.core.nn.losses import (
    BinaryCrossEntropy,
    CrossEntropy,
    Huber,
    Loss,
    MeanAbsoluteError,
    MeanSquaredError,
)

__all__ = ["LOSS_CASES", "LossCase", "loss_and_gradient", "worst_loss_nudge_error"]

Array = NDArray[Any]


@dataclass
class LossCase:
    """A loss, a batch's outputs (nudged), its targets (as the loss takes them) and the rows'
    weights (None: none)."""

    loss: Loss
    outputs: Array
    targets: Array
    weights: Array | None
    label: str

    @property
    def id(self) -> str:
        return f"{self.loss.kind}-{self.label}"


def _cases() -> list[LossCase]:
    rng = np.random.default_rng(20261205)
    rows = 6

    def logits(width: int) -> Array:
        signed: Array = rng.uniform(0.3, 3.0, (rows, width)) * rng.choice(
            [-1.0, 1.0], (rows, width)
        )
        return signed

    def weights() -> Array:
        drawn: Array = rng.uniform(0.0, 3.0, rows)
        drawn[1] = 0.0  # a row that counts for nothing
        return drawn

    bits = (rng.random((rows, 1)) > 0.5).astype(np.float64)
    bits[:2] = [[0.0], [1.0]]
    two = (rng.random((rows, 2)) > 0.5).astype(np.float64)
    classes = np.array([0, 3, 2, 2, 1, 0], np.int64)
    numbers = rng.standard_normal((rows, 2))
    # Away from the kinks: |output - target| from 0.2, and from Huber's delta by 0.15 or more.
    apart = rng.uniform(0.2, 0.85, (rows, 2)) * rng.choice([-1.0, 1.0], (rows, 2))
    apart[::2] *= 2.5  # beyond a delta of 1 (at least 0.5 · 2.5 = 1.25 away): the linear part
    probabilities = rng.uniform(0.05, 0.95, (rows, 1))
    softmaxed = np.exp(logits(4))
    softmaxed /= softmaxed.sum(axis=1, keepdims=True)
    return [
        LossCase(BinaryCrossEntropy(), logits(1), bits, None, "plain"),
        LossCase(BinaryCrossEntropy(), logits(1), bits, weights(), "weighted"),
        LossCase(BinaryCrossEntropy(pos_weight=3.0), logits(1), bits, None, "pos-weight"),
        LossCase(BinaryCrossEntropy(label_smoothing=0.1), logits(1), bits, weights(), "smoothed"),
        LossCase(
            BinaryCrossEntropy(from_logits=False, pos_weight=0.5, label_smoothing=0.2),
            probabilities,
            bits,
            weights(),
            "probabilities",
        ),
        LossCase(BinaryCrossEntropy(pos_weight=2.0), logits(2), two, weights(), "two-outputs"),
        LossCase(CrossEntropy(), logits(4), classes, None, "plain"),
        LossCase(CrossEntropy(), logits(4), classes, weights(), "weighted"),
        LossCase(CrossEntropy(label_smoothing=0.1), logits(4), classes, weights(), "smoothed"),
        LossCase(
            CrossEntropy(from_logits=False, label_smoothing=0.3),
            softmaxed,
            classes,
            None,
            "probabilities",
        ),
        LossCase(MeanSquaredError(), numbers + apart, numbers, weights(), "weighted"),
        LossCase(MeanAbsoluteError(), numbers + apart, numbers, None, "plain"),
        LossCase(MeanAbsoluteError(), numbers + apart, numbers, weights(), "weighted"),
        LossCase(Huber(), numbers + apart, numbers, None, "plain"),
        LossCase(Huber(delta=0.4), numbers + apart * 0.5, numbers, weights(), "weighted"),
    ]


LOSS_CASES: list[LossCase] = _cases()


def loss_and_gradient(
    engine: Engine, case: LossCase, outputs: Array | None = None
) -> tuple[float, Array]:
    """The loss of the case (or of `outputs` in place of its own) on `engine`, and its gradient
    towards the outputs, as the recording sends it back."""
    given = case.outputs if outputs is None else outputs
    out = Tensor.put(engine, np.asarray(given, np.float64))
    targets = Tensor.put(engine, case.targets)
    weights = None if case.weights is None else Tensor.put(engine, case.weights)
    with Recording([out]) as recording:
        if weights is None:
            value = case.loss.value(out, targets)
        else:
            value = case.loss.value(out, targets, weights)
        (gradient,) = recording.gradients(value, [out])
    return (
        float(np.asarray(engine.get(value.handle), np.float64)),
        np.asarray(engine.get(gradient), np.float64),
    )


def worst_loss_nudge_error(
    case: LossCase, engine_factory: Callable[[], Engine] = Float64Engine, step: float = 1e-6
) -> float:
    """The largest |recorded - nudged| / (1e-7 + 1e-5·|nudged|) over every output value, on a
    float64 engine made by `engine_factory`: at most 1 for a right loss."""
    engine = engine_factory()
    _, recorded = loss_and_gradient(engine, case)
    nudged = np.zeros_like(recorded)
    for place in np.ndindex(case.outputs.shape):
        moved = case.outputs.astype(np.float64).copy()
        moved[place] += step
        up, _ = loss_and_gradient(engine, case, moved)
        moved[place] -= 2 * step
        down, _ = loss_and_gradient(engine, case, moved)
        nudged[place] = (up - down) / (2 * step)
    if recorded.shape != nudged.shape:
        return float("inf")
    return float(np.max(np.abs(recorded - nudged) / (1e-7 + 1e-5 * np.abs(nudged))))

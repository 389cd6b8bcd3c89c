"""Measuring a part of the rows: its loss, its accuracy (for losses of classes) and the metrics
asked for, batch by batch — a run's validation rows each epoch and its test rows at its end
(`deepsharp.core.training.loop`), and the rows handed to `TrainedNetwork.evaluate`.

Each batch's mean loss counts its rows (the part's loss is the mean over every row); the metrics
are computed once, from every row's prediction and target (`measure`); in a data-parallel run
the sums and the predictions are every process's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.nn.losses import Loss
from deepsharp.core.training.distribution import Distribution, OneProcess, Sums
from deepsharp.core.training.metrics import measure

__all__ = ["Measured", "measured_part", "measures_of"]

Measured = tuple[float, NDArray[Any], NDArray[Any] | None, NDArray[Any]]
"""One batch measured: its mean loss, its predictions (the link applied), the positions its
loss counts (`Loss.counted`: a padding mask, or None), its targets."""


def measured_part(
    batches: Iterable[Measured],
    loss: Loss,
    metrics: Sequence[str],
    outputs: int,
    distribution: Distribution | None = None,
) -> tuple[Sums, dict[str, float]]:
    """The sums of a part's batches (the loss over its rows, the rows predicted right) and the
    metrics of its predictions, every process's where a `distribution` spreads the run."""
    distribution = OneProcess() if distribution is None else distribution
    sums = Sums()
    predictions: list[NDArray[Any]] = []
    targets: list[NDArray[Any]] = []
    for value, predicted, counted, batch_targets in batches:
        rows = len(predicted)
        if counted is not None:  # a class a position: each position counted is a row
            predicted, batch_targets = _counted(predicted, batch_targets, counted)
            # the loss's mean over every place (padding weighing 0) as the mean over those
            # counted, so that the part's loss is the mean over its positions counted
            value = value * counted.size / len(predicted) if len(predicted) else 0.0
        right = (
            float(loss.correct(predicted, batch_targets).sum()) if loss.measures_accuracy else 0.0
        )
        sums.add(value, rows, right, len(predicted))
        if metrics:  # a feed's targets are as the loss takes them
            predictions.append(predicted)
            targets.append(batch_targets)
    figures: dict[str, float] = {}
    if metrics:
        assert loss.task is not None  # check_metrics_fit refused a loss of no task
        none = (0,) if loss.task == "classes" else (0, outputs)  # a process left no rows
        every = distribution.gather(
            [
                np.concatenate(predictions) if predictions else np.zeros((0, outputs), np.float32),
                np.concatenate(targets) if targets else np.zeros(none, np.float32),
            ]
        )
        figures = measure(metrics, loss.task, every[0], every[1])
    return distribution.combine(sums), figures


def _counted(
    predicted: NDArray[Any], targets: NDArray[Any], counted: NDArray[Any]
) -> tuple[NDArray[Any], NDArray[Any]]:
    """A batch of a class at each position as rows of one position each, the positions its
    loss counts alone (its padding left out, as the loss leaves it: Keras's masked metrics)."""
    rows, positions = counted.shape
    keep = counted.reshape(-1) > 0.5
    flat = np.asarray(targets).reshape(rows * positions)
    return predicted.reshape(rows * positions, -1)[keep], flat[keep]


def measures_of(loss: Loss, sums: Sums, figures: dict[str, float]) -> dict[str, float]:
    """What a report says of measured rows: the loss, the accuracy (for losses that measure
    it), then each metric."""
    measures = {"loss": sums.mean_loss}
    if loss.measures_accuracy:
        measures["accuracy"] = sums.accuracy
    measures.update(figures)
    return measures

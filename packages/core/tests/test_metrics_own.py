"""A metric of one's own, registered by name: measured, monitored, checkpointed and evaluated as
deepsharp's own are (trial EX4: FitOptions(metrics=...) took deepsharp's names alone)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    ConfigurationError,
    CrossEntropy,
    Dense,
    FitOptions,
    Metric,
    Network,
    Relu,
    fit,
    register_metric,
)
from deepsharp.core.training.metrics import METRICS


def balanced_error(predictions: Any, targets: Any, task: str) -> float:
    """The mean over the classes present of the share of their rows predicted wrong."""
    predicted, true = predictions.argmax(1), targets.reshape(-1)
    return float(np.mean([np.mean(predicted[true == c] != c) for c in np.unique(true)]))


OWN = Metric("balanced_error", ("classes",), balanced_error, lower_is_better=True)


@pytest.fixture
def registered() -> Iterator[Metric]:
    register_metric(OWN)
    try:
        yield OWN
    finally:
        METRICS.pop(OWN.name, None)


def _rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)


def _fit(options: FitOptions, **kw: Any) -> Any:
    network = Network([Dense(16), Relu(), Dense(3)])
    return fit(None, _rows(), network, CrossEntropy(), Adam(0.01), options, **kw)


def test_a_registered_metric_is_measured_monitored_and_evaluated(registered: Metric) -> None:
    run = _fit(FitOptions(seed=0, epochs=4, metrics=("accuracy", "balanced_error"),
                          monitor="balanced_error"))  # fmt: skip
    history = [record.metrics["balanced_error"] for record in run.report.history]
    assert run.report.best_epoch == 1 + int(np.argmin(history))  # less is better
    assert "balanced_error" in str(run.report) and "balanced_error" in run.report.measures
    x, y = _rows()
    predictions = run.trained.predict(x)
    evaluated = run.trained.evaluate((x, y), metrics=("balanced_error",))
    assert evaluated["balanced_error"] == pytest.approx(balanced_error(predictions, y, "classes"))


def test_a_run_with_a_registered_metric_resumes_bit_for_bit(
    registered: Metric, tmp_path: Path
) -> None:
    options = {"seed": 0, "metrics": ("balanced_error",)}
    whole = _fit(FitOptions(epochs=4, **options))
    _fit(FitOptions(epochs=2, checkpoint_dir=tmp_path, **options))
    resumed = _fit(FitOptions(epochs=4, checkpoint_dir=tmp_path, **options), resume_from=tmp_path)
    assert [r.metrics for r in resumed.report.history] == [r.metrics for r in whole.report.history]


def test_an_unknown_name_says_how_to_register_one_and_a_taken_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"register_metric\(Metric\(\.\.\.\)\)"):
        FitOptions(seed=0, metrics=("balanced_error",))
    with pytest.raises(ValueError, match="'auc' is deepsharp's own metric"):
        register_metric(Metric("auc", ("classes",), balanced_error))
    with pytest.raises(ValueError, match="tasks are some of"):
        register_metric(Metric("mine", ("ranking",), balanced_error))
    with pytest.raises(ValueError, match="a word of letters"):
        register_metric(Metric("my metric", ("classes",), balanced_error))
    assert "mine" not in METRICS and "my metric" not in METRICS


def test_a_registered_metric_that_fails_is_named(registered: Metric) -> None:
    def broken(predictions: Any, targets: Any, task: str) -> float:
        raise ZeroDivisionError("no rows of class 2")

    register_metric(Metric("broken", ("classes",), broken))
    try:
        with pytest.raises(ConfigurationError, match=r"the metric 'broken' \(registered\) failed"):
            _fit(FitOptions(seed=0, epochs=1, metrics=("broken",)))
    finally:
        METRICS.pop("broken", None)

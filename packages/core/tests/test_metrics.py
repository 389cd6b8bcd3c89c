"""Metrics: each computed as scikit-learn computes it (checked on random cases), taken on the
validation rows each epoch (the history) and on the test rows (the measures), shown in the
report's text and plot; names that are not metrics, or metrics that do not fit the loss, are
refused saying what fits."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    GRU,
    Adam,
    BinaryCrossEntropy,
    ConfigurationError,
    CrossEntropy,
    Dense,
    Embedding,
    FitOptions,
    Huber,
    MeanAbsoluteError,
    MeanSquaredError,
    Network,
    Relu,
    Trainer,
    fit,
)
from deepsharp.core.training.metrics import BUILT_IN, METRICS, measure

sklearn = pytest.importorskip("sklearn.metrics")

CASES = range(12)


def _binary(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(5, 60))
    targets = (rng.random((rows, 1)) < rng.uniform(0.2, 0.8)).astype(np.float32)
    targets[0], targets[1] = 0.0, 1.0  # both classes
    scores = rng.random((rows, 1))
    if seed % 3 == 0:  # ties among the scores
        scores = np.round(scores * 4) / 4
    return scores.astype(np.float32), targets


def _classes(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + seed)
    rows, classes = int(rng.integers(8, 80)), int(rng.integers(3, 6))
    targets = rng.integers(0, classes, rows)
    targets[:classes] = np.arange(classes)  # every class held (as scikit-learn's AUC needs)
    logits = rng.standard_normal((rows, classes)) * 2
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return probabilities.astype(np.float32), targets


def _regression(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(200 + seed)
    rows, outputs = int(rng.integers(3, 50)), int(rng.integers(1, 4))
    targets = rng.standard_normal((rows, outputs)).astype(np.float32)
    noise = rng.standard_normal((rows, outputs)) * rng.uniform(0.1, 2)
    return (targets + noise).astype(np.float32), targets


def _ours(name: str, task: str, predictions: np.ndarray, targets: np.ndarray) -> float:
    return measure([name], task, predictions, targets)[name]


@pytest.mark.parametrize("seed", CASES)
def test_binary_metrics_are_scikit_learn_s(seed: int) -> None:
    scores, targets = _binary(seed)
    true, predicted = targets[:, 0].astype(int), (scores[:, 0] >= 0.5).astype(int)
    expected = {
        "accuracy": sklearn.accuracy_score(true, predicted),
        "auc": sklearn.roc_auc_score(true, scores[:, 0]),
        "precision": sklearn.precision_score(true, predicted, zero_division=0),
        "recall": sklearn.recall_score(true, predicted, zero_division=0),
        "f1": sklearn.f1_score(true, predicted, zero_division=0),
        "precision_macro": sklearn.precision_score(
            true, predicted, average="macro", zero_division=0
        ),
        "recall_macro": sklearn.recall_score(true, predicted, average="macro", zero_division=0),
        "f1_macro": sklearn.f1_score(true, predicted, average="macro", zero_division=0),
    }
    for name, value in expected.items():
        assert _ours(name, "binary", scores, targets) == pytest.approx(value, abs=1e-12), name


@pytest.mark.parametrize("seed", CASES)
def test_class_metrics_are_scikit_learn_s(seed: int) -> None:
    probabilities, targets = _classes(seed)
    predicted = probabilities.argmax(axis=1)
    expected = {
        "accuracy": sklearn.accuracy_score(targets, predicted),
        "auc": sklearn.roc_auc_score(
            targets, probabilities.astype(np.float64), multi_class="ovr", average="macro"
        ),
    }
    for name in ("precision", "recall", "f1"):
        score = getattr(sklearn, f"{name}_score")
        expected[name] = expected[f"{name}_macro"] = score(
            targets, predicted, average="macro", zero_division=0
        )
    for name, value in expected.items():
        assert _ours(name, "classes", probabilities, targets) == pytest.approx(value, abs=1e-12), (
            name
        )


@pytest.mark.parametrize("seed", CASES)
def test_regression_metrics_are_scikit_learn_s(seed: int) -> None:
    predictions, targets = _regression(seed)
    if seed == 0:  # a constant output: R² of 0 (scikit-learn's force_finite)
        targets[:, 0] = 1.5
    wide = (
        targets.astype(np.float64),
        predictions.astype(np.float64),
    )  # scikit-learn keeps float32
    expected = {
        "mae": sklearn.mean_absolute_error(*wide),
        "mse": sklearn.mean_squared_error(*wide),
        "rmse": sklearn.root_mean_squared_error(*wide),
        "r2": sklearn.r2_score(*wide),
    }
    for name, value in expected.items():
        ours = _ours(name, "regression", predictions, targets)
        assert ours == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_r2_of_one_row_is_nan_as_scikit_learn_s() -> None:
    """Failed before (trial AB): R² of one row was 0.0, which reads as a score; scikit-learn's
    r2_score gives NaN (it is not defined for fewer than two rows)."""
    one = (np.array([[2.5]], np.float32), np.array([[3.0]], np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's UndefinedMetricWarning
        assert np.isnan(sklearn.r2_score(one[1], one[0]))
    assert np.isnan(_ours("r2", "regression", *one))
    assert _ours("mae", "regression", *one) == 0.5  # the others are defined on one row


def test_auc_of_rows_of_one_class_is_nan() -> None:
    scores, targets = np.array([[0.2], [0.7]], np.float32), np.zeros((2, 1), np.float32)
    assert np.isnan(_ours("auc", "binary", scores, targets))


def test_metrics_of_predictions_holding_a_nan_are_nan() -> None:
    """Failed before (trial BK): one NaN prediction of four gave an AUC of 1.0 and an accuracy
    of 0.75 (the NaN counted as class 0), where scikit-learn refuses the predictions."""
    scores = np.array([[0.2], [np.nan], [0.7], [0.9]], np.float32)
    targets = np.array([[0], [0], [1], [1]], np.float32)
    got = measure(["auc", "accuracy", "f1"], "binary", scores, targets)
    assert all(np.isnan(value) for value in got.values()), got


def _classification(rows: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(21)
    x = rng.standard_normal((rows, 5)).astype(np.float32)
    y = np.digitize(x[:, 0] + 0.5 * x[:, 1], [-0.5, 0.5])
    return x, y


def _options(metrics: Any, **extra: Any) -> FitOptions:
    return FitOptions(seed=2, epochs=3, batch_size=32, progress=False, metrics=metrics, **extra)


def test_a_run_takes_its_metrics_on_validation_each_epoch_and_on_the_test_rows(
    tmp_path: Path,
) -> None:
    """Before: report.measures held the loss and the accuracy alone."""
    x, y = _classification()
    names = ("accuracy", "auc", "f1", "precision_macro", "recall")
    run = fit(None, (x, y), Network([Dense(8), Relu(), Dense(3)]), CrossEntropy(), Adam(0.02),
              _options(names))  # fmt: skip
    report = run.report
    assert all(list(record.metrics) == list(names) for record in report.history)
    assert set(names) <= set(report.measures) and "loss" in report.measures
    text = str(report)
    assert "precision_macro" in text and "auc" in text.splitlines()[2]
    pytest.importorskip("matplotlib")
    report.plot(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_the_test_measures_are_scikit_learn_s_on_the_test_rows() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((200, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.1 * rng.standard_normal(200)).reshape(-1, 1)
    test = (x[:50], y[:50].astype(np.float32))
    run = fit(None, (x[50:], y[50:].astype(np.float32)), Network([Dense(1)]), MeanSquaredError(),
              Adam(0.05), _options(("mae", "rmse", "r2")), test_rows=test)  # fmt: skip
    predicted = run.trained.predict(test[0])
    assert run.report.measures["mae"] == pytest.approx(
        sklearn.mean_absolute_error(test[1], predicted), rel=1e-6
    )
    assert run.report.measures["r2"] == pytest.approx(
        sklearn.r2_score(test[1], predicted), rel=1e-6
    )
    assert run.report.measures["loss"] == pytest.approx(
        sklearn.mean_squared_error(test[1], predicted), rel=1e-5
    )


def test_an_unknown_metric_is_refused_naming_the_close_names() -> None:
    with pytest.raises(ValueError, match=r"unknown metric 'acuracy' \(did you mean 'accuracy'"):
        FitOptions(seed=1, metrics=("acuracy",))
    with pytest.raises(ValueError, match="the metrics are accuracy, auc"):
        FitOptions(seed=1, metrics=("loss",))


@pytest.mark.parametrize(
    ("loss", "metric", "said"),
    [
        (MeanSquaredError(), "auc", r"'auc' measures binary or classes .* ask for 'mae'"),
        (Huber(), "accuracy", "regression loss"),
        (MeanAbsoluteError(), "f1", "ask for 'mae', 'mse', 'rmse', 'r2'"),
        (CrossEntropy(), "r2", "'r2' measures regression predictions"),
        (BinaryCrossEntropy(), "mae", r"ask for 'accuracy', 'auc'"),
    ],
)
def test_a_metric_that_does_not_fit_the_loss_is_refused(loss: Any, metric: str, said: str) -> None:
    x, y = _classification(60)
    y = y.astype(np.float32).reshape(-1, 1) if not isinstance(loss, CrossEntropy) else y
    if isinstance(loss, BinaryCrossEntropy):
        y = (y > 0).astype(np.float32)
    outputs = 3 if isinstance(loss, CrossEntropy) else 1
    with pytest.raises(ConfigurationError, match=said):
        fit(None, (x, y), Network([Dense(outputs)]), loss, Adam(), _options((metric,)))


def test_every_metric_is_checked_here() -> None:
    assert BUILT_IN <= set(METRICS)  # (and those registered: the guide's example registers one)
    assert set(BUILT_IN) == {
        "accuracy", "auc", "precision", "recall", "f1", "precision_macro", "recall_macro",
        "f1_macro", "mae", "mse", "rmse", "r2",
    }  # fmt: skip


def test_a_class_at_every_position_is_measured_each_position_a_row() -> None:
    rng = np.random.default_rng(4)
    targets = rng.integers(0, 3, (12, 5))
    logits = rng.standard_normal((12, 5, 3))
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    names = ("accuracy", "auc", "f1", "precision_macro", "recall")
    per_position = measure(names, "classes", probabilities.reshape(12, 15), targets)
    flat = measure(names, "classes", probabilities.reshape(60, 3), targets.reshape(60))
    assert per_position == flat
    x = rng.standard_normal((40, 5, 2)).astype(np.float32)
    run = fit(
        None,
        (x, rng.integers(0, 3, (40, 5))),
        Network([GRU(4, return_sequences=True), Dense(3)]),
        CrossEntropy(),
        Adam(),
        FitOptions(seed=0, epochs=2, progress=False, metrics=names),
    )
    assert set(names) <= set(run.report.measures)
    assert all(set(names) <= set(epoch.metrics) for epoch in run.report.history)


def _padded_tags(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids of texts of 1 to 6 tokens padded with 0 at the end, and a tag at each position (the
    padding's tag 0, a class like the others)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 12, (80, 6))
    for row, length in enumerate(rng.integers(1, 7, 80)):
        ids[row, length:] = 0
    return ids, ids % 3


@pytest.mark.parametrize("engine", ["light", "torch:cpu"])
def test_a_class_at_every_position_counts_the_positions_its_padding_mask_does_not_mark(
    engine: str,
) -> None:
    # Trial L: padding counted in the loss and in every figure — 42 % of the validation
    # positions padding, a network right at every token reported 0.58 accurate — and so the
    # best epoch judged mostly on padding. As Keras takes a masked loss and metrics: the
    # padding an Embedding marks weighs nothing, the mean is over the positions counted.
    if engine.startswith("torch"):
        pytest.importorskip("deepsharp.engines.torch")
    ids, tags = _padded_tags(0)
    real = ids != 0
    network = Network([Embedding(12, 8), Dense(3)], inputs=6)
    trainer = Trainer(network, CrossEntropy(), Adam(0.05), engine=engine, seed=0)
    loss = trainer.step(ids, tags)
    logits = np.asarray(trainer.evaluate(ids, tags)[1], np.float64).reshape(80, 6, 3)
    trainer.close()
    drawn = Trainer(Network([Embedding(12, 8), Dense(3)], inputs=6), CrossEntropy(), Adam(0.05),
                    engine=engine, seed=0)  # fmt: skip
    before = np.asarray(drawn.evaluate(ids, tags)[1], np.float64).reshape(80, 6, 3)
    drawn.close()
    chosen = np.take_along_axis(before, tags[..., None], 2)[..., 0]
    # padding weighs 0: the mean over every place (as weights are taken), the sum over the real
    assert loss == pytest.approx(-np.log(chosen)[real].sum() / real.size, rel=1e-5)
    other = np.where(real, tags, (tags + 1) % 3)  # what the padding's tags are changes nothing
    again = Trainer(Network([Embedding(12, 8), Dense(3)], inputs=6), CrossEntropy(), Adam(0.05),
                    engine=engine, seed=0)  # fmt: skip
    assert again.step(ids, other) == loss
    assert np.array_equal(
        np.asarray(again.evaluate(ids, tags)[1], np.float64).reshape(80, 6, 3), logits
    )
    again.close()
    names = ("accuracy", "f1_macro", "auc")
    run = fit(
        None,
        (ids[:60], tags[:60]),
        Network([Embedding(12, 8), Dense(3)], inputs=6),
        CrossEntropy(),
        Adam(0.05),
        FitOptions(
            seed=0, epochs=3, progress=False, metrics=names, restore_best=False, engine=engine
        ),
        validation_rows=(ids[60:], tags[60:]),
    )
    predicted = run.trained.predict(ids[60:], engine).reshape(20, 6, 3).astype(np.float64)
    kept, true = predicted[real[60:]], tags[60:][real[60:]]
    last = run.report.history[-1]
    assert last.validation_loss == pytest.approx(
        -np.log(np.take_along_axis(kept, true[:, None], 1)).mean(), rel=1e-5
    )
    assert last.metrics["accuracy"] == sklearn.accuracy_score(true, kept.argmax(1))
    assert last.metrics["f1_macro"] == pytest.approx(
        sklearn.f1_score(true, kept.argmax(1), average="macro"), rel=1e-12
    )
    assert last.metrics["auc"] == pytest.approx(
        sklearn.roc_auc_score(true, kept, multi_class="ovr"), rel=1e-12
    )
    assert run.trained.evaluate((ids[60:], tags[60:]), engine, metrics=names) == {
        "loss": last.validation_loss, "accuracy": last.metrics["accuracy"],
        **{name: last.metrics[name] for name in names[1:]},
    }  # fmt: skip


def test_an_accumulated_step_of_padded_positions_is_the_whole_batch_s_step() -> None:
    # Trials RV, SQ: each part's loss a mean over its own positions counted, the parts added
    # by their rows: parts of other shares of padding made another step than the whole
    # batch's (the weights 0.028 apart after a run; 1e-8 without padding).
    ids, tags = _padded_tags(1)
    ids[::3, 1:] = 0  # parts of other shares of padding

    def slots(accumulate: int) -> dict[str, np.ndarray]:  # batches of 16 rows, in parts
        run = fit(None, (ids, tags), Network([Embedding(12, 8), Dense(3)], inputs=6),
                  CrossEntropy(), Adam(0.05),
                  FitOptions(seed=0, epochs=2, batch_size=16 // accumulate, accumulate=accumulate,
                             restore_best=False,
                             progress=False))  # fmt: skip
        return run.trained.network.slots

    whole, parts = slots(1), slots(2)
    for name in whole:
        assert np.allclose(whole[name], parts[name], rtol=0, atol=2e-6), name

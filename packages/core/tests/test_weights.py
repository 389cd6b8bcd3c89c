"""Weights and the losses that take them: class weights and rows' weights through fit, weighted
as Keras weighs them; pos_weight, label smoothing, MeanAbsoluteError and Huber, each loss's
gradient nudge-checked; and what is refused."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.contracts.losses import LOSS_CASES, LossCase, worst_loss_nudge_error
from deepsharp.contracts.reference import Float64Engine
from deepsharp.core import (
    GRU,
    Adam,
    BinaryCrossEntropy,
    ConfigurationError,
    CrossEntropy,
    DataError,
    Dense,
    FitOptions,
    Huber,
    Loss,
    MeanAbsoluteError,
    MeanSquaredError,
    Network,
    Relu,
    Run,
    Tensor,
    TrainedNetwork,
    Trainer,
    fit,
)
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.nn.losses import float_targets, loss_from_json, loss_to_json, weighted_mean
from deepsharp.engines.light import LightEngine


@pytest.mark.parametrize("case", LOSS_CASES, ids=lambda case: case.id)
def test_every_loss_s_gradient_agrees_with_nudging(case: LossCase) -> None:
    assert worst_loss_nudge_error(case, Float64Engine) <= 1.0


def test_a_wrong_gradient_is_caught_by_the_loss_nudging() -> None:
    """A loss whose way back sends twice what its value says: the check fails it."""

    class Doubled(Loss):
        task = "regression"

        def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
            difference = outputs - targets
            squares = difference * difference
            half = ops.mul(ops.detached(squares), 0.5)  # counted in the value, not the gradient
            return ops.mean(ops.add(ops.mul(squares, 0.5), half))

    case = next(case for case in LOSS_CASES if case.loss == MeanSquaredError())
    wrong = LossCase(Doubled(), case.outputs, case.targets, None, "doubled")
    assert worst_loss_nudge_error(wrong, Float64Engine) > 1.0


def _value(loss: Loss, outputs: Any, targets: Any, weights: Any = None) -> float:
    engine = LightEngine()
    out = Tensor.put(engine, np.asarray(outputs, np.float32))
    wanted = Tensor.put(engine, loss.targets(targets, out.shape[1]))
    if weights is None:
        return float(engine.get(loss.value(out, wanted).handle))
    w = Tensor.put(engine, np.asarray(weights, np.float32))
    return float(engine.get(loss.value(out, wanted, w).handle))


Z = np.array([[2.0], [-1.0], [0.5], [-3.0]])
Y = np.array([[1.0], [0.0], [0.0], [1.0]])
W = np.array([1.0, 2.0, 0.0, 0.5])


def _bce(z: np.ndarray, y: np.ndarray, pos: float = 1.0) -> np.ndarray:
    p = 1 / (1 + np.exp(-z))
    return -(pos * y * np.log(p) + (1 - y) * np.log(1 - p))


def test_weights_are_keras_s_the_mean_of_weight_times_loss() -> None:
    assert _value(BinaryCrossEntropy(), Z, Y, W) == pytest.approx(
        np.mean(W[:, None] * _bce(Z, Y)), rel=1e-6
    )
    logits = np.array([[1.0, 0.0, -1.0], [0.2, 0.3, 0.1]])
    classes = np.array([2, 0])
    terms = np.log(np.exp(logits).sum(1)) - logits[np.arange(2), classes]
    assert _value(CrossEntropy(), logits, classes, [3.0, 0.5]) == pytest.approx(
        np.mean([3.0, 0.5] * terms), rel=1e-6
    )


def test_pos_weight_weighs_the_positive_terms_as_pytorch_does() -> None:
    """Before: BinaryCrossEntropy(pos_weight=...) was a TypeError."""
    assert _value(BinaryCrossEntropy(pos_weight=4.0), Z, Y) == pytest.approx(
        np.mean(_bce(Z, Y, 4.0)), rel=1e-6
    )
    probabilities = 1 / (1 + np.exp(-Z))
    assert _value(BinaryCrossEntropy(from_logits=False, pos_weight=4.0), probabilities, Y) == (
        pytest.approx(np.mean(_bce(Z, Y, 4.0)), rel=1e-5)
    )


def test_label_smoothing_pulls_the_targets_as_keras_does() -> None:
    smoothed = Y * 0.8 + 0.1
    assert _value(BinaryCrossEntropy(label_smoothing=0.2), Z, Y) == pytest.approx(
        np.mean(_bce(Z, smoothed)), rel=1e-6
    )
    logits = np.array([[1.0, 0.0, -1.0], [0.2, 0.3, 0.1]])
    targets = np.eye(3)[[2, 0]] * 0.7 + 0.1
    logs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert _value(CrossEntropy(label_smoothing=0.3), logits, [2, 0]) == pytest.approx(
        np.mean(-(targets * logs).sum(1)), rel=1e-6
    )


def test_mean_absolute_error_and_huber_follow_their_formulas() -> None:
    """Before: there was no MAE or Huber loss."""
    outputs = np.array([[0.5, -2.0], [3.0, 0.1]])
    targets = np.array([[0.0, 0.0], [0.0, 0.0]])
    assert _value(MeanAbsoluteError(), outputs, targets) == pytest.approx(5.6 / 4)
    size = np.abs(outputs)
    for delta in (1.0, 0.3, 5.0):
        huber = np.where(size <= delta, 0.5 * size**2, delta * (size - 0.5 * delta))
        assert _value(Huber(delta), outputs, targets) == pytest.approx(np.mean(huber), rel=1e-6)
    assert _value(Huber(), outputs, targets, [2.0, 0.0]) == pytest.approx(
        np.mean([[2 * 0.125, 2 * 1.5], [0.0, 0.0]]), rel=1e-6
    )


@pytest.mark.parametrize(
    "loss",
    [
        BinaryCrossEntropy(pos_weight=2.5, label_smoothing=0.1),
        CrossEntropy(from_logits=False, label_smoothing=0.05),
        MeanAbsoluteError(),
        Huber(delta=0.5),
    ],
    ids=repr,
)
def test_the_new_settings_go_into_files_and_back(loss: Loss, tmp_path: Path) -> None:
    assert loss_from_json(loss_to_json(loss)) == loss
    x, y = _binary_data(60)
    if isinstance(loss, CrossEntropy):
        run = _fit((x, y[:, 0].astype(np.int64)), loss, 2)
    else:
        run = _fit((x, y), loss)
    run.trained.save(tmp_path / "net.safetensors")
    assert TrainedNetwork.load(tmp_path / "net.safetensors").loss == loss


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: BinaryCrossEntropy(pos_weight=0.0), "pos_weight must be a finite number above 0"),
        (lambda: BinaryCrossEntropy(label_smoothing=1.0), "label_smoothing must be .* below 1"),
        (lambda: CrossEntropy(label_smoothing=-0.1), "label_smoothing must be a finite number"),
        (lambda: Huber(delta=0.0), "delta must be a finite number above 0"),
        (lambda: Huber(delta=math.inf), "delta must be"),
        # Before: below 0 said "from 0", which 0 itself is not.
        (lambda: BinaryCrossEntropy(pos_weight=-1), "pos_weight must be a finite number above 0"),
        (lambda: Huber(delta=-1), "delta must be a finite number above 0"),
    ],
)
def test_bad_loss_settings_are_refused(make: Any, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        make()


def _binary_data(rows: int = 240) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(31)
    x = rng.standard_normal((rows, 4)).astype(np.float32)
    y = (x[:, 0] + 0.7 * rng.standard_normal(rows) > 0.8).astype(np.float32).reshape(-1, 1)
    return x, y


def _fit(data: Any, loss: Loss, outputs: int = 1, **extra: Any) -> Run:
    options = FitOptions(seed=6, epochs=3, batch_size=16, progress=False)
    link = None  # a loss of probabilities takes a network ending in its link
    if getattr(loss, "from_logits", True) is False:
        link = "softmax" if isinstance(loss, CrossEntropy) else "sigmoid"
    network = Network([Dense(6), Relu(), Dense(outputs, activation=link)])
    return fit(None, data, network, loss, Adam(0.02), options, **extra)


def _bits(run: Run) -> list[bytes]:
    return [value.tobytes() for value in run.trained.network.slots.values()]


def test_class_weights_weigh_each_row_by_its_class_as_sample_weights_do() -> None:
    """Before: fit(..., class_weight=...) was a TypeError. Class weights are rows' weights
    drawn from the targets: the same run, bit for bit, as the same weights given row by row."""
    x, y = _binary_data()
    by_class = _fit((x, y), BinaryCrossEntropy(), class_weight={0: 1.0, 1: 3.0})
    by_row = _fit((x, y), BinaryCrossEntropy(), sample_weight=np.where(y[:, 0] > 0, 3.0, 1.0))
    plain = _fit((x, y), BinaryCrossEntropy())
    assert _bits(by_class) == _bits(by_row) != _bits(plain)
    # Weighing the rare positives up predicts more of them.
    positives = [float(np.mean(run.trained.predict(x) >= 0.5)) for run in (plain, by_class)]
    assert positives[1] > positives[0]


def test_class_weights_and_sample_weights_multiply() -> None:
    x, y = _binary_data()
    both = _fit(
        (x, y), BinaryCrossEntropy(), class_weight={1: 2.0}, sample_weight=np.full(240, 0.5)
    )
    product = _fit((x, y), BinaryCrossEntropy(), sample_weight=np.where(y[:, 0] > 0, 1.0, 0.5))
    assert _bits(both) == _bits(product)


def test_class_weights_for_cross_entropy_through_fit() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((200, 4)).astype(np.float32)
    y = np.digitize(x[:, 0], [-1.0, 1.0])
    weighted = _fit((x, y), CrossEntropy(), 3, class_weight={0: 4.0, 2: 4.0})
    plain = _fit((x, y), CrossEntropy(), 3)
    assert _bits(weighted) != _bits(plain)
    assert weighted.report.measures["loss"] > 0


@pytest.mark.parametrize(
    ("loss", "weights", "error", "said"),
    [
        (
            BinaryCrossEntropy(),
            {0: 1.0, 2: 5.0},
            DataError,
            r"names class 2, and .* classes 0\.\.1",
        ),
        (CrossEntropy(), {3: 2.0}, DataError, r"class\(es\) 3 that the training targets lack"),
        (BinaryCrossEntropy(), {1: -1.0}, ValueError, r"class_weight\[1\] must be a finite"),
        (BinaryCrossEntropy(), {1.5: 1.0}, TypeError, "keys are class indices"),
        # Failed before (and the row weight below): refused at the first step as the batch's
        # row with "the weight inf", a value never given, naming neither class nor row
        (BinaryCrossEntropy(), {0: 1e39}, ValueError, r"class_weight\[0\] .* not 1e\+39"),
        (BinaryCrossEntropy(), [1.0, 2.0], TypeError, "maps each class to its weight"),
        (MeanSquaredError(), {0: 1.0}, ConfigurationError, "a regression .* sample_weight"),
        (BinaryCrossEntropy(), {0: 0.0, 1: 0.0}, DataError, r"every class .* \(0, 1\) zero"),
    ],
)
def test_bad_class_weights_are_refused(
    loss: Loss, weights: Any, error: type[Exception], said: str
) -> None:
    x, y = _binary_data()
    outputs = 5 if isinstance(loss, CrossEntropy) else 1
    targets = (y[:, 0] * 2).astype(np.int64) if isinstance(loss, CrossEntropy) else y
    with pytest.raises(error, match=said):
        _fit((x, targets), loss, outputs, class_weight=weights)


@pytest.mark.parametrize(
    ("weights", "said"),
    [
        (np.ones(10), r"240 rows and weights of shape \(10,\)"),
        (np.full(240, -1.0), "row 1 .* has the weight -1.0"),
        (np.r_[np.ones(239), np.nan], "row 240 .* has the weight nan"),
        (np.r_[np.ones(149), 1e39, np.ones(90)], r"row 150 .* 1e\+39 beyond float32's range"),
        (np.ones((240, 2)), "give one weight a row"),
        (np.zeros(240), r"every training row.s weight is zero \(the 168 rows of 240 the split"),
    ],
)
def test_bad_sample_weights_are_refused(weights: Any, said: str) -> None:
    with pytest.raises(DataError, match=said):
        _fit(_binary_data(), BinaryCrossEntropy(), sample_weight=weights)


def test_class_and_sample_weights_are_refused_together_where_their_products_are() -> None:
    """Failed before (trial AB): class_weight={0: 0} and sample_weight 0 on every row of class
    1 weighed every row 0, each alone accepted, and the run trained nothing and reported it;
    weights of 1e30 each made a product of inf that the first step refused with NumPy's raw
    overflow warning, naming 'row 1' of a shuffled batch and a weight nobody gave."""
    x, y = _binary_data()
    none = np.where(y[:, 0] == 1.0, 0.0, 1.0)
    with pytest.raises(DataError, match="times sample_weight is zero for every training row"):
        _fit((x, y), BinaryCrossEntropy(), class_weight={0: 0.0}, sample_weight=none)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's overflow warning stays in
        with pytest.raises(DataError, match=r"beyond float32 .* class weighs 1e\+30 and the row"):
            _fit((x, y), BinaryCrossEntropy(), class_weight={0: 1e30, 1: 1e30},
                 sample_weight=np.full(240, 1e30))  # fmt: skip
    _fit((x, y), BinaryCrossEntropy(), class_weight={0: 0.0}, sample_weight=1.0 - none / 2)


def test_sample_weights_are_for_arrays() -> None:
    from deepsharp.core.samples import titanic

    with pytest.raises(DataError, match="sample_weight weighs the rows of arrays"):
        fit(titanic.pipeline(), titanic.rows(), titanic.network(), BinaryCrossEntropy(), Adam(),
            FitOptions(seed=1, epochs=1, progress=False), sample_weight=np.ones(891))  # fmt: skip


def test_a_loss_of_one_s_own_takes_weights_through_weighted_mean() -> None:
    """The guide's loss of one's own: log(cosh(d)), weighted by weighted_mean."""

    class LogCosh(Loss):
        task = "regression"

        def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
            d = outputs - targets
            cosh = ops.mul(ops.exp(d) + ops.exp(ops.neg(d)), 0.5)
            return weighted_mean(ops.log(cosh), weights)

        def targets(self, targets: Any, outputs: int) -> Any:
            return float_targets(self, targets, outputs)

    outputs, targets = np.array([[0.5], [-1.0]]), np.zeros((2, 1))
    assert _value(LogCosh(), outputs, targets, [2.0, 1.0]) == pytest.approx(
        np.mean([2 * np.log(np.cosh(0.5)), np.log(np.cosh(1.0))]), rel=1e-6
    )
    case = LossCase(LogCosh(), outputs, targets, np.array([2.0, 1.0]), "own")
    assert worst_loss_nudge_error(case, Float64Engine) <= 1.0


def test_class_weights_of_a_class_at_every_position_weigh_each_place() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 4, 2)).astype(np.float32)
    classes = rng.integers(0, 3, (16, 4))
    network = Network([GRU(3, return_sequences=True), Dense(3)])
    weights = np.array([2.0, 1.0, 0.5], np.float32)[classes]  # a weight a place, by its class
    with Trainer(network, CrossEntropy(), Adam(), seed=0) as trainer:
        trainer.start((4, 2))
        chances = network.predict(x, CrossEntropy()).reshape(16, 4, 3)
        taken = np.take_along_axis(chances, classes[..., None], -1)[..., 0]
        expected = np.mean(weights * -np.log(taken.astype(np.float64)))
        assert math.isclose(trainer.step(x, classes, weights=weights), expected, rel_tol=1e-5)
        with pytest.raises(
            DataError, match=r"a row, shape \(16,\), or one a place, shape \(16, 4\)"
        ):
            trainer.step(x, classes, weights=np.ones((16, 3)))
    run = fit(
        None,
        (x, classes),
        Network([GRU(3, return_sequences=True), Dense(3)]),
        CrossEntropy(),
        Adam(),
        FitOptions(seed=0, epochs=2, progress=False),
        class_weight={0: 2.0, 2: 0.5},
        sample_weight=np.linspace(0.5, 1.5, 16),
    )
    assert math.isfinite(run.report.measures["loss"])


def test_fit_takes_a_weight_a_place_for_a_class_at_every_position() -> None:
    """Before: fit refused sample_weight of shape (N, L), though Trainer.step takes it; padded
    places then always counted in a tagging run's loss. Places of weight 0 teach nothing: other
    classes there give the same run, bit for bit."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 4, 2)).astype(np.float32)
    classes = rng.integers(0, 3, (40, 4))
    kept = np.ones((40, 4), np.float32)
    kept[:, 3] = 0.0  # the last place of every row is padding

    def run(targets: np.ndarray, **extra: Any) -> Run:
        return fit(None, (x, targets), Network([GRU(3, return_sequences=True), Dense(3)]),
                   CrossEntropy(), Adam(0.01), FitOptions(seed=0, epochs=2, progress=False),
                   sample_weight=kept, **extra)  # fmt: skip

    other = classes.copy()
    other[:, 3] = (other[:, 3] + 1) % 3
    assert _bits(run(classes)) == _bits(run(other))
    assert _bits(run(classes, class_weight={0: 2.0})) == _bits(run(other, class_weight={0: 2.0}))


def test_class_weights_may_name_the_target_s_labels_and_a_key_both_label_and_index_is_refused() -> (
    None
):
    """Before: keys were class indices only: {'3': 5.0} was a raw TypeError, and {1: 0.0, 2: 0.0}
    meant to leave grades 1 and 2 out zeroed grades 2 and 3 silently (grade 3 never
    predicted)."""
    from deepsharp.core import SGD, Pipeline, fit

    rng = np.random.default_rng(0)
    rows = [{"a": float(v), "grade": str(int(np.digitize(v, [-0.5, 0.5])) + 1)}
            for v in rng.normal(size=90)]  # fmt: skip

    def run(weights: Any) -> Run:
        pipeline = Pipeline().number("a").target("grade", kind="classes")
        options = FitOptions(seed=0, epochs=1, progress=False)
        return fit(pipeline, rows, Network([Dense(3)]), CrossEntropy(), SGD(0.1), options,
                   class_weight=weights)  # fmt: skip

    assert _bits(run({"1": 5.0})) == _bits(run({0: 5.0}))  # 0 is no label: class 0
    assert _bits(run({"3": 5.0})) == _bits(run({3: 5.0}))  # 3 is no class index: the label
    with pytest.raises(DataError, match=r"key 1 is the label '1' \(class 0\) and the index of"):
        run({1: 0.0, 2: 0.0})
    with pytest.raises(DataError, match=r"names '4', which is no label of the target"):
        run({"4": 1.0})

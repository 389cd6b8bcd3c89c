"""Losses: values that do not cancel or turn NaN, targets they refuse, and the link they carry."""

from __future__ import annotations

import json
import math
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
    DataError,
    Dense,
    FitOptions,
    Flatten,
    Huber,
    MeanAbsoluteError,
    MeanSquaredError,
    Network,
    Relu,
    ShapeError,
    Sigmoid,
    Softmax,
    Tensor,
    TrainedNetwork,
    Trainer,
    fit,
)
from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.nn.losses import loss_from_json, loss_to_json
from deepsharp.core.random import Generator
from deepsharp.engines.light import LightEngine


def _value(
    loss: BinaryCrossEntropy | CrossEntropy, outputs: list[list[float]], targets: object
) -> float:
    engine = LightEngine()
    z = Tensor.put(engine, np.array(outputs, np.float32))
    y = Tensor.put(engine, loss.targets(targets, z.shape[1]))
    return float(engine.get(loss.value(z, y).handle))


@pytest.mark.parametrize("z", [8.0, 12.0, 20.0, 30.0])
def test_binary_cross_entropy_keeps_its_digits_for_confident_positives(z: float) -> None:
    """Before: softplus(z) - z*y cancelled: 7 % off at z = 12, and 0 at z = 20."""
    got = _value(BinaryCrossEntropy(), [[z]], [[1.0]])
    exact = math.log1p(math.exp(-z))
    assert abs(got - exact) <= 1e-6 * exact


def test_binary_cross_entropy_of_confident_negatives_and_wrong_predictions() -> None:
    assert abs(_value(BinaryCrossEntropy(), [[-20.0]], [[0.0]]) - math.log1p(math.exp(-20))) < 1e-14
    assert _value(BinaryCrossEntropy(), [[-100.0]], [[1.0]]) == pytest.approx(100.0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_cross_entropy_of_logits_spanning_float32_is_not_nan() -> None:
    """Before: one_hot * log_softmax multiplied 0 by -inf: NaN."""
    assert _value(CrossEntropy(), [[3e38, -3e38]], [0]) == 0.0
    assert _value(CrossEntropy(), [[3e38, -3e38], [0.0, 0.0]], [0, 1]) == pytest.approx(
        math.log(2) / 2
    )


def test_cross_entropy_of_a_perfect_prediction_is_plus_zero() -> None:
    """Before: -0.0."""
    value = _value(CrossEntropy(), [[100.0, 0.0]], [0])
    assert value == 0.0 and math.copysign(1.0, value) == 1.0


def test_cross_entropy_agrees_with_the_textbook_formula() -> None:
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4))
    targets = np.array([0, 3, 2, 2, 1, 0])
    exact = np.mean(np.log(np.exp(logits).sum(1)) - logits[np.arange(6), targets])
    assert _value(CrossEntropy(), logits.tolist(), targets) == pytest.approx(exact, rel=1e-6)


def test_binary_cross_entropy_refuses_targets_other_than_0_and_1() -> None:
    """Before: a 0-9 target trained to the end and reported an accuracy."""
    trainer = Trainer(Network([Dense(1)], inputs=2), BinaryCrossEntropy(), Adam(), seed=0)
    rows = np.zeros((3, 2), np.float32)
    with pytest.raises(DataError, match=r"targets 0 and 1; row 3 .* holds 7\.0.*CrossEntropy"):
        trainer.step(rows, [[0.0], [1.0], [7.0]])


@pytest.mark.parametrize("loss", [BinaryCrossEntropy(), MeanSquaredError()])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_target_that_is_not_finite_is_refused_naming_its_row(loss: Any, bad: float) -> None:
    trainer = Trainer(Network([Dense(1)], inputs=2), loss, Adam(), seed=0)
    rows = np.zeros((3, 2), np.float32)
    with pytest.raises(
        DataError, match=r"row 2, output 1 \(each counting from 1\): the target is "
    ):
        trainer.step(rows, [[0.0], [bad], [1.0]])


@pytest.mark.parametrize("loss", [BinaryCrossEntropy(), MeanSquaredError()])
def test_a_target_beyond_float32_s_range_is_refused_as_written(loss: Any) -> None:
    """Failed before: 1e40 was reported as "the target is inf" (its float32 cast), a value the
    user never wrote."""
    trainer = Trainer(Network([Dense(1)], inputs=2), loss, Adam(), seed=0)
    rows = np.zeros((3, 2), np.float32)
    with pytest.raises(
        DataError, match=r"row 2, output 1 .*: the target is -1e\+40, beyond float32's range"
    ):
        trainer.step(rows, [0.0, -1e40, 1.0])


def test_a_network_ending_in_a_sigmoid_handed_a_logits_loss_is_refused_naming_both_ways_out() -> (
    None
):
    """Before: the sigmoid was applied twice, silently."""
    network = Network([Dense(4), Relu(), Dense(1), Sigmoid()], inputs=3)
    with pytest.raises(ConfigurationError, match=r"drop the final Sigmoid\(\).*from_logits=False"):
        Trainer(network, BinaryCrossEntropy(), Adam())
    with pytest.raises(ConfigurationError, match=r"drop the final Softmax\(\).*from_logits=False"):
        Trainer(Network([Dense(3), Softmax()], inputs=3), CrossEntropy(), Adam())


def _twins(last: type, outputs: int) -> tuple[Network, Network]:
    generator = Generator(5)
    logits = Network([Dense(6), Relu(), Dense(outputs)], inputs=4)
    logits.initialize(generator)
    probabilities = Network([Dense(6), Relu(), Dense(outputs), last()], inputs=4)
    probabilities.set_slots(logits.slots)
    return logits, probabilities


@pytest.mark.parametrize(
    ("last", "outputs", "loss", "targets"),
    [
        (Sigmoid, 1, BinaryCrossEntropy, np.array([[0.0], [1.0], [1.0], [0.0], [1.0]], np.float32)),
        (Softmax, 3, CrossEntropy, np.array([0, 2, 1, 1, 0])),
    ],
)
def test_from_logits_false_takes_the_probabilities_of_a_network_ending_in_them(
    last: type, outputs: int, loss: type, targets: np.ndarray
) -> None:
    """As Keras: the same loss and the same steps as the logits' loss on the network without
    its last layer, and its predictions come out of the network as they are."""
    logits, probabilities = _twins(last, outputs)
    rows = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    with (
        Trainer(logits, loss(), Adam(0.01), seed=0) as a,
        Trainer(probabilities, loss(from_logits=False), Adam(0.01), seed=0) as b,
    ):
        for _ in range(5):
            assert b.step(rows, targets) == pytest.approx(a.step(rows, targets), rel=1e-5)
        for name, value in a.network.slots.items():
            np.testing.assert_allclose(b.network.slots[name], value, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(
        probabilities.predict(rows, loss(from_logits=False)),
        logits.predict(rows, loss()),
        rtol=1e-5,
    )


def test_a_loss_s_settings_go_into_the_trained_file(tmp_path: Path) -> None:
    assert loss_from_json(
        json.loads(json.dumps(loss_to_json(CrossEntropy(False))))
    ) == CrossEntropy(from_logits=False)
    network = Network([Dense(1), Sigmoid()], inputs=2)
    network.initialize(Generator(0))
    pipeline = Pipeline().learn(np.zeros((2, 2)))
    TrainedNetwork(network, BinaryCrossEntropy(from_logits=False), pipeline).save(tmp_path / "p")
    loaded = TrainedNetwork.load(tmp_path / "p")
    assert loaded.loss == BinaryCrossEntropy(from_logits=False) != BinaryCrossEntropy()
    assert (
        loaded.predict(np.ones((1, 2))).tolist()
        == network.predict(
            np.ones((1, 2), np.float32), BinaryCrossEntropy(from_logits=False)
        ).tolist()
    )


@pytest.mark.parametrize("kind", [{}, [], None, 7, "Dense"])
def test_a_recorded_loss_of_no_known_kind_is_a_value_error_naming_it(kind: Any) -> None:
    """Before (the fuzzer's find): an unhashable kind such as {} raised a raw TypeError."""
    with pytest.raises(ValueError, match="unknown loss"):
        loss_from_json({"kind": kind})


@pytest.mark.parametrize(
    "loss", [MeanSquaredError(), MeanAbsoluteError(), Huber(), BinaryCrossEntropy()], ids=repr
)
def test_a_network_whose_rows_give_a_sequence_trains_on_flat_targets(loss: Any) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5, 3)).astype(np.float32)
    y = (rng.random((8, 10)) > 0.5).astype(np.float32)  # 5 positions x 2 outputs, flat a row
    sequence = Network([Dense(2)], inputs=(5, 3))
    flat = Network([Dense(2), Flatten()], inputs=(5, 3))
    ours = Trainer(sequence, loss, Adam(0.01), engine="light", seed=0)
    theirs = Trainer(flat, loss, Adam(0.01), engine="light", seed=0)
    for _ in range(3):  # the same slots, the same values in order: the same steps, bit for bit
        assert ours.step(x, y) == theirs.step(x, y)
    assert ours.evaluate(x, y)[1].shape == (8, 10)
    with pytest.raises(ShapeError, match=r"give each row's targets flat, \(N, 10\)"):
        ours.step(x, y.reshape(8, 5, 2))


def test_cross_entropy_refuses_one_hot_targets_saying_to_take_their_argmax() -> None:
    one_hot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1]]
    with pytest.raises(DataError, match=r"look one-hot .* give y\.argmax\(axis=1\)"):
        CrossEntropy().targets(one_hot, 3)
    assert CrossEntropy().targets(one_hot.argmax(axis=1), 3).tolist() == [0, 2, 1, 1]


def test_a_class_a_row_for_a_network_of_a_class_a_position_is_refused_naming_both() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5, 2)).astype(np.float32)
    trainer = Trainer(Network([GRU(4, return_sequences=True), Dense(3)]), CrossEntropy(), Adam())
    with pytest.raises(ShapeError, match=r"a class at each of 5 positions .* shape \(N, 5\)"):
        trainer.step(x, rng.integers(0, 3, 8))


def test_a_wrong_count_of_outputs_for_class_targets_names_the_fix() -> None:
    """Failed before (trial PT): Dense(5) for 10 classes said only the indices' range, and
    BinaryCrossEntropy's 10 outputs for class indices said only that the shapes differ."""
    rng = np.random.default_rng(0)
    x, y = rng.random((60, 4)).astype(np.float32), np.arange(60) % 10
    options = FitOptions(seed=0, epochs=1, progress=False)
    with pytest.raises(
        ShapeError, match=r"0\.\.9: the targets reach 9, so end the network in Dense\(10\)"
    ):
        fit(None, (x, y), Network([Dense(5)]), CrossEntropy(), Adam(0.01), options)
    with pytest.raises(
        ShapeError, match=r"as they are class indices \(0\.\.9\), train with CrossEntropy\(\)"
    ):
        fit(None, (x, y), Network([Dense(10)]), BinaryCrossEntropy(), Adam(0.01), options)
    with pytest.raises(ShapeError, match=r"end the network in Dense\(1\)$"):  # amounts: no classes
        fit(None, (x, y + 0.5), Network([Dense(10)]), MeanSquaredError(), Adam(0.01), options)
    # labels 1..10 under Dense(10): they count from 1 (said "hold 11 classes": review)
    with pytest.raises(
        ShapeError,
        match=r"reach 10, .* Dense\(11\) .*, or, as they count from 1, give them from 0 \(y - 1\)",
    ):
        fit(None, (x, y + 1), Network([Dense(10)]), CrossEntropy(), Adam(0.01), options)
    stray = y.copy()
    stray[3] = 10**9  # one stray label: no Dense(1000000001)
    with pytest.raises(ShapeError, match=r"found 0\.\.1000000000$"):
        fit(None, (x, stray), Network([Dense(10)]), CrossEntropy(), Adam(0.01), options)


def test_class_indices_out_of_range_are_said_as_given() -> None:
    """Failed before (trial E2): read after their cast to int64, a uint64 index of 2**64 - 1
    was said as -1, and 1e20 as -9223372036854775808."""
    from deepsharp.core import CrossEntropy

    for given, said in ((np.array([0, 2**64 - 1], np.uint64), "0..18446744073709551615"),
                        (np.array([0.0, 1e20]), "0..100000000000000000000")):  # fmt: skip
        with pytest.raises(ShapeError, match=f"must lie in 0..2 for 3 classes, found {said}"):
            CrossEntropy().targets(given, 3)
    assert CrossEntropy().targets(np.array([0.0, 2.0]), 3).tolist() == [0, 2]

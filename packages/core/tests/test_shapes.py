"""Shape mistakes raise ShapeError naming the layer and both shapes."""

from __future__ import annotations

import numpy as np
import pytest
from core_helpers import titanic_shaped, titanic_trainer

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    CrossEntropy,
    Dense,
    Flatten,
    MaxPool2D,
    Network,
    Relu,
    ShapeError,
    Trainer,
)


def test_a_wrong_feature_count_names_the_layer_and_both_shapes() -> None:
    trainer = titanic_trainer()
    _, targets = titanic_shaped()
    with pytest.raises(
        ShapeError, match=r"layer 'dense' \(Dense\(units=16\)\).*\(14,\).*\(32, 13\)"
    ):
        trainer.step(np.zeros((32, 13), np.float32), targets)


def test_a_wrong_target_shape_names_the_loss_and_both_shapes() -> None:
    trainer = titanic_trainer()
    rows, _ = titanic_shaped()
    with pytest.raises(ShapeError, match=r"BinaryCrossEntropy.*\(32, 2\).*\(N, 1\)"):
        trainer.step(rows, np.zeros((32, 2), np.float32))


def test_class_targets_must_be_indices_within_the_outputs() -> None:
    network = Network([Dense(3)], inputs=14)
    trainer = Trainer(network, CrossEntropy(), Adam(), seed=0)
    rows, _ = titanic_shaped()
    with pytest.raises(ShapeError, match=r"0\.\.2"):
        trainer.step(rows, np.full(32, 5))


def test_predict_with_the_wrong_feature_count_names_the_layer() -> None:
    network = Network([Dense(4), Relu(), Dense(1)], inputs=3)
    trainer = Trainer(network, BinaryCrossEntropy(), Adam(), seed=0)
    trainer.close()
    with pytest.raises(ShapeError, match=r"layer 'dense' .*\(3,\).*\(2, 5\)"):
        network.predict(np.zeros((2, 5)), BinaryCrossEntropy())


def test_a_dense_layer_after_images_asks_for_flatten() -> None:
    with pytest.raises(ShapeError, match=r"layer 'dense' \(Dense\(units=4\)\).*Flatten"):
        Network([Dense(4)], inputs=(1, 8, 8))


def test_a_pool_too_big_for_its_images_is_refused() -> None:
    with pytest.raises(ShapeError, match=r"layer 'maxpool2d' .*\(1, 1, 1\)"):
        Network([MaxPool2D(2), Flatten()], inputs=(1, 1, 1))


def test_build_takes_a_feature_count_as_the_constructor_s_inputs_does() -> None:
    """Before (trial DX): Network(...).build(14) was TypeError: 'int' object is not iterable."""
    network = Network([Dense(16), Relu(), Dense(1)])
    network.build(14)
    assert network.input_specs[0].shape == (14,) and network.output_shape == (1,)
    with pytest.raises(ShapeError, match=r"built for rows of shape \(14,\), not \(13,\)"):
        network.build(13)
    with pytest.raises(ValueError, match=r"build's shape of 'input' is a feature count or a"):
        Network([Dense(1)]).build("x")  # type: ignore[arg-type]

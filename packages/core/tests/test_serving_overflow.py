"""Serving values that overflow inside the network (issue 25, item 9): a prediction that is not
finite from finite features is a DataError naming the row, on the command line one line and a
non-zero exit; no NumPy warning reaches the user, and a softmax of logits ±3e38 serves finite
probabilities on the light and the test engines."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_files import seal, split

from deepsharp.core import (
    BatchNorm,
    BinaryCrossEntropy,
    CrossEntropy,
    DataError,
    Dense,
    FileFormatError,
    Network,
    Pipeline,
    TrainedNetwork,
)
from deepsharp.core.cli import main
from deepsharp.core.random import Generator


def _trained() -> TrainedNetwork:
    """A network of one unscaled number column whose finite slots make 3e38 overflow into
    inf and -inf, then NaN where they are added."""
    pipeline = (
        Pipeline()
        .number("x", scale=False)
        .target("y")
        .learn([{"x": "1", "y": "0"}, {"x": "2", "y": "1"}])
    )
    network = Network([Dense(2), Dense(1)], inputs=1)
    network.set_slots(
        {
            "dense.weights": np.array([[4.0, -4.0]], np.float32),
            "dense.bias": np.zeros(2),
            "dense_1.weights": np.ones((2, 1), np.float32),
            "dense_1.bias": np.zeros(1),
        }
    )
    return TrainedNetwork(network, BinaryCrossEntropy(), pipeline)


def test_a_prediction_that_overflows_inside_the_network_is_refused_naming_its_row() -> None:
    trained = _trained()
    rows = [{"x": "1"}, {"x": "2"}, {"x": "3e38"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy RuntimeWarning may reach the user
        with pytest.raises(DataError, match=r"row 3 \(counting from 1\).*overflowed"):
            trained.predict(rows)
        assert trained.predict(rows[:2]).shape == (2, 1)


def test_slots_a_trainer_s_step_left_infinite_are_named_not_the_features() -> None:
    """Before (trial GS): a step whose gradients overflowed (its loss finite, 1e36) left the
    weights infinite, and predict blamed the features of a row of ones."""
    from deepsharp.core import SGD, MeanSquaredError, StateError, Trainer

    x, y = np.full((8, 2), 1e21, np.float32), np.full((8, 1), 1e18, np.float32)
    network = Network([Dense(1, init="zeros")], inputs=2)
    with Trainer(network, MeanSquaredError(), SGD(1e-3), engine="light:float32", seed=0) as step:
        assert np.isfinite(step.step(x, y))
    with pytest.raises(StateError, match=r"slot 'dense.weights' holds NaN or infinite values"):
        network.predict(np.ones((2, 2), np.float32), MeanSquaredError())


def test_on_mixed_float16_the_refusal_names_float16_s_range() -> None:
    """Failed before: a row of 70,000s (finite, served on light and light:float32) was refused
    on light:mixed_float16 with no word of float16, whose range ends at 65,504."""
    trained = _trained()
    rows = [{"x": "1"}, {"x": "70000"}]
    assert np.isfinite(trained.predict(rows, "light:float32")).all()
    with pytest.raises(
        DataError, match=r"row 2 .*overflowed.*float16's, whose range ends at 65,504"
    ):
        trained.predict(rows, "light:mixed_float16")


def test_the_command_line_says_it_in_one_line_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _trained().save(tmp_path / "m.safetensors")
    (tmp_path / "rows.csv").write_text("x\n1\n3e38\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(["predict", str(tmp_path / "m.safetensors"), str(tmp_path / "rows.csv")])
    said = capsys.readouterr()
    assert code != 0
    assert "row 2 (counting from 1)" in said.err and len(said.err.strip().splitlines()) == 1
    assert "Traceback" not in said.err


@pytest.mark.parametrize("spec", ["light", "testbuffer"])
def test_a_softmax_of_logits_far_apart_serves_finite_probabilities_quietly(spec: str) -> None:
    network = Network([Dense(2)], inputs=1)
    network.set_slots(
        {"dense.weights": np.array([[3e38, -3e38]], np.float32), "dense.bias": np.zeros(2)}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = network.predict(np.array([[1.0], [-1.0]], np.float32), CrossEntropy(), spec)
    assert np.array_equal(got, np.array([[1.0, 0.0], [0.0, 1.0]], np.float32))


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"d.weights": np.full((3, 2), np.nan)}, r"slot 'd\.weights' holds NaN or infinite"),
        ({"d.weights": np.full((3, 2), 1e39)}, r"slot 'd\.weights' holds NaN or infinite"),
    ],
)
def test_slots_a_network_cannot_hold_are_refused_where_they_are_set(
    values: dict[str, Any], said: str
) -> None:
    """Failed before: NaN (or float32's infinity) set as slots was taken, and predict then
    blamed the rows ('its prediction is nan ... look for huge values in this row')."""
    network = Network([Dense(2, name="d"), BatchNorm(name="bn")], inputs=3)
    network.initialize(Generator(0))
    slots = {**network.slots, **values}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DataError, match=said):
            network.set_slots(slots)
    assert np.isfinite(network.slots["d.weights"]).all()  # the old ones kept


def test_a_negative_moving_variance_is_refused_where_it_is_set_and_in_a_file(
    tmp_path: Path,
) -> None:
    network = Network([Dense(2, name="d"), BatchNorm(name="bn")], inputs=3)
    network.initialize(Generator(0))
    negative = {"bn.moving_mean": np.zeros(2), "bn.moving_variance": np.array([-5.0, 1.0])}
    with pytest.raises(DataError, match=r"buffer 'bn\.moving_variance' holds -5, below its least"):
        network.set_buffers(negative)
    network.set_buffers({**negative, "bn.moving_variance": np.array([0.0, 1.0])})  # 0 is held
    path = tmp_path / "n.safetensors"
    network.save(path)
    Network.load(path)
    header, body = split(path.read_bytes())  # the variance's first value made -0.5, resealed
    start = header["bn.moving_variance"]["data_offsets"][0]
    body = body[:start] + np.float32(-0.5).tobytes() + body[start + 4 :]
    path.write_bytes(seal(header, body))
    with pytest.raises(FileFormatError, match=r"buffer 'bn\.moving_variance' holds -0\.5, below"):
        Network.load(path)

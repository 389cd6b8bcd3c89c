"""`Permute(dims)`: a row's axes in another order, Keras's Permute (asked for by trial RN: a
sequence's features could not be made a Conv1D's channels but by Reshape and Flatten)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import (
    Conv1D,
    Dense,
    Embedding,
    Flatten,
    Input,
    MeanSquaredError,
    Network,
    Permute,
    SequencePool,
    ShapeError,
)
from deepsharp.core.random import Generator


def test_a_row_s_axes_are_put_in_the_order_given() -> None:
    network = Network([Permute((3, 1, 2))], inputs=(2, 3, 4))
    assert network.output_shape == (4, 2, 3)
    rows = np.arange(48, dtype=np.float32).reshape(2, 2, 3, 4)
    got = network.predict(rows)
    np.testing.assert_array_equal(got.reshape(2, 4, 2, 3), rows.transpose(0, 3, 1, 2))


def test_a_sequence_s_features_become_channels_and_its_mask_is_let_go(
    recwarn: pytest.WarningsRecorder, tmp_path: Path
) -> None:
    ids = Input(6, dtype="int64", name="ids")
    channels = Permute((2, 1))(Embedding(9, 4)(ids))  # (4, 6): no positions first
    network = Network(inputs=ids, outputs=Dense(1)(Flatten()(Conv1D(3, 2)(channels))))
    network.initialize(Generator(0))
    rows = np.array([[1, 2, 3, 0, 0, 0], [4, 5, 6, 7, 8, 1]])
    network.predict(rows, MeanSquaredError())
    assert not [w for w in recwarn if "takes channels first" in str(w.message)]
    # positions kept first (dims starting with 1): the mask goes on, and the pool leaves the
    # padding out
    kept = Network([Embedding(9, 4), Permute((1, 2)), SequencePool()], inputs=6)
    kept.initialize(Generator(1))
    table = kept.slots["embedding.table"]
    np.testing.assert_allclose(kept.predict(rows[:1]), [table[[1, 2, 3]].mean(0)], rtol=5e-7)
    network.save(tmp_path / "permuted.safetensors")
    again = Network.load(tmp_path / "permuted.safetensors")
    np.testing.assert_array_equal(
        again.predict(rows, MeanSquaredError()), network.predict(rows, MeanSquaredError())
    )


@pytest.mark.parametrize(
    "dims", [(1, 1), (0, 1), (2,), (1, 3), "21", (1.0, 2), (True, 2), ()], ids=repr
)
def test_dims_that_are_no_order_of_the_axes_are_refused(dims: object) -> None:
    with pytest.raises(ValueError, match="dims is an order of a row's axes counted from 1"):
        Permute(dims)  # type: ignore[arg-type]


def test_dims_of_another_count_than_the_row_s_axes_are_refused() -> None:
    with pytest.raises(ShapeError, match=r"orders 2 axes, and rows of shape .* have 3"):
        Network([Permute((2, 1))], inputs=(2, 3, 4)).build()

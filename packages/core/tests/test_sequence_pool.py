"""`SequencePool(how="mean"|"max")`: a sequence's mean or maximum over its positions, (N, L, D)
-> (N, D), the padding an Embedding marks left out (Keras's GlobalAveragePooling1D and
GlobalMaxPooling1D). Asked for by trial RN: a text's embeddings could not be averaged over its
words (GlobalAvgPool takes channels first and averaged each word's features instead), and
nothing left the padding out. Its way back is nudged in the layer harness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Dense,
    Embedding,
    FitOptions,
    MeanSquaredError,
    Network,
    SequencePool,
    ShapeError,
    TrainedNetwork,
    Trainer,
    fit,
)
from deepsharp.core.random import Generator

IDS = np.array([[3, 4, 0, 0, 0], [0, 0, 5, 6, 7], [0, 0, 0, 0, 0], [1, 2, 3, 4, 5]])
TOKENS = [[3, 4], [5, 6, 7], [], [1, 2, 3, 4, 5]]


def _pooled(how: str) -> Network:
    network = Network([Embedding(9, 3), SequencePool(how)], inputs=5)
    network.initialize(Generator(0))
    return network


@pytest.mark.parametrize("engine", ["light", "light:float32", "testbuffer"])
@pytest.mark.parametrize("how", ["mean", "max"])
def test_the_padding_is_left_out_and_a_row_of_none_gives_zeros(how: str, engine: str) -> None:
    network = _pooled(how)
    table = network.slots["embedding.table"]
    got = network.predict(IDS, MeanSquaredError(), engine=engine)
    for row, tokens in zip(got, TOKENS):
        wanted = getattr(table[tokens], how)(0) if tokens else np.zeros(3, np.float32)
        np.testing.assert_allclose(row, wanted, rtol=5e-7, atol=1e-7)  # a total, then / n
    assert not np.signbit(got[2]).any()  # a row of none: 0.0, not -0.0 (trial MS)
    # no mask (Embedding(mask_zero=False)): every place, padding included
    plain = Network([Embedding(9, 3, mask_zero=False), SequencePool(how)], inputs=5)
    plain.set_slots(network.slots)
    every = plain.predict(IDS, MeanSquaredError(), engine=engine)
    np.testing.assert_allclose(every[0], getattr(table[IDS[0]], how)(0), rtol=5e-7)


@pytest.mark.parametrize("how", ["mean", "max"])
def test_the_padding_s_row_of_the_table_gets_no_gradient(how: str) -> None:
    network = Network([Embedding(9, 3), SequencePool(how), Dense(1)], inputs=5)
    network.initialize(Generator(1))
    before = network.slots["embedding.table"].copy()
    trainer = Trainer(network, BinaryCrossEntropy(), Adam(0.1), engine="light", seed=0)
    trainer.step(IDS[:2], np.array([[1.0], [0.0]], np.float32))
    after = trainer.network.slots["embedding.table"]
    np.testing.assert_array_equal(after[0], before[0])  # id 0: padding alone
    changed = {i for i in range(9) if not np.array_equal(after[i], before[i])}
    assert changed <= {3, 4, 5, 6, 7} and {3, 5} <= changed


def test_it_is_saved_and_refused_where_it_does_not_fit(tmp_path: Path) -> None:
    network = Network([Embedding(9, 3), SequencePool("max"), Dense(1)], inputs=5)
    ids, targets = np.tile(IDS, (3, 1)), np.ones((12, 1), np.float32)
    options = FitOptions(epochs=1, progress=False, seed=0)
    trained = fit(None, (ids, targets), network, MeanSquaredError(), Adam(0.1), options).trained
    path = tmp_path / "pooled.safetensors"
    trained.save(path)
    loaded = TrainedNetwork.load(path)
    assert loaded.network.layers[1].how == "max"
    np.testing.assert_array_equal(loaded.predict(IDS), trained.predict(IDS))
    with pytest.raises(ShapeError, match=r"takes sequences \(N, L, D\).*GlobalAvgPool\(\)"):
        Network([SequencePool()], inputs=(2, 3, 4)).build()
    with pytest.raises(ValueError, match="how is 'mean' or 'max', not 'sum'"):
        SequencePool("sum")

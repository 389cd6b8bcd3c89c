"""Generating text from a next-token model (`TrainedNetwork.generate`): ids drawn only where the
vocabulary holds a token, and what it refuses."""

from __future__ import annotations

import pytest

from deepsharp.core import (
    ConfigurationError,
    CrossEntropy,
    Dense,
    Embedding,
    Input,
    MeanSquaredError,
    Network,
    Pipeline,
    TrainedNetwork,
)
from deepsharp.core.random import Generator


def _model(vocabulary: int, text: str, loss: object = None) -> TrainedNetwork:
    pipeline = Pipeline().text("context", tokens="characters", length=8, vocabulary=vocabulary)
    pipeline.learn([{"context": text}])
    ids = Input(8, dtype="int64", name="context")
    network = Network(inputs=ids, outputs=Dense(vocabulary)(Embedding(vocabulary, 4)(ids)))
    network.initialize(Generator(0))
    return TrainedNetwork(network, loss or CrossEntropy(), pipeline)


def test_ids_the_vocabulary_holds_no_token_for_are_never_drawn() -> None:
    model = _model(20, "abcabcabba")  # 3 tokens learned, 20 ids a position
    written = model.generate("ab", 200, temperature=1e30)  # every id all but equally likely
    assert set(written) <= set("abc") and len(written) == 202
    assert model.generate("ab", 30, seed=1) == model.generate("ab", 30, seed=1)


def test_a_model_that_is_not_a_next_token_model_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not CrossEntropy"):
        _model(20, "abcabc", MeanSquaredError()).generate("ab", 3)
    with pytest.raises(ValueError, match="temperature is a number above 0"):
        _model(20, "abcabc").generate("ab", 3, temperature=0.0)


def test_a_temperature_so_small_the_logits_overflow_writes_the_likeliest_tokens() -> None:
    """Before: temperature=1e-310 made the weights NaN and raised an IndexError."""
    model = _model(6, "abcabcabba")
    greedy = model.generate("ab", 20, temperature=1e-310, seed=3)
    assert greedy == model.generate("ab", 20, temperature=1e-310, seed=4)  # no draw: the argmax
    assert greedy == model.generate("ab", 20, temperature=1e-6, seed=5)

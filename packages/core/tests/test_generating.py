"""Generating text from a next-token model (`TrainedNetwork.generate`): ids drawn only where the
vocabulary holds a token, and what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core import (
    ConfigurationError,
    CrossEntropy,
    DataError,
    Dense,
    Embedding,
    Input,
    MeanSquaredError,
    Network,
    Pipeline,
    PositionalEmbedding,
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
    with pytest.raises(ValueError, match="temperature is a number from 0"):
        _model(20, "abcabc").generate("ab", 3, temperature=-0.5)


def test_a_temperature_so_small_the_logits_overflow_writes_the_likeliest_tokens() -> None:
    """Before: temperature=1e-310 made the weights NaN and raised an IndexError."""
    model = _model(6, "abcabcabba")
    greedy = model.generate("ab", 20, temperature=1e-310, seed=3)
    assert greedy == model.generate("ab", 20, temperature=1e-310, seed=4)  # no draw: the argmax
    assert greedy == model.generate("ab", 20, temperature=1e-6, seed=5)
    # temperature 0 is greedy, as many generators take it (refused before: trial PT)
    assert greedy == model.generate("ab", 20, temperature=0, seed=6)
    # logits all below 0 (a model ending in Softmax draws from log-probabilities) overflow to
    # -inf: greedy too (failed before, trial CO: the last token, or an IndexError)
    network = model.network
    weights = network.slots
    weights[f"{network.layers[-1].name}.bias"] = weights[f"{network.layers[-1].name}.bias"] - 50.0
    network.set_slots(weights)
    low = model.generate("ab", 20, temperature=1e-307, seed=3)
    assert low == model.generate("ab", 20, temperature=1e-310, seed=3) == greedy


def test_numpy_numbers_are_taken_and_a_seed_is_within_64_bits() -> None:
    """Failed before (trial CO): np.float32 temperatures and np.int64 lengths were refused, and
    the seeds 2**64 and 0 (or -1 and 2**64 - 1) drew the same text."""
    import numpy as np

    model = _model(20, "abcabcabba")
    assert model.generate("ab", np.int64(5), temperature=np.float32(0.5), seed=np.int64(2)) == (
        model.generate("ab", 5, temperature=0.5, seed=2)
    )
    for hot in (10**400, np.longdouble("1e400")):  # past float64's range (greedy before)
        with pytest.raises(
            ValueError, match=r"temperature is a number from 0 .* to float64's largest"
        ):
            model.generate("ab", 3, temperature=hot)
    for seed in (2**64, -1):
        with pytest.raises(ValueError, match=r"seed is a whole number from 0 to 2\*\*64 - 1"):
            model.generate("ab", 3, seed=seed)


@pytest.mark.parametrize("padding", ["end", "start"])
def test_the_prompt_is_laid_out_as_the_column_lays_out_its_ids(padding: str) -> None:
    """Failed before on padding="start": the prompt was written from the window's first place
    and its logits read there, a layout the column (so training and predict) never made."""
    pipeline = Pipeline().text("context", tokens="characters", length=8, padding=padding)
    pipeline.learn([{"context": "the cat sat on the mat and the rat ate the hat"}])
    ids = Input(8, dtype="int64", name="context")
    vocabulary = pipeline.columns[0].vocabulary
    embedded = PositionalEmbedding(8, 6)(Embedding(vocabulary, 6)(ids))
    network = Network(inputs=ids, outputs=Dense(vocabulary)(embedded))
    network.initialize(Generator(3))
    model = TrainedNetwork(network, CrossEntropy(), pipeline)
    tokens = pipeline.columns[0].tokens
    for prompt in ("the", "ca", "t", "the mat"):
        row = pipeline.features([{"context": prompt}])
        logits = network.predict(row, CrossEntropy()).reshape(8, vocabulary)
        last = 7 if padding == "start" else len(prompt) - 1
        drawable = logits[last, 2 : 2 + len(tokens)]
        expected = tokens[int(drawable.argmax())]
        assert model.generate(prompt, 1, temperature=1e-6) == prompt + expected, prompt


def test_top_k_draws_from_the_likeliest_tokens_alone() -> None:
    import numpy as np

    from deepsharp.core.generating import _draw

    logits = np.array([9.0, 9.0, 0.5, 3.0, 2.0, 3.0, -1.0, 7.0])  # ids 0, 1: padding, unknown
    drawn = {_draw(logits, 1e6, Generator(seed), 7, top_k=2) for seed in range(200)}
    assert drawn == {3, 5}  # 3.0 twice (id 7 holds no token); 0.5, 2.0 and -1.0 never
    drawn = {_draw(logits, 1e6, Generator(seed), 7, top_k=3) for seed in range(200)}
    assert drawn == {3, 4, 5}
    everything = {_draw(logits, 1e6, Generator(seed), 7, top_k=50) for seed in range(300)}
    assert everything == {2, 3, 4, 5, 6}
    model = _model(6, "abcabcabba")
    assert model.generate("ab", 20, top_k=1, seed=7) == model.generate("ab", 20, temperature=0)
    assert model.generate("ab", 20, seed=2, top_k=None) == model.generate("ab", 20, seed=2)
    for wrong in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="top_k is a whole number of tokens from 1"):
            model.generate("ab", 3, top_k=wrong)  # type: ignore[arg-type]


def test_logits_that_overflowed_are_refused_not_drawn_as_padding() -> None:
    """Failed before (trial HC): every logit NaN or infinite, argmax drew id 0, padding, and
    its token was printed ('the&&&&&'); predict refuses such a network."""
    import numpy as np

    from deepsharp.core import DataError

    model = _model(6, "abcabcabba")
    network = model.network
    network.set_slots({name: np.full_like(value, 3e38) for name, value in network.slots.items()})
    with pytest.raises(DataError, match="the logits of token 1 drawn are not all finite"):
        model.generate("ab", 5)


def test_pieces_come_as_each_token_is_drawn() -> None:
    """`deepsharp generate` writes each token as it comes (a long text was silent to its end:
    trial HC): the pieces are the prompt, then a token each, lazily."""
    import itertools

    from deepsharp.core.generating import pieces

    model = _model(6, "abcabcabba")
    first = list(itertools.islice(pieces(model, "ab", 10**12, seed=4), 4))  # no hang
    assert first[0] == "ab" and all(len(piece) == 1 for piece in first[1:])
    assert "".join(pieces(model, "ab", 9, seed=4)) == model.generate("ab", 9, seed=4)
    with pytest.raises(ValueError, match="temperature"):  # settings checked before any piece
        pieces(model, "ab", 3, temperature=-1.0)


def test_pieces_leave_numpy_s_warnings_as_they_were_between_pieces() -> None:
    """Failed before (review): the errstate the draws hold stayed on while the caller held
    the text, its own NumPy warnings off."""
    import numpy as np

    from deepsharp.core.generating import pieces

    model = _model(6, "abcabcabba")
    before = np.geterr()
    text = pieces(model, "ab", 3, seed=1)
    next(text)
    next(text)
    assert np.geterr() == before
    list(text)
    assert np.geterr() == before


def test_a_token_of_no_chance_is_no_overflow() -> None:
    """Refused before (review): a logit of -inf alone is a token of no chance (predict serves
    such a network); NaN, +inf or every logit -inf are the overflow refused."""
    import numpy as np

    from deepsharp.core import DataError
    from deepsharp.core.generating import _draw

    logits = np.array([0.0, 0.0, 1.0, -np.inf, 2.0])
    assert {_draw(logits, 1.0, Generator(seed), 5) for seed in range(50)} == {2, 4}
    for broken in ([0.0, 0.0, np.nan, 1.0, 1.0], [0.0, 0.0, np.inf, 1.0, 1.0],
                   [0.0, 0.0, -np.inf, -np.inf, -np.inf]):  # fmt: skip
        with pytest.raises(DataError, match="not all finite"):
            _draw(np.array(broken), 1.0, Generator(0), 5)


def _bigram_losses(model: TrainedNetwork, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Each token's logits from the one before it, as `_model`'s network gives them (a
    position reads its own token alone), worked out on the host in float64."""
    slots = model.network.slots
    table = np.asarray(slots["embedding.table"], np.float64)
    logits = table @ np.asarray(slots["dense.weights"], np.float64)
    logits += np.asarray(slots["dense.bias"], np.float64)
    column = model.pipeline.columns[0]
    ids = np.array([column.lookup.get(token, 1) for token in text])
    return logits[ids[:-1]], ids[1:]


def test_a_next_token_model_is_evaluated_on_a_text_every_token_once() -> None:
    """Failed before (the last round's note): a next-token model's pipeline has no target
    column, so evaluate refused it whatever it was given; a text is its rows with targets."""
    model = _model(6, "abcabcabba")  # 8 positions: windows of 9 tokens
    text = "abcabcabbacbacabc"  # 17 tokens: windows from 0 and 8, every target once
    measures = model.evaluate(text, metrics=("f1",))
    logits, targets = _bigram_losses(model, text)
    logs = logits - logits.max(1, keepdims=True)
    logs -= np.log(np.exp(logs).sum(1, keepdims=True))
    assert list(measures) == ["loss", "accuracy", "f1"]
    assert measures["loss"] == pytest.approx(-logs[np.arange(16), targets].mean(), rel=1e-5)
    assert measures["accuracy"] == pytest.approx((logits.argmax(1) == targets).mean())
    # 19 tokens: a third window ends at the last token; the 6 it shares are counted twice
    longer = text + "ab"
    logits, targets = _bigram_losses(model, longer)
    logs = logits - logits.max(1, keepdims=True)
    logs -= np.log(np.exp(logs).sum(1, keepdims=True))
    places = np.r_[0:16, 10:18]
    wanted = -logs[places, targets[places]].mean()
    assert model.evaluate(longer, batch_size=2)["loss"] == pytest.approx(wanted, rel=1e-5)


def test_evaluate_says_a_text_is_what_a_next_token_model_is_measured_on() -> None:
    model = _model(6, "abcabcabba")
    with pytest.raises(DataError, match="it is a next-token model, so give evaluate a text"):
        model.evaluate([{"context": "abcabcab"}])
    with pytest.raises(DataError, match=r"cuts into 8 tokens .* give a text of 9 tokens or more"):
        model.evaluate("abcabcab")
    with pytest.raises(ConfigurationError, match="evaluate measures the next token's softmax"):
        _model(6, "abcabc", MeanSquaredError()).evaluate("abcabcabcabc")


def test_a_long_text_is_cut_a_part_at_a_time_as_it_is_cut_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its ids and windows made a part at a time (a review: a 40 MB text took 1.24 GB, every
    token's string held at once); words are cut at a space, so none lies across two parts."""
    from deepsharp.core import evaluating

    for tokens, text in (
        ("characters", "abcabcabbacbacabcab" * 7),
        ("words", " ".join(["the cat sat", "on the mat", "café latte"] * 9)),
    ):
        pipeline = Pipeline().text("context", tokens=tokens, length=4, vocabulary=12)
        pipeline.learn([{"context": text}])
        ids = Input(4, dtype="int64", name="context")
        network = Network(inputs=ids, outputs=Dense(12)(Embedding(12, 3)(ids)))
        network.initialize(Generator(0))
        model = TrainedNetwork(network, CrossEntropy(), pipeline)
        whole = model.evaluate(text, metrics=("f1",))
        column = pipeline.columns[0]
        monkeypatch.setattr(evaluating, "PART", 5)  # a few characters a part, 1 window a feed
        assert evaluating._ids(column, text).tolist() == [
            column.lookup.get(token, 1) for token in column.split(text)
        ]
        assert model.evaluate(text, metrics=("f1",)) == whole
        monkeypatch.undo()


@pytest.mark.parametrize(
    "text",
    [
        "ab," * 40,  # no space at all: words between commas
        "x" * 19 + "e\u0301" + "-cafe",  # a letter and its combining mark at the cut
        "ab " * 3 + "<\u0338" * 30 + "ab",  # a mark NFC composes with the separator before it
        "中文" * 30 + " ab",  # a script written without spaces
    ],
    ids=["commas", "mark", "composed", "no-spaces"],
)
def test_words_are_cut_a_part_at_a_time_as_whole_whatever_separates_them(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before (a review): a part was cut at its last space alone, else mid-word."""
    from deepsharp.core import evaluating
    from deepsharp.core.data.text import Text

    column = Text("t", tokens="words", length=4, vocabulary=10)
    column.lookup = {"ab": 2, "x" * 19 + "é": 3, "cafe": 4, "中文" * 30: 5}
    monkeypatch.setattr(evaluating, "PART", 19)
    whole = [column.lookup.get(token, 1) for token in column.split(text)]
    assert evaluating._ids(column, text).tolist() == whole

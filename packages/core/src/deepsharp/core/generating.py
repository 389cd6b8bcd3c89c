"""Generation: a next-token model's text, drawn token after token (`TrainedNetwork.generate`).

A next-token model is a trained network whose pipeline is one text column (its vocabulary cuts
a prompt into ids and turns ids back into tokens), whose network takes one input of those ids,
(L,) int64, and gives at every position the logits of the token that follows, (L, vocabulary),
under `CrossEntropy` — the Shakespeare sample is one. Each new token is drawn from
softmax(logits / temperature) at the last position the context fills (the last L tokens, laid
out as the column lays out its ids: from its start, or ending at its last place where the column
pads at the start; a causal network reads no place after it), from deepsharp's own generator (`seed`),
so the same call gives the same text on the same engine. Padding and unknown ids are never
drawn, nor ids the vocabulary holds no token for (a network of more outputs than the column
learned tokens: text of fewer kinds of token than its vocabulary's size).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.data.text import UNKNOWN, Text
from deepsharp.core.engine import Engine
from deepsharp.core.errors import ConfigurationError, DataError
from deepsharp.core.nn.layer import Pass
from deepsharp.core.nn.losses import CrossEntropy
from deepsharp.core.nn.predicting import serving_engine
from deepsharp.core.random import Generator

if TYPE_CHECKING:
    from deepsharp.core.serving import TrainedNetwork

__all__ = ["generate", "is_next_token_model", "next_token_column", "pieces"]


def next_token_column(trained: TrainedNetwork, doing: str = "generate") -> Text:
    """The text column whose tokens a next-token model draws; a ConfigurationError naming what
    makes `trained` none (its pipeline, its network's input or output, its loss), for `doing`
    (generate, evaluate on a text)."""
    pipeline, network = trained.pipeline, trained.network
    columns = [] if pipeline.takes_arrays else pipeline.columns
    if len(columns) != 1 or not isinstance(columns[0], Text):
        kinds = ", ".join(f"{c.kind} {c.name!r}" for c in columns) or "arrays"
        raise ConfigurationError(
            f"{_does(doing)}, whose pipeline is one text column; this one's is {kinds}: a network "
            f"trained on other rows {_instead(doing)}"
        )
    column = columns[0]
    specs = network.input_specs
    if len(specs) != 1 or specs[0].dtype != "int64" or specs[0].shape != (column.length,):
        raise ConfigurationError(
            f"{doing} needs a network of one input of the text column {column.name!r}'s ids, "
            f"({column.length},) int64; this network's inputs are "
            f"{[(s.name, s.shape, s.dtype) for s in specs]}"
        )
    if network.output_shape != (column.length, column.vocabulary):
        raise ConfigurationError(
            f"{doing} needs a network that gives, at each of the {column.length} positions, "
            f"the logits of the next token over the column's {column.vocabulary} ids: "
            f"(N, {column.length}, {column.vocabulary}); this one gives rows of "
            f"{network.output_shape} ({network.layers[network.graph.nodes[-1].layer].label})"
        )
    if not isinstance(trained.loss, CrossEntropy):
        raise ConfigurationError(
            f"{doing} {'draws from' if doing == 'generate' else 'measures'} the next token's "
            f"softmax: the network's loss is "
            f"{trained.loss!r}, not CrossEntropy"
        )
    return column


def is_next_token_model(trained: TrainedNetwork) -> bool:
    """Whether `trained` is a next-token model (`next_token_column` finds its column)."""
    try:
        next_token_column(trained)
    except ConfigurationError:
        return False
    return True


def _does(doing: str) -> str:
    if doing == "generate":
        return "generate draws tokens of a next-token model"
    return "evaluate measures a text with a next-token model"


def _instead(doing: str) -> str:
    if doing == "generate":
        return "predicts them, it does not write text"
    return "is evaluated on such rows with their targets, not on a text"


def generate(
    trained: TrainedNetwork,
    prompt: str,
    length: int,
    temperature: float = 1.0,
    seed: int = 0,
    engine: Engine | str | None = None,
    top_k: int | None = None,
) -> str:
    """`prompt` and `length` tokens drawn after it (see the module's docstring); `top_k`: each
    drawn from the `top_k` likeliest tokens alone (those tied with the last of them too)."""
    return "".join(pieces(trained, prompt, length, temperature, seed, engine, top_k))


def pieces(
    trained: TrainedNetwork,
    prompt: str,
    length: int,
    temperature: float = 1.0,
    seed: int = 0,
    engine: Engine | str | None = None,
    top_k: int | None = None,
) -> Iterator[str]:
    """The text `generate` writes, piece by piece as each token is drawn: the prompt, then each
    token with what joins it to the text before (`deepsharp generate` writes them as they
    come). Its settings are checked here, before any piece."""
    column = next_token_column(trained)
    if top_k is not None and (
        isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, numbers.Integral) or top_k < 1
    ):
        raise ValueError(
            f"generate: top_k is a whole number of tokens from 1 (1: the likeliest each time), "
            f"or None for every token, not {top_k!r}"
        )
    if (
        isinstance(length, (bool, np.bool_))
        or not isinstance(length, numbers.Integral)
        or length < 0
    ):
        raise ValueError(f"generate: length is a whole number of tokens to draw, not {length!r}")
    try:  # (as a float: 1e400 in a longdouble, or 10**400, is past float64's range)
        warmth = float(temperature) if isinstance(temperature, numbers.Real) else math.nan
    except OverflowError:
        warmth = math.inf
    if isinstance(temperature, (bool, np.bool_)) or not 0.0 <= warmth < math.inf:
        raise ValueError(
            f"generate: temperature is a number from 0 (greedy: the likeliest token each time) "
            f"to float64's largest, not {temperature!r}"
        )
    if (
        isinstance(seed, (bool, np.bool_))
        or not isinstance(seed, numbers.Integral)
        or not 0 <= seed < 2**64
    ):  # (a larger one, or a negative one, would be another's 64 bits: the same draws)
        raise ValueError(f"generate: seed is a whole number from 0 to 2**64 - 1, not {seed!r}")
    length, seed = int(length), int(seed)
    if not isinstance(prompt, str):
        raise TypeError(f"generate: the prompt is text, not {type(prompt).__name__}")
    ids = [column.lookup.get(token, UNKNOWN) for token in column.split(prompt)]
    if not ids:
        raise ValueError(
            f"generate: the prompt holds no token of the column {column.name!r} "
            f"({column.tokens_of}): give it some text to go on from"
        )
    tokens = column.tokens or []
    if not tokens:
        raise ConfigurationError(
            f"generate: the column {column.name!r} learned no token, so there is none to draw"
        )
    return _drawn(trained, column, prompt, ids, length, warmth, seed, engine, top_k)


def _drawn(
    trained: TrainedNetwork,
    column: Text,
    prompt: str,
    ids: list[int],
    length: int,
    temperature: float,
    seed: int,
    engine: Engine | str | None,
    top_k: int | None,
) -> Iterator[str]:
    tokens = column.tokens or []
    made = serving_engine(engine)
    network, context_length = trained.network, column.length
    bound = network.put(made)
    context = Pass(made, False, None)
    draws = Generator(seed)
    joiner = "" if column.tokens_of == "characters" else " "
    yield prompt
    ids = ids[-context_length:]
    for drawn in range(length):
        # NumPy's warnings held while a token is drawn alone, not while the caller holds the
        # text between pieces (a review: they were off in the caller's own work).
        with np.errstate(all="ignore"):
            row = np.zeros((1, context_length), np.int64)
            place = context_length - len(ids) if column.padding == "start" else 0
            row[0, place : place + len(ids)] = ids  # as the column lays out its ids
            out = network.forward([Tensor.put(made, row)], bound, context)
            logits = _logits(trained, made.get(out.handle)[0, place + len(ids) - 1])
            chosen = _draw(logits, temperature, draws, 2 + len(tokens), top_k, drawn)
        ids = [*ids[1 - context_length :], chosen] if context_length > 1 else [chosen]
        first = drawn == 0 and (not joiner or prompt.endswith(" "))
        yield ("" if first else joiner) + tokens[chosen - 2]


def _logits(trained: TrainedNetwork, outputs: NDArray[Any]) -> NDArray[np.float64]:
    values = np.asarray(outputs, np.float64)
    if isinstance(trained.loss, CrossEntropy) and not trained.loss.from_logits:
        return np.log(np.maximum(values, 1e-300))  # probabilities given: their logs
    return values


def _draw(
    logits: NDArray[np.float64],
    temperature: float,
    draws: Generator,
    drawable: int,
    top_k: int | None = None,
    before: int = 0,
) -> int:
    """An id drawn from softmax(logits / temperature), never padding (0), unknown (1) or an id
    from `drawable` on (one the vocabulary holds no token for); where `top_k` is given, from
    the `top_k` likeliest of the others alone (and those tied with the last of them)."""
    found = logits[2:drawable]
    # NaN or +inf, or no token of finite logit (argmax then drew padding and printed it:
    # trial HC); a token whose logit is -inf alone is one of no chance (a review).
    broken = np.isnan(found) | (found == np.inf)
    if broken.any() or not (found > -np.inf).any():
        bad = float(found[broken][0]) if broken.any() else -math.inf
        raise DataError(
            f"generate: the logits of token {before + 1} drawn are not all finite ({bad!r}): a "
            "value overflowed inside the network from finite ids (its slots may hold values too "
            "large: predict refuses its rows too)"
        )
    logits = logits.copy()
    logits[:2] = -np.inf
    logits[drawable:] = -np.inf
    if top_k is not None and top_k < drawable - 2:
        kept = np.partition(logits, -top_k)[-top_k]  # the k-th largest
        logits[logits < kept] = -np.inf
    if temperature == 0.0:  # greedy, as many generators take 0 (trial PT: it was refused)
        return int(np.argmax(logits))
    scaled = logits / temperature
    if not np.isfinite(scaled.max()):  # a temperature so small the logits overflow (either
        return int(np.argmax(logits))  # way: all below 0 make -inf): its limit, greedy
    weights = np.exp(scaled - scaled.max())
    cumulative = np.cumsum(weights)
    place = draws.uniform(1)[0] * cumulative[-1]
    return int(min(np.searchsorted(cumulative, place, side="right"), len(cumulative) - 1))

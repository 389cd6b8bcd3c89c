"""The networks deepsharp trains when given none (rows of features; rows with text), and
networks made by a function of the user's (`deepsharp train --network MODULE:FUNCTION`, the
scikit-learn estimators' builders)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from deepsharp.core.nn.graph import Input, Symbol
from deepsharp.core.nn.layer import Layer
from deepsharp.core.nn.layers import LSTM, Concatenate, Dense, Embedding, Relu, Rescaling
from deepsharp.core.nn.network import Network

__all__ = [
    "built",
    "default_network",
    "rescaled",
    "standardised",
    "targets_scale",
    "text_network",
]


def default_network(outputs: int, last: Layer | None = None) -> Network:
    """Dense(32), ReLU, Dense(outputs): one hidden layer, its inputs inferred from the features;
    then `last`, where given (a regression's `Rescaling` to its targets' scale)."""
    return Network([Dense(32), Relu(), Dense(outputs), *([last] if last is not None else [])])


def targets_scale(targets: Any) -> tuple[Any, Any]:
    """Number targets' spread (standard deviation) and mean, a column's own for each column of
    (N, targets): what a `Rescaling` at the end of a network trained on the targets standardised
    (`standardised`) takes, to predict on their scale. A column of one value has a spread of 0:
    learned as zeros (`standardised`) and predicted as its value, whatever the network gives
    (its spread was 1, and a constant 2**-20 came back as -0.003 to 0.009: trial S).
    (A column whose spread was under a millionth of its mean had a spread of 1 too, and was
    learned unstandardised: 1e8 plus a signal of spread 90 was not learned, 1e20 plus one of
    1e13 came out constant and 1e30 plus one of 1e22 diverged at the first step.)"""
    values = np.asarray(targets, np.float64).reshape(len(targets), -1)
    mean = values.mean(axis=0)
    spread = values.std(axis=0)
    spread[~(spread > 0.0)] = 0.0
    return spread, mean


def standardised(targets: Any, spread: Any, mean: Any) -> Any:
    """(targets - mean) / spread, a column at a time, in the targets' shape (a column of
    spread 0, one value, as targets - mean: zeros)."""
    values = np.asarray(targets, np.float64)
    columns = values.reshape(len(values), -1)
    divisor = np.where(np.asarray(spread) > 0.0, spread, 1.0)
    return ((columns - mean) / divisor).reshape(values.shape)


def is_identity(layer: Any) -> bool:
    """Whether a layer is a `Rescaling` of scale 1 and offset 0: one a regression's targets,
    standardised while it trains, set to their scale after (one of other numbers is a scale
    of one's own, kept)."""
    return bool(
        isinstance(layer, Rescaling)
        and np.all(np.asarray(layer.scale) == 1.0)
        and np.all(np.asarray(layer.offset) == 0.0)
    )


def rescaled(network: Network, spread: Any, mean: Any) -> None:
    """Set the network's last layer, a `Rescaling` trained as the identity (on standardised
    targets), to the targets' spread and mean: its predictions then on their scale."""
    last = network.layers[-1]
    assert isinstance(last, Rescaling), last
    last.scale = [float(v) for v in spread] if len(spread) > 1 else float(spread[0])
    last.offset = [float(v) for v in mean] if len(mean) > 1 else float(mean[0])
    buffers = network.buffers
    buffers[f"{last.name}.scale"] = np.asarray(spread, np.float32)
    buffers[f"{last.name}.offset"] = np.asarray(mean, np.float32)
    network.set_buffers(buffers)


def text_network(
    outputs: int,
    texts: Mapping[str, tuple[int, int]],
    features: tuple[str, int] | None = None,
    last: Layer | None = None,
) -> Network:
    """A network for rows with text: each text input's ids (`texts`: its name -> (length,
    vocabulary)) through Embedding(vocabulary, 32) and LSTM(32), the other features (`features`:
    the input's name and width, if any) through Dense(32, relu); side by side, then
    Dense(32, relu) and Dense(outputs); then `last`, where given."""
    inputs: list[Symbol] = []
    parts: list[Symbol] = []
    for name, (length, vocabulary) in texts.items():
        ids = Input(length, dtype="int64", name=name)
        inputs.append(ids)
        parts.append(LSTM(32)(Embedding(vocabulary, 32)(ids)))
    if features is not None:
        values = Input(features[1], name=features[0])
        inputs.append(values)
        parts.append(Dense(32, activation="relu")(values))
    joined = parts[0] if len(parts) == 1 else Concatenate()(parts)
    out = Dense(outputs)(Dense(32, activation="relu")(joined))
    return Network(inputs=inputs, outputs=out if last is None else last(out))


def built(builder: Callable[..., Any], outputs: int, **more: Any) -> Any:
    """What `builder` makes: called with `outputs=` (how many values a row must get) and each
    of `more` it takes a parameter of that name for. The caller checks it is a Network."""
    given = {"outputs": outputs, **more}
    return builder(**{name: value for name, value in given.items() if takes(builder, name)})


def takes(function: Callable[..., Any], name: str) -> bool:
    """Whether a function takes a parameter of this name."""
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False

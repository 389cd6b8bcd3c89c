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

__all__ = ["built", "default_network", "targets_scale", "text_network"]


def default_network(outputs: int, last: Layer | None = None) -> Network:
    """Dense(32), ReLU, Dense(outputs): one hidden layer, its inputs inferred from the features;
    then `last`, where given (a regression's `Rescaling` to its targets' scale)."""
    return Network([Dense(32), Relu(), Dense(outputs), *([last] if last is not None else [])])


def targets_scale(targets: Any) -> Rescaling:
    """`Rescaling` to number targets' scale: their spread (standard deviation; 1 where they are
    all alike) and mean, a column's own for each column of (N, targets)."""
    values = np.asarray(targets, np.float64).reshape(len(targets), -1)
    spread = values.std(axis=0)
    spread[~(spread > 1e-12)] = 1.0
    mean = values.mean(axis=0)
    if values.shape[1] == 1:
        return Rescaling(float(spread[0]), float(mean[0]))
    return Rescaling(spread.tolist(), mean.tolist())


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

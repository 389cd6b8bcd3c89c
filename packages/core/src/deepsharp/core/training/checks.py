"""What a trainer checks of what it is handed before it touches an engine: the parts of a run
(a network, a loss, an optimizer), a batch's rows, and the rows' weights."""

from __future__ import annotations

import dis
import inspect
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import (
    ConfigurationError,
    DataError,
    DeepSharpWarning,
    check_instance,
    described,
)
from deepsharp.core.nn.losses import BinaryCrossEntropy, CrossEntropy, Loss
from deepsharp.core.nn.network import Network, in_order
from deepsharp.core.nn.optimizers import Optimizer

__all__ = [
    "check_parts",
    "checked_rows",
    "checked_weights",
    "quiet",
    "refuse_no_probabilities",
    "refuse_target_in_features",
    "rows_in",
    "warn_of_weights_unread",
]


def check_parts(network: Any, loss: Any, optimizer: Any, where: str) -> None:
    """Refuse a network, loss or optimizer of the wrong kind, and a class handed where one of its
    instances belongs (`BinaryCrossEntropy` for `BinaryCrossEntropy()`), saying what to write."""
    for what, value, kind in (
        ("network", network, Network),
        ("loss", loss, Loss),
        ("optimizer", optimizer, Optimizer),
    ):
        check_instance(what, value, kind, where)
    refuse_no_probabilities(loss, network)


def refuse_no_probabilities(loss: Loss, network: Network) -> None:
    """Refuse to train a loss of probabilities (from_logits=False) where the network ends in
    deepsharp's own layer of weights without the link (a Dense, a convolution): its outputs
    are no probabilities, and the loss trained on them as such, its predictions below 0 (trial
    X3). At a run's start alone: a file trained so before still serves."""
    if not isinstance(loss, (BinaryCrossEntropy, CrossEntropy)):
        return
    if loss.from_logits:
        return
    last = _values_made(network)
    if last.ends_in is not None:  # its link (perhaps before a Dropout): probabilities
        return
    link = "sigmoid" if isinstance(loss, BinaryCrossEntropy) else "softmax"
    if type(last).__name__ in ("Dense", "Conv1D", "Conv2D") and type(last).__module__.startswith(
        "deepsharp."
    ):
        name = type(loss).__name__
        raise ConfigurationError(
            f"{name}(from_logits=False) takes probabilities, and the network ends in "
            f"{last.label}, whose outputs are not ({link} not applied): give {name}() (it takes "
            f"the logits and applies the {link} itself, its predictions probabilities), or end "
            f"the network in activation='{link}'"
        )


PASSING = ("Dropout", "Flatten", "Reshape", "Permute")
"""deepsharp's layers that pass their input's values on (a Dropout serves them as they are)."""


def _values_made(network: Network) -> Any:
    """The layer that made the network's output values: its last, or the layer before a
    Dropout, Flatten, Reshape or Permute that ends it (trial S2: Dense(3), Dropout(0.1) under
    CrossEntropy(from_logits=False) served 'probabilities' from -55 to 71)."""
    graph = network.graph
    inputs = len(graph.inputs)  # (a node's sources count the network's inputs first)
    node = graph.nodes[-1]
    while True:
        layer = network.layers[node.layer]
        own = type(layer).__module__.startswith("deepsharp.")
        if not (own and type(layer).__name__ in PASSING and len(node.sources) == 1):
            return layer
        if node.sources[0] < inputs:
            return layer
        node = graph.nodes[node.sources[0] - inputs]


def refuse_target_in_features(x: object, y: object) -> None:
    """Refuse features of a DataFrame that hold the column given as the targets (a pandas
    Series of the frame: `(frame, frame["label"])`): the network would read its answer, and
    every figure says so, 1.0 (trial X3)."""
    name = getattr(y, "name", None)
    columns = getattr(x, "columns", None)
    if name is None or columns is None or not hasattr(y, "equals"):
        return
    try:
        held = name in columns and bool(y.equals(x[name]))  # type: ignore[index]
    except (TypeError, ValueError):
        return
    if held:
        raise DataError(
            f"the features hold the target column {name!r} (the targets given are that "
            "column of the frame): the network would read its answer. Give the features "
            f"without it: (frame.drop(columns=[{name!r}]), frame[{name!r}])"
        )


def quiet() -> Any:
    """NumPy's floating-point warnings off, where a value that is not finite is looked for."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


def checked_rows(features: Any, where: str, empty: bool = False) -> NDArray[Any]:
    """One input's batch as an array, at least 2-D with a row (unless it may be empty)."""
    array = np.asarray(features) if not isinstance(features, np.ndarray) else features
    if array.ndim < 2 or (array.shape[0] == 0 and not empty):
        raise DataError(
            f"{where}: a batch is (rows, ...) with at least one row, not of shape {array.shape}"
        )
    return array


def checked_weights(
    weights: Any, rows: int, where: str, positions: int | None = None
) -> NDArray[np.float32]:
    """Rows' weights: one finite number of 0 or more a row (float32, shape (rows,)); where the
    targets are a class at each of `positions` places of a sequence, one a place may be given
    instead (shape (rows, positions): class weights of each place's class)."""
    try:
        given = np.asarray(weights)
        if given.dtype.kind == "c":  # (was cut to its real part, with NumPy's warning: trial S)
            raise TypeError
        array = given.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise DataError(
            f"{where}: the weights must be real numbers, not {described(weights)}"
        ) from None
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    each_place = positions is not None and array.shape == (rows, positions)
    if not each_place and (array.ndim != 1 or array.shape[0] != rows):
        raise DataError(
            f"{where}: {rows} rows and weights of shape {array.shape}: give one weight a row, "
            f"shape ({rows},)"
            + ("" if positions is None else f", or one a place, shape ({rows}, {positions})")
        )
    bad = np.flatnonzero(~np.isfinite(array) | (array < 0) | (array > FLOAT32_MAX))
    if bad.size:
        i = int(bad[0]) // (array.shape[1] if array.ndim == 2 else 1)
        value = float(array.reshape(-1)[int(bad[0])])
        beyond = " beyond float32's range (3.4e38)" if math.isfinite(value) and value > 0 else ""
        raise DataError(
            f"{where}: row {i + 1} (counting from 1) has the weight {value!r}{beyond}; every "
            "weight must be a finite float32 number of 0 or more"
        )
    return array.astype(np.float32)


FLOAT32_MAX = float(np.finfo(np.float32).max)


def rows_in(features: Any) -> int:
    """How many rows a batch's features hold (one array, a list of one an input, or a dict)."""
    if isinstance(features, Mapping):
        features = next(iter(features.values()))
    elif in_order(features):
        features = features[0]
    return int(np.shape(features)[0]) if np.ndim(features) else 0


def warn_of_weights_unread(loss: Loss) -> None:
    """Warn where a run weighs its rows (sample_weight, class_weight) and the loss is one of
    one's own whose `value` never reads its weights: every weight would change nothing (trial
    EX4: a loss that did not hand its weights on trained bit for bit as the unweighted run)."""
    value = getattr(type(loss), "value", None)
    if value is None or value is Loss.value or type(loss).__module__.startswith("deepsharp."):
        return
    value = inspect.unwrap(value)  # (a decorator's wrapper: the function it wraps)
    code = getattr(value, "__code__", None)
    try:
        parameters = list(inspect.signature(value).parameters.values())
    except (TypeError, ValueError):
        return
    if code is None or len(parameters) < 4 or code.co_flags & inspect.CO_VARKEYWORDS:
        return
    if parameters[3].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
        return  # (*rest: handed on as a whole)
    weights = parameters[3].name  # (self, outputs, targets, weights)
    if weights in code.co_cellvars:  # read by a function or comprehension inside (a review)
        return
    for instruction in dis.get_instructions(code):  # a read of the local: LOAD_FAST and kin
        if instruction.opname.startswith("LOAD") and "FAST" in instruction.opname:
            held = instruction.argval  # (a pair of names where two are loaded at once: 3.13)
            if held == weights or (isinstance(held, tuple) and weights in held):
                return
    warnings.warn(
        f"{type(loss).__name__}.value never reads its {weights!r}, and this run weighs its "
        "rows (sample_weight or class_weight): every weight would change nothing; end the "
        f"loss in weighted_mean(terms, {weights})",
        DeepSharpWarning,
        stacklevel=3,
    )

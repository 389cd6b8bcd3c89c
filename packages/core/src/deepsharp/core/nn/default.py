"""The network deepsharp trains when given none, and networks made by a function of the user's
(`deepsharp train --network MODULE:FUNCTION`, the scikit-learn estimators' builders)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from deepsharp.core.nn.layers import Dense, Relu
from deepsharp.core.nn.network import Network

__all__ = ["built", "default_network"]


def default_network(outputs: int) -> Network:
    """Dense(32), ReLU, Dense(outputs): one hidden layer, its inputs inferred from the features."""
    return Network([Dense(32), Relu(), Dense(outputs)])


def built(builder: Callable[..., Any], outputs: int) -> Any:
    """What `builder` makes: called with `outputs=` (how many values a row must get) where it
    takes a parameter of that name, else with nothing. The caller checks it is a Network."""
    try:
        takes = "outputs" in inspect.signature(builder).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        takes = False
    return builder(outputs=outputs) if takes else builder()

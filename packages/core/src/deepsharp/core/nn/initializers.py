"""Initialisers: how a slot's first values are drawn, by name, from the run's generator.

Every layer with weights takes `init=` one of these names (Keras's, with Keras's formulas);
biases start at zero. fan_in is how many values each output adds (a dense layer's inputs, a
convolution's channels times its kernel's places), fan_out how many outputs each input reaches.

- ``"glorot_uniform"`` (the default): uniform in ±sqrt(6 / (fan_in + fan_out));
- ``"glorot_normal"``: a normal of deviation sqrt(2 / (fan_in + fan_out)), truncated at two
  deviations (and widened by 1/0.8796, as Keras does, so that its deviation is what it says);
- ``"he_uniform"``: uniform in ±sqrt(6 / fan_in) (for ReLU networks);
- ``"he_normal"``: a normal of deviation sqrt(2 / fan_in), truncated likewise;
- ``"normal"``: a normal of deviation 0.05 (Keras's RandomNormal);
- ``"zeros"``, ``"ones"``.

Draws come from deepsharp's generator, whose floats are made from raw bits by its own formula,
so the first values of a run do not change with the NumPy version.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.random import Generator

__all__ = ["INITIALIZERS", "check_initializer", "initial_values"]

_TRUNCATED = 0.87962566103423978
"""The deviation of a standard normal truncated at ±2: a truncated draw is widened by its
inverse, so that its deviation is the one asked for (Keras's constant)."""

Draw = Callable[[Generator, int, int, int], NDArray[np.float64]]


def _uniform(limit: float, generator: Generator, count: int) -> NDArray[np.float64]:
    drawn: NDArray[np.float64] = (generator.uniform(count) * 2.0 - 1.0) * limit
    return drawn


def _truncated(deviation: float, generator: Generator, count: int) -> NDArray[np.float64]:
    drawn: NDArray[np.float64] = generator.normal(count, truncate=2.0) * (deviation / _TRUNCATED)
    return drawn


INITIALIZERS: dict[str, Draw] = {
    "glorot_uniform": lambda g, n, fan_in, fan_out: _uniform(
        math.sqrt(6.0 / (fan_in + fan_out)), g, n
    ),
    "glorot_normal": lambda g, n, fan_in, fan_out: _truncated(
        math.sqrt(2.0 / (fan_in + fan_out)), g, n
    ),
    "he_uniform": lambda g, n, fan_in, fan_out: _uniform(math.sqrt(6.0 / fan_in), g, n),
    "he_normal": lambda g, n, fan_in, fan_out: _truncated(math.sqrt(2.0 / fan_in), g, n),
    "normal": lambda g, n, fan_in, fan_out: g.normal(n) * 0.05,
    "zeros": lambda g, n, fan_in, fan_out: np.zeros(n),
    "ones": lambda g, n, fan_in, fan_out: np.ones(n),
}
"""Each initialiser's name -> its draw (generator, count, fan_in, fan_out) -> float64 values."""

_ALIASES = {"glorot": "glorot_uniform"}  # what slots were declared with before names were public


def check_initializer(name: object, where: str) -> str:
    """`name` if it names an initialiser; a ValueError naming `where`, the close names and every
    name otherwise."""
    if isinstance(name, str) and name in _ALIASES:
        return _ALIASES[name]
    if isinstance(name, str) and name in INITIALIZERS:
        return name
    close = (
        difflib.get_close_matches(name, list(INITIALIZERS), n=2) if isinstance(name, str) else []
    )
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    if name is None:  # a layer whose default is None (LSTM's) draws by its own rule
        hint = " (leave init out for the layer's own default)"
    raise ValueError(
        f"{where}: no initialiser {name!r}{hint}; the initialisers are "
        + ", ".join(repr(known) for known in INITIALIZERS)
    )


def initial_values(
    name: str, shape: tuple[int, ...], generator: Generator, fan_in: int, fan_out: int
) -> NDArray[np.float32]:
    """First values of `shape` drawn by the initialiser `name` (float32)."""
    count = math.prod(shape)
    drawn = INITIALIZERS[check_initializer(name, "initial_values")](
        generator, count, max(fan_in, 1), max(fan_out, 1)
    )
    return np.asarray(drawn, np.float32).reshape(shape)

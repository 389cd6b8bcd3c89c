"""Cases for every rule of the rulebook: inputs (float32, away from kinks) and attributes.

A rule added to `deepsharp.core.ops.RULES` without a case here fails `test_every_rule_has_a_case`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["CASES", "Case"]

Array = NDArray[np.float32]


@dataclass
class Case:
    """Inputs of one operation (arrays become tensors; floats stay constants) and its attributes."""

    inputs: tuple[Array | float, ...]
    attrs: dict[str, Any] = field(default_factory=dict)


def _uniform(
    rng: np.random.Generator, shape: tuple[int, ...], low: float = -2.0, high: float = 2.0
) -> Array:
    return np.asarray(rng.uniform(low, high, shape), np.float32)


def _away_from_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    """Values with |x| in [0.2, 2]: no kink within a nudge."""
    return np.asarray(rng.uniform(0.2, 2.0, shape) * rng.choice([-1.0, 1.0], shape), np.float32)


def _distinct(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    """Distinct values at least 0.05 apart: no ties for a maximum to choose between."""
    count = int(np.prod(shape))
    spread = rng.permutation(count) * 0.05 - count * 0.025
    return np.asarray(spread, np.float32).reshape(shape)


def _binary(rng: np.random.Generator, divisor: bool = False) -> list[Case]:
    def b(shape: tuple[int, ...]) -> Array:
        return _away_from_zero(rng, shape) if divisor else _uniform(rng, shape)

    return [
        Case((_uniform(rng, (3, 4)), b((3, 4)))),
        Case((_uniform(rng, (2, 3, 4)), b((3, 1)))),  # the second input broadcast twice over
        Case((_uniform(rng, (1, 4)), b((3, 1)))),  # both broadcast
        Case((_uniform(rng, (3,)), 1.5 if divisor else -0.75)),
        Case((2.5, b((2, 3)))),
    ]


def _maximum(rng: np.random.Generator) -> list[Case]:
    a = _distinct(rng, (3, 4))
    return [
        Case((a, (a + _away_from_zero(rng, (3, 4)) * 0.1).astype(np.float32))),
        Case((a, 0.01)),
        Case((_distinct(rng, (2, 3, 4)), _distinct(rng, (3, 1)) + np.float32(0.0125))),
    ]


def _unary(
    make: Callable[[np.random.Generator, tuple[int, ...]], Array],
) -> Callable[[np.random.Generator], list[Case]]:
    return lambda rng: [Case((make(rng, (3, 5)),)), Case((make(rng, (2, 1, 3)),))]


def _matmul(rng: np.random.Generator) -> list[Case]:
    cases = []
    for ta in (False, True):
        for tb in (False, True):
            a = _uniform(rng, (4, 3) if ta else (3, 4))
            b = _uniform(rng, (5, 4) if tb else (4, 5))
            cases.append(Case((a, b), {"transpose_a": ta, "transpose_b": tb}))
    return cases


def _reduction(rng: np.random.Generator) -> list[Case]:
    x = _uniform(rng, (3, 4, 2))
    return [
        Case((x,), {"axes": axes, "keepdims": keep})
        for axes, keep in [((0,), False), ((1, 2), True), ((0, 1, 2), False), ((2,), True)]
    ]


def _conv2d(rng: np.random.Generator) -> list[Case]:
    return [
        Case(
            (_uniform(rng, (2, 2, 5, 5)), _uniform(rng, (3, 2, 3, 3))),
            {"stride": 1, "padding": ((1, 1), (1, 1))},
        ),
        Case(
            (_uniform(rng, (1, 2, 6, 5)), _uniform(rng, (2, 2, 2, 3))),
            {"stride": 2, "padding": ((0, 0), (0, 0))},
        ),
        Case(
            (_uniform(rng, (1, 1, 4, 4)), _uniform(rng, (2, 1, 3, 3))),
            {"stride": 2, "padding": ((0, 1), (1, 1))},
        ),
    ]


CASES: dict[str, Callable[[np.random.Generator], list[Case]]] = {
    "add": _binary,
    "sub": _binary,
    "mul": _binary,
    "div": lambda rng: _binary(rng, divisor=True),
    "maximum": _maximum,
    "neg": _unary(_uniform),
    "abs": _unary(_away_from_zero),
    "relu": _unary(_away_from_zero),
    "exp": _unary(_uniform),
    "log": _unary(lambda rng, s: _uniform(rng, s, 0.3, 3.0)),
    "log1p": _unary(lambda rng, s: _uniform(rng, s, -0.6, 3.0)),
    "sqrt": _unary(lambda rng, s: _uniform(rng, s, 0.3, 3.0)),
    "tanh": _unary(_uniform),
    "sigmoid": _unary(lambda rng, s: _uniform(rng, s, -4.0, 4.0)),
    "matmul": _matmul,
    "sum": _reduction,
    "mean": _reduction,
    "log_softmax": lambda rng: [Case((_uniform(rng, (3, 5)),)), Case((_uniform(rng, (4, 1)),))],
    "binary_cross_entropy_terms": lambda rng: [
        Case(
            (
                _away_from_zero(rng, (6, 1)) * np.float32(2.0),
                rng.uniform(0, 1, (6, 1)).astype(np.float32),
            )
        ),
        Case((_uniform(rng, (4, 2)), (rng.uniform(size=(4, 2)) < 0.5).astype(np.float32))),
    ],
    "binary_cross_entropy": lambda rng: [
        Case(
            (
                _away_from_zero(rng, (6, 1)) * np.float32(2.0),
                rng.uniform(0, 1, (6, 1)).astype(np.float32),
            )
        ),
        Case((_uniform(rng, (4, 3)), (rng.uniform(size=(4, 3)) < 0.5).astype(np.float32))),
    ],
    "affine": lambda rng: [
        Case((_uniform(rng, (5, 3)), _uniform(rng, (3, 4)), _uniform(rng, (4,)))),
        Case((_uniform(rng, (1, 7)), _uniform(rng, (7, 1)), _uniform(rng, (1,)))),
    ],
    "conv2d": _conv2d,
    "maxpool2d": lambda rng: [
        Case((_distinct(rng, (1, 2, 4, 5)),), {"pool": 2}),
        Case((_distinct(rng, (2, 1, 7, 6)),), {"pool": 3}),
    ],
    "reshape": lambda rng: [
        Case((_uniform(rng, (3, 4)),), {"shape": (2, 6)}),
        Case((_uniform(rng, (2, 3)),), {"shape": (6,)}),
    ],
    "transpose": lambda rng: [
        Case((_uniform(rng, (2, 3, 4)),), {"axes": (2, 0, 1)}),
        Case((_uniform(rng, (2, 3)),), {"axes": (1, 0)}),
    ],
    "slice": lambda rng: [
        Case((_uniform(rng, (5, 3)),), {"axis": 0, "start": 1, "stop": 4}),
        Case((_uniform(rng, (2, 6, 2)),), {"axis": 1, "start": 0, "stop": 5}),
    ],
    "pad": lambda rng: [
        Case((_uniform(rng, (2, 3)),), {"widths": ((1, 0), (2, 1))}),
        Case((_uniform(rng, (1, 2, 2, 2)),), {"widths": ((0, 0), (0, 0), (1, 1), (0, 2))}),
    ],
    "concatenate": lambda rng: [
        Case((_uniform(rng, (2, 3)), _uniform(rng, (2, 1)), _uniform(rng, (2, 2))), {"axis": 1}),
        Case((_uniform(rng, (1, 3)), _uniform(rng, (2, 3))), {"axis": 0}),
    ],
    "broadcast_to": lambda rng: [
        Case((_uniform(rng, (1, 4)),), {"shape": (3, 4)}),
        Case((_uniform(rng, (3, 1)),), {"shape": (2, 3, 5)}),
        Case((_uniform(rng, (4,)),), {"shape": (2, 4)}),
    ],
}

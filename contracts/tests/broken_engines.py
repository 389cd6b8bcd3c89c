"""Engines broken on purpose, each in one way the contract must catch (and the check that should).

Each is the example engine (which keeps the whole contract) with one thing broken.

Each factory is a `module:factory` spec: `--engine broken_engines:float16_products`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from example_engine import ExampleEngine

from deepsharp.contracts.measure import FLOAT32_TOTALS
from deepsharp.core.autodiff.functions import RULES, Rule
from deepsharp.core.autodiff.tensor import Node
from deepsharp.core.engine import EngineIdentity

Array = Any


class Float16Products(ExampleEngine):
    """Adds its matrix products in float16."""

    name = "float16-products"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        half = np.matmul(
            (a.T if transpose_a else a).astype(np.float16),
            (b.T if transpose_b else b).astype(np.float16),
        )
        return half.astype(np.float32)


class Float32LargeProducts(ExampleEngine):
    """Adds large products in float32, as a plain BLAS call would (small ones stay honest)."""

    name = "float32-large-products"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a, b = (a.T if transpose_a else a), (b.T if transpose_b else b)
        if a.shape[0] * b.shape[1] < 1000:
            return super().matmul(a, b)
        return np.matmul(a, b).astype(np.float32)


class DropsLastTerm(ExampleEngine):
    """A sum that leaves out the last term along the last axis it reduces."""

    name = "drops-last-term"

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        last = max(axes)
        kept = np.take(x, np.arange(x.shape[last] - 1), axis=last)
        return np.sum(kept, axis=axes, dtype=np.float64, keepdims=keepdims).astype(np.float32)


class Float32TotalsDropsLastTerm(DropsLastTerm):
    """The same dropped term in an engine that declares float32 totals: the wider bound
    those are held to must still catch it."""

    name = "float32-totals-drops-last-term"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision=FLOAT32_TOTALS)


class FlipsABit(ExampleEngine):
    """A reshape that flips the lowest bit of its first value."""

    name = "flips-a-bit"

    def reshape(self, x: Array, shape: tuple[int, ...]) -> Array:
        out = np.array(x.reshape(shape))
        if out.size:
            out.reshape(-1).view(np.uint32 if out.dtype == np.float32 else np.uint64)[0] ^= 1
        return out


_OPERATIONS = [
    "matmul",
    "sum",
    "mean",
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "greater",
    "where",
    "neg",
    "abs",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "copy",
    "reshape",
    "transpose",
    "slice",
    "take_rows",
    "pad",
    "broadcast_to",
    "max",
    "one_hot",
]


class RoundTrips(ExampleEngine):
    """Copies every result out to the host and back in: right values, far too many transfers."""

    name = "round-trips"


def _round_trip(operation: str) -> Any:
    def run(self: RoundTrips, *args: Any, **kwargs: Any) -> Array:
        return self.put(self.get(getattr(ExampleEngine, operation)(self, *args, **kwargs)))

    return run


for _operation in _OPERATIONS:
    setattr(RoundTrips, _operation, _round_trip(_operation))


class _HalfGradient(Rule):
    """The matrix product's rule, sending back half the gradient it should."""

    name = "matmul"

    def __init__(self, honest: Rule) -> None:
        self.honest = honest

    def forward(self, engine: Any, *args: Any, **attrs: Any) -> Any:
        return self.honest.forward(engine, *args, **attrs)

    def backward(self, engine: Any, node: Node, grad: Any) -> Any:
        return tuple(
            None if g is None else engine.mul(g, 0.5)
            for g in self.honest.backward(engine, node, grad)
        )


def float16_products() -> ExampleEngine:
    return Float16Products()


def float32_large_products() -> ExampleEngine:
    return Float32LargeProducts()


def drops_last_term() -> ExampleEngine:
    return DropsLastTerm()


def float32_totals_drops_last_term() -> ExampleEngine:
    return Float32TotalsDropsLastTerm()


def flips_a_bit() -> ExampleEngine:
    return FlipsABit()


def round_trips() -> ExampleEngine:
    return RoundTrips()


def half_gradient_rule() -> ExampleEngine:
    """An honest engine in a process whose rulebook's matmul rule is broken (a subprocess only)."""
    if not isinstance(RULES["matmul"], _HalfGradient):
        RULES["matmul"] = _HalfGradient(RULES["matmul"])
    return ExampleEngine()

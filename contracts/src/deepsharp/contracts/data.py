"""Inputs for the checks, and their float64 references (the light engine's `ReferenceEngine`).

Hypothesis draws the shapes, the kinds of values and a seed; the values themselves come from
NumPy's generator with that seed, so inputs of 4,096 elements cost nothing to draw and every
failure is replayed exactly from what Hypothesis prints.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from deepsharp.engines.light import ReferenceEngine

__all__ = [
    "CHECKS",
    "AbsoluteTotals",
    "draw",
    "out_size",
    "references",
    "seeds",
    "sides",
    "signs",
]

Array = NDArray[Any]

CHECKS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Few examples each, the same every run: the whole suite stays well under a minute."""

seeds = st.integers(0, 2**32 - 1)
sides = st.sampled_from([1, 1, 2, 3, 4, 5, 7])
"""Sizes of one axis: ones and odd sizes favoured."""
signs = st.sampled_from(["mixed", "mixed", "positive", "negative"])


def draw(
    seed: int,
    shape: tuple[int, ...],
    *,
    signs: str = "mixed",
    low: float = -6.0,
    high: float = 4.0,
    zeros: float = 0.05,
    negative_zeros: bool = False,
) -> NDArray[np.float32]:
    """float32 values of magnitudes 10**low .. 10**high (log-uniform), some zeros, given signs."""
    rng = np.random.default_rng(seed)
    values = np.asarray(10.0 ** rng.uniform(low, high, shape))
    if signs == "mixed":
        values *= rng.choice([-1.0, 1.0], shape)
    elif signs == "negative":
        values = -values
    values[rng.uniform(0.0, 1.0, shape) < zeros] = 0.0
    out = np.asarray(values, np.float32)
    if negative_zeros:
        out[(out == 0) & (rng.uniform(0.0, 1.0, shape) < 0.5)] = np.float32(-0.0)
    return out


def out_size(size: int, kernel: int, stride: int, before: int, after: int) -> int:
    return (size + before + after - kernel) // stride + 1


class AbsoluteTotals(ReferenceEngine):
    """The float64 reference engine with every total taken over absolute values: Σ|terms|, what
    the totals bound (and a rule's S) is made of."""

    name = "reference over absolute values"

    def matmul(self, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
        return super().matmul(np.abs(a), np.abs(b), transpose_a, transpose_b)

    def sum(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        return super().sum(np.abs(x), axes, keepdims)

    def mean(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        return super().mean(np.abs(x), axes, keepdims)

    def conv2d(self, x: Any, w: Any, stride: int, padding: Any, bias: Any = None) -> Any:
        bias = None if bias is None else np.abs(bias)
        return super().conv2d(np.abs(x), np.abs(w), stride, padding, bias)

    def conv2d_weight_grad(
        self, x: Any, gy: Any, kernel: Any, stride: int, padding: Any, bias: bool = False
    ) -> Any:
        return super().conv2d_weight_grad(np.abs(x), np.abs(gy), kernel, stride, padding, bias)

    def conv2d_fold(self, gy: Any, w: Any, image: Any, stride: int, padding: Any) -> Any:
        return super().conv2d_fold(np.abs(gy), np.abs(w), image, stride, padding)


class TermCounts(ReferenceEngine):
    """The float64 reference engine over ones: how many terms each element's total adds (a
    mean's terms too), what the bound of float32 totals is made of."""

    name = "reference counting terms"

    def put(self, array: Any) -> Any:
        held = super().put(array)
        return np.ones_like(held) if held.dtype.kind == "f" else held

    def mean(self, x: Any, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        return super().sum(x, axes, keepdims)


def references(operation: str, *args: Any) -> tuple[Array, Array, Array]:
    """`operation` on the same float32 inputs on the float64 reference engine; Σ|terms|: the
    same on `AbsoluteTotals`; and how many terms each element adds: the same on `TermCounts`
    (arrays are put on each engine; other arguments pass as they are)."""
    results = []
    for engine in (ReferenceEngine(), AbsoluteTotals(), TermCounts()):
        handles = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
        results.append(np.asarray(engine.get(getattr(engine, operation)(*handles)), np.float64))
    return results[0], results[1], results[2]

"""Inputs for the checks, and their float64 references (`deepsharp.contracts.reference`).

Hypothesis draws the shapes, the kinds of values and a seed; the values themselves come from
NumPy's generator with that seed, so inputs of 4,096 elements cost nothing to draw and every
failure is replayed exactly from what Hypothesis prints. Each check's inputs come from a seed
of its own, made from the check's name (`pinned`), Hypothesis keeps no database and its version
is pinned (ci/constraints.txt): the same suite draws the same inputs on every run, for every
engine and from wherever it is run, so the published worst roundings reproduce exactly.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from deepsharp.contracts.reference import AbsoluteTotals, Float64Engine, TermCounts

__all__ = [
    "CHECKS",
    "bias_references",
    "draw",
    "momenta",
    "pinned",
    "out_size",
    "references",
    "seeds",
    "sides",
    "signs",
]

Array = NDArray[Any]

_PROFILE = settings.default or settings()  # the profile loaded (no_shrinking's, in its runs)

CHECKS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # the profile's phases but explain: it re-ran a failing example to say which draws matter,
    # and for an engine whose sum gave float64 it failed inside Hypothesis (the pinned 6.155.2:
    # "assert 1 <= 0" from its shrinker) in place of the check's own message
    phases=tuple(phase for phase in _PROFILE.phases if phase is not Phase.explain),
)
"""Few examples each: the whole suite stays well under a minute."""

Test = TypeVar("Test", bound=Callable[..., Any])


def _draw_no_local_constants() -> None:
    """Hypothesis mixes into its draws numbers it reads from the source of every "local" module
    that happens to be imported (deepsharp's own, in an editable install), so what a check draws
    would depend on which engines and modules were loaded before it. The suite's inputs must not:
    its draws keep to Hypothesis's own constants. (A private hook of the pinned Hypothesis; where
    it is gone, nothing is changed.)"""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - another Hypothesis
        return
    if hasattr(providers, "_get_local_constants") and hasattr(providers, "CONSTANTS_CACHE"):
        empty = type(providers._local_constants)()
        providers._get_local_constants = lambda: empty
        providers.CONSTANTS_CACHE.cache.clear()


_draw_no_local_constants()


def pinned(test: Test) -> Test:
    """`CHECKS` and a seed of the check's own, from its name (put it above `@given`): the same
    inputs on every run, for every engine, whatever seed or profile pytest is handed.
    Hypothesis's own derandomised seed would not do: it hashes each test's node id, which
    holds the engine's spec and the folder pytest was run from."""
    pinned_test: Test = seed(zlib.crc32(test.__name__.encode()))(CHECKS(test))
    return pinned_test


seeds = st.integers(0, 2**32 - 1)
sides = st.sampled_from([1, 1, 2, 3, 4, 5, 7])
"""Sizes of one axis: ones and odd sizes favoured."""
signs = st.sampled_from(["mixed", "mixed", "positive", "negative"])
momenta = st.one_of(st.sampled_from([0.0, 0.9, 0.99]), st.floats(0.0, 0.999))
"""SGD's momentum: the usual settings, and any in [0, 0.999] (a fast path must not treat a
range of them apart)."""


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


def references(operation: str, *args: Any) -> tuple[Array, Array, Array]:
    """`operation` on the same float32 inputs on the suite's float64 reference; Σ|terms|: the
    same over absolute values; and how many terms each element adds: the same over ones
    (`deepsharp.contracts.reference`; arrays are put on each, other arguments pass as they are)."""
    results = []
    for engine in (Float64Engine(), AbsoluteTotals(), TermCounts()):
        handles = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
        results.append(np.asarray(engine.get(getattr(engine, operation)(*handles)), np.float64))
    return results[0], results[1], results[2]


def bias_references(
    x: Array, w: Array, bias: Array, stride: int, padding: Any
) -> tuple[Array, Array, Array]:
    """`references` of the convolution of x with w plus each filter's bias: the bias is one more
    term of every total (added in float64, over absolute values, and counted)."""
    ref, terms, count = references("conv2d", x, w, stride, padding)
    column = np.asarray(bias, np.float64).reshape(1, -1, 1, 1)
    return ref + column, terms + np.abs(column), count + 1

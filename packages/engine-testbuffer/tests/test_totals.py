"""The test engine's totals keep the strict promise: float32 arithmetic, every total within
3u·Σ|terms| of the exact one (u = 2**-24) at any length, a place's bits the same in any company.

The reference is float64 arithmetic written here (a float64 product of float32 values is exact;
the float64 totals of up to 2**21 terms are within 2**-32·Σ|terms|, 1/256 of a u, or math.fsum
where a case is built to be hard), never another engine.
"""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import numpy as np
import pytest

from deepsharp.engines.testbuffer import TestBufferEngine
from deepsharp.engines.testbuffer._totals import BLOCK, CHUNK, _quotient, dot, pairs, totals

U = 2.0**-24
F32 = np.float32
Array = np.ndarray[Any, Any]


def draw(seed: int, shape: tuple[int, ...], signs: str = "mixed") -> Array:
    """Magnitudes 10**-6 .. 10**4, log-uniform, some zeros: the contract suite's kind of values."""
    rng = np.random.default_rng(seed)
    values = 10.0 ** rng.uniform(-6.0, 4.0, shape)
    if signs == "mixed":
        values *= rng.choice([-1.0, 1.0], shape)
    values[rng.uniform(0.0, 1.0, shape) < 0.05] = 0.0
    return values.astype(F32)


def worst(got: Array, exact: Array, scale: Array) -> float:
    """The largest |got - exact| in units of u·Σ|terms| (an error where Σ|terms| is 0 is inf)."""
    error = np.abs(np.asarray(got, np.float64) - exact)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(scale > 0, error / (U * np.where(scale > 0, scale, 1.0)), np.inf)
    return float(np.max(np.where(error == 0, 0.0, ratio), initial=0.0))


def sequential_float32(terms: Array) -> float:
    """What a plain float32 loop adds up: the kind of sum the bound exists to rule out."""
    return float(np.cumsum(terms, dtype=F32)[-1])


# --- within the bound at every length and layout ------------------------------------------------
@pytest.mark.parametrize(
    "rows,count,columns",
    [
        (1, 1, 1),
        (3, 2, 5),
        (7, 3, 1),
        (5, CHUNK - 1, 4),
        (5, CHUNK, 4),
        (5, CHUNK + 1, 4),  # two chunks, one short
        (300, 10, 200),  # short totals, many places: several blocks
        (4, 1000, 3),  # more chunks than columns: chunks laid out last
        (2, 1000, 600),  # fewer chunks than columns
        (1, 70_001, 2),  # a long total over several spans of chunks
        (40, 17, 5000),
    ],
)
def test_products_stay_within_three_roundings(rows: int, count: int, columns: int) -> None:
    a, b = draw(rows, (rows, count)), draw(count, (count, columns))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    got = dot(a, b)
    assert got.dtype == F32 and got.shape == (rows, columns)
    assert worst(got, exact, scale) <= 3.0
    engine = TestBufferEngine()  # the same through the engine, each operand stored either way
    for ta in (False, True):
        for tb in (False, True):
            left = engine.put(np.ascontiguousarray(a.T) if ta else a)
            right = engine.put(np.ascontiguousarray(b.T) if tb else b)
            assert worst(engine.get(engine.matmul(left, right, ta, tb)), exact, scale) <= 3.0


@pytest.mark.parametrize(
    "shape,axes",
    [((5, 3), (0,)), ((4, 3, 2), (0, 2)), ((3, 300_000), (1,)), ((2_100_000,), (0,))],
)
def test_sums_within_one_rounding_and_means_within_two(
    shape: tuple[int, ...], axes: tuple[int, ...]
) -> None:
    """A sum's terms are exact, so its only roundings are the tree's, carried, and the last one:
    within 1.0005u·Σ|terms| (the docstring's bound); a mean's division adds one more."""
    x = draw(sum(shape), shape)
    engine = TestBufferEngine()
    exact = x.astype(np.float64).sum(axis=axes)
    scale = np.abs(x).astype(np.float64).sum(axis=axes)
    count = math.prod(shape[axis] for axis in axes)
    assert worst(engine.get(engine.sum(engine.put(x), axes)), exact, scale) <= 1.0005
    got = engine.get(engine.mean(engine.put(x), axes))
    assert worst(got, exact / count, scale / count) <= 2.001


# --- cases random inputs never reach -------------------------------------------------------------
JUST_OVER_HALF_AN_ULP = F32((1 + 2.0**-10) * 2.0**-24)
"""Added to 1 in float32 this rounds up to a whole ulp (2**-23): twice what it is."""


@pytest.mark.parametrize("count", [10, 1000, 100_000, 1 << 20])
def test_one_large_term_then_many_just_over_half_an_ulp(count: int) -> None:
    terms = np.full(count, JUST_OVER_HALF_AN_ULP, F32)
    terms[0] = 1.0
    exact = 1.0 + (count - 1) * float(JUST_OVER_HALF_AN_ULP)
    scale = exact  # every term positive
    if count >= 1000:  # the case is hard: a float32 loop is off by about count/2 u·Σ|terms|
        assert abs(sequential_float32(terms) - exact) > 100 * U * scale
    got = totals(terms[None, :])[0]
    assert abs(float(got) - exact) <= 1.0005 * U * scale
    engine = TestBufferEngine()  # as a product too (times ones), and as a sum on the engine
    ones = np.ones((count, 1), F32)
    assert (
        abs(
            float(engine.get(engine.matmul(engine.put(terms[None, :]), engine.put(ones)))[0, 0])
            - exact
        )
        <= 3 * U * scale
    )
    assert abs(float(engine.get(engine.sum(engine.put(terms), (0,)))) - exact) <= 1.0005 * U * scale


@pytest.mark.parametrize("repeats", [1, 7, 300])
def test_alternating_sign_cancellations(repeats: int) -> None:
    """+1, then 999 terms just over half an ulp of it, then -1, again and again: the total is
    what the small terms make, the large ones cancel; a float32 loop doubles every small one."""
    block = np.full(1001, JUST_OVER_HALF_AN_ULP, F32)
    block[0], block[-1] = 1.0, -1.0
    terms = np.tile(block, repeats)
    exact = math.fsum(terms.astype(np.float64))
    scale = math.fsum(np.abs(terms).astype(np.float64))
    assert abs(sequential_float32(terms) - exact) > 100 * U * scale
    assert abs(float(totals(terms[None, :])[0]) - exact) <= 1.0005 * U * scale
    # Products that cancel: (+a)(b) and (-a)(b) side by side, each product rounded.
    a = draw(1, (1, 4096), signs="positive")
    b = draw(2, (4096, 1), signs="positive")
    left = np.concatenate([a, -a, a[:, :7]], axis=1)
    right = np.concatenate([b, b, b[:7]], axis=0)
    exact_products = math.fsum(left[0].astype(np.float64) * right[:, 0].astype(np.float64))
    scale = math.fsum(np.abs(left[0].astype(np.float64) * right[:, 0].astype(np.float64)))
    assert abs(float(dot(left, right)[0, 0]) - exact_products) <= 3 * U * scale


def test_infinities_and_nans_come_out_as_float_addition_makes_them() -> None:
    x = np.array(
        [[1, np.inf, 2], [np.inf, -np.inf, 1], [np.nan, 1, 1], [1, 2, 3], [-np.inf, 5, 6]], F32
    )
    got = totals(x)
    np.testing.assert_array_equal(got, np.array([np.inf, np.nan, np.nan, 6, -np.inf], F32))


def test_a_mean_over_an_empty_axis_is_nan_as_numpy_s() -> None:
    """Before (trial EN): a RecursionError, its NaN taken for a total that overflowed."""
    engine = TestBufferEngine()
    got = engine.get(engine.mean(engine.put(np.zeros((0, 3), F32)), (0,)))
    assert got.shape == (3,) and np.isnan(got).all()
    assert engine.get(engine.sum(engine.put(np.zeros((0, 3), F32)), (0,))).tolist() == [0, 0, 0]


def test_means_divide_by_counts_float32_cannot_hold() -> None:
    """A count above 2**24 is not a float32; the quotient is corrected by its remainder, so it
    stays within a rounding of the exact one, where dividing by the rounded count does not."""
    rng = np.random.default_rng(5)
    totals_ = (rng.standard_normal(100_000) * 1e3).astype(F32)
    carries = (totals_ * F32(1e-8) * rng.standard_normal(100_000).astype(F32)).astype(F32)
    for count in (2**24 + 1, 10**15 + 7):
        exact = (totals_.astype(np.float64) + carries.astype(np.float64)) / count
        got = _quotient(totals_, carries, count)
        assert np.max(np.abs(got - exact) / np.abs(exact)) <= 1.001 * U
        rounded = (totals_ + carries) / F32(count)
        assert np.max(np.abs(rounded - exact) / np.abs(exact)) > 1.5 * U


# --- the same bits in any company -----------------------------------------------------------------
def test_a_place_gets_the_same_bits_alone_and_among_others_in_every_layout() -> None:
    """A place's total and carry (its sum before the last rounding, which shows how it was
    added) alone and among others: other blocks and another layout of the terms (alone, its
    32 chunks outnumber the 8 columns and are laid out last; among 40 rows, not), but the same
    tree, so the same bits."""
    a, b = draw(3, (40, 2000)), draw(4, (2000, 8))
    among, sums = pairs(a, b), pairs(None, a.T)
    for row in (0, 17, 39):
        alone = pairs(a[row : row + 1], b)
        np.testing.assert_array_equal(alone[0][0], among[0][row])
        np.testing.assert_array_equal(alone[1][0], among[1][row])
        alone = pairs(a[row : row + 1], b[:, :3])
        np.testing.assert_array_equal(alone[1][0], among[1][row, :3])
        np.testing.assert_array_equal(pairs(None, a[row : row + 1].T)[1], sums[1][:, row : row + 1])
    assert np.count_nonzero(among[1]) > among[1].size // 2  # the carries are worth comparing
    x, w = draw(5, (BLOCK // 4, 12)), draw(6, (12, 8))  # more places than one block holds
    np.testing.assert_array_equal(pairs(x, w)[1][-5:], pairs(x[-5:], w)[1])
    np.testing.assert_array_equal(dot(x, w)[-5:], dot(x[-5:], w))
    np.testing.assert_array_equal(totals(x)[-5:], totals(x[-5:]))


# --- temporaries stay bounded ---------------------------------------------------------------------
def test_temporaries_stay_bounded_however_many_terms() -> None:
    """A product of 16.8 million terms (67 MB were they kept) holds a few blocks at once."""
    a, b = draw(6, (64, 4096)), draw(7, (4096, 64))
    dot(a[:2], b[:, :2])  # imports and caches warmed outside the count
    tracemalloc.start()
    try:
        dot(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * (a.nbytes + b.nbytes) + 16 * BLOCK * 4, f"{peak / 2**20:.1f} MiB at once"


# --- convolutions: the same promise ---------------------------------------------------------------
def _windows64(x: Array, kernel: tuple[int, int], stride: int, padding: Any) -> Array:
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), padding[0], padding[1]])
    windows = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=(2, 3))
    return windows[:, :, ::stride, ::stride]  # (N, C, oh, ow, kh, kw)


def reference_conv(x: Array, w: Array, stride: int, padding: Any) -> Array:
    windows = _windows64(x, w.shape[2:], stride, padding)
    return np.einsum("nchwij,fcij->nfhw", windows, w.astype(np.float64))


def reference_weight_grad(x: Array, gy: Array, kernel: Any, stride: int, padding: Any) -> Array:
    windows = _windows64(x, kernel, stride, padding)
    return np.einsum("nchwij,nfhw->fcij", windows, gy.astype(np.float64))


def reference_fold(gy: Array, w: Array, image: Any, stride: int, padding: Any) -> Array:
    (top, bottom), (left, right) = padding
    count, _, out_h, out_w = gy.shape
    _, channels, kh, kw = w.shape
    padded = np.zeros((count, channels, image[0] + top + bottom, image[1] + left + right))
    for i in range(kh):
        for j in range(kw):
            sent = np.einsum(
                "nfhw,fc->nchw", gy.astype(np.float64), w[:, :, i, j].astype(np.float64)
            )
            padded[:, :, i : i + stride * out_h : stride, j : j + stride * out_w : stride] += sent
    return padded[:, :, top : top + image[0], left : left + image[1]]


CONVOLUTIONS = [
    # (images, filters, stride, padding)
    ((2, 3, 7, 7), (4, 3, 3, 3), 1, ((0, 0), (0, 0))),
    ((2, 3, 8, 8), (4, 3, 3, 3), 2, ((0, 1), (0, 1))),  # 'same' at stride 2, as TF pads it
    ((3, 2, 9, 7), (5, 2, 4, 4), 3, ((1, 2), (1, 2))),
    ((2, 3, 9, 9), (4, 3, 1, 1), 2, ((0, 0), (0, 0))),  # 1x1 filters at stride 2
    ((1, 2, 5, 6), (2, 2, 2, 3), 1, ((1, 0), (2, 1))),
    ((40, 1, 12, 12), (3, 1, 3, 3), 1, ((1, 1), (1, 1))),  # weight-gradient totals of 5,760 terms
]


@pytest.mark.parametrize("images,filters,stride,padding", CONVOLUTIONS)
def test_convolutions_stay_within_three_roundings(
    images: tuple[int, ...], filters: tuple[int, ...], stride: int, padding: Any
) -> None:
    engine = TestBufferEngine()
    x, w, bias = draw(1, images), draw(2, filters), draw(3, filters[:1])
    xa, wa = np.abs(x), np.abs(w)
    exact = reference_conv(x, w, stride, padding)
    scale = reference_conv(xa, wa, stride, padding)
    got = engine.get(engine.conv2d(engine.put(x), engine.put(w), stride, padding))
    assert worst(got, exact, scale) <= 3.0
    with_bias = engine.conv2d_bias(engine.put(x), engine.put(w), engine.put(bias), stride, padding)
    shift = bias.astype(np.float64)[None, :, None, None]
    assert worst(engine.get(with_bias), exact + shift, scale + np.abs(shift)) <= 3.0

    gy = draw(4, exact.shape)
    kernel = (filters[2], filters[3])
    weights, biases = engine.conv2d_weight_bias_grad(
        engine.put(x), engine.put(gy), kernel, stride, padding
    )
    exact = reference_weight_grad(x, gy, kernel, stride, padding)
    scale = reference_weight_grad(xa, np.abs(gy), kernel, stride, padding)
    assert worst(engine.get(weights), exact, scale) <= 3.0
    gya = np.abs(gy).astype(np.float64)
    assert (
        worst(engine.get(biases), gy.astype(np.float64).sum((0, 2, 3)), gya.sum((0, 2, 3)))
        <= 1.0005
    )

    folded = engine.conv2d_fold(engine.put(gy), engine.put(w), images[2:], stride, padding)
    exact = reference_fold(gy, w, images[2:], stride, padding)
    scale = reference_fold(np.abs(gy), wa, images[2:], stride, padding)
    assert worst(engine.get(folded), exact, scale) <= 3.0

"""Totals: |got - ref| <= 3u * sum(|terms|) for every element, u = 2**-24.

The reference is the light engine's float64 `ReferenceEngine` on the same float32 inputs (every
total added in float64); sum(|terms|) is the same total taken over absolute values: |A| @ |B| for
a product, sum(|x|) for a sum, sum(|x|) / n for a mean, and the convolution, weight gradient and
fold of |x| with |w| (or |gy|).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from deepsharp.contracts.data import CHECKS, draw, out_size, references, seeds, sides, signs
from deepsharp.contracts.measure import Contract
from deepsharp.core.engine import Engine, fused

inner_sizes = st.one_of(sides, st.integers(1, 40), st.sampled_from([255, 1000, 4096]))
"""The length of a total: small and odd, and up to 4,096."""


@CHECKS
@given(
    m=sides,
    k=inner_sizes,
    n=sides,
    transpose_a=st.booleans(),
    transpose_b=st.booleans(),
    sign=signs,
    seed=seeds,
)
def test_matmul_within_totals_bound(
    engine: Engine,
    contract: Contract,
    m: int,
    k: int,
    n: int,
    transpose_a: bool,
    transpose_b: bool,
    sign: str,
    seed: int,
) -> None:
    a = draw(seed, (m, k), signs=sign)
    b = draw(seed + 1, (k, n), signs=sign)
    stored_a = np.ascontiguousarray(a.T) if transpose_a else a
    stored_b = np.ascontiguousarray(b.T) if transpose_b else b
    got = engine.get(
        engine.matmul(engine.put(stored_a), engine.put(stored_b), transpose_a, transpose_b)
    )
    contract.totals(
        "matmul", got, *references("matmul", stored_a, stored_b, transpose_a, transpose_b)
    )


def _reductions(draw_: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = draw_(st.integers(1, 4))
    shape = list(draw_(st.lists(sides, min_size=ndim, max_size=ndim)))
    if draw_(st.booleans()):  # one long axis: totals of up to 4,096 terms
        shape[draw_(st.integers(0, ndim - 1))] = draw_(st.sampled_from([64, 999, 4096]))
    axes = draw_(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(shape), tuple(sorted(axes))


reductions = st.composite(_reductions)()


@CHECKS
@given(case=reductions, keepdims=st.booleans(), sign=signs, seed=seeds)
def test_sum_within_totals_bound(
    engine: Engine,
    contract: Contract,
    case: tuple[tuple[int, ...], tuple[int, ...]],
    keepdims: bool,
    sign: str,
    seed: int,
) -> None:
    shape, axes = case
    x = draw(seed, shape, signs=sign)
    got = engine.get(engine.sum(engine.put(x), axes, keepdims))
    contract.totals("sum", got, *references("sum", x, axes, keepdims))


@CHECKS
@given(case=reductions, keepdims=st.booleans(), sign=signs, seed=seeds)
def test_mean_within_totals_bound(
    engine: Engine,
    contract: Contract,
    case: tuple[tuple[int, ...], tuple[int, ...]],
    keepdims: bool,
    sign: str,
    seed: int,
) -> None:
    shape, axes = case
    x = draw(seed, shape, signs=sign)
    got = engine.get(engine.mean(engine.put(x), axes, keepdims))
    contract.totals("mean", got, *references("mean", x, axes, keepdims))


def _convolutions(draw_: st.DrawFn) -> dict[str, object]:
    kh, kw = draw_(st.integers(1, 4)), draw_(st.integers(1, 4))
    stride = draw_(st.integers(1, 3))
    if draw_(st.booleans()):  # 'same', as the layer computes it
        from deepsharp.core.autodiff.functions import same_padding

        height, width = draw_(st.integers(1, 9)), draw_(st.integers(1, 9))
        padding = (same_padding(height, kh, stride), same_padding(width, kw, stride))
    else:
        height, width = draw_(st.integers(kh, kh + 8)), draw_(st.integers(kw, kw + 8))
        padding = ((0, 0), (0, 0))
        if draw_(st.booleans()):
            padding = (
                (draw_(st.integers(0, 2)), draw_(st.integers(0, 2))),
                (draw_(st.integers(0, 2)), draw_(st.integers(0, 2))),
            )
    oh = out_size(height, kh, stride, *padding[0])
    ow = out_size(width, kw, stride, *padding[1])
    return {
        "count": draw_(st.integers(1, 3)),
        "channels": draw_(st.sampled_from([1, 2, 3, 8])),
        "filters": draw_(st.sampled_from([1, 2, 5])),
        "image": (height, width),
        "kernel": (kh, kw),
        "stride": stride,
        "padding": padding,
        "out": (oh, ow),
    }


convolutions = st.composite(_convolutions)()


@CHECKS
@given(case=convolutions, sign=signs, seed=seeds)
def test_conv2d_within_totals_bound(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    assume(min(case["out"]) >= 1)
    x = draw(seed, (case["count"], case["channels"], *case["image"]), signs=sign)
    w = draw(seed + 1, (case["filters"], case["channels"], *case["kernel"]), signs=sign)
    got = engine.get(engine.conv2d(engine.put(x), engine.put(w), case["stride"], case["padding"]))
    contract.totals("conv2d", got, *references("conv2d", x, w, case["stride"], case["padding"]))
    # With a bias: one more term of every total.
    b = draw(seed + 2, (case["filters"],), signs=sign)
    handle = fused.conv2d_bias(
        engine, engine.put(x), engine.put(w), engine.put(b), case["stride"], case["padding"]
    )
    ref = references("conv2d", x, w, case["stride"], case["padding"], b)
    contract.totals("conv2d with bias", engine.get(handle), *ref)


@CHECKS
@given(case=convolutions, sign=signs, seed=seeds)
def test_conv2d_weight_grad_within_totals_bound(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    assume(min(case["out"]) >= 1)
    x = draw(seed, (case["count"], case["channels"], *case["image"]), signs=sign)
    gy = draw(seed + 1, (case["count"], case["filters"], *case["out"]), signs=sign)
    handle = engine.conv2d_weight_grad(
        engine.put(x), engine.put(gy), case["kernel"], case["stride"], case["padding"]
    )
    ref = references("conv2d_weight_grad", x, gy, case["kernel"], case["stride"], case["padding"])
    contract.totals("conv2d_weight_grad", engine.get(handle), *ref)
    # With the biases' gradient from the same pass: the filters' the same, gy's totals beside.
    weights, biases = fused.conv2d_weight_bias_grad(
        engine, engine.put(x), engine.put(gy), case["kernel"], case["stride"], case["padding"]
    )
    contract.totals("conv2d_weight_grad with bias", engine.get(weights), *ref)
    ref = references("sum", gy, (0, 2, 3))
    contract.totals("conv2d_weight_grad with bias", engine.get(biases), *ref)


@CHECKS
@given(case=convolutions, sign=signs, seed=seeds)
def test_conv2d_fold_within_totals_bound(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    assume(min(case["out"]) >= 1)
    gy = draw(seed, (case["count"], case["filters"], *case["out"]), signs=sign)
    w = draw(seed + 1, (case["filters"], case["channels"], *case["kernel"]), signs=sign)
    handle = engine.conv2d_fold(
        engine.put(gy), engine.put(w), case["image"], case["stride"], case["padding"]
    )
    ref = references("conv2d_fold", gy, w, case["image"], case["stride"], case["padding"])
    contract.totals("conv2d_fold", engine.get(handle), *ref)


def _every_transpose(engine: Engine, contract: Contract, a: Any, b: Any) -> None:
    """a @ b held to the bound with each operand stored as it is and transposed."""
    ref = references("matmul", a, b)
    for ta, tb in itertools.product([False, True], repeat=2):
        sa = np.ascontiguousarray(a.T) if ta else a
        sb = np.ascontiguousarray(b.T) if tb else b
        got = engine.get(engine.matmul(engine.put(sa), engine.put(sb), ta, tb))
        contract.totals("matmul", got, *ref)


def test_matmul_with_every_transpose_of_a_long_total(engine: Engine, contract: Contract) -> None:
    """Products of 4,096 terms, one sign and both, each way round (a fixed, deterministic case)."""
    for (m, n), sign in itertools.product([(1, 1), (1, 5), (5, 1), (3, 7)], ["mixed", "positive"]):
        a, b = draw(m * 10 + n, (m, 4096), signs=sign), draw(n, (4096, n), signs=sign)
        _every_transpose(engine, contract, a, b)


def test_large_totals_within_bound(engine: Engine, contract: Contract) -> None:
    """Products, sums and convolutions large enough that an engine may work them a block at a
    time (light and torch do, above 2**18 and 2**19 float64 values): every element within bound."""
    for (m, k, n), sign in itertools.product(
        [(1400, 400, 3), (3, 400, 1400)], ["positive", "mixed"]
    ):
        a, b = draw(m + n, (m, k), signs=sign), draw(k, (k, n), signs=sign)
        _every_transpose(engine, contract, a, b)
    x = draw(4, (64, 8, 40, 40), signs="positive")
    for axes, keepdims in (((0, 2, 3), False), ((1,), True), ((0,), False), ((0, 1, 2, 3), False)):
        for operation in ("sum", "mean"):
            got = engine.get(getattr(engine, operation)(engine.put(x), axes, keepdims))
            contract.totals(operation, got, *references(operation, x, axes, keepdims))
    from deepsharp.core.autodiff.functions import same_padding

    padding = (same_padding(20, 3, 1), same_padding(20, 3, 1))
    for sign in ("positive", "mixed"):
        x = draw(1, (64, 2, 20, 20), signs=sign)
        w = draw(2, (8, 2, 3, 3), signs=sign)
        b = draw(5, (8,), signs=sign)
        gy = draw(3, (64, 8, 20, 20), signs=sign)
        got = engine.get(
            fused.conv2d_bias(engine, engine.put(x), engine.put(w), engine.put(b), 1, padding)
        )
        contract.totals("conv2d with bias", got, *references("conv2d", x, w, 1, padding, b))
        weights, biases = fused.conv2d_weight_bias_grad(
            engine, engine.put(x), engine.put(gy), (3, 3), 1, padding
        )
        ref = references("conv2d_weight_grad", x, gy, (3, 3), 1, padding)
        contract.totals("conv2d_weight_grad with bias", engine.get(weights), *ref)
        ref = references("sum", gy, (0, 2, 3))
        contract.totals("conv2d_weight_grad with bias", engine.get(biases), *ref)
        handle = engine.conv2d_fold(engine.put(gy), engine.put(w), (20, 20), 1, padding)
        ref = references("conv2d_fold", gy, w, (20, 20), 1, padding)
        contract.totals("conv2d_fold", engine.get(handle), *ref)

"""Totals: every element within its engine's precision's bound of the float64 reference.

u = 2**-24; n is how many terms the element's total adds; Σ|terms| is the same total taken over
absolute values (|A|·|B| for a product, Σ|x| for a sum, Σ|x|/n for a mean, the convolution,
weight gradient and fold of |x| with |w| or |gy|). Strict engines are held to 3u·Σ|terms|,
float32 ones to (n + 1)u·Σ|terms|, mixed ones to (3u_h + (n + 1)u)·Σ|terms| on products and
convolutions and the float32 bound on sums and means (`deepsharp.core.engine.precision`).

Drawn inputs (Hypothesis) cover shapes, signs and magnitudes; fixed cases cover what a draw
seldom meets: convolutions whose stride skips places (1x1 kernels with stride 2 and 3), and
adversarial totals that line the roundings up (one large term and many just over half its ulp)
so that a total added in float32 in sequence strays by n units where a strict one may stray 3.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from deepsharp.contracts.data import (
    bias_references,
    draw,
    out_size,
    pinned,
    references,
    seeds,
    sides,
    signs,
)
from deepsharp.contracts.half import input_sizes
from deepsharp.contracts.measure import Contract
from deepsharp.core.autodiff.functions import same_padding
from deepsharp.core.engine import Engine, fused
from deepsharp.core.engine.precision import Precision

inner_sizes = st.one_of(sides, st.integers(1, 40), st.sampled_from([255, 1000, 4096]))
"""The length of a total: small and odd, and up to 4,096."""


# --- the checks, each for one operation on given inputs ------------------------------------------


def check_matmul(
    engine: Engine, contract: Contract, a: Any, b: Any, transpose_a: bool, transpose_b: bool
) -> None:
    """op(a) @ op(b) with a and b stored transposed where asked (a, b: the operands as used)."""
    stored_a = np.ascontiguousarray(a.T) if transpose_a else a
    stored_b = np.ascontiguousarray(b.T) if transpose_b else b
    got = engine.get(
        engine.matmul(engine.put(stored_a), engine.put(stored_b), transpose_a, transpose_b)
    )
    contract.totals(
        "matmul", got, *references("matmul", a, b), product=True, inputs=input_sizes("matmul", a, b)
    )


def check_every_transpose(engine: Engine, contract: Contract, a: Any, b: Any) -> None:
    for transpose_a, transpose_b in itertools.product([False, True], repeat=2):
        check_matmul(engine, contract, a, b, transpose_a, transpose_b)


def check_reduction(
    engine: Engine, contract: Contract, operation: str, x: Any, axes: Any, keepdims: bool
) -> None:
    """`sum` or `mean` of x over `axes`."""
    got = engine.get(getattr(engine, operation)(engine.put(x), axes, keepdims))
    ref = references(operation, x, axes, keepdims)
    contract.totals(operation, got, *ref, product=False)


def check_convolution(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    """The convolution, its bias, its weight gradient (with the biases') and its fold."""
    stride, padding, kernel = case["stride"], case["padding"], case["kernel"]
    x = draw(seed, (case["count"], case["channels"], *case["image"]), signs=sign)
    w = draw(seed + 1, (case["filters"], case["channels"], *kernel), signs=sign)
    b = draw(seed + 2, (case["filters"],), signs=sign)
    gy = draw(seed + 3, (case["count"], case["filters"], *case["out"]), signs=sign)
    got = engine.get(engine.conv2d(engine.put(x), engine.put(w), stride, padding))
    ref, inputs = (
        references("conv2d", x, w, stride, padding),
        input_sizes("conv2d", x, w, stride, padding),
    )
    contract.totals("conv2d", got, *ref, product=True, inputs=inputs)
    # With a bias (the core's fused operation): one more term of every total.
    handle = fused.conv2d_bias(engine, engine.put(x), engine.put(w), engine.put(b), stride, padding)
    ref, inputs = (
        bias_references(x, w, b, stride, padding),
        input_sizes("conv2d", x, w, stride, padding, b),
    )
    contract.totals("conv2d with bias", engine.get(handle), *ref, product=True, inputs=inputs)

    handle = engine.conv2d_weight_grad(engine.put(x), engine.put(gy), kernel, stride, padding)
    args = (x, gy, kernel, stride, padding)
    ref, inputs = references("conv2d_weight_grad", *args), input_sizes("conv2d_weight_grad", *args)
    contract.totals("conv2d_weight_grad", engine.get(handle), *ref, product=True, inputs=inputs)
    # With the biases' gradient (the core's fused operation): the filters' the same, gy's
    # totals beside them.
    weights, biases = fused.conv2d_weight_bias_grad(
        engine, engine.put(x), engine.put(gy), kernel, stride, padding
    )
    contract.totals(
        "conv2d_weight_grad with bias", engine.get(weights), *ref, product=True, inputs=inputs
    )
    ref = references("sum", gy, (0, 2, 3))
    contract.totals("conv2d_weight_grad with bias", engine.get(biases), *ref, product=False)

    image = case["image"]
    handle = engine.conv2d_fold(engine.put(gy), engine.put(w), image, stride, padding)
    args = (gy, w, image, stride, padding)
    ref, inputs = references("conv2d_fold", *args), input_sizes("conv2d_fold", *args)
    contract.totals("conv2d_fold", engine.get(handle), *ref, product=True, inputs=inputs)


def convolution(
    count: int,
    channels: int,
    filters: int,
    image: tuple[int, int],
    kernel: tuple[int, int],
    stride: int,
    padding: Any = ((0, 0), (0, 0)),
) -> dict[str, Any]:
    """One convolution's shapes: `padding` is ((top, bottom), (left, right)) or "same"."""
    if padding == "same":
        padding = tuple(same_padding(size, k, stride) for size, k in zip(image, kernel))
    out = (
        out_size(image[0], kernel[0], stride, *padding[0]),
        out_size(image[1], kernel[1], stride, *padding[1]),
    )
    return {
        "count": count,
        "channels": channels,
        "filters": filters,
        "image": image,
        "kernel": kernel,
        "stride": stride,
        "padding": padding,
        "out": out,
    }


# --- drawn inputs ----------------------------------------------------------------------------


@pinned
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
    check_matmul(engine, contract, a, b, transpose_a, transpose_b)


def _reductions(draw_: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = draw_(st.integers(1, 4))
    shape = list(draw_(st.lists(sides, min_size=ndim, max_size=ndim)))
    if draw_(st.booleans()):  # one long axis: totals of up to 4,096 terms
        shape[draw_(st.integers(0, ndim - 1))] = draw_(st.sampled_from([64, 999, 4096]))
    axes = draw_(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(shape), tuple(sorted(axes))


reductions = st.composite(_reductions)()


@pytest.mark.parametrize("operation", ["sum", "mean"])
@pinned
@given(case=reductions, keepdims=st.booleans(), sign=signs, seed=seeds)
def test_reduction_within_totals_bound(
    engine: Engine,
    contract: Contract,
    operation: str,
    case: tuple[tuple[int, ...], tuple[int, ...]],
    keepdims: bool,
    sign: str,
    seed: int,
) -> None:
    shape, axes = case
    check_reduction(engine, contract, operation, draw(seed, shape, signs=sign), axes, keepdims)


def _convolutions(draw_: st.DrawFn) -> dict[str, Any]:
    kernel = (draw_(st.integers(1, 4)), draw_(st.integers(1, 4)))
    stride = draw_(st.integers(1, 3))
    if draw_(st.booleans()):  # 'same', as the layer computes it
        image = (draw_(st.integers(1, 9)), draw_(st.integers(1, 9)))
        padding: Any = "same"
    else:
        image = (
            draw_(st.integers(kernel[0], kernel[0] + 8)),
            draw_(st.integers(kernel[1], kernel[1] + 8)),
        )
        padding = ((0, 0), (0, 0))
        if draw_(st.booleans()):
            padding = tuple((draw_(st.integers(0, 2)), draw_(st.integers(0, 2))) for _ in "hw")
    return convolution(
        count=draw_(st.integers(1, 3)),
        channels=draw_(st.sampled_from([1, 2, 3, 8])),
        filters=draw_(st.sampled_from([1, 2, 5])),
        image=image,
        kernel=kernel,
        stride=stride,
        padding=padding,
    )


convolutions = st.composite(_convolutions)()


@pinned
@given(case=convolutions, sign=signs, seed=seeds)
def test_convolution_within_totals_bound(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    assume(min(case["out"]) >= 1)
    check_convolution(engine, contract, case, sign, seed)


# --- fixed cases -----------------------------------------------------------------------------

FIXED_CONVOLUTIONS = {
    "1x1-stride-2": convolution(2, 3, 2, (7, 6), (1, 1), 2),
    "1x1-stride-2-same": convolution(1, 2, 3, (8, 5), (1, 1), 2, "same"),
    "1x1-stride-3-padded": convolution(2, 2, 2, (5, 7), (1, 1), 3, ((1, 0), (0, 2))),
    "1x1-stride-1": convolution(2, 8, 5, (4, 3), (1, 1), 1),
    "3x3-stride-2-same": convolution(2, 3, 2, (9, 8), (3, 3), 2, "same"),
    "2x3-stride-3": convolution(1, 2, 3, (8, 10), (2, 3), 3),
    "5x5-larger-than-the-image": convolution(2, 2, 2, (3, 4), (5, 5), 1, ((2, 2), (2, 2))),
}
"""Convolutions a draw seldom meets: a stride that skips places (1x1 kernels, kernels smaller
than their stride), and kernels larger than the image."""


@pytest.mark.parametrize("sign", ["mixed", "positive"])
@pytest.mark.parametrize("name", list(FIXED_CONVOLUTIONS))
def test_fixed_convolution_within_totals_bound(
    engine: Engine, contract: Contract, name: str, sign: str
) -> None:
    check_convolution(engine, contract, FIXED_CONVOLUTIONS[name], sign, seed=len(name))


@pytest.mark.parametrize("inner", [1, 2, 8])
def test_short_products_within_totals_bound(engine: Engine, contract: Contract, inner: int) -> None:
    """Products of 1, 2 and 8 terms of full 24-bit mantissas: there float32 may stray n + 1
    units, while a product taken in a half format (TF32's 10 bits, bfloat16's 7, float16's
    10) strays thousands."""
    a, b = draw(inner, (6, inner), low=-1, high=1), draw(inner + 1, (inner, 5), low=-1, high=1)
    check_every_transpose(engine, contract, a, b)


@pytest.mark.parametrize(("m", "k", "n"), [(3, 3, 3), (5, 5, 2), (2, 4, 4), (33, 33, 33)])
def test_products_of_square_operands_take_each_transpose(
    engine: Engine, contract: Contract, m: int, k: int, n: int
) -> None:
    """A square operand looks the same transposed or not: an engine that guesses a transpose
    from the shapes gives it untransposed, and only square operands tell (before, the drawn
    sizes held none, so such an engine passed, its products wrong)."""
    a, b = draw(m + k, (m, k)), draw(k + n, (k, n))
    check_every_transpose(engine, contract, a, b)


ADVERSARIAL_SIZES = [16, 256, 4096, 16384]
"""How many terms the adversarial totals add."""


def adversarial(n: int) -> Any:
    """Two totals of n terms, (2, n) float32: 1 then n - 1 terms of 2^-24·(1 + 2^-10), just over
    half an ulp of 1, and the same terms the other way round. Added in float32 in order, each
    small term rounds the running total up by a whole ulp: about n units of u·Σ|terms| astray,
    where a strict total (one rounding) is within 1."""
    small = np.float32(2.0**-24 * (1.0 + 2.0**-10))
    row = np.full(n, small, np.float32)
    row[0] = 1.0
    return np.stack([row, row[::-1]])


@pytest.mark.parametrize("n", ADVERSARIAL_SIZES)
def test_adversarial_sums_and_means_within_totals_bound(
    engine: Engine, contract: Contract, n: int
) -> None:
    """The adversarial totals along the last axis, the first, two trailing axes and two apart."""
    rows = adversarial(n)
    cases = [
        (rows, (1,)),
        (np.ascontiguousarray(rows.T), (0,)),
        (rows.reshape(2, n // 16, 16), (1, 2)),
        (np.ascontiguousarray(rows.reshape(2, n // 16, 16).transpose(1, 0, 2)), (0, 2)),
    ]
    for operation in ("sum", "mean"):
        for x, axes in cases:
            for keepdims in (False, True):
                check_reduction(engine, contract, operation, x, axes, keepdims)


@pytest.mark.parametrize("n", ADVERSARIAL_SIZES)
def test_adversarial_products_within_totals_bound(
    engine: Engine, contract: Contract, n: int
) -> None:
    """The adversarial totals as products (each row times ones, each way round and transposed)
    and as convolutions: over channels, over places (the weight gradient) and over filters
    (the fold)."""
    rows = adversarial(n)
    ones = np.ones((n, 3), np.float32)
    check_every_transpose(engine, contract, rows, ones)
    check_every_transpose(engine, contract, ones.T.copy(), rows.T.copy())
    valid = ((0, 0), (0, 0))
    checks = [
        ("conv2d", (rows.T.reshape(1, n, 2, 1), np.ones((1, n, 1, 1), np.float32), 1, valid)),
        (
            "conv2d_weight_grad",
            (rows.reshape(1, 2, 1, n), np.ones((1, 1, 1, n), np.float32), (1, 1), 1, valid),
        ),
        (
            "conv2d_fold",
            (rows.T.reshape(1, n, 1, 2), np.ones((n, 1, 1, 1), np.float32), (1, 2), 1, valid),
        ),
    ]
    for operation, args in checks:
        handles = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
        got = engine.get(getattr(engine, operation)(*handles))
        ref, inputs = references(operation, *args), input_sizes(operation, *args)
        contract.totals(operation, got, *ref, product=True, inputs=inputs)


def test_large_totals_within_bound(engine: Engine, contract: Contract) -> None:
    """Products, sums and convolutions large enough that an engine may work them a block at a
    time (light and torch do, above 2**18 and 2**19 float64 values): every element within bound."""
    for (m, n), sign in itertools.product([(1, 1), (1, 5), (5, 1), (3, 7)], ["mixed", "positive"]):
        a, b = draw(m * 10 + n, (m, 4096), signs=sign), draw(n, (4096, n), signs=sign)
        check_every_transpose(engine, contract, a, b)
    for (m, k, n), sign in itertools.product(
        [(1400, 400, 3), (3, 400, 1400)], ["positive", "mixed"]
    ):
        a, b = draw(m + n, (m, k), signs=sign), draw(k, (k, n), signs=sign)
        check_every_transpose(engine, contract, a, b)
    x = draw(4, (64, 8, 40, 40), signs="positive")
    for axes, keepdims in (((0, 2, 3), False), ((1,), True), ((0,), False), ((0, 1, 2, 3), False)):
        for operation in ("sum", "mean"):
            check_reduction(engine, contract, operation, x, axes, keepdims)
    for sign in ("positive", "mixed"):
        case = convolution(64, 2, 8, (20, 20), (3, 3), 1, "same")
        check_convolution(engine, contract, case, sign, seed=1)


# --- totals near float32's range -------------------------------------------------------------

NEAR = 2.0**126
"""Where the near-range totals lie: the largest Σ|terms| at about 2^126 (8.5e37), half of
float32's largest value, while the drawn ones reach 1e4 or so."""

_VALID = ((0, 0), (0, 0))
_CONVOLUTION = convolution(2, 3, 2, (6, 5), (3, 2), 1, ((1, 0), (0, 1)))
NEAR_RANGE: dict[str, tuple[tuple[Any, ...], tuple[int, ...]]] = {
    # an operation's arguments, and the places of the operands scaled (two for a product)
    "matmul": ((draw(1, (3, 40), low=-2, high=2), draw(2, (40, 5), low=-2, high=2)), (0, 1)),
    "sum": ((draw(3, (4, 64), low=-2, high=2), (1,)), (0,)),
    "mean": (
        (
            np.array(
                [[3e38, 3e38, 0, 0], [-3e38, 3e38, 3e38, 1e30], [1e20, 2e20, -4e20, 3e37]],
                np.float32,
            ),
            (1,),
        ),
        (0,),
    ),
    "conv2d": (
        (
            draw(4, (2, 3, 6, 5), low=-2, high=2),
            draw(5, (2, 3, 3, 2), low=-2, high=2),
            1,
            _CONVOLUTION["padding"],
        ),
        (0, 1),
    ),
    "conv2d_weight_grad": (
        (
            draw(6, (2, 3, 6, 5), low=-2, high=2),
            draw(7, (2, 2, *_CONVOLUTION["out"]), low=-2, high=2),
            (3, 2),
            1,
            _CONVOLUTION["padding"],
        ),
        (0, 1),
    ),
    "conv2d_fold": (
        (
            draw(8, (2, 2, *_CONVOLUTION["out"]), low=-2, high=2),
            draw(9, (2, 3, 3, 2), low=-2, high=2),
            (6, 5),
            1,
            _CONVOLUTION["padding"],
        ),
        (0, 1),
    ),
}
"""Each total's inputs, before they are scaled near float32's range (mean's first row is
[3e38, 3e38, 0, 0], whose mean is 1.5e38)."""


LARGEST = {None: 3.4028235e38, "bfloat16": 3.3895314e38, "float16": 65504.0}
"""The largest finite value of float32 and of each half format a mixed precision's products take
their inputs in."""


def near_range(
    operation: str, args: tuple[Any, ...], operands: tuple[int, ...], precision: Precision
) -> tuple[tuple[Any, ...], int]:
    """The arguments with their operands scaled by powers of two (exactly) so that the largest
    Σ|terms| lies just under NEAR: for a strict engine, whatever a total passes through on its
    way (a mean is taken as given: its sums of |x| pass float32's range); for another, so that
    no partial total of |terms| passes NEAR (a mean's sum of |x|, before it is divided). No
    input passes half the largest value of the format a product takes it in (a mixed
    precision's half format). The arguments, and the exponent the products were scaled by."""
    strict = precision.name == "strict"
    if operation == "mean" and strict:
        return args, 0
    _, terms, count = references(operation, *args)
    widest = terms * count if operation == "mean" else terms
    exponent = int(np.floor(np.log2(NEAR / float(np.max(widest)))))
    largest = LARGEST[precision.half if len(operands) == 2 else None] / 2
    scaled, done = list(args), 0
    for index, place in enumerate(operands):
        share = (exponent - done) // (len(operands) - index)
        room = int(np.floor(np.log2(largest / float(np.max(np.abs(args[place]))))))
        share = min(share, room)
        scaled[place] = np.ldexp(np.asarray(args[place], np.float64), share).astype(np.float32)
        done += share
    return tuple(scaled), done


@pytest.mark.parametrize("operation", list(NEAR_RANGE))
def test_totals_near_float32_s_range_within_bound(
    engine: Engine, contract: Contract, operation: str
) -> None:
    """Totals whose Σ|terms| come near float32's largest values are held to the same bound.
    A strict engine adds wherever the total lies in range (the mean of [3e38, 3e38, 0, 0] is
    1.5e38, though 3e38 + 3e38 overflows float32); a float32 or mixed one is held where no
    partial total of |terms| leaves the range (its kernels add in float32), a mixed one's
    products on inputs within its half format's range (float16's largest is 65,504)."""
    args, operands = NEAR_RANGE[operation]
    args, exponent = near_range(operation, args, operands, contract.precision)
    handles = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
    got = engine.get(getattr(engine, operation)(*handles))
    ref = references(operation, *args)
    product = len(operands) == 2
    inputs = input_sizes(operation, *args) if product else None
    contract.totals(operation, got, *ref, product=product, inputs=inputs)
    if operation == "conv2d":  # with a bias, scaled as the products are: one more term
        x, w, stride, padding = args
        bias = np.ldexp(draw(10, (w.shape[0],), low=-2, high=2).astype(np.float64), exponent)
        bias = bias.astype(np.float32)
        handle = fused.conv2d_bias(
            engine, handles[0], handles[1], engine.put(bias), stride, padding
        )
        ref = bias_references(x, w, bias, stride, padding)
        inputs = input_sizes("conv2d", x, w, stride, padding, bias)
        contract.totals("conv2d with bias", engine.get(handle), *ref, product=True, inputs=inputs)
    if operation == "matmul":  # and stored transposed, every way
        check_every_transpose(engine, contract, *args)

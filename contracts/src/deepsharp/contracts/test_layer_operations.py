"""The operations the layers of networks as graphs are built from, and int64 indices end to end.

Each operation is taken as the core takes it, `fused.<name>(engine, ...)`: the engine's own where
it offers one, else the core's reference in the primitives an engine had before these operations
(so an engine written before them is held here too). Each is held to its family against the
suite's own float64 definition, written here:

- `batch_matmul` (a product of stacks: attention's (N, heads, L, d)): totals, n = k, as a
  product (a mixed precision takes its inputs in its half format);
- `add_rows` (rows added into places: an embedding's way back): totals, n = how many values a
  row gets, held as a product (the core's reference multiplies the values by a one-hot, exact
  in any format); 1 and then many values of just over half its ulp into one row, as the
  adversarial sums; and the same bits every time;
- `erf`: value by value, against erf in float64;
- `gelu` and `gelu_back`: value by value, against x·Φ(x) and grad·(Φ(x) + x·φ(x)) in float64;
- `maxpool2d_pair` (windows of two sizes) and its way back: moves, bit for bit, each window's
  first maximum selected;
- int64: `put` and `get` of int64 values across their range, and moves of int64 handles (the
  references reshape and slice indices and selections); `take_rows` with indices of any shape
  ((N, L) ids -> (N, L, D)); `one_hot` of indices of any shape; `greater` of indices and a
  constant (a padding mask): bit for bit;
- on a product's output (what a mixed engine may keep in its half format): `erf` and GELU's
  pair read it exactly, products of stacks of outputs hold the precision's bound, `add_rows`
  takes one as its values, max-pooling selects its values bit for bit.

Where the engine offers one of these fast paths of its own, it is also held to the core's
reference run on the suite's float64 engine (`test_fast_paths.reference`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray

from deepsharp.contracts.data import draw, pinned, seeds, sides, signs
from deepsharp.contracts.measure import Contract
from deepsharp.contracts.test_fast_paths import own, reference
from deepsharp.contracts.test_mixed import COLUMNS, ROWS, product_output
from deepsharp.contracts.test_totals import ADVERSARIAL_SIZES, adversarial
from deepsharp.core.engine import Engine, fused

Array = NDArray[Any]
leads = st.lists(sides, min_size=0, max_size=2).map(tuple)
"""The leading axes of a stack: none (a plain product), one or two (N, heads)."""


# --- the float64 definitions ---------------------------------------------------------------


def stacked(a: Array, b: Array) -> tuple[Array, Array, Array, Array]:
    """a @ b stack by stack in float64, its Σ|terms|, n and the sizes of its inputs
    (Σ(|a| + |b|) over each total's terms, `Precision.totals_floor`)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    exact = np.matmul(a64, b64)
    terms = np.matmul(np.abs(a64), np.abs(b64))
    count = np.full(exact.shape, a.shape[-1], np.float64)
    inputs = np.matmul(np.abs(a64), np.ones_like(b64)) + np.matmul(np.ones_like(a64), np.abs(b64))
    return exact, terms, count, inputs


def rows_added(values: Array, indices: Array, rows: int) -> tuple[Array, Array, Array, Array]:
    """out[indices[i...]] += values[i...] in float64, its Σ|terms|, how many values each row
    gets (n), and the sizes of the inputs its terms multiply (a one-hot's 1 and |value|)."""
    ids = indices.reshape(-1)
    row_shape = values.shape[indices.ndim :]
    flat = np.asarray(values, np.float64).reshape(ids.size, math.prod(row_shape))
    exact, terms = np.zeros((rows, flat.shape[1])), np.zeros((rows, flat.shape[1]))
    np.add.at(exact, ids, flat)
    np.add.at(terms, ids, np.abs(flat))
    count = np.bincount(ids, minlength=rows).astype(np.float64)[:, None] * np.ones_like(exact)
    shape = (rows, *row_shape)
    return (
        exact.reshape(shape),
        terms.reshape(shape),
        count.reshape(shape),
        (count + terms).reshape(shape),
    )


def erf64(x: Array) -> Array:
    """erf of each value, in float64 (the standard library's)."""
    exact: Array = np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))
    return exact


def gelu64(x: Array) -> Array:
    """GELU of each value, x·Φ(x), in float64."""
    wide = np.asarray(x, np.float64)
    result: Array = wide * 0.5 * (1.0 + erf64(wide / math.sqrt(2.0)))
    return result


def gelu_back64(x: Array, grad: Array) -> Array:
    """GELU's way back, grad·(Φ(x) + x·φ(x)), in float64."""
    wide = np.asarray(x, np.float64)
    cdf = 0.5 * (1.0 + erf64(wide / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * wide * wide) / math.sqrt(2.0 * math.pi)
    result: Array = np.asarray(grad, np.float64) * (cdf + wide * pdf)
    return result


def first_maxima(x: Array, pool: tuple[int, int]) -> tuple[Array, Array]:
    """Each window's maximum and the place of its first maximum, counted row by row: a place
    replaces the best so far only when strictly larger."""
    (down, across), (height, width) = pool, x.shape[2:]
    out_h, out_w = height // down, width // across
    best = x[:, :, 0 : down * out_h : down, 0 : across * out_w : across].copy()
    selection = np.zeros(best.shape, np.int64)
    for p in range(down):
        for q in range(across):
            place = x[:, :, p : p + down * out_h : down, q : q + across * out_w : across]
            larger = place > best
            best = np.where(larger, place, best)
            selection = np.where(larger, p * across + q, selection)
    return best, selection


def sent_back(gy: Array, selection: Array, image: tuple[int, int], pool: tuple[int, int]) -> Array:
    """Each window's gradient at the place its selection names, zeros elsewhere."""
    (count, channels, out_h, out_w), (down, across) = gy.shape, pool
    out = np.zeros((count, channels, *image), gy.dtype)
    for p in range(down):
        for q in range(across):
            place = out[:, :, p : p + down * out_h : down, q : q + across * out_w : across]
            place[...] = np.where(selection == p * across + q, gy, place)  # -0.0 arrives
    return out


# --- the checks, each for one operation on given inputs ------------------------------------------


def check_batch_matmul(
    engine: Engine, contract: Contract, a: Array, b: Array, transpose_a: bool, transpose_b: bool
) -> None:
    """op(a) @ op(b), stack by stack, a and b stored transposed where asked."""
    stored_a = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if transpose_a else a
    stored_b = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if transpose_b else b
    handle = fused.batch_matmul(
        engine, engine.put(stored_a), engine.put(stored_b), transpose_a, transpose_b
    )
    exact, terms, count, inputs = stacked(a, b)
    got = engine.get(handle)
    contract.totals("batch_matmul", got, exact, terms, count, product=True, inputs=inputs)


def check_add_rows(
    engine: Engine, contract: Contract, values: Array, indices: Array, rows: int, name: str
) -> Array:
    got = engine.get(fused.add_rows(engine, engine.put(values), engine.put(indices), rows))
    exact, terms, count, inputs = rows_added(values, indices, rows)
    contract.totals(name, got, exact, terms, count, product=True, inputs=inputs)
    return got


# --- drawn inputs ----------------------------------------------------------------------------


@pinned
@given(
    lead=leads,
    m=sides,
    k=st.one_of(sides, st.integers(1, 40), st.sampled_from([255, 1000])),
    n=sides,
    transpose_a=st.booleans(),
    transpose_b=st.booleans(),
    sign=signs,
    seed=seeds,
)
def test_batch_matmul_within_totals_bound(
    engine: Engine,
    contract: Contract,
    lead: tuple[int, ...],
    m: int,
    k: int,
    n: int,
    transpose_a: bool,
    transpose_b: bool,
    sign: str,
    seed: int,
) -> None:
    a = draw(seed, (*lead, m, k), signs=sign)
    b = draw(seed + 1, (*lead, k, n), signs=sign)
    check_batch_matmul(engine, contract, a, b, transpose_a, transpose_b)


@pytest.mark.parametrize(("m", "k", "n"), [(3, 3, 3), (4, 4, 2), (2, 5, 5)])
def test_batch_products_of_square_operands_take_each_transpose(
    engine: Engine, contract: Contract, m: int, k: int, n: int
) -> None:
    """Square stacks look the same transposed or not: only they tell an engine that guesses a
    transpose from the shapes."""
    a, b = draw(m * k, (2, m, k)), draw(k * n, (2, k, n))
    for transpose_a, transpose_b in itertools.product([False, True], repeat=2):
        check_batch_matmul(engine, contract, a, b, transpose_a, transpose_b)


def _rows(draw_: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    indices = tuple(draw_(st.lists(sides, min_size=1, max_size=3)))
    row = tuple(draw_(st.lists(sides, min_size=0, max_size=2)))
    return indices, row, draw_(st.sampled_from([1, 2, 5, 12, 40]))


row_cases = st.composite(_rows)()


@pinned
@given(case=row_cases, sign=signs, seed=seeds)
def test_add_rows_within_totals_bound(
    engine: Engine,
    contract: Contract,
    case: tuple[tuple[int, ...], tuple[int, ...], int],
    sign: str,
    seed: int,
) -> None:
    """Values of indices of any shape added into `rows` rows: repeated indices, rows no index
    names (exactly zero)."""
    index_shape, row_shape, rows = case
    indices = np.random.default_rng(seed).integers(0, rows, index_shape).astype(np.int64)
    values = draw(seed + 1, (*index_shape, *row_shape), signs=sign)
    check_add_rows(engine, contract, values, indices, rows, "add_rows")


@pytest.mark.parametrize("n", ADVERSARIAL_SIZES)
def test_adversarial_rows_within_totals_bound(engine: Engine, contract: Contract, n: int) -> None:
    """1 and then n - 1 values just over half its ulp sent to one row, and the same the other
    way round to another, the two interleaved: added in float32 in order they stray n units,
    where a strict total strays under 1."""
    values = np.empty((2 * n, 3), np.float32)
    values[0::2], values[1::2] = (row[:, None] for row in adversarial(n))
    indices = np.tile(np.array([1, 3], np.int64), n)
    check_add_rows(engine, contract, values, indices, 4, "add_rows")


def test_add_rows_gives_the_same_bits_every_time(engine: Engine, contract: Contract) -> None:
    """An embedding's way back, twice: a total's bits must not depend on the run (atomic adds
    in whatever order threads reach them do)."""
    rng = np.random.default_rng(11)
    indices = rng.integers(0, 30, (64, 48)).astype(np.int64)
    values = draw(12, (64, 48, 8), low=-3, high=1)
    first = check_add_rows(engine, contract, values, indices, 30, "add_rows")
    for _ in range(2):
        again = engine.get(fused.add_rows(engine, engine.put(values), engine.put(indices), 30))
        contract.moves("add_rows run again", again, first, family="steps")


ERF_EDGES = np.array(
    [0.0, -0.0, 1e-30, -1e-30, 1e-8, 0.46875, -0.46875, 4.0, -4.0, 6.0, 9.5, -30.0], np.float32
)
"""Where erf's formulas change (Cody's 0.46875 and 4), its ends, and signed zeros."""


@pinned
@given(shape=st.lists(sides, min_size=0, max_size=3).map(tuple), seed=seeds)
def test_erf_within_value_tolerance(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    x = np.asarray(np.random.default_rng(seed).uniform(-6.5, 6.5, shape), np.float32)
    x = np.concatenate([x.reshape(-1), ERF_EDGES])
    contract.values("erf", engine.get(fused.erf(engine, engine.put(x))), erf64(x))


GELU_EDGES = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, 0.5, -0.5, 3.0, -3.0, 9.5, -9.5, 1e4, -30.0])
"""Signed zeros, GELU's flat tails (below -9 it is -0 or a tiny negative; above, x) and values
of either sign where its slope turns."""


@pinned
@given(shape=st.lists(sides, min_size=0, max_size=3).map(tuple), seed=seeds)
def test_gelu_and_its_way_back_within_value_tolerance(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.uniform(-8.0, 8.0, shape), np.float32)
    x = np.concatenate([x.reshape(-1), GELU_EDGES.astype(np.float32)])
    grad = np.asarray(rng.uniform(-3.0, 3.0, x.shape), np.float32)
    contract.values("gelu", engine.get(fused.gelu(engine, engine.put(x))), gelu64(x))
    got = engine.get(fused.gelu_back(engine, engine.put(x), engine.put(grad)))
    contract.values("gelu_back", got, gelu_back64(x, grad))


def _pools(draw_: st.DrawFn) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    pool = (draw_(st.integers(1, 4)), draw_(st.integers(1, 4)))
    shape = (
        draw_(st.integers(1, 3)),
        draw_(st.integers(1, 3)),
        draw_(st.integers(pool[0], 3 * pool[0] + 2)),
        draw_(st.integers(pool[1], 3 * pool[1] + 2)),
    )
    return shape, pool


pool_cases = st.composite(_pools)()


@pinned
@given(case=pool_cases, seed=seeds, ties=st.booleans())
def test_maxpool2d_pair_moves_maxima_selects_the_first_and_sends_gradients_back(
    engine: Engine, contract: Contract, case: Any, seed: int, ties: bool
) -> None:
    shape, pool = case
    x = draw(seed, shape, low=-3, high=3, zeros=0.1)
    if ties:  # few distinct values: the first maximum must be chosen
        x = np.round(x).astype(np.float32) + np.float32(0.0)
    maxima, selection = fused.maxpool2d_pair(engine, engine.put(x), pool)
    expected_maxima, expected_selection = first_maxima(x, pool)
    contract.moves("maxpool2d_pair", engine.get(maxima), expected_maxima)
    contract.moves("maxpool2d_pair selection", engine.get(selection), expected_selection)
    gy = draw(seed + 1, expected_maxima.shape, low=-30, high=30, negative_zeros=True)
    back = fused.maxpool2d_pair_back(engine, engine.put(gy), selection, shape[2:], pool)
    expected = sent_back(gy, expected_selection, shape[2:], pool)
    contract.moves("maxpool2d_pair_back", engine.get(back), expected)


# --- int64 end to end ------------------------------------------------------------------------

INT64_EDGES = np.array(
    [
        0,
        1,
        -1,
        2**24 + 1,
        2**31,
        -(2**31) - 1,
        2**53 + 1,
        -(2**53) - 1,
        2**62 + 3,
        2**63 - 1,
        -(2**63),
    ],
    np.int64,
)
"""Integers float32 and float64 do not hold, and int64's ends."""


@pinned
@given(shape=st.lists(sides, min_size=0, max_size=3).map(tuple), seed=seeds)
def test_put_and_get_of_int64_move_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(-(2**63), 2**63 - 1, shape, dtype=np.int64, endpoint=True)
    contract.moves("put and get of int64", engine.get(engine.put(values)), values)
    contract.moves("put and get of int64", engine.get(engine.put(INT64_EDGES)), INT64_EDGES)
    for kind in (np.int32, np.uint8, np.bool_):  # other integers arrive as int64
        small = np.asarray(values % 2 if kind is np.bool_ else values % 200, kind)
        contract.moves(
            "put and get of int64", engine.get(engine.put(small)), small.astype(np.int64)
        )


@pinned
@given(shape=st.lists(sides, min_size=1, max_size=3).map(tuple), seed=seeds, data=st.data())
def test_moves_of_int64_handles_move_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    """Indices and selections are reshaped, sliced, transposed and joined as values are."""
    values = np.random.default_rng(seed).integers(-(2**62), 2**62, shape, dtype=np.int64)
    handle = engine.put(values)
    flat = engine.reshape(handle, (values.size,))
    contract.moves("reshape of int64", engine.get(flat), values.reshape(-1))
    axis = data.draw(st.integers(0, len(shape) - 1))
    stop = data.draw(st.integers(1, shape[axis]))
    index = [slice(None)] * len(shape)
    index[axis] = slice(0, stop)
    got = engine.get(engine.slice(handle, axis, 0, stop))
    contract.moves("slice of int64", got, values[tuple(index)])
    axes = tuple(reversed(range(len(shape))))
    contract.moves("transpose of int64", engine.get(engine.transpose(handle, axes)), values.T)
    joined = engine.concatenate([handle, handle], axis)
    contract.moves("concatenate of int64", engine.get(joined), np.concatenate([values] * 2, axis))
    contract.moves("copy of int64", engine.get(engine.copy(handle)), values)


@pinned
@given(
    table=st.lists(sides, min_size=1, max_size=3).map(tuple),
    ids=st.lists(sides, min_size=1, max_size=3).map(tuple),
    seed=seeds,
)
def test_take_rows_with_indices_of_any_shape_moves_every_bit(
    engine: Engine, contract: Contract, table: tuple[int, ...], ids: tuple[int, ...], seed: int
) -> None:
    """An embedding's lookup: ids (N, L) of a table (V, D) -> (N, L, D)."""
    x = draw(seed, table, low=-30, high=30, zeros=0.1, negative_zeros=True)
    rows = np.random.default_rng(seed).integers(0, table[0], ids).astype(np.int64)
    got = engine.get(engine.take_rows(engine.put(x), engine.put(rows)))
    contract.moves("take_rows of indices of any shape", got, x[rows])


@pinned
@given(shape=st.lists(sides, min_size=1, max_size=3).map(tuple), classes=sides, seed=seeds)
def test_one_hot_of_indices_of_any_shape_moves_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], classes: int, seed: int
) -> None:
    indices = np.random.default_rng(seed).integers(0, classes, shape).astype(np.int64)
    got = engine.get(engine.one_hot(engine.put(indices), classes))
    contract.moves(
        "one_hot of indices of any shape", got, np.eye(classes, dtype=np.float32)[indices]
    )


@pinned
@given(shape=st.lists(sides, min_size=1, max_size=3).map(tuple), seed=seeds)
def test_greater_of_int64_indices_and_a_constant_gives_float32_ones_and_zeros(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    """Where ids are padding (id 0) and where they are not: attention's padding mask, made on
    the engine from the ids themselves."""
    ids = np.random.default_rng(seed).integers(0, 4, shape).astype(np.int64)
    got = engine.get(engine.greater(engine.put(ids), 0.5))
    contract.moves("greater of int64 indices", got, (ids > 0.5).astype(np.float32))


# --- on a product's output -------------------------------------------------------------------


@pinned
@given(seed=seeds)
def test_a_products_output_meets_the_layer_operations(
    engine: Engine, contract: Contract, seed: int
) -> None:
    """What a mixed engine may keep in its half format, handed to each new operation: erf reads
    it exactly (widened, in float32), stacks of outputs multiply within the precision's bound,
    rows add it as values, max-pooling selects its values."""
    handle, held = product_output(engine, draw(seed, (ROWS, COLUMNS), low=-3, high=1))
    values = held.astype(np.float32)
    got = engine.get(fused.erf(engine, handle))
    contract.values("erf of a product's output", got, erf64(held))
    got = engine.get(fused.gelu(engine, handle))
    contract.values("gelu of a product's output", got, gelu64(held))
    grad = draw(seed + 2, (ROWS, COLUMNS), low=-3, high=1)
    got = engine.get(fused.gelu_back(engine, handle, engine.put(grad)))
    contract.values("gelu_back of a product's output", got, gelu_back64(held, grad))

    other, other_held = product_output(engine, draw(seed + 1, (ROWS, COLUMNS), low=-3, high=1))
    stacks = (4, ROWS // 4, COLUMNS)
    a, b = engine.reshape(handle, stacks), engine.reshape(other, stacks)
    exact, terms, count, inputs = stacked(
        values.reshape(stacks), np.swapaxes(other_held.astype(np.float32).reshape(stacks), -1, -2)
    )
    got = engine.get(fused.batch_matmul(engine, a, b, False, True))
    contract.totals(
        "batch_matmul of products' outputs", got, exact, terms, count, product=True, inputs=inputs
    )

    indices = np.random.default_rng(seed).integers(0, 9, ROWS).astype(np.int64)
    got = engine.get(fused.add_rows(engine, handle, engine.put(indices), 9))
    exact, terms, count, inputs = rows_added(values, indices, 9)
    contract.totals(
        "add_rows of a product's output", got, exact, terms, count, product=True, inputs=inputs
    )

    images = engine.reshape(handle, (1, 4, 32, 32))
    maxima, _ = fused.maxpool2d_pair(engine, images, (2, 4))
    expected, _ = first_maxima(values.reshape(1, 4, 32, 32), (2, 4))
    contract.moves("maxpool2d_pair of a product's output", engine.get(maxima), expected)


# --- the engine's own, against the core's reference ------------------------------------------


@pinned
@given(lead=leads, m=sides, k=sides, n=sides, transposes=st.booleans(), seed=seeds)
def test_offered_batch_matmul_matches_the_reference(
    engine: Engine,
    contract: Contract,
    lead: tuple[int, ...],
    m: int,
    k: int,
    n: int,
    transposes: bool,
    seed: int,
) -> None:
    batch_matmul = own(engine, "batch_matmul")
    a, b = draw(seed, (*lead, m, k)), draw(seed + 1, (*lead, k, n))
    stored_b = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if transposes else b
    got = engine.get(batch_matmul(engine.put(a), engine.put(stored_b), False, transposes))
    f64, _, out = reference("batch_matmul", a, stored_b, False, transposes)
    _, terms, count, inputs = stacked(a, b)
    contract.totals(
        "fast batch_matmul", got, f64.get(out), terms, count, product=True, inputs=inputs
    )


@pinned
@given(case=row_cases, seed=seeds)
def test_offered_add_rows_matches_the_reference(
    engine: Engine, contract: Contract, case: Any, seed: int
) -> None:
    add_rows = own(engine, "add_rows")
    index_shape, row_shape, rows = case
    indices = np.random.default_rng(seed).integers(0, rows, index_shape).astype(np.int64)
    values = draw(seed + 1, (*index_shape, *row_shape))
    got = engine.get(add_rows(engine.put(values), engine.put(indices), rows))
    f64, _, out = reference("add_rows", values, indices, rows)
    _, terms, count, inputs = rows_added(values, indices, rows)
    contract.totals("fast add_rows", got, f64.get(out), terms, count, product=True, inputs=inputs)


@pinned
@given(shape=st.lists(sides, min_size=1, max_size=3).map(tuple), seed=seeds)
def test_offered_erf_matches_the_reference(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    erf = own(engine, "erf")
    x = np.asarray(np.random.default_rng(seed).uniform(-6.5, 6.5, shape), np.float32)
    f64, _, out = reference("erf", x)
    contract.values("fast erf", engine.get(erf(engine.put(x))), f64.get(out))


@pinned
@given(shape=st.lists(sides, min_size=1, max_size=3).map(tuple), seed=seeds)
def test_offered_gelu_pair_matches_the_reference(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    gelu, gelu_back = own(engine, "gelu"), own(engine, "gelu_back")
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.uniform(-8.0, 8.0, shape), np.float32)
    grad = np.asarray(rng.uniform(-3.0, 3.0, shape), np.float32)
    f64, _, out = reference("gelu", x)
    contract.values("fast gelu", engine.get(gelu(engine.put(x))), f64.get(out))
    f64, _, out = reference("gelu_back", x, grad)
    got = engine.get(gelu_back(engine.put(x), engine.put(grad)))
    contract.values("fast gelu_back", got, f64.get(out))


@pinned
@given(case=pool_cases, seed=seeds)
def test_offered_maxpool2d_pair_matches_the_reference_bit_for_bit(
    engine: Engine, contract: Contract, case: Any, seed: int
) -> None:
    forward, back = own(engine, "maxpool2d_pair"), own(engine, "maxpool2d_pair_back")
    shape, pool = case
    x = np.round(draw(seed, shape, low=-3, high=3, zeros=0.1)).astype(np.float32)
    maxima, selection = forward(engine.put(x), pool)
    f64, _, (ref_maxima, ref_selection) = reference("maxpool2d_pair", x, pool)
    contract.moves(
        "fast maxpool2d_pair", engine.get(maxima), f64.get(ref_maxima).astype(np.float32)
    )
    contract.moves("fast maxpool2d_pair", engine.get(selection), f64.get(ref_selection))
    gy = draw(seed + 1, f64.shape(ref_maxima), low=-30, high=30)
    got = engine.get(back(engine.put(gy), selection, shape[2:], pool))
    ref_back = fused.FAST_PATHS["maxpool2d_pair_back"](
        f64, f64.put(gy), ref_selection, shape[2:], pool
    )
    contract.moves("fast maxpool2d_pair_back", got, f64.get(ref_back).astype(np.float32))

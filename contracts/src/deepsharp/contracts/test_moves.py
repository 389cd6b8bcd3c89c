"""Moves: values only change places, so every bit must arrive (signed zeros included)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from deepsharp.contracts.data import draw, pinned, references, seeds, sides
from deepsharp.contracts.measure import Contract, value_tolerance
from deepsharp.core.engine import Engine, fused

shapes = st.lists(sides, min_size=1, max_size=4).map(tuple)


def _values(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return draw(seed, shape, low=-30, high=30, zeros=0.1, negative_zeros=True)


@pinned
@given(shape=shapes, seed=seeds, data=st.data())
def test_reshape_moves_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    x = _values(seed, shape)
    sizes = list(shape)
    data.draw(st.randoms(use_true_random=False)).shuffle(sizes)
    target = tuple(sizes[: data.draw(st.integers(0, len(sizes)))])
    target = (*target, math.prod(sizes) // max(1, math.prod(target)))
    contract.moves("reshape", engine.get(engine.reshape(engine.put(x), target)), x.reshape(target))


@pinned
@given(shape=shapes, seed=seeds, data=st.data())
def test_transpose_moves_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    x = _values(seed, shape)
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    got = engine.get(engine.transpose(engine.put(x), axes))
    contract.moves("transpose", got, x.transpose(axes))


@pinned
@given(shape=shapes, seed=seeds, data=st.data())
def test_slice_moves_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    x = _values(seed, shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    start = data.draw(st.integers(0, shape[axis] - 1))
    stop = data.draw(st.integers(start + 1, shape[axis]))
    index = [slice(None)] * len(shape)
    index[axis] = slice(start, stop)
    got = engine.get(engine.slice(engine.put(x), axis, start, stop))
    contract.moves("slice", got, x[tuple(index)])


@pinned
@given(shape=shapes, seed=seeds, data=st.data())
def test_take_rows_moves_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    x = _values(seed, shape)
    rows = np.array(
        data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=9)), np.int64
    )
    got = engine.get(engine.take_rows(engine.put(x), engine.put(rows)))
    contract.moves("take_rows", got, x[rows])


@pinned
@given(shape=shapes, seed=seeds, data=st.data())
def test_concatenate_and_split_move_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    axis = data.draw(st.integers(0, len(shape) - 1))
    lengths = data.draw(st.lists(sides, min_size=1, max_size=4))
    parts = [
        _values(seed + i, (*shape[:axis], n, *shape[axis + 1 :])) for i, n in enumerate(lengths)
    ]
    joined = engine.concatenate([engine.put(p) for p in parts], axis)
    contract.moves("concatenate", engine.get(joined), np.concatenate(parts, axis))
    pieces = engine.split(joined, lengths, axis)
    assert isinstance(pieces, list), f"split must return a list, not {type(pieces).__name__}"
    assert len(pieces) == len(parts)
    for piece, part in zip(pieces, parts, strict=True):
        contract.moves("split", engine.get(piece), part)


@pinned
@given(shape=shapes, seed=seeds, data=st.data())
def test_pad_moves_every_bit(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    x = _values(seed, shape)
    widths = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape]
    contract.moves("pad", engine.get(engine.pad(engine.put(x), widths)), np.pad(x, widths))


@pinned
@given(data=st.data(), seed=seeds)
def test_broadcast_to_moves_every_bit(
    engine: Engine, contract: Contract, data: st.DataObject, seed: int
) -> None:
    target = data.draw(st.lists(sides, min_size=0, max_size=4).map(tuple))
    kept = data.draw(st.integers(0, len(target)))  # trailing axes the input has
    shape = tuple(n if data.draw(st.booleans()) else 1 for n in target[len(target) - kept :])
    x = _values(seed, shape)
    got = engine.get(engine.broadcast_to(engine.put(x), target))
    contract.moves("broadcast_to", got, np.broadcast_to(x, target))


@pinned
@given(shape=shapes, seed=seeds, keepdims=st.booleans(), data=st.data())
def test_max_moves_every_bit(
    engine: Engine,
    contract: Contract,
    shape: tuple[int, ...],
    seed: int,
    keepdims: bool,
    data: st.DataObject,
) -> None:
    x = draw(seed, shape, low=-30, high=30, zeros=0.1)  # no -0.0: which zero is larger is unsaid
    axes = tuple(
        sorted(data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True)))
    )
    got = engine.get(engine.max(engine.put(x), axes, keepdims))
    contract.moves("max", got, np.max(x, axis=axes, keepdims=keepdims))


def test_max_is_nan_where_a_nan_is_among_the_values(engine: Engine, contract: Contract) -> None:
    """NumPy's max: NaN where any value is NaN, infinities compared as values (onnxruntime's
    ReduceMax passed over a NaN)."""
    nan, inf = np.nan, np.inf
    x = np.array([[1, nan, 2], [inf, 3, -1], [-inf, -inf, -5], [nan, nan, nan], [2, 1, nan]])
    x = x.astype(np.float32)
    got = engine.get(engine.max(engine.put(x), (1,), False))
    expected = np.max(x, axis=1)
    if not np.array_equal(np.isnan(got), np.isnan(expected)):
        raise AssertionError(f"max on {contract.spec}: {got} where NumPy's max gives {expected}")
    contract.moves("max", got[~np.isnan(expected)], expected[~np.isnan(expected)])


@pinned
@given(count=st.integers(1, 40), classes=st.integers(1, 12), seed=seeds)
def test_one_hot_moves_every_bit(
    engine: Engine, contract: Contract, count: int, classes: int, seed: int
) -> None:
    indices = np.random.default_rng(seed).integers(0, classes, count).astype(np.int64)
    got = engine.get(engine.one_hot(engine.put(indices), classes))
    contract.moves("one_hot", got, np.eye(classes, dtype=np.float32)[indices])


@pinned
@given(shape=shapes, seed=seeds)
def test_copy_and_assign_move_every_bit_and_copies_stay_apart(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    x, y = _values(seed, shape), _values(seed + 1, shape)
    source = engine.put(x)
    copied = engine.copy(source)
    contract.moves("copy", engine.get(copied), x)
    engine.assign(source, engine.put(y))
    contract.moves("assign", engine.get(source), y)
    # the copy did not follow its source (one that shares its memory was 'N bits differ')
    contract.moves("copy (its source since assigned into: a copy is memory of its own)",
                   engine.get(copied), x)  # fmt: skip


def _images(draw_: st.DrawFn) -> tuple[tuple[int, int, int, int], int]:
    pool = draw_(st.integers(1, 3))
    shape = (
        draw_(st.integers(1, 3)),
        draw_(st.integers(1, 3)),
        draw_(st.integers(pool, 3 * pool + 2)),
        draw_(st.integers(pool, 3 * pool + 2)),
    )
    return shape, pool


images = st.composite(_images)()


def _first_maxima(x: np.ndarray, pool: int) -> tuple[np.ndarray, np.ndarray]:
    """Each window's maximum and the place (row by row) of its first maximum."""
    n, c, h, w = x.shape
    oh, ow = h // pool, w // pool
    windows = x[:, :, : oh * pool, : ow * pool].reshape(n, c, oh, pool, ow, pool)
    windows = windows.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, pool * pool)
    selection = windows.argmax(axis=-1).astype(np.int64)
    return np.take_along_axis(windows, selection[..., None], -1)[..., 0], selection


@pinned
@given(case=images, seed=seeds, ties=st.booleans())
def test_maxpool2d_moves_maxima_and_selects_the_first(
    engine: Engine, contract: Contract, case: Any, seed: int, ties: bool
) -> None:
    shape, pool = case
    x = draw(seed, shape, low=-3, high=3, zeros=0.1)
    if ties:  # few distinct values: the first maximum must be chosen
        x = np.round(x).astype(np.float32) + np.float32(0.0)
    maxima, selection = engine.maxpool2d(engine.put(x), pool)
    expected_maxima, expected_selection = _first_maxima(x, pool)
    contract.moves("maxpool2d", engine.get(maxima), expected_maxima)
    contract.moves("maxpool2d selection", engine.get(selection), expected_selection)


@pinned
@given(case=images, seed=seeds, ties=st.booleans())
def test_maxpool2d_back_sends_each_gradient_to_its_selection(
    engine: Engine, contract: Contract, case: Any, seed: int, ties: bool
) -> None:
    shape, pool = case
    x = draw(seed, shape, low=-3, high=3, zeros=0.1)
    if ties:
        x = np.round(x).astype(np.float32) + np.float32(0.0)
    _, selection = engine.maxpool2d(engine.put(x), pool)
    _, expected_selection = _first_maxima(x, pool)
    n, c, h, w = shape
    oh, ow = h // pool, w // pool
    gy = _values(seed + 1, (n, c, oh, ow))
    got = engine.get(engine.maxpool2d_back(engine.put(gy), selection, (h, w), pool))
    spread = np.zeros((n, c, oh, ow, pool * pool), np.float32)
    np.put_along_axis(spread, expected_selection[..., None], gy[..., None], -1)
    expected = np.zeros(shape, np.float32)
    expected[:, :, : oh * pool, : ow * pool] = (
        spread.reshape(n, c, oh, ow, pool, pool)
        .transpose(0, 1, 2, 4, 3, 5)
        .reshape(n, c, oh * pool, ow * pool)
    )
    contract.moves("maxpool2d_back", got, expected)


def test_indices_of_a_real_vocabulary_s_size_move_every_bit(
    engine: Engine, contract: Contract
) -> None:
    """Rows and classes past what 8 and 16 bits hold (a vocabulary of 70,000 words, 300
    classes): an index narrowed on the way would read another row, silently."""
    table = np.arange(70_000 * 2, dtype=np.float32).reshape(70_000, 2)
    rows = np.array([0, 255, 256, 32_767, 32_768, 65_535, 65_536, 69_999], np.int64)
    got = engine.get(engine.take_rows(engine.put(table), engine.put(rows)))
    contract.moves("take_rows", got, table[rows])
    classes = np.array([0, 127, 128, 255, 256, 299], np.int64)
    got = engine.get(engine.one_hot(engine.put(classes), 300))
    contract.moves("one_hot", got, np.eye(300, dtype=np.float32)[classes])


def test_a_value_changed_in_place_is_read_anew_by_later_operations(
    engine: Engine, contract: Contract
) -> None:
    """A value assigned into, or changed by an optimizer's update in place, is what every later
    operation reads: an engine that keeps something of a value by its handle (a widened copy of
    a product's operand, kept while the handle lives) read the slots before the update, and
    trained wrong with every other check passed (trial E)."""
    rng = np.random.default_rng(7)  # values every precision holds (float16's among them)
    x, w, x2, grad = (rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3, 2)) * 2)
    a, b = engine.put(x), engine.put(w)
    engine.get(engine.matmul(a, b))  # read once: whatever is kept of a and b is kept now
    engine.assign(a, engine.put(x2))
    got = engine.get(engine.matmul(a, b))
    contract.totals("matmul after assign", got, *references("matmul", x2, w), product=True)
    velocity = engine.zeros((3, 2))
    fused.sgd_update(engine, [b], [engine.put(grad)], [velocity], learning_rate=0.5, momentum=0.0)
    moved = engine.get(b)
    contract.within("values", "sgd_update in place", moved, w - 0.5 * grad,
                    value_tolerance(w - 0.5 * grad), "of the value tolerance")  # fmt: skip
    got = engine.get(engine.matmul(a, b))
    contract.totals("matmul after an update in place", got, *references("matmul", x2, moved),
                    product=True)  # fmt: skip

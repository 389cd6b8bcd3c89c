"""Transfers: put and get are exact, and each one is counted; a checked put (a trainer's put of a
batch) says whether every value is finite."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepsharp.contracts.data import draw, pinned, seeds, sides
from deepsharp.contracts.measure import Contract, mismatching_bits
from deepsharp.core.engine import Engine
from deepsharp.core.errors import DataError

shapes = st.lists(sides, min_size=0, max_size=4).map(tuple)


@pinned
@given(shape=shapes, seed=seeds)
def test_put_then_get_gives_the_same_bits_and_counts_each(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    values = draw(seed, shape, low=-40, high=38, negative_zeros=True)
    before_in, before_out = engine.counters.transfers_in, engine.counters.transfers_out
    handle = engine.put(values)
    assert engine.counters.transfers_in == before_in + 1, "put must count one transfer in"
    assert engine.shape(handle) == shape
    got = engine.get(handle)
    assert engine.counters.transfers_out == before_out + 1, "get must count one transfer out"
    contract.moves("put/get", got, values, family="transfers")


def test_special_values_cross_exactly(engine: Engine, contract: Contract) -> None:
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, 1.0 / 3.0],
        np.float32,
    )
    contract.moves("put/get", engine.get(engine.put(special)), special, family="transfers")


def test_float64_is_put_as_float32_and_integers_as_int64(
    engine: Engine, contract: Contract
) -> None:
    wide = np.array([[1.0 / 3.0, -2.5e-7], [1e30, 7.0]])
    contract.moves(
        "put/get", engine.get(engine.put(wide)), wide.astype(np.float32), family="transfers"
    )
    rows = np.array([0, 3, 2**40, -1], np.int64)
    contract.moves("put/get", engine.get(engine.put(rows)), rows, family="transfers")
    small = np.array([5, 0, 2], np.int32)
    contract.moves(
        "put/get", engine.get(engine.put(small)), small.astype(np.int64), family="transfers"
    )
    unsigned = np.array([7, 2**63 - 1], np.uint64)  # within int64's range: held as it is
    contract.moves(
        "put/get", engine.get(engine.put(unsigned)), unsigned.astype(np.int64), family="transfers"
    )


def test_unsigned_integers_beyond_int64_are_refused_not_wrapped(engine: Engine) -> None:
    """A cast would wrap 2**63 and 2**64 - 1 to -2**63 and -1 (hashed ids read as other rows):
    every engine's put refuses them (`deepsharp.core.engine.protocol.int64_put`)."""
    for beyond in (2**63, 2**64 - 1):
        with pytest.raises(DataError, match="beyond int64's range"):
            engine.put(np.array([1, beyond], np.uint64))


def test_zeros_are_made_on_the_engine_without_a_transfer(
    engine: Engine, contract: Contract
) -> None:
    before_in = engine.counters.transfers_in
    handle = engine.zeros((3, 1, 2))
    assert engine.counters.transfers_in == before_in, "zeros() is made on the engine, not put"
    assert engine.shape(handle) == (3, 1, 2)
    contract.moves("zeros", engine.get(handle), np.zeros((3, 1, 2), np.float32))
    # Each its own memory: an optimizer's memories start as zeros and are changed in place
    # (zeros of one shape handed out once made Adam's moments one buffer; the suite blamed
    # adam_update and a run the learning rate: trial E).
    other = engine.zeros((3, 1, 2))
    engine.assign(handle, engine.put(np.ones((3, 1, 2), np.float32)))
    contract.moves("zeros (two of one shape, one assigned into)", engine.get(other),
                   np.zeros((3, 1, 2), np.float32))  # fmt: skip


def test_shape_is_a_tuple_of_whole_numbers(engine: Engine) -> None:
    """`shape` gives a tuple (a list failed later, as 'affine: shapes [5, 3] @ [3, 4] + [4] do
    not fit', blaming the network: trial E)."""
    for made in (engine.put(np.zeros((5, 3), np.float32)), engine.zeros((2,)), engine.zeros(())):
        shape = engine.shape(made)
        assert type(shape) is tuple and all(type(n) is int for n in shape), (
            f"shape() gives a tuple of Python ints, not {shape!r} ({type(shape).__name__})"
        )


def test_put_keeps_no_memory_of_the_caller_s(engine: Engine, contract: Contract) -> None:
    """What `put` makes is the engine's: the caller may write into the array it put (a batch's
    buffer refilled for the next batch) without changing the engine's tensor. (A put that kept
    the caller's array failed other checks, each blaming another operation: an update in place
    wrote into the caller's slots.)"""
    values = draw(13, (3, 5), low=-3, high=3)
    given = np.array(values, copy=True)
    handle = engine.put(given)
    given[...] = np.float32(7.0)  # the caller's array, refilled
    changed = mismatching_bits(engine.get(handle), values)
    assert not changed, (
        f"put on {contract.spec} kept the caller's memory: writing into the array that was put "
        f"changed {changed} bits of the engine's tensor; put must copy what it is given "
        "(np.array(..., copy=True), or the device's own copy)"
    )


def test_get_gives_memory_the_caller_owns(engine: Engine, contract: Contract) -> None:
    """What `get` gives is the caller's: an array it can write into without changing the
    engine's tensor, and that nothing the engine does later (an update in place, as an
    optimizer's) changes. A user's copy of the slots (`network.slots`) must not move with
    the next step."""
    values = draw(11, (3, 5), low=-3, high=3)
    later = draw(12, (3, 5), low=-3, high=3)
    handle = engine.put(values)
    first = engine.get(handle)
    seen = np.array(first, copy=True)
    engine.assign(handle, engine.put(later))  # in place, as an optimizer's update
    changed = mismatching_bits(first, seen)
    contract.measurements.record(contract.spec, "transfers", "get (the caller's memory)", changed)
    assert not changed, (
        f"get on {contract.spec} gave memory the engine still uses: an update of the tensor in "
        f"place changed {changed} bits of what get had given; get must give a copy the caller "
        "owns (np.array(..., copy=True))"
    )
    second = engine.get(handle)
    assert isinstance(second, np.ndarray) and second.flags.writeable, (
        f"get on {contract.spec} gave memory the engine still uses: an array the caller cannot "
        "write into; get must give a copy the caller owns"
    )
    second[...] = np.float32(7.0)  # the caller's to change
    third = engine.get(handle)
    changed = mismatching_bits(third, later)
    contract.measurements.record(contract.spec, "transfers", "get (the caller's memory)", changed)
    assert not changed, (
        f"get on {contract.spec} gave memory the engine still uses: writing into what get had "
        f"given changed {changed} bits of the engine's tensor"
    )


CHECKED = {"put_checked"}
"""The fast paths held here (test_fast_paths asks that every one is held somewhere)."""


def test_a_checked_put_is_exact_counts_one_transfer_and_says_whether_every_value_is_finite(
    engine: Engine, contract: Contract
) -> None:
    """`put_checked` (a trainer's put of a batch's features): the values bit for bit, one
    transfer in, and whether every value is finite — also where a float32 total of finite
    values overflows; the caller's array left as it was, handed over or not."""
    own = getattr(engine, "put_checked", None)
    if own is None:
        pytest.skip("the engine offers no put_checked of its own: the core's reference runs")
    rng = np.random.default_rng(3)
    plain = rng.standard_normal((300, 7)).astype(np.float32)
    huge = np.full((4, 3), 3.0e38, np.float32)  # finite: its float32 total overflows
    cases: list[tuple[str, np.ndarray, bool]] = [
        ("drawn values", plain, True),
        ("values whose float32 total overflows", huge, True),
        ("a NaN", _with(plain, np.nan), False),
        ("an infinity", _with(plain, np.inf), False),
        ("a negative infinity", _with(huge, -np.inf), False),
        ("float64 values", plain.astype(np.float64) / 3.0, True),
        ("a transposed view", plain.T, True),
    ]
    for what, values, finite in cases:
        for owned in (False, True):
            kept = values.copy()
            before = engine.counters.transfers_in
            handle, said = own(values, owned=owned)
            assert engine.counters.transfers_in == before + 1, f"{what}: one transfer in"
            assert said is finite, f"{what} (owned={owned}): said finite={said}, not {finite}"
            contract.moves(
                "put_checked", engine.get(handle), values.astype(np.float32), family="transfers"
            )
            assert mismatching_bits(values, kept) == 0, f"{what}: the caller's array changed"


def _with(values: np.ndarray, special: float) -> np.ndarray:
    made: np.ndarray = values.copy()
    made[len(made) // 2, -1] = special
    return made

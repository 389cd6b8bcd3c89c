"""deepsharp's own generator: the same bits from the same seed, whatever NumPy is installed."""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core.random import Generator, Streams


def test_a_seed_gives_these_bits_under_every_numpy() -> None:
    # Written down once; tests-3.10 checks them under NumPy 1.26 (the oldest supported) too.
    bits = Generator(42).bits(3)
    assert [int(b) for b in bits] == [
        0xCD32F5BB1623F15E,
        0x9D591BB7266B13F3,
        0x733A550E28BD9590,
    ]
    assert Generator(42).uniform(2).tolist() == [0.8015588361505619, 0.6146409341949204]


def test_the_counter_is_the_whole_state() -> None:
    first = Generator(7)
    first.bits(10)
    later = Generator(7, counter=first.counter)
    assert np.array_equal(first.bits(5), later.bits(5))


def test_streams_are_independent_of_each_other() -> None:
    streams = Streams(3)
    split_first = Streams(3).split.permutation(100)
    streams.slots.uniform(1000)  # another purpose drawing must not move the split
    assert np.array_equal(streams.split.permutation(100), split_first)


def test_uniform_floats_lie_in_the_unit_interval() -> None:
    values = Generator(1).uniform(100_000)
    assert values.min() >= 0.0 and values.max() < 1.0
    assert abs(values.mean() - 0.5) < 0.01


def test_a_permutation_holds_every_index_once() -> None:
    order = Generator(5).permutation(891)
    assert sorted(order.tolist()) == list(range(891))


def test_a_seed_must_be_an_integer() -> None:
    with pytest.raises(TypeError, match="integer"):
        Generator(1.5)  # type: ignore[arg-type]


def test_a_draw_no_value_can_meet_or_of_fewer_than_no_values_is_refused() -> None:
    """Before (trial AP): normal(4, truncate=0) drew for ever; bits(-5) moved the counter back
    to -5 and the next draw raised an OverflowError."""
    generator = Generator(0)
    for bound in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="truncate is a bound above 0"):
            generator.normal(4, truncate=bound)
    with pytest.raises(ValueError, match="a draw is of 0 or more values, not -5"):
        generator.bits(-5)
    with pytest.raises(ValueError, match="a draw is of 0 or more values"):
        generator.normal(-2)
    assert generator.counter == 0 and len(generator.uniform(3)) == 3


def test_a_tensor_put_from_a_list_of_whole_numbers_is_int64() -> None:
    """Before (trial AP): labelled float32 while the engine held int64 (torch then failed
    inside torch)."""
    from deepsharp.core.autodiff.tensor import Tensor
    from deepsharp.core.engine import make_engine

    engine = make_engine("light")
    ids = Tensor.put(engine, [1, 2, 3])
    assert ids.dtype == "int64" and ids.numpy().dtype == np.int64
    values = Tensor.put(engine, [0.5, 2.0])
    assert values.dtype == "float32" and values.numpy().dtype == np.float32


def test_a_draw_of_a_fraction_of_values_is_refused() -> None:
    """Taken before (review): the counter became a float and later draws differed."""
    generator = Generator(0)
    with pytest.raises(ValueError, match=r"a draw is of 0 or more values, not 2\.5"):
        generator.bits(2.5)  # type: ignore[arg-type]
    assert generator.counter == 0
    assert len(generator.bits(np.int64(2))) == 2


def test_numpy_counts_keep_the_counter_a_python_int() -> None:
    """Before (review): np.uint64 then np.int64 counts made the counter a float64 (the draws
    after it other ones), and next_key overflowed."""
    generator = Generator(0)
    generator.bits(np.uint64(2))
    generator.bits(np.int64(1))
    assert type(generator.counter) is int and generator.counter == 3
    assert (
        generator.next_key().bits(1).tolist() == Generator(0, counter=3).next_key().bits(1).tolist()
    )

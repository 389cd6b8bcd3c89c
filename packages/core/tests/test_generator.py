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

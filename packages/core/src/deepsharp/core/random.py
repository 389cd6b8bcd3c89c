"""deepsharp's own generator: every draw a run makes comes from here, counted from its seed.

Counter-based (SplitMix64's finaliser over seed and counter), so its whole state is two
integers that fit in a checkpoint, and a draw does not depend on the engine, the NumPy
version or anything else the process did. Floats are made from the raw bits by our own
formula: the top 53 bits times 2**-53. `KeyedOrder` shuffles numbers too many for a table
(the blocks of a file larger than memory) from the same finaliser.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.reals import is_whole

__all__ = ["Generator", "KeyedOrder", "Streams"]

_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FEISTEL_ROUNDS = 4


def _mix(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser: every input bit reaches every output bit."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return mixed


def _mix_word(z: int) -> int:
    """`_mix` of one word, in Python's integers (a few operations, no arrays)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


_DRAWN = threading.local()


def draws() -> int:
    """How many values this thread's generators have drawn (keys taken among them): what a
    compiled step's capture compares, before and after a pass and its host steps, to see a
    draw a replay could not make (one from a copy of the pass's generator too: trial C2)."""
    return getattr(_DRAWN, "count", 0)


def _drew(count: int) -> None:
    _DRAWN.count = getattr(_DRAWN, "count", 0) + count


class Generator:
    """Random bits, floats, permutations and masks from a seed and a counter (the seed taken
    modulo 2**64: -1 is 2**64 - 1's generator)."""

    def __init__(self, seed: int, counter: int = 0, stream: int = 0) -> None:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"a seed is an integer, not {seed!r}")
        self.seed = int(seed)
        self.stream = int(stream)
        self.counter = int(counter)
        words = np.array([self.seed & _MASK, self.stream & _MASK], dtype=np.uint64)
        mixed = _mix(words)
        self._key = _mix(mixed[:1] ^ (mixed[1:] * _GOLDEN))[0]

    def bits(self, count: int) -> NDArray[np.uint64]:
        """`count` fresh 64-bit words."""
        if not is_whole(count) or count < 0:  # (it moved the counter back, or made it a float,
            raise ValueError(f"a draw is of 0 or more values, not {count!r}")  # trial AP, review)
        places = np.arange(self.counter, self.counter + count, dtype=np.uint64)
        self.counter += int(count)  # a NumPy count made it a NumPy number (a review)
        _drew(int(count))
        return _mix(places * _GOLDEN + self._key)

    def uniform(self, count: int) -> NDArray[np.float64]:
        """`count` floats in [0, 1), each a multiple of 2**-53."""
        floats: NDArray[np.float64] = (self.bits(count) >> np.uint64(11)).astype(np.float64)
        return floats * (2.0**-53)

    def normal(self, count: int, truncate: float | None = None) -> NDArray[np.float64]:
        """`count` draws of a standard normal (Marsaglia's polar method), each within
        ±`truncate` where one is given (a draw beyond it is drawn again).

        Pairs of floats in (-1, 1) are drawn until their squared length s lies in (0, 1); each
        kept pair gives two values x·sqrt(-2 ln s / s). The logarithm is Python's (the C
        library's, correctly rounded), every other step exact IEEE arithmetic, so a draw does
        not change with the NumPy version."""
        if truncate is not None and not truncate > 0:  # no draw lies within: it never ended
            raise ValueError(f"normal: truncate is a bound above 0, or None, not {truncate!r}")
        if not is_whole(count) or count < 0:
            raise ValueError(f"a draw is of 0 or more values, not {count!r}")
        out = np.empty(count, np.float64)
        done = 0
        while done < count:
            wanted = max(8, 2 * (count - done))  # about 4/π pairs a kept pair, and truncation
            pairs = self.uniform(2 * wanted).reshape(wanted, 2) * 2.0 - 1.0
            squares = pairs[:, 0] * pairs[:, 0] + pairs[:, 1] * pairs[:, 1]
            kept = (squares > 0.0) & (squares < 1.0)
            pairs, squares = pairs[kept], squares[kept]
            logs = np.fromiter(map(math.log, squares.tolist()), np.float64, len(squares))
            values = (pairs * np.sqrt(-2.0 * logs / squares)[:, None]).reshape(-1)
            if truncate is not None:
                values = values[np.abs(values) <= truncate]
            taken = values[: count - done]
            out[done : done + len(taken)] = taken
            done += len(taken)
        return out

    def uniform_rows(
        self, rows: int, width: int, first: int = 0, total: int | None = None
    ) -> NDArray[np.float64]:
        """Floats for rows first .. first + rows - 1 of a draw of `total` rows of `width` values
        each: a row's floats depend on its place in the draw, not on who draws it (processes
        sharing a batch draw their rows' parts of one draw). The generator then moves on by
        the whole draw. With first=0 and total=rows, the same floats as uniform(rows * width)."""
        total = rows if total is None else total
        start = self.counter + first * width
        places = np.arange(start, start + rows * width, dtype=np.uint64)
        self.counter += int(total) * int(width)
        _drew(rows * width)
        floats: NDArray[np.float64] = (_mix(places * _GOLDEN + self._key) >> np.uint64(11)).astype(
            np.float64
        )
        return floats * (2.0**-53)

    def next_key(self) -> Generator:
        """A generator of its own for the next draw (a training step's dropout masks), keyed by
        this one's key and counter; this one moves on by one. Its draws do not depend on how
        many values the draws before it took: a process that drew nothing (left no rows of a
        batch) stays in step with those that drew."""
        child = Generator.__new__(Generator)
        child.seed, child.stream, child.counter = self.seed, self.stream, 0
        key = _mix_word((self.counter * int(_GOLDEN) + int(self._key)) & _MASK) ^ int(_GOLDEN)
        child._key = np.uint64(key)
        self.counter += 1
        _drew(1)
        return child

    def permutation(self, count: int) -> NDArray[np.int64]:
        """The numbers 0 .. count-1 in a shuffled order."""
        return np.argsort(self.bits(count), kind="stable").astype(np.int64)

    def __repr__(self) -> str:
        return f"Generator(seed={self.seed}, stream={self.stream}, counter={self.counter})"


class KeyedOrder:
    """A permutation of 0 .. count-1 drawn from `key`: `order[positions]` gives the numbers at
    those positions, each computed alone (no table of `count` entries is ever made).

    A balanced Feistel network over the smallest even number of bits that holds count - 1 (4
    rounds of SplitMix64's finaliser keyed by `key`) permutes 0 .. 2**bits - 1; a number that
    lands at count or beyond is sent through again until it lands below (cycle walking), which
    keeps the map a permutation of 0 .. count-1. 2**bits < 4 * count, so few numbers walk."""

    def __init__(self, key: int, count: int) -> None:
        self.count = count
        bits = max(2, (count - 1).bit_length())
        self._half = (bits + 1) // 2
        self._mask = np.uint64((1 << self._half) - 1)
        words = np.arange(_FEISTEL_ROUNDS, dtype=np.uint64) * _GOLDEN + np.uint64(
            key & ((1 << 64) - 1)
        )
        self._keys = _mix(words)

    def _once(self, numbers: NDArray[np.uint64]) -> NDArray[np.uint64]:
        half, mask = np.uint64(self._half), self._mask
        left, right = numbers >> half, numbers & mask
        for key in self._keys:
            left, right = right, left ^ (_mix(right * _GOLDEN + key) & mask)
        joined: NDArray[np.uint64] = (left << half) | right
        return joined

    def __getitem__(self, positions: NDArray[np.int64]) -> NDArray[np.int64]:
        if self.count <= 1:
            return np.zeros(len(positions), np.int64)
        numbers = self._once(positions.astype(np.uint64))
        outside = numbers >= np.uint64(self.count)
        while outside.any():
            numbers[outside] = self._once(numbers[outside])
            outside = numbers >= np.uint64(self.count)
        return numbers.astype(np.int64)


class Streams:
    """A run's randomness: one stream per purpose, each counted from the run's seed, so that
    the split does not change with the network, nor the order of rows with its slot count."""

    PURPOSES = ("split", "slots", "order", "dropout")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.split, self.slots, self.order, self.dropout = (
            Generator(seed, stream=index) for index in range(len(self.PURPOSES))
        )

    @property
    def state(self) -> dict[str, Any]:
        """Small enough for a checkpoint: the seed and how far each stream has counted."""
        return {
            "seed": self.seed,
            **{name: getattr(self, name).counter for name in self.PURPOSES},
        }

    def restore(self, state: dict[str, Any]) -> None:
        if int(state["seed"]) != self.seed:
            raise ValueError(
                f"the state is of seed {state['seed']}, these streams of seed {self.seed}"
            )
        for name in self.PURPOSES:
            getattr(self, name).counter = int(state[name])

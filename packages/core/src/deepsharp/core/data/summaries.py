"""Statistics of rows that come in parts: each summary takes one part's values at a time, in
memory bounded whatever the number of rows, and gives the statistic when the last part is in.

- `Moments`: the count, mean and sum of squared deviations in float64, parts merged by Chan,
  Golub and LeVeque's pairwise update; the mean and standard deviation agree with NumPy's over
  all the values at once to float64 rounding (not bit for bit: the sums are grouped otherwise).
- `Median`: exact (NumPy's `median`, bit for bit) while the distinct values fit a table of
  `EXACT_DISTINCT` entries; past that, a log-bucketed sketch (DDSketch's buckets, Masson et al.
  2019): each of the middle values it gives lies within a relative `ALPHA` (0.1 %) of the
  exact one (within FLOAT32_TINY of 0 for values nearer 0 than that), so the median of two
  middle values a, b lies within ALPHA * (|a| + |b|) / 2 of the exact one. The sketch holds at
  most one count per bucket: about 176,000 over float32's whole range, far fewer in practice.
- `LabelCounts`: how many rows hold each label, up to `MAX_LABELS` distinct labels (past that a
  DataError: such a column is an identifier, not a category).
- `TokenCounts`: how many times each token of a text column comes, in a table of at most
  `limit` tokens: exact while the distinct tokens fit it; past that, pruned as Misra and Gries
  prune (each time the table overflows, every count drops by the (limit + 1)-th largest and
  those at 0 go), so a token kept is counted short by at most (tokens seen) / (limit + 1), and
  any token that comes more often than that is kept.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.values import FLOAT32_TINY, Column, ColumnName, label_counts
from deepsharp.core.errors import DataError

__all__ = [
    "ALPHA",
    "EXACT_DISTINCT",
    "MAX_LABELS",
    "LabelCounts",
    "Median",
    "Moments",
    "Sketch",
    "TokenCounts",
]

EXACT_DISTINCT = 1 << 17  # 131,072 distinct values: 2 MiB of table
ALPHA = 0.001
MAX_LABELS = 100_000
_SLICE = 1 << 14

Floats = npt.NDArray[np.float64]
Counts = npt.NDArray[np.int64]
Key = TypeVar("Key", np.float64, np.int64)


class Moments:
    """Count, mean and the sum of squared deviations of the values added so far."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self.deviations = 0.0  # the sum of (x - mean)**2

    def add(self, values: Floats) -> None:
        if values.size:
            mean = float(np.mean(values))
            self.merge(int(values.size), mean, float(np.sum(np.square(values - mean))))

    def merge(self, count: int, mean: float, deviations: float) -> None:
        """Take in `count` more values of this mean and sum of squared deviations."""
        if count == 0:
            return
        total = self.count + count
        delta = mean - self.mean
        self.mean += delta * (count / total)
        self.deviations += deviations + delta * delta * (self.count * count / total)
        self.count = total

    @property
    def std(self) -> float:
        """The population standard deviation (NumPy's `std`, ddof=0)."""
        return math.sqrt(self.deviations / self.count) if self.count else math.nan


def _tally(
    keys: npt.NDArray[Key], weights: Counts | None = None
) -> tuple[npt.NDArray[Key], Counts]:
    """The distinct keys, sorted, with how many times each comes (or the sum of its weights)."""
    if weights is None:
        distinct, counts = np.unique(keys, return_counts=True)
        return distinct, counts.astype(np.int64)
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(inverse, weights=weights, minlength=distinct.size).astype(np.int64)


def _merged(
    keys: npt.NDArray[Key], counts: Counts, more: npt.NDArray[Key], weights: Counts
) -> tuple[npt.NDArray[Key], Counts]:
    """A table of (sorted distinct key, count) with more of them (sorted, distinct) counted in:
    the keys it holds found by bisection, the new ones inserted (no sort of the whole table)."""
    at = np.searchsorted(keys, more)
    held = at < keys.size
    held[held] = keys[at[held]] == more[held]
    counts = counts.copy()
    counts[at[held]] += weights[held]
    fresh = ~held
    if fresh.any():
        keys = np.insert(keys, at[fresh], more[fresh])
        counts = np.insert(counts, at[fresh], weights[fresh])
    return keys, counts


def _at_rank(counts: Counts, rank: int) -> int:
    """The index of the key that holds the value of rank `rank` (from 0) in sorted order."""
    return int(np.searchsorted(np.cumsum(counts), rank, side="right"))


def _middle(counts: Counts) -> tuple[int, int]:
    """The table indices of the two middle values (the same one for an odd count)."""
    total = int(counts.sum())
    return _at_rank(counts, (total - 1) // 2), _at_rank(counts, total // 2)


class Sketch:
    """Counts of values by bucket: bucket i > 0 of a sign holds |x| in (g**(i-1), g**i] with
    g = (1 + alpha) / (1 - alpha), told by 2 g**i / (g + 1), within a relative alpha of every
    value it holds; values nearer 0 than FLOAT32_TINY count as 0."""

    _SPAN = 1 << 17  # more than the buckets of one sign over float32's range at alpha 0.001

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha = alpha
        self.gamma = (1.0 + alpha) / (1.0 - alpha)
        self._log_gamma = math.log(self.gamma)
        self.keys: Counts = np.empty(0, np.int64)  # sorted as the values they hold
        self.counts: Counts = np.empty(0, np.int64)

    def add(self, values: Floats, weights: Counts | None = None) -> None:
        keys, counts = _tally(self._keys(values), weights)
        self.keys, self.counts = _merged(self.keys, self.counts, keys, counts)

    def _keys(self, values: Floats) -> Counts:
        size = np.abs(values)
        keys = np.zeros(values.size, np.int64)
        away = size >= FLOAT32_TINY
        index = np.ceil(np.log(size[away]) / self._log_gamma).astype(np.int64)
        # Keys keep the values' order: negatives below 0 (larger size, lower key), then 0, then
        # positives; every bucket index lies within +-SPAN/2 over float32's range.
        keys[away] = np.where(values[away] > 0, 2 * self._SPAN + index, -(2 * self._SPAN + index))
        return keys

    def _value(self, key: int) -> float:
        if key == 0:
            return 0.0
        index = abs(key) - 2 * self._SPAN
        told = 2.0 * self.gamma**index / (self.gamma + 1.0)
        return told if key > 0 else -told

    def median(self) -> float:
        low, high = _middle(self.counts)
        return (self._value(int(self.keys[low])) + self._value(int(self.keys[high]))) / 2


class Median:
    """The median of the values added so far: exact while their distinct values fit
    `exact_distinct`, from a `Sketch` after."""

    def __init__(self, exact_distinct: int = EXACT_DISTINCT, alpha: float = ALPHA) -> None:
        self.exact_distinct = exact_distinct
        self.alpha = alpha
        self.values: Floats = np.empty(0, np.float64)
        self.counts: Counts = np.empty(0, np.int64)
        self.sketch: Sketch | None = None

    @property
    def exact(self) -> bool:
        return self.sketch is None

    def add(self, values: Floats) -> None:
        if values.size == 0:
            return
        if self.sketch is not None:
            self.sketch.add(values)
            return
        distinct, counts = _tally(values)
        self.values, self.counts = _merged(self.values, self.counts, distinct, counts)
        if self.values.size > self.exact_distinct:
            self.sketch = Sketch(self.alpha)
            for start in range(0, self.values.size, _SLICE):  # a slice at a time: few transients
                end = start + _SLICE
                self.sketch.add(self.values[start:end], self.counts[start:end])
            self.values, self.counts = np.empty(0, np.float64), np.empty(0, np.int64)

    def median(self) -> float:
        """As NumPy's median gives it (the mean of the two middle values for an even count)."""
        if self.sketch is not None:
            return self.sketch.median()
        low, high = _middle(self.counts)
        return (float(self.values[low]) + float(self.values[high])) / 2


class LabelCounts:
    """How many rows hold each label (None: missing), over every part."""

    def __init__(self, name: ColumnName, limit: int = MAX_LABELS, kept: int | None = None) -> None:
        self.name = name
        self.limit = limit
        self.kept = kept  # the category's max_values, where it gives one
        self.counts: dict[str | None, int] = {}
        self.rows = 0

    def add(self, values: Column) -> None:
        for text, count in label_counts(values, self.name).items():
            self.counts[text] = self.counts.get(text, 0) + count
        self.rows += len(values)
        if len(self.counts) > self.limit:
            if self.kept is not None:  # (trial ST5: said a one-hot that wide, of max_values=20)
                raise DataError(
                    f"column {self.name!r} holds more than {self.limit:,} distinct values in "
                    f"its first {self.rows:,} training rows: max_values={self.kept} keeps the "
                    f"most frequent, from every value's count, and counts are kept for at most "
                    f"{self.limit:,} values; a column of so many is an identifier: drop it, make "
                    "it a number, or read it as a text column (its vocabulary counted in a "
                    "table of its own)"
                )
            raise DataError(
                f"column {self.name!r} holds more than {self.limit:,} distinct values in its "
                f"first {self.rows:,} training rows: an identifier, not a category (a one-hot "
                "that wide repays nothing); drop the column, or make it a number"
            )


class TokenCounts:
    """How many times each token comes, over every part, in a table of at most `limit` tokens
    (see the module's docstring: exact while they fit, Misra-Gries counts past that)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: dict[str, int] = {}
        self.seen = 0
        self.exact = True

    def add(self, tokens: Iterable[str]) -> None:
        """Count one part's tokens in."""
        counts = self.counts
        for token, count in Counter(tokens).items():
            counts[token] = counts.get(token, 0) + count
            self.seen += count
        if len(counts) > self.limit:
            held = np.fromiter(counts.values(), np.int64, len(counts))
            cut = int(np.partition(held, len(held) - self.limit - 1)[len(held) - self.limit - 1])
            self.counts = {token: count - cut for token, count in counts.items() if count > cut}
            self.exact = False

    def most_frequent(self, count: int) -> list[str]:
        """The `count` tokens counted most often, most first; ties in the tokens' text order."""
        ranked = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        return [token for token, _ in ranked[:count]]

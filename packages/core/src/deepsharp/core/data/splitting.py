"""Splitting rows: the training, validation and test rows a pipeline's split cuts from a
permutation (`Pipeline.partition`), and how many rows a split needs so that no part is empty."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["permutation", "rows_needed", "split_shares", "split_sizes"]


def permutation(count: int, order: npt.ArrayLike) -> npt.NDArray[np.int64]:
    perm = np.asarray(order)
    if perm.ndim != 1 or perm.shape[0] != count:
        raise ValueError(
            f"partition: order must be a permutation of the {count} row indices, but it has "
            f"shape {perm.shape}"
        )
    if count and perm.dtype.kind not in "iu":
        raise ValueError(f"partition: order must hold integers, not {perm.dtype}")
    perm = perm.astype(np.int64)
    if count and (
        perm.min() < 0
        or perm.max() >= count
        or not bool(np.all(np.bincount(perm, minlength=count) == 1))
    ):
        raise ValueError(
            f"partition: order must be a permutation of 0 .. {count - 1}, each index once"
        )
    return perm


def split_shares(
    train: float, validation: float, test: bool = True, with_validation: bool = True
) -> tuple[float, float]:
    """The training and validation shares of the rows a split cuts, where the test or the
    validation rows may be given apart (`test`, `with_validation` False): the parts left are
    cut in the ratio of their fractions (the test part's, 1 - train - validation)."""
    if test and with_validation:  # the fractions as they are (a total of 1.0 - 1e-16 would
        return train, validation  # move a row at the edge of a floor)
    kept_validation = validation if with_validation else 0.0
    kept_test = max(0.0, 1.0 - train - validation) if test else 0.0
    total = train + kept_validation + kept_test
    return train / total, kept_validation / total


def split_sizes(count: int, train: float, validation: float) -> tuple[int, int, int]:
    # A hair of tolerance so that, e.g., 0.29 * 100 (28.999999999999996) gives 29 rows.
    n_train = min(count, math.floor(train * count + 1e-9))
    n_validation = min(count - n_train, math.floor(validation * count + 1e-9))
    return n_train, n_validation, count - n_train - n_validation


def rows_needed(train: float, validation: float, test: bool) -> int:
    n = 1
    while True:
        a, b, c = split_sizes(n, train, validation)
        if not test:
            a, c = a + c, 1
        if a > 0 and c > 0 and (validation == 0 or b > 0):
            return n
        n += 1

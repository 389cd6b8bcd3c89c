"""Inputs for the checks, and the suite's own float64 references for the harder operations.

Hypothesis draws the shapes, the kinds of values and a seed; the values themselves come from
NumPy's generator with that seed, so inputs of 4,096 elements cost nothing to draw and every
failure is replayed exactly from what Hypothesis prints.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

__all__ = [
    "CHECKS",
    "conv2d_reference",
    "conv2d_fold_reference",
    "conv2d_weight_grad_reference",
    "draw",
    "out_size",
    "seeds",
    "sides",
    "signs",
]

Array = NDArray[Any]
Padding = tuple[tuple[int, int], tuple[int, int]]

CHECKS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Few examples each, the same every run: the whole suite stays well under a minute."""

seeds = st.integers(0, 2**32 - 1)
sides = st.sampled_from([1, 1, 2, 3, 4, 5, 7])
"""Sizes of one axis: ones and odd sizes favoured."""
signs = st.sampled_from(["mixed", "mixed", "positive", "negative"])


def draw(
    seed: int,
    shape: tuple[int, ...],
    *,
    signs: str = "mixed",
    low: float = -6.0,
    high: float = 4.0,
    zeros: float = 0.05,
    negative_zeros: bool = False,
) -> NDArray[np.float32]:
    """float32 values of magnitudes 10**low .. 10**high (log-uniform), some zeros, given signs."""
    rng = np.random.default_rng(seed)
    values = np.asarray(10.0 ** rng.uniform(low, high, shape))
    if signs == "mixed":
        values *= rng.choice([-1.0, 1.0], shape)
    elif signs == "negative":
        values = -values
    values[rng.uniform(0.0, 1.0, shape) < zeros] = 0.0
    out = np.asarray(values, np.float32)
    if negative_zeros:
        out[(out == 0) & (rng.uniform(0.0, 1.0, shape) < 0.5)] = np.float32(-0.0)
    return out


def out_size(size: int, kernel: int, stride: int, before: int, after: int) -> int:
    return (size + before + after - kernel) // stride + 1


def _padded(x: Array, padding: Padding) -> Array:
    return np.pad(np.asarray(x, np.float64), [(0, 0), (0, 0), padding[0], padding[1]])


def conv2d_reference(x: Array, w: Array, stride: int, padding: Padding) -> Array:
    """Cross-correlation in float64, one kernel place at a time."""
    xp = _padded(x, padding)
    w = np.asarray(w, np.float64)
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            window = xp[
                :, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride
            ]
            y += np.einsum("nchw,fc->nfhw", window, w[:, :, i, j])
    return y


def conv2d_weight_grad_reference(
    x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Padding
) -> Array:
    xp = _padded(x, padding)
    gy = np.asarray(gy, np.float64)
    oh, ow = gy.shape[2:]
    gw = np.zeros((gy.shape[1], x.shape[1], kernel[0], kernel[1]))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            window = xp[
                :, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride
            ]
            gw[:, :, i, j] = np.einsum("nfhw,nchw->fc", gy, window)
    return gw


def conv2d_fold_reference(
    gy: Array, w: Array, image: tuple[int, int], stride: int, padding: Padding
) -> Array:
    """What each output place's gradient adds onto the image places it read, in float64."""
    gy = np.asarray(gy, np.float64)
    w = np.asarray(w, np.float64)
    (top, bottom), (left, right) = padding
    count, _, oh, ow = gy.shape
    kh, kw = w.shape[2:]
    gx = np.zeros((count, w.shape[1], image[0] + top + bottom, image[1] + left + right))
    for i in range(kh):
        for j in range(kw):
            gx[
                :, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride
            ] += np.einsum("nfhw,fc->nchw", gy, w[:, :, i, j])
    return gx[:, :, top : top + image[0], left : left + image[1]]

"""Engines broken on purpose that hide a NaN a run should see: each passed every other check
(trial E), and turns a diverged run's NaN into numbers.

Each factory is a `module:factory` spec: `--engine quiet_engines:relu_by_fmax`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from example_engine import ExampleEngine

Array = Any


class ReluByFmax(ExampleEngine):
    """ReLU as np.fmax(x, 0), which gives 0 for a NaN."""

    name = "relu-by-fmax"

    def relu(self, x: Array) -> Array:
        return np.fmax(x, np.float32(0.0))


class SumsLeaveNanOut(ExampleEngine):
    """Totals by np.nansum: a row's NaN is left out of its total."""

    name = "sums-leave-nan-out"

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.nansum(x, axis=axes, keepdims=keepdims, dtype=np.float64).astype(np.float32)


class MaximumByFmax(ExampleEngine):
    """maximum as np.fmax, which leaves a NaN operand out (trial EX4: the losses' clip of
    probabilities then turned a NaN into a finite loss)."""

    name = "maximum-by-fmax"

    def maximum(self, a: Array, b: Array) -> Array:
        return np.fmax(a, b).astype(np.float32)


def maximum_by_fmax() -> ExampleEngine:
    return MaximumByFmax()


def relu_by_fmax() -> ExampleEngine:
    return ReluByFmax()


def sums_leave_nan_out() -> ExampleEngine:
    return SumsLeaveNanOut()

"""An outside engine: the light engine's arithmetic, with every product added in float64.

Run the contract on it with `pytest --pyargs deepsharp.contracts --engine example_engine:make`
(with this file's folder on PYTHONPATH).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from deepsharp.engines.light import LightEngine

Array = Any


class PreciseEngine(LightEngine):
    """NumPy float32 tensors; products and convolutions added in float64, then rounded once."""

    name = "precise"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        wide = super().matmul(a.astype(np.float64), b.astype(np.float64), transpose_a, transpose_b)
        return wide.astype(np.float32)

    def conv2d(self, x: Array, w: Array, stride: int, padding: Any) -> Array:
        wide = super().conv2d(x.astype(np.float64), w.astype(np.float64), stride, padding)
        return wide.astype(np.float32)

    def conv2d_weight_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Any
    ) -> Array:
        wide = super().conv2d_weight_grad(
            x.astype(np.float64), gy.astype(np.float64), kernel, stride, padding
        )
        return wide.astype(np.float32)

    def conv2d_fold(
        self, gy: Array, w: Array, image: tuple[int, int], stride: int, padding: Any
    ) -> Array:
        wide = super().conv2d_fold(
            gy.astype(np.float64), w.astype(np.float64), image, stride, padding
        )
        return wide.astype(np.float32)

    def sgd_update(
        self,
        slots: Sequence[Array],
        grads: Sequence[Array],
        velocities: Sequence[Array],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        for slot, grad, velocity in zip(slots, grads, velocities, strict=True):
            velocity *= np.float32(momentum)
            velocity -= np.float32(learning_rate) * grad
            slot += velocity

    def adam_update(
        self,
        slots: Sequence[Array],
        grads: Sequence[Array],
        firsts: Sequence[Array],
        seconds: Sequence[Array],
        *,
        step_size: float,
        beta1: float,
        beta2: float,
        epsilon: float,
    ) -> None:
        for slot, grad, first, second in zip(slots, grads, firsts, seconds, strict=True):
            first += (grad - first) * np.float32(1.0 - beta1)
            second += (grad * grad - second) * np.float32(1.0 - beta2)
            slot -= np.float32(step_size) * first / (np.sqrt(second) + np.float32(epsilon))


def make() -> PreciseEngine:
    """The factory a `module:factory` spec names."""
    return PreciseEngine()

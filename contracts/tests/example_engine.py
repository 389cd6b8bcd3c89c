"""An outside engine: the light engine's arithmetic, with its own fused optimizer updates.

Run the contract on it with `pytest --pyargs deepsharp.contracts --engine example_engine:make`
(with this file's folder on PYTHONPATH).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from deepsharp.engines.light import LightEngine

Array = Any


class ExampleEngine(LightEngine):
    """The light engine's arrays and arithmetic, with the fused optimizer updates written out
    slot by slot as plain NumPy expressions: an engine overrides what it does its own way."""

    name = "example"

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


def make() -> ExampleEngine:
    """The factory a `module:factory` spec names."""
    return ExampleEngine()

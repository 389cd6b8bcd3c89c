"""Engines and references for the engine layer's tests (conftest puts this folder on the path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from deepsharp.core import Conv2D, CrossEntropy, Dense, Flatten, Network, Relu, Trainer
from deepsharp.core.engine import Engine, fused
from deepsharp.core.engine.registry import _MEMBERS


class PrimitivesOnly:
    """Another engine's primitives and nothing else: no fast path reaches the core through it,
    so every fused operation runs its reference (what a new engine written from the protocol
    alone gets). Each primitive is a property of the class (not a `__getattr__` forward), so
    `isinstance(..., Engine)` sees them on every Python: from 3.12 a runtime protocol looks
    members up statically."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def name(self) -> str:
        return f"{self._engine.name} (primitives only)"


def _forward(member: str) -> property:
    return property(lambda self: getattr(self._engine, member))


for _member in _MEMBERS:
    if _member != "name":
        setattr(PrimitivesOnly, _member, _forward(_member))


def offers(engine: Any, fast_path: str) -> bool:
    """Whether `engine` offers the fast path of that name (the core then runs it)."""
    assert fast_path in fused.FAST_PATHS
    return getattr(engine, fast_path, None) is not None


def trains_alike(fast: Any, plain: Any, optimizer: Any) -> None:
    """Four steps of a small convolutional network on `fast` (an engine with its fast paths) and
    on `plain` (primitives only) give the same losses and slots, to float32 rounding."""
    rng = np.random.default_rng(4)
    batches = [
        (rng.standard_normal((6, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, 6))
        for _ in range(4)
    ]
    runs = []
    for engine in (fast, plain):
        network = Network(
            [Conv2D(4, 3, padding="same"), Relu(), Conv2D(2, 3, stride=2), Flatten(), Dense(3)],
            inputs=(1, 8, 8),
        )
        trainer = Trainer(network, CrossEntropy(), optimizer, engine=engine, seed=0)
        losses = [trainer.step(x, y) for x, y in batches]
        runs.append((losses, trainer.network.slots))
    (fast_losses, fast_slots), (plain_losses, plain_slots) = runs
    assert np.allclose(fast_losses, plain_losses, rtol=1e-5, atol=1e-6)
    for name, value in fast_slots.items():
        assert np.allclose(plain_slots[name], value, rtol=1e-4, atol=1e-6), name


U = 2.0**-24
TINY = np.finfo(np.float32).tiny  # below it float32 loses bits: no relative promise there


def _softplus64(x: Any) -> Any:
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


TAILS: dict[str, tuple[Callable[[Any], Any], list[tuple[float, float]]]] = {
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), [(-87.0, -10.0), (10.0, 40.0)]),
    "exp": (np.exp, [(-87.0, -20.0), (20.0, 88.0)]),
    "softplus": (_softplus64, [(-87.0, -15.0), (15.0, 80.0)]),
    "log1p": (np.log1p, [(-0.999, -0.5), (-1e-4, 1e-4), (1e5, 1e30)]),
}


def tail_values(low: float, high: float, count: int = 4000) -> Any:
    """float32 values across [low, high], log-spaced where the range spans decades."""
    if low > 0 and high / low > 100:
        return np.geomspace(low, high, count).astype(np.float32)
    return np.linspace(low, high, count).astype(np.float32)


def worst_relative_error(op: str, got: Any, x: Any) -> float:
    """The largest |got - ref| / |ref| in units of u, over results float32 holds in full."""
    exact = TAILS[op][0](x.astype(np.float64))
    held = np.abs(exact) >= TINY
    return float((np.abs(got[held] - exact[held]) / np.abs(exact[held])).max() / U)

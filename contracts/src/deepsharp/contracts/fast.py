"""The fused operations as the core calls them: through `deepsharp.core.engine.fused`, which runs
an engine's own fast path where it offers one and the core's reference in primitives otherwise.

Until the core has `fused`, the fused operations are part of every engine's protocol (the
convolution's bias an argument of `conv2d`, the biases' gradient a flag of
`conv2d_weight_grad`), and these call them there. That fallback is the only place the suite
knows the older protocol; it goes once `fused` is in every core the suite supports.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = [
    "FUSED",
    "adam_update",
    "conv2d_bias",
    "conv2d_weight_bias_grad",
    "fast_paths",
    "relu_back",
    "sgd_update",
]


def _fused() -> ModuleType | None:
    try:
        return importlib.import_module("deepsharp.core.engine.fused")
    except ModuleNotFoundError:
        return None


FUSED = _fused()
"""`deepsharp.core.engine.fused`, or None where the core has no fast paths yet."""


def fast_paths() -> dict[str, Any]:
    """`fused.FAST_PATHS`: each fast path's name and its reference written in primitives."""
    if FUSED is None:
        return {}
    paths: dict[str, Any] = FUSED.FAST_PATHS
    return paths


def conv2d_bias(engine: Any, x: Any, w: Any, bias: Any, stride: int, padding: Any) -> Any:
    if FUSED is None:
        return engine.conv2d(x, w, stride, padding, bias)
    return FUSED.conv2d_bias(engine, x, w, bias, stride, padding)


def conv2d_weight_bias_grad(
    engine: Any, x: Any, gy: Any, kernel: tuple[int, int], stride: int, padding: Any
) -> tuple[Any, Any]:
    if FUSED is None:
        weights, biases = engine.conv2d_weight_grad(x, gy, kernel, stride, padding, True)
        return weights, biases
    weights, biases = FUSED.conv2d_weight_bias_grad(engine, x, gy, kernel, stride, padding)
    return weights, biases


def relu_back(engine: Any, x: Any, grad: Any) -> Any:
    if FUSED is None:
        return engine.relu_back(x, grad)
    return FUSED.relu_back(engine, x, grad)


def sgd_update(
    engine: Any,
    slots: Sequence[Any],
    grads: Sequence[Any],
    velocities: Sequence[Any],
    *,
    learning_rate: float,
    momentum: float,
) -> None:
    settings = {"learning_rate": learning_rate, "momentum": momentum}
    if FUSED is None:
        engine.sgd_update(slots, grads, velocities, **settings)
        return
    FUSED.sgd_update(engine, slots, grads, velocities, **settings)


def adam_update(
    engine: Any,
    slots: Sequence[Any],
    grads: Sequence[Any],
    firsts: Sequence[Any],
    seconds: Sequence[Any],
    *,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    settings = {"step_size": step_size, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    if FUSED is None:
        engine.adam_update(slots, grads, firsts, seconds, **settings)
        return
    FUSED.adam_update(engine, slots, grads, firsts, seconds, **settings)

"""Fast paths: fused operations, each with a reference written in the engine's primitives.

The core calls every fused operation through this module, `fused.<name>(engine, ...)`: where
the engine offers a method of that name (and the signature given here, without the engine) it
runs that, else the reference below. A new engine is thus the primitives alone; an engine may
add any of these for speed, and the contract suite holds each one it offers to its reference
(`FAST_PATHS`: name -> reference function, taking the engine first).

- `conv2d_bias(x, w, bias, stride, padding)`: the convolution plus each filter's bias (F,).
- `conv2d_weight_bias_grad(x, gy, kernel, stride, padding)`: the filters' gradient and the
  biases' (gy's totals over images and places), as a pair.
- `relu_back(x, grad)`: ReLU's way back: grad where x > 0, else 0.
- `sgd_update(slots, grads, velocities, *, learning_rate, momentum)`: in place, for each slot:
  v = momentum·v - learning_rate·g; slot += v.
- `adam_update(slots, grads, firsts, seconds, *, step_size, beta1, beta2, epsilon)`: in place
  (Keras's Adam; step_size holds the bias corrections): m += (g - m)(1 - beta1);
  v += (g² - v)(1 - beta2); slot -= step_size·m / (√v + epsilon).
- `decay_update(slots, *, factor)`: in place: each slot times `factor` (AdamW's decoupled
  weight decay, factor = 1 - learning_rate·weight_decay).
- `parts(flat, shapes)`: consecutive parts of a flat tensor, each of its shape: how the core
  lays out slots and an optimizer's memory (an engine that offers it may then do an update over
  all of a flat tensor's parts in one pass).

The totals among them (the first two) are held to the engine's precision: a bias is one more
term of each total. The others are value-by-value operations, held to the value tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from deepsharp.core.engine.protocol import Engine, Handle, Padding

__all__ = [
    "FAST_PATHS",
    "adam_update",
    "adam_update_reference",
    "conv2d_bias",
    "conv2d_bias_reference",
    "conv2d_weight_bias_grad",
    "conv2d_weight_bias_grad_reference",
    "decay_update",
    "decay_update_reference",
    "parts",
    "parts_reference",
    "relu_back",
    "relu_back_reference",
    "sgd_update",
    "sgd_update_reference",
]

Paddings = tuple[Padding, Padding]


# --- the references, in primitives ------------------------------------------------------------


def conv2d_bias_reference(
    engine: Engine, x: Handle, w: Handle, bias: Handle, stride: int, padding: Paddings
) -> Handle:
    filters = engine.shape(bias)[0]
    out = engine.conv2d(x, w, stride, padding)
    return engine.add(out, engine.reshape(bias, (1, filters, 1, 1)))


def conv2d_weight_bias_grad_reference(
    engine: Engine,
    x: Handle,
    gy: Handle,
    kernel: tuple[int, int],
    stride: int,
    padding: Paddings,
) -> tuple[Handle, Handle]:
    return engine.conv2d_weight_grad(x, gy, kernel, stride, padding), engine.sum(gy, (0, 2, 3))


def relu_back_reference(engine: Engine, x: Handle, grad: Handle) -> Handle:
    return engine.where(engine.greater(x, 0.0), grad, 0.0)


def sgd_update_reference(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    velocities: Sequence[Handle],
    *,
    learning_rate: float,
    momentum: float,
) -> None:
    for slot, grad, velocity in zip(slots, grads, velocities, strict=True):
        kept = engine.mul(velocity, momentum)
        engine.assign(velocity, engine.sub(kept, engine.mul(grad, learning_rate)))
        engine.assign(slot, engine.add(slot, velocity))


def adam_update_reference(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    firsts: Sequence[Handle],
    seconds: Sequence[Handle],
    *,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    for slot, grad, first, second in zip(slots, grads, firsts, seconds, strict=True):
        engine.assign(first, engine.add(first, engine.mul(engine.sub(grad, first), 1.0 - beta1)))
        square = engine.mul(grad, grad)
        engine.assign(
            second, engine.add(second, engine.mul(engine.sub(square, second), 1.0 - beta2))
        )
        root = engine.add(engine.sqrt(second), epsilon)
        engine.assign(slot, engine.sub(slot, engine.mul(engine.div(first, root), step_size)))


def decay_update_reference(engine: Engine, slots: Sequence[Handle], *, factor: float) -> None:
    for slot in slots:
        engine.assign(slot, engine.mul(slot, factor))


def parts_reference(
    engine: Engine, flat: Handle, shapes: Sequence[tuple[int, ...]]
) -> list[Handle]:
    handles, start = [], 0
    for shape in shapes:
        count = math.prod(shape)
        handles.append(engine.reshape(engine.slice(flat, 0, start, start + count), tuple(shape)))
        start += count
    return handles


FAST_PATHS: dict[str, Callable[..., Any]] = {
    "conv2d_bias": conv2d_bias_reference,
    "conv2d_weight_bias_grad": conv2d_weight_bias_grad_reference,
    "relu_back": relu_back_reference,
    "sgd_update": sgd_update_reference,
    "adam_update": adam_update_reference,
    "decay_update": decay_update_reference,
    "parts": parts_reference,
}
"""Every fast path an engine may offer: its name -> its reference (taking the engine first)."""


# --- what the core calls: the engine's own where it offers one --------------------------------


def conv2d_bias(
    engine: Engine, x: Handle, w: Handle, bias: Handle, stride: int, padding: Paddings
) -> Handle:
    own = getattr(engine, "conv2d_bias", None)
    if own is not None:
        return own(x, w, bias, stride, padding)
    return conv2d_bias_reference(engine, x, w, bias, stride, padding)


def conv2d_weight_bias_grad(
    engine: Engine,
    x: Handle,
    gy: Handle,
    kernel: tuple[int, int],
    stride: int,
    padding: Paddings,
) -> tuple[Handle, Handle]:
    own = getattr(engine, "conv2d_weight_bias_grad", None)
    if own is not None:
        pair: tuple[Handle, Handle] = own(x, gy, kernel, stride, padding)
        return pair
    return conv2d_weight_bias_grad_reference(engine, x, gy, kernel, stride, padding)


def relu_back(engine: Engine, x: Handle, grad: Handle) -> Handle:
    own = getattr(engine, "relu_back", None)
    if own is not None:
        return own(x, grad)
    return relu_back_reference(engine, x, grad)


def sgd_update(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    velocities: Sequence[Handle],
    *,
    learning_rate: float,
    momentum: float,
) -> None:
    own = getattr(engine, "sgd_update", None)
    if own is not None:
        own(slots, grads, velocities, learning_rate=learning_rate, momentum=momentum)
    else:
        sgd_update_reference(
            engine, slots, grads, velocities, learning_rate=learning_rate, momentum=momentum
        )


def adam_update(
    engine: Engine,
    slots: Sequence[Handle],
    grads: Sequence[Handle],
    firsts: Sequence[Handle],
    seconds: Sequence[Handle],
    *,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    settings = {"step_size": step_size, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    own = getattr(engine, "adam_update", None)
    if own is not None:
        own(slots, grads, firsts, seconds, **settings)
    else:
        adam_update_reference(engine, slots, grads, firsts, seconds, **settings)


def decay_update(engine: Engine, slots: Sequence[Handle], *, factor: float) -> None:
    own = getattr(engine, "decay_update", None)
    if own is not None:
        own(slots, factor=factor)
    else:
        decay_update_reference(engine, slots, factor=factor)


def parts(engine: Engine, flat: Handle, shapes: Sequence[tuple[int, ...]]) -> list[Handle]:
    own = getattr(engine, "parts", None)
    if own is not None:
        made: list[Handle] = own(flat, shapes)
        return made
    return parts_reference(engine, flat, shapes)


# --- gradient clipping: the optimizers' clip_norm and global_clip_norm, as Keras's -------------
# Each returns new gradients and leaves the ones given unchanged. The squares' totals are held
# to the engine's precision, the rest to the value tolerance (the contract's
# test_training_tools holds an engine's own to these references).


def _squares(engine: Engine, grad: Handle) -> Handle:
    """The total of a gradient's squares (a value of shape ())."""
    square = engine.mul(grad, grad)
    axes = tuple(range(len(engine.shape(grad))))
    return engine.sum(square, axes) if axes else square


def _clip_factor(engine: Engine, squares: Handle, clip_norm: float) -> Handle:
    """c / max(the squares' root, c): 1 exactly where the norm is within c."""
    return engine.div(clip_norm, engine.maximum(engine.sqrt(squares), clip_norm))


def clip_norm_reference(
    engine: Engine, grads: Sequence[Handle], *, clip_norm: float
) -> list[Handle]:
    """Each gradient g times c / max(‖g‖, c) (g's own bits where ‖g‖ <= c)."""
    return [engine.mul(g, _clip_factor(engine, _squares(engine, g), clip_norm)) for g in grads]


def global_clip_norm_reference(
    engine: Engine, grads: Sequence[Handle], *, clip_norm: float
) -> list[Handle]:
    """Every gradient times c / max(N, c), N the root of all their squares added up."""
    total: Handle | None = None
    for grad in grads:
        part = _squares(engine, grad)
        total = part if total is None else engine.add(total, part)
    if total is None:
        return []
    factor = _clip_factor(engine, total, clip_norm)
    return [engine.mul(g, factor) for g in grads]


def clip_norm(engine: Engine, grads: Sequence[Handle], *, clip_norm: float) -> list[Handle]:
    own = getattr(engine, "clip_norm", None)
    if own is not None:
        clipped: list[Handle] = own(grads, clip_norm=clip_norm)
        return clipped
    return clip_norm_reference(engine, grads, clip_norm=clip_norm)


def global_clip_norm(engine: Engine, grads: Sequence[Handle], *, clip_norm: float) -> list[Handle]:
    own = getattr(engine, "global_clip_norm", None)
    if own is not None:
        clipped: list[Handle] = own(grads, clip_norm=clip_norm)
        return clipped
    return global_clip_norm_reference(engine, grads, clip_norm=clip_norm)


FAST_PATHS.update(clip_norm=clip_norm_reference, global_clip_norm=global_clip_norm_reference)
__all__ += [
    "clip_norm",
    "clip_norm_reference",
    "global_clip_norm",
    "global_clip_norm_reference",
]

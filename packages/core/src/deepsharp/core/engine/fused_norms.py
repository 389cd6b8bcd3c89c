"""LayerNorm's fast paths: each position's last axis made mean 0 and variance 1, scaled and
shifted (`layer_norm`), and its way back (`layer_norm_back`).

Entered in `deepsharp.core.engine.fused` (`fused.layer_norm`, `fused.layer_norm_back`, and in
`FAST_PATHS`), as every fast path is: the core calls the engine's own method of the name where
it offers one, else the reference below, written in the primitives (the contract's
test_normalization holds an engine's own to these references).
"""

from __future__ import annotations

from deepsharp.core.engine.protocol import Engine, Handle

__all__ = [
    "centered_rows",
    "layer_norm",
    "layer_norm_back",
    "layer_norm_back_reference",
    "layer_norm_reference",
]


def centered_rows(engine: Engine, x: Handle, last: tuple[int, ...]) -> Handle:
    """x less its mean along `last`, the mean taken twice: the mean of what the first left
    over added to it. A row of one value is then all zeros, as it is: its mean at float32 is
    one unit of the last place off the value where the total rounds (37 values of 123456.79),
    and LayerNorm made that difference, over a variance of its square, into about ±1 (light's
    float32, the test engine's, the onnx engine's: trial E2)."""
    mean = engine.mean(x, last, True)
    mean = engine.add(mean, engine.mean(engine.sub(x, mean), last, True))
    return engine.sub(x, mean)


def layer_norm_reference(
    engine: Engine, x: Handle, scale: Handle, shift: Handle, epsilon: float
) -> Handle:
    last = (len(engine.shape(x)) - 1,)
    centered = centered_rows(engine, x, last)
    variance = engine.mean(engine.mul(centered, centered), last, True)
    normed = engine.div(centered, engine.sqrt(engine.add(variance, epsilon)))
    return engine.add(engine.mul(normed, scale), shift)


def layer_norm_back_reference(
    engine: Engine, x: Handle, scale: Handle, grad: Handle, epsilon: float
) -> tuple[Handle, Handle, Handle]:
    shape = engine.shape(x)
    last, positions = (len(shape) - 1,), tuple(range(len(shape) - 1))
    centered = centered_rows(engine, x, last)
    deviation = engine.sqrt(
        engine.add(engine.mean(engine.mul(centered, centered), last, True), epsilon)
    )
    normed = engine.div(centered, deviation)
    toward_shift = engine.sum(grad, positions)
    toward_scale = engine.sum(engine.mul(grad, normed), positions)
    toward_normed = engine.mul(grad, scale)
    spread = engine.mul(normed, engine.mean(engine.mul(toward_normed, normed), last, True))
    kept = engine.sub(engine.sub(toward_normed, engine.mean(toward_normed, last, True)), spread)
    return engine.div(kept, deviation), toward_scale, toward_shift


def layer_norm(engine: Engine, x: Handle, scale: Handle, shift: Handle, epsilon: float) -> Handle:
    own = getattr(engine, "layer_norm", None)
    if own is not None:
        return own(x, scale, shift, epsilon)
    return layer_norm_reference(engine, x, scale, shift, epsilon)


def layer_norm_back(
    engine: Engine, x: Handle, scale: Handle, grad: Handle, epsilon: float
) -> tuple[Handle, Handle, Handle]:
    own = getattr(engine, "layer_norm_back", None)
    if own is not None:
        made: tuple[Handle, Handle, Handle] = own(x, scale, grad, epsilon)
        return made
    return layer_norm_back_reference(engine, x, scale, grad, epsilon)

"""Fast paths of the optimizers' gradient clipping: `clip_norm` and `global_clip_norm`, as
Keras's.

Entered in `deepsharp.core.engine.fused` (`fused.clip_norm`, `fused.global_clip_norm`, and in
`FAST_PATHS`), as every fast path is: the core calls the engine's own method of the name where
it offers one, else the reference below, written in the primitives. Each returns new gradients
and leaves the ones given unchanged. The squares' totals are held to the engine's precision,
the rest to the value tolerance (the contract's test_training_tools holds an engine's own to
these references).
"""

from __future__ import annotations

from collections.abc import Sequence

from deepsharp.core.engine.protocol import Engine, Handle

__all__ = ["clip_norm", "clip_norm_reference", "global_clip_norm", "global_clip_norm_reference"]


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

"""Gradient accumulation's arithmetic (`Trainer(accumulate=K)`): a step's rows cut into K
contiguous parts, a part's rows of a tensor on the engine, and the parts' losses and gradients
added up, each weighted by its share of the step's rows."""

from __future__ import annotations

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine, Handle

__all__ = ["added", "part_rows", "parts_of"]


def parts_of(rows: int, count: int) -> list[tuple[int, int]]:
    """`rows` cut into `count` contiguous parts, [start, stop) each, as even as they go (the
    first `rows % count` one row larger); fewer where there are fewer rows than parts."""
    count = max(1, min(count, rows))
    base, extra = divmod(rows, count)
    parts, start = [], 0
    for index in range(count):
        stop = start + base + (1 if index < extra else 0)
        parts.append((start, stop))
        start = stop
    return parts


def part_rows(tensor: Tensor, start: int, stop: int) -> Tensor:
    """Rows start .. stop - 1 of a tensor on the engine (no gradient: the step's inputs)."""
    engine = tensor.engine
    handle = engine.slice(tensor.handle, 0, start, stop)
    return Tensor(handle, engine.shape(handle), engine, None, tensor.dtype)


def added(
    engine: Engine,
    value: Tensor | None,
    summed: list[Handle] | None,
    loss: Tensor,
    grads: list[Handle],
    weight: float,
) -> tuple[Tensor, list[Handle]]:
    """The running loss and gradients of an accumulated step, with one more part's added in,
    weighted by its share of the step's rows."""
    part = engine.mul(loss.handle, weight)
    weighted = [engine.mul(g, weight) for g in grads]
    if value is None or summed is None:
        return Tensor(part, (), engine), weighted
    added = engine.add(value.handle, part)
    return Tensor(added, (), engine), [engine.add(a, b) for a, b in zip(summed, weighted)]

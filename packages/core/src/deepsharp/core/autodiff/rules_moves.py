"""The rules of moves: reshape, transpose, slice, pad, concatenate, broadcast and rows picked by
index (an embedding), each forward beside its way back. Importing the module enters them in
`RULES`."""

from __future__ import annotations

from typing import Any

from deepsharp.core.autodiff.rulebook import shape_of, unbroadcast
from deepsharp.core.autodiff.tensor import Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ShapeError

__all__: list[str] = []


@register
class Reshape(Rule):
    moves = True  # int64 ids stay ids
    name = "reshape"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, x: Any, shape: tuple[int, ...]) -> tuple[Handle, Any]:
        return engine.reshape(x, shape), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (engine.reshape(grad, x.shape),)


@register
class Transpose(Rule):
    moves = True  # int64 ids stay ids
    name = "transpose"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, x: Any, axes: tuple[int, ...]) -> tuple[Handle, Any]:
        return engine.transpose(x, axes), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        axes = node.attrs["axes"]
        inverse = tuple(sorted(range(len(axes)), key=lambda i: axes[i]))
        return (engine.transpose(grad, inverse),)


@register
class Slice(Rule):
    moves = True  # int64 ids stay ids
    name = "slice"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads
    stretch = True  # several slices of one value: their gradients are joined, not added

    def forward(
        self, engine: Engine, x: Any, axis: int, start: int, stop: int
    ) -> tuple[Handle, Any]:
        return engine.slice(x, axis, start, stop), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        axis, start, stop = node.attrs["axis"], node.attrs["start"], node.attrs["stop"]
        widths = [(0, 0)] * len(x.shape)
        widths[axis] = (start, x.shape[axis] - stop)
        return (engine.pad(grad, widths),)


@register
class Pad(Rule):
    moves = True  # int64 ids stay ids
    name = "pad"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(
        self, engine: Engine, x: Any, widths: tuple[tuple[int, int], ...]
    ) -> tuple[Handle, Any]:
        return engine.pad(x, widths), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        for axis, (before, _) in enumerate(node.attrs["widths"]):
            if node.shape[axis] != x.shape[axis]:
                grad = engine.slice(grad, axis, before, before + x.shape[axis])
        return (grad,)


@register
class Concatenate(Rule):
    moves = True  # int64 ids stay ids
    name = "concatenate"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, *xs: Any, axis: int) -> tuple[Handle, Any]:
        return engine.concatenate(xs, axis), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        axis = node.attrs["axis"]
        sizes = [x.shape[axis] for x in node.inputs if isinstance(x, Tensor)]
        parts = engine.split(grad, sizes, axis)
        return tuple(part if need else None for part, need in zip(parts, node.needs))


@register
class BroadcastTo(Rule):
    moves = True  # int64 ids stay ids
    name = "broadcast_to"
    keeps_output = keeps_inputs = False  # shapes are all its way back reads

    def forward(self, engine: Engine, x: Any, shape: tuple[int, ...]) -> tuple[Handle, Any]:
        return engine.broadcast_to(x, shape), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x = node.inputs[0]
        assert isinstance(x, Tensor)
        return (unbroadcast(engine, grad, node.shape, x.shape),)


@register
class TakeRows(Rule):
    """Rows of a table picked by int64 indices of any shape (an embedding): table (V, ...) and
    ids (N, ...) -> (N, ..., *table.shape[1:]). Its way back adds each row's gradients into the
    row it came from (`add_rows`, a fast path); the indices get none."""

    name = "take_rows"
    keeps_output = False  # its way back reads the indices and the table's shape

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        if len(shape_of(inputs[0])) < 1 or not isinstance(inputs[1], Tensor):
            raise ShapeError(
                f"take_rows: a table of shape {shape_of(inputs[0])} and indices {inputs[1]!r}: "
                "a table of at least one axis and an int64 tensor of indices"
            )

    def forward(self, engine: Engine, table: Any, ids: Any) -> tuple[Handle, Any]:
        return engine.take_rows(table, ids), None

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        table, ids = node.inputs
        assert isinstance(table, Tensor) and isinstance(ids, Tensor)
        sent = fused.add_rows(engine, grad, ids.handle, table.shape[0]) if node.needs[0] else None
        return sent, None

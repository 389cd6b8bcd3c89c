"""Layers that take several inputs: Add and Concatenate (`Add()([a, b])`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import ShapeError
from deepsharp.core.nn.layer import Layer, Pass, Shape
from deepsharp.core.reals import is_whole

__all__ = ["Add", "Concatenate"]


class Add(Layer):
    """The sum of two or more inputs of one shape, value by value (a residual connection:
    `Add()([x, block(x)])`)."""

    several = True
    most_inputs = 2**31

    def build(self, shapes: list[Shape]) -> Shape:
        if any(shape != shapes[0] for shape in shapes):
            raise ShapeError(
                f"{self.label} adds inputs of one shape, not rows of shapes "
                + ", ".join(str(shape) for shape in shapes)
            )
        return shapes[0]

    def forward(self, xs: Sequence[Tensor], slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total


class Concatenate(Layer):
    """Two or more inputs side by side along `axis` (axes count the batch axis as 0, as in Keras:
    -1, the default, is the last; every other size must agree)."""

    several = True
    most_inputs = 2**31

    def __init__(self, axis: int = -1, name: str | None = None) -> None:
        super().__init__(name)
        if not is_whole(axis) or axis == 0:
            raise ValueError(
                f"Concatenate: axis is a whole number other than 0 (axis 0 is the batch's), "
                f"not {axis!r}"
            )
        self.axis = int(axis)

    def build(self, shapes: list[Shape]) -> Shape:
        rank = len(shapes[0])
        along = self.axis - 1 if self.axis > 0 else rank + self.axis
        if any(len(shape) != rank for shape in shapes) or not 0 <= along < rank:
            raise ShapeError(
                f"{self.label}: rows of shapes {', '.join(map(str, shapes))} cannot be joined "
                f"along axis {self.axis}"
            )
        for shape in shapes:
            if shape[:along] + shape[along + 1 :] != shapes[0][:along] + shapes[0][along + 1 :]:
                raise ShapeError(
                    f"{self.label} joins along axis {self.axis}; every other size must agree, "
                    f"and rows of shapes {', '.join(map(str, shapes))} differ elsewhere"
                )
        joined = sum(shape[along] for shape in shapes)
        self.along = along + 1  # on the batch's tensors
        return (*shapes[0][:along], joined, *shapes[0][along + 1 :])

    def forward(self, xs: Sequence[Tensor], slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.concatenate(list(xs), self.along)

    def config(self) -> dict[str, Any]:
        return {"axis": self.axis}

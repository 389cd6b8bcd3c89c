"""Pooling over a sequence's positions: `SequencePool(how="mean"|"max")`, (N, L, D) -> (N, D),
Keras's GlobalAveragePooling1D and GlobalMaxPooling1D over sequences laid out positions first
(an Embedding's, an LSTM's every state, a transformer block's) — GlobalAvgPool takes channels
first, (C, L), as PyTorch lays out signals.

Where the sequence carries a padding mask (an `Embedding` marks id 0), the padding is left out,
as Keras's layers leave it out: the mean is over a row's tokens alone, the maximum among them; a
row that is all padding gives zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import ShapeError
from deepsharp.core.nn.layer import Layer, Pass, Shape

__all__ = ["SequencePool"]

HOWS = ("mean", "max")

LOWEST = -3.4028234663852886e38
"""float32's lowest value: the padding's stand-in where the maximum is taken."""


class SequencePool(Layer):
    """The mean (`how="mean"`, the default) or the maximum (`how="max"`) over a sequence's
    positions, each feature alone: rows (L, D) -> (D,), the padding its mask marks left out."""

    keeps_positions = False  # one value a feature: the positions are gone

    def __init__(self, how: str = "mean", name: str | None = None) -> None:
        super().__init__(name)
        if how not in HOWS:
            raise ValueError(
                f"SequencePool: how is 'mean' or 'max', not {how!r} (the mean or the largest "
                "value of each feature over the positions)"
            )
        self.how = how

    def build(self, shape: Shape) -> Shape:
        if len(shape) != 2:
            raise ShapeError(
                f"{self.label} takes sequences (N, L, D): rows of positions and their features "
                f"(L, D), not rows of shape {shape}; images and signals laid out channels first "
                "take GlobalAvgPool()"
            )
        return (shape[1],)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        rows, length, features = x.shape
        mask = getattr(x, "mask", None)
        if self.how == "mean":
            if mask is None:
                return ops.mean(x, 1)
            total = ops.sum(x * ops.reshape(mask, (rows, length, 1)), 1)
            count = ops.sum(mask, 1, keepdims=True)  # (N, 1): the row's tokens
            return total / ops.maximum(count, 1.0)  # a row of none: 0 / 1
        if mask is not None:  # the padding at float32's lowest: never the maximum of a token
            keep = ops.reshape(mask, (rows, length, 1))
            x = x * keep + (1.0 - keep) * LOWEST
        top = ops.maxpool2d(ops.reshape(x, (rows, 1, length, features)), (length, 1))
        out = ops.reshape(top, (rows, features))
        if mask is None:
            return out
        # a row of none: 0 (its lowest times 0 is -0.0, and -0.0 + 0.0 is 0.0: trial MS)
        return out * ops.greater(ops.sum(mask, 1, keepdims=True), 0.5) + 0.0

    def config(self) -> dict[str, Any]:
        return {} if self.how == "mean" else {"how": self.how}

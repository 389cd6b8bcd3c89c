"""Normalisation: BatchNorm (statistics of the batch, running ones kept as buffers) and LayerNorm
(statistics of each position's last axis)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import ShapeError
from deepsharp.core.nn.layer import Layer, Pass, Shape
from deepsharp.core.nn.layers.convolution import _not_positions
from deepsharp.core.reals import is_real

__all__ = ["BatchNorm", "LayerNorm"]


def _fraction(layer: str, what: str, value: object, low: float, high: float) -> float:
    if not is_real(value) or not low < value < high:
        raise ValueError(f"{layer}: {what} is a number in ({low:g}, {high:g}), not {value!r}")
    return float(value)


class BatchNorm(Layer):
    """Each feature (rows (N, F)) or channel (images (N, C, H, W), signals (N, C, L)) made mean 0
    and variance 1 over the batch, then scaled and shifted (slots `scale`, `shift`), Keras's
    convention: while training, the batch's mean and (biased) variance, and the running ones
    (buffers `moving_mean`, `moving_variance`) move towards them, moving = moving·momentum +
    batch·(1 - momentum); serving and evaluation use the running ones. Under data parallelism
    the batch is the whole global batch (every process's rows, summed in rank order)."""

    whole_batch = True

    def __init__(
        self, momentum: float = 0.99, epsilon: float = 1e-3, name: str | None = None
    ) -> None:
        super().__init__(name)
        if not is_real(momentum) or not 0 <= momentum < 1:  # 0: the last batch's alone
            raise ValueError(
                f"BatchNorm: momentum is a number in [0, 1) (0 keeps the last batch's "
                f"statistics alone, as PyTorch's momentum=1.0), not {momentum!r}"
            )
        self.momentum = float(momentum)
        self.epsilon = _fraction("BatchNorm", "epsilon", epsilon, 0.0, math.inf)

    def build(self, shape: Shape) -> Shape:
        channels = shape[0]
        for name, init in (("scale", "ones"), ("shift", "zeros")):
            self.slot(name, (channels,), init)
        self.buffer("moving_mean", (channels,), "zeros")
        self.buffer("moving_variance", (channels,), "ones", least=0.0)
        return shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        if x.ndim > 2:
            _not_positions(
                self,
                x,
                "the statistics of each channel over the rows and places",
                "To normalise each position's features, use LayerNorm",
            )
        channels = x.shape[1]
        kept = (1, channels, *(1 for _ in x.shape[2:]))  # broadcast over rows and places
        axes = (0, *range(2, x.ndim))
        if context.training:
            rows = context.batch_rows or x.shape[0]
            count = rows * math.prod(x.shape[2:])
            if rows < 2:
                raise ShapeError(
                    f"{self.label} trains on the statistics of a batch, and this batch holds one "
                    "row: give batches of two rows or more (FitOptions(batch_size=...); a run's "
                    "last batch is what the rows leave over)"
                )
            mean = context.batch_total(ops.sum(x, axes, keepdims=True)) / float(count)
            # taken twice, what the first left over added to it: a channel of one value is then
            # all zeros, as it is (its float32 mean is a unit of the last place off where its
            # total rounds, and 37 rows of 123456.79 were made about ±0.24: trial E2)
            mean = mean + context.batch_total(ops.sum(x - mean, axes, keepdims=True)) / float(count)
            centered = x - mean
            variance = context.batch_total(
                ops.sum(centered * centered, axes, keepdims=True)
            ) / float(count)
            self._follow(slots["moving_mean"], mean)
            self._follow(slots["moving_variance"], variance)
        else:
            centered = x - ops.reshape(slots["moving_mean"], kept)
            variance = ops.reshape(slots["moving_variance"], kept)
        normed = centered / ops.sqrt(variance + self.epsilon)
        return normed * ops.reshape(slots["scale"], kept) + ops.reshape(slots["shift"], kept)

    def _follow(self, moving: Tensor, batch: Tensor) -> None:
        """moving = moving·momentum + batch·(1 - momentum), in place; no gradient flows."""
        now = ops.reshape(ops.detached(batch), moving.shape)
        ops.assign(moving, moving * self.momentum + now * (1.0 - self.momentum))

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {}
        if self.momentum != 0.99:
            made["momentum"] = self.momentum
        if self.epsilon != 1e-3:
            made["epsilon"] = self.epsilon
        return made


class LayerNorm(Layer):
    """Each position's last axis made mean 0 and variance 1, then scaled and shifted (slots
    `scale`, `shift` of the last axis's size), as PyTorch's `nn.LayerNorm(D, eps=1e-5)`."""

    def __init__(self, epsilon: float = 1e-5, name: str | None = None) -> None:
        super().__init__(name)
        self.epsilon = _fraction("LayerNorm", "epsilon", epsilon, 0.0, math.inf)

    def build(self, shape: Shape) -> Shape:
        for name, init in (("scale", "ones"), ("shift", "zeros")):
            self.slot(name, (shape[-1],), init)
        return shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.layer_norm(x, slots["scale"], slots["shift"], self.epsilon)

    def config(self) -> dict[str, Any]:
        return {} if self.epsilon == 1e-5 else {"epsilon": self.epsilon}

"""Layers of images (N, C, H, W) and signals (N, C, L), channels first as in PyTorch:
convolutions, and pooling of windows or of every place."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import DeepSharpWarning, ShapeError
from deepsharp.core.nn.initializers import check_initializer
from deepsharp.core.nn.layer import Layer, Pass, Shape, whole
from deepsharp.core.nn.layers.activations import activation, ends_in
from deepsharp.core.nn.layers.dense import Dense

__all__ = ["AvgPool2D", "Conv1D", "Conv2D", "GlobalAvgPool", "MaxPool2D"]

Paddings = tuple[tuple[int, int], tuple[int, int]]


def _image(layer: Layer, shape: Shape) -> Shape:
    if len(shape) != 3:
        raise ShapeError(
            f"{layer.label} takes images (channels, height, width), not rows of shape {shape}"
        )
    return shape


def _pair(layer: str, what: str, value: object) -> tuple[int, int]:
    """A size, or a pair of sizes (height, width), as a pair of positive whole numbers."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise ValueError(f"{layer}: {what} is a size or two, not {value!r}")
    return whole(layer, what, pair[0]), whole(layer, what, pair[1])


def _padding(layer: str, padding: object) -> str:
    if padding not in ("valid", "same"):
        raise ValueError(f"{layer}'s padding is 'valid' or 'same', not {padding!r}")
    return str(padding)


def _activated(name: str | None, out: Tensor) -> Tensor:
    """A convolution's output (N, F, ...) through its activation; softmax over the filters at
    each place (as Keras's channels-last softmax and PyTorch's softmax(dim=1) take it), not
    over the last axis of the places."""
    if name != "softmax":
        return activation(name, out)
    last = out.ndim - 1
    moved = ops.transpose(out, (0, *range(2, out.ndim), 1))  # the filters last
    return ops.transpose(activation(name, moved), (0, last, *range(1, last)))


class Conv2D(Layer):
    """Filters slid over images (N, C, H, W) -> (N, filters, H', W'); weights (filters, C, kh, kw)
    and one bias a filter, as in PyTorch, then the `activation` named, if any. `padding="same"`
    keeps H' = ceil(H / stride) (TensorFlow's rule: an extra zero goes after)."""

    keeps_positions = False  # its output's axis 1: filters, channels

    activation = Dense.activation

    def __init__(
        self,
        filters: int,
        kernel_size: int | tuple[int, int],
        stride: int = 1,
        padding: str = "valid",
        activation: str | None = None,
        init: str = "glorot_uniform",
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.padding = _padding("Conv2D", padding)
        self.filters = whole("Conv2D", "filters", filters)
        self.kernel = _pair("Conv2D", "kernel_size", kernel_size)
        self.stride = whole("Conv2D", "stride", stride)
        self.activation = activation
        self.init = check_initializer(init, "Conv2D")
        self.pads: Paddings = ((0, 0), (0, 0))

    def build(self, shape: Shape) -> Shape:
        channels, height, width = _image(self, shape)
        kh, kw = self.kernel
        if self.padding == "same":
            self.pads = (
                ops.same_padding(height, kh, self.stride),
                ops.same_padding(width, kw, self.stride),
            )
        (top, bottom), (left, right) = self.pads
        out_h = (height + top + bottom - kh) // self.stride + 1
        out_w = (width + left + right - kw) // self.stride + 1
        if out_h < 1 or out_w < 1:
            turned = (
                f"; if these are channels-last images (N, H, W, C) of {shape[2]} channel"
                f"{'' if shape[2] == 1 else 's'}, give x.transpose(0, 3, 1, 2): deepsharp takes "
                "images (N, C, H, W)"
                if shape[2] in (1, 3, 4) and min(shape[:2]) >= max(kh, kw)
                else ""
            )
            raise ShapeError(
                f"{self.label}: a {kh}x{kw} kernel does not fit images of {shape}{turned}"
            )
        self.slot(
            "weights",
            (self.filters, channels, kh, kw),
            self.init,
            channels * kh * kw,
            self.filters * kh * kw,
        )
        self.slot("bias", (self.filters,), "zeros")
        return (self.filters, out_h, out_w)

    def meets_input(self, shape: Shape) -> None:
        if len(shape) == 3 and shape[2] in (1, 3, 4) and min(shape[:2]) > 4:
            warnings.warn(
                f"{self!r} is built for images of shape {shape}, read as (channels, height, "
                f"width): {shape[0]} channels of {shape[1]}x{shape[2]}. If these are "
                "channels-last images (N, H, W, C), give x.transpose(0, 3, 1, 2): deepsharp "
                "takes images (N, C, H, W)",
                DeepSharpWarning,
                stacklevel=4,
            )

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        out = ops.conv2d(x, slots["weights"], self.stride, self.pads, slots["bias"])
        return _activated(self.activation, out)

    @property
    def ends_in(self) -> str | None:
        return ends_in(self.activation)

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {
            "filters": self.filters,
            "kernel_size": list(self.kernel),
            "stride": self.stride,
            "padding": self.padding,
        }
        if self.activation is not None:
            made["activation"] = self.activation
        if self.init != "glorot_uniform":
            made["init"] = self.init
        return made


class Conv1D(Layer):
    """Filters slid along signals (N, C, L) -> (N, filters, L'); weights (filters, C, k) and one
    bias a filter, as PyTorch's `nn.Conv1d`, then the `activation` named, if any."""

    keeps_positions = False  # its output's axis 1: filters, channels

    activation = Dense.activation

    def __init__(
        self,
        filters: int,
        kernel_size: int,
        stride: int = 1,
        padding: str = "valid",
        activation: str | None = None,
        init: str = "glorot_uniform",
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.padding = _padding("Conv1D", padding)
        self.filters = whole("Conv1D", "filters", filters)
        self.kernel = whole("Conv1D", "kernel_size", kernel_size)
        self.stride = whole("Conv1D", "stride", stride)
        self.activation = activation
        self.init = check_initializer(init, "Conv1D")
        self.pads: Paddings = ((0, 0), (0, 0))

    def build(self, shape: Shape) -> Shape:
        if len(shape) != 2:
            raise ShapeError(
                f"{self.label} takes signals (channels, length), not rows of shape {shape}"
            )
        channels, length = shape
        if self.padding == "same":
            self.pads = ((0, 0), ops.same_padding(length, self.kernel, self.stride))
        before, after = self.pads[1]
        out = (length + before + after - self.kernel) // self.stride + 1
        if out < 1:
            raise ShapeError(
                f"{self.label}: a kernel of {self.kernel} does not fit signals of {shape}"
            )
        fan_in, fan_out = channels * self.kernel, self.filters * self.kernel
        self.slot("weights", (self.filters, channels, self.kernel), self.init, fan_in, fan_out)
        self.slot("bias", (self.filters,), "zeros")
        return (self.filters, out)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        _not_positions(
            self,
            x,
            "filters slid along a signal's length, over its channels",
            "To slide them along the sequence's positions, give it Permute((2, 1))(x): the "
            "features as its channels",
        )
        count, channels, length = x.shape
        weights = slots["weights"]
        images = ops.reshape(x, (count, channels, 1, length))  # a signal: an image one place high
        filters = ops.reshape(weights, (weights.shape[0], channels, 1, self.kernel))
        out = ops.conv2d(images, filters, self.stride, self.pads, slots["bias"])
        return _activated(self.activation, ops.reshape(out, (count, out.shape[1], out.shape[3])))

    @property
    def ends_in(self) -> str | None:
        return ends_in(self.activation)

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {
            "filters": self.filters,
            "kernel_size": self.kernel,
            "stride": self.stride,
            "padding": self.padding,
        }
        if self.activation is not None:
            made["activation"] = self.activation
        if self.init != "glorot_uniform":
            made["init"] = self.init
        return made


class _Pool(Layer):
    """Windows of pool_size (a size, or (height, width)), stride the window, no padding: rows
    and columns a window does not fill are dropped (PyTorch's and Keras's default)."""

    keeps_positions = False  # its output's axis 1: filters, channels

    def __init__(self, pool_size: int | tuple[int, int] = 2, name: str | None = None) -> None:
        super().__init__(name)
        self.pool = _pair(self.kind, "pool_size", pool_size)

    def build(self, shape: Shape) -> Shape:
        channels, height, width = _image(self, shape)
        ph, pw = self.pool
        if height < ph or width < pw:
            raise ShapeError(f"{self.label}: a {ph}x{pw} pool does not fit images of {shape}")
        return (channels, height // ph, width // pw)

    def config(self) -> dict[str, Any]:
        ph, pw = self.pool
        return {"pool_size": ph if ph == pw else [ph, pw]}


class MaxPool2D(_Pool):
    """The largest value of each window (its first, where several tie)."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        ph, pw = self.pool
        return ops.maxpool2d(x, ph if ph == pw else (ph, pw))


class AvgPool2D(_Pool):
    """The mean of each window."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        count, channels, height, width = x.shape
        ph, pw = self.pool
        out_h, out_w = height // ph, width // pw
        if (out_h * ph, out_w * pw) != (height, width):
            x = ops.slice(ops.slice(x, 2, 0, out_h * ph), 3, 0, out_w * pw)
        windows = ops.reshape(x, (count, channels, out_h, ph, out_w, pw))
        return ops.mean(windows, (3, 5))


class GlobalAvgPool(Layer):
    """The mean over every place of each channel: (N, C, ...) -> (N, C) — images, signals."""

    keeps_positions = False  # its output's axis 1: filters, channels

    def build(self, shape: Shape) -> Shape:
        if len(shape) < 2:
            raise ShapeError(
                f"{self.label} takes rows of channels and places (C, H, W) or (C, L), not rows of "
                f"shape {shape}"
            )
        return (shape[0],)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        _not_positions(self, x, "the mean of each channel over its places")
        return ops.mean(x, tuple(range(2, x.ndim)))


SUMMARISE = (
    "To summarise a sequence, pool it over its positions with SequencePool() (the mean, or "
    "SequencePool('max'), each leaving out the padding) or end it with LSTM or GRU (their last "
    "state, return_sequences=False)"
)


def _not_positions(layer: Layer, x: Tensor, what: str, instead: str = SUMMARISE) -> None:
    """Warn of a sequence of positions (L, D) — an Embedding's, or what came after one: it
    carries a padding mask — where channels come first, (C, L): its positions are taken for
    channels and its features for places (a warning, not a refusal: files trained so serve)."""
    if getattr(x, "mask", None) is not None:
        warnings.warn(
            f"{layer.label} takes channels first, (channels, length): {what}. Its input is a "
            f"sequence of positions, {tuple(x.shape[1:])} (its padding mask came with it from "
            f"an Embedding), whose positions it takes for channels. {instead}; where its "
            "positions are meant as channels, let go of its mask before it: "
            "Reshape((length, features))(Flatten()(x))",
            DeepSharpWarning,
            stacklevel=2,
        )

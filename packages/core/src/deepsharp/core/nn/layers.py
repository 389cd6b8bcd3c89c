"""Layers: what a network is made of. None of them knows an engine.

A layer declares its slots when it is built for a row shape, and its forward is ordinary
arithmetic on tensors (`x @ w + b`). A layer written as code subclasses `Layer`; every
subclass is registered so that a network file can name it (deepsharp's own by their name, a
user's by module and name: see `deepsharp.core.kinds`). A file never brings code of its own:
only layers already imported can be loaded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine
from deepsharp.core.errors import ShapeError
from deepsharp.core.kinds import Kinds
from deepsharp.core.random import Generator

__all__ = [
    "LAYERS",
    "Conv2D",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPool2D",
    "Pass",
    "Relu",
    "Sigmoid",
    "SlotSpec",
    "Softmax",
    "Tanh",
]

Shape = tuple[int, ...]
LAYERS: Kinds[Layer] = Kinds("layer kind")


def _whole(layer: str, what: str, value: object) -> int:
    """A positive whole number (not a bool, not 1.5), or a ValueError saying which argument."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{layer}: {what} must be a positive whole number, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class SlotSpec:
    """A slot a layer asks for: its shape and how its first values are drawn."""

    shape: Shape
    init: str = "glorot"  # "glorot" (uniform), "zeros" or "ones"
    fan_in: int = 0
    fan_out: int = 0

    def initial(self, generator: Generator) -> NDArray[np.float32]:
        count = math.prod(self.shape)
        if self.init == "zeros":
            return np.zeros(self.shape, np.float32)
        if self.init == "ones":
            return np.ones(self.shape, np.float32)
        if self.init == "glorot":
            limit = math.sqrt(6.0 / (self.fan_in + self.fan_out))
            drawn = (generator.uniform(count) * 2.0 - 1.0) * limit
            return drawn.astype(np.float32).reshape(self.shape)
        raise ValueError(f"unknown initialiser {self.init!r}: use 'glorot', 'zeros' or 'ones'")


class Pass:
    """What one forward pass knows beyond its values: the engine, training or not, the
    generator, and where its rows lie in the whole batch (`share`: (start, stop, total), when a
    batch is shared among processes; None: the rows are all of it)."""

    __slots__ = ("engine", "generator", "share", "training")

    def __init__(
        self,
        engine: Engine,
        training: bool,
        generator: Generator | None,
        share: tuple[int, int, int] | None = None,
    ) -> None:
        self.engine = engine
        self.training = training
        self.generator = generator
        self.share = share


class Layer:
    """A step of a network. Subclasses implement `build` (optional) and `forward`.

    `build(shape)` receives the shape of one row (a feature count as `(n,)`, an image as
    `(C, H, W)`), declares slots with `self.slot(name, shape, ...)`, and returns the shape of
    one output row. `forward(x, slots, context)` maps a batch to a batch.
    """

    kind: ClassVar[str] = "Layer"
    key: ClassVar[str] = "Layer"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        cls.key = LAYERS.add(cls)

    def __init__(self) -> None:
        self.specs: dict[str, SlotSpec] = {}
        self.input_shape: Shape | None = None
        self.output_shape: Shape | None = None
        self.label = self.kind

    def slot(
        self, name: str, shape: Shape, init: str = "glorot", fan_in: int = 0, fan_out: int = 0
    ) -> None:
        """Declare a slot (called from `build`)."""
        self.specs[name] = SlotSpec(tuple(int(s) for s in shape), init, fan_in, fan_out)

    def build(self, shape: Shape) -> Shape:
        return shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement forward")

    def config(self) -> dict[str, Any]:
        """The constructor's arguments, as JSON values (what a network file records)."""
        return {}

    def built_for(self, shape: Shape) -> Shape:
        self.specs = {}
        self.input_shape = shape
        self.output_shape = tuple(self.build(shape))
        return self.output_shape

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{self.kind}({args})"


class Dense(Layer):
    """x @ weights + bias: `units` outputs from every input feature."""

    def __init__(self, units: int) -> None:
        super().__init__()
        self.units = _whole("Dense", "units", units)

    def build(self, shape: Shape) -> Shape:
        if len(shape) != 1:
            raise ShapeError(
                f"{self.label} takes rows of features, not rows of shape {shape}: put Flatten() before it"
            )
        self.slot("weights", (shape[0], self.units), "glorot", shape[0], self.units)
        self.slot("bias", (self.units,), "zeros")
        return (self.units,)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.affine(x, slots["weights"], slots["bias"])  # x @ weights + bias

    def config(self) -> dict[str, Any]:
        return {"units": self.units}


class Relu(Layer):
    """max(x, 0), value by value."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.relu(x)


class Sigmoid(Layer):
    """1 / (1 + e^-x), value by value: a logit made a probability."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.sigmoid(x)


class Tanh(Layer):
    """The hyperbolic tangent, value by value."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.tanh(x)


class Softmax(Layer):
    """Each row's values as probabilities over its last axis (for a loss that takes
    probabilities: `CrossEntropy(from_logits=False)`)."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.exp(ops.log_softmax(x))


class Dropout(Layer):
    """While training, zero each value with probability `rate` and scale the rest by 1/(1-rate).

    Masks come from the run's generator and are put on the engine (one transfer in a step).
    A value's draw is keyed by the step (each step takes a key of its own) and by its row's
    place in the whole batch, so processes sharing a batch draw one process's masks.
    """

    def __init__(self, rate: float) -> None:
        super().__init__()
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout's rate must be a number in [0, 1), not {rate!r}")
        self.rate = float(rate)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        if not context.training or self.rate == 0.0 or context.generator is None:
            return x
        rows = x.shape[0]
        first, _, total = context.share or (0, rows, rows)
        # Each value's draw is keyed by its row's place in the whole batch, not by who draws it.
        drawn = context.generator.uniform_rows(rows, math.prod(x.shape[1:]), first, total)
        keep = drawn >= self.rate
        mask = (keep / (1.0 - self.rate)).astype(np.float32).reshape(x.shape)
        return x * Tensor.put(context.engine, mask)

    def config(self) -> dict[str, Any]:
        return {"rate": self.rate}


class Flatten(Layer):
    """Each row's values in one line: (N, C, H, W) -> (N, C*H*W)."""

    def build(self, shape: Shape) -> Shape:
        return (math.prod(shape),)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.reshape(x, (x.shape[0], math.prod(x.shape[1:])))


def _image(layer: Layer, shape: Shape) -> Shape:
    if len(shape) != 3:
        raise ShapeError(
            f"{layer.label} takes images (channels, height, width), not rows of shape {shape}"
        )
    return shape


class Conv2D(Layer):
    """Filters slid over images (N, C, H, W); weights (filters, C, kh, kw) as in PyTorch."""

    def __init__(
        self,
        filters: int,
        kernel_size: int | tuple[int, int],
        stride: int = 1,
        padding: str = "valid",
    ) -> None:
        super().__init__()
        if padding not in ("valid", "same"):
            raise ValueError(f"Conv2D's padding is 'valid' or 'same', not {padding!r}")
        self.filters = _whole("Conv2D", "filters", filters)
        kernel = (
            tuple(kernel_size)
            if isinstance(kernel_size, (tuple, list))
            else (kernel_size, kernel_size)
        )
        if len(kernel) != 2:
            raise ValueError(f"Conv2D: kernel_size is a size or two, not {kernel_size!r}")
        self.kernel = (
            _whole("Conv2D", "kernel_size", kernel[0]),
            _whole("Conv2D", "kernel_size", kernel[1]),
        )
        self.stride = _whole("Conv2D", "stride", stride)
        self.padding = padding
        self.pads: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))

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
            raise ShapeError(f"{self.label}: a {kh}x{kw} kernel does not fit images of {shape}")
        self.slot(
            "weights",
            (self.filters, channels, kh, kw),
            "glorot",
            channels * kh * kw,
            self.filters * kh * kw,
        )
        self.slot("bias", (self.filters,), "zeros")
        return (self.filters, out_h, out_w)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.conv2d(x, slots["weights"], self.stride, self.pads, slots["bias"])

    def config(self) -> dict[str, Any]:
        return {
            "filters": self.filters,
            "kernel_size": list(self.kernel),
            "stride": self.stride,
            "padding": self.padding,
        }


class MaxPool2D(Layer):
    """The largest value of each pool x pool window (stride pool)."""

    def __init__(self, pool_size: int = 2) -> None:
        super().__init__()
        self.pool_size = _whole("MaxPool2D", "pool_size", pool_size)

    def build(self, shape: Shape) -> Shape:
        channels, height, width = _image(self, shape)
        if height < self.pool_size or width < self.pool_size:
            raise ShapeError(
                f"{self.label}: a {self.pool_size}-pool does not fit images of {shape}"
            )
        return (channels, height // self.pool_size, width // self.pool_size)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.maxpool2d(x, self.pool_size)

    def config(self) -> dict[str, Any]:
        return {"pool_size": self.pool_size}


def layer_from_json(data: Any) -> Layer:
    """A layer from what a network file records; only registered layer kinds are made."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ValueError(f"a layer is recorded as {{'kind': ..., 'config': {{...}}}}, not {data!r}")
    kind = data["kind"]
    cls = LAYERS.get(kind)
    if cls is None:
        raise ValueError(LAYERS.unknown(kind))
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise ValueError(f"layer {kind!r}: its config must be a mapping, not {config!r}")
    if "kernel_size" in config and isinstance(config["kernel_size"], list):
        config = {**config, "kernel_size": tuple(config["kernel_size"])}
    try:
        return cls(**config)
    except (TypeError, ValueError) as error:
        raise ValueError(f"layer {kind!r}: bad config {config!r} ({error})") from None

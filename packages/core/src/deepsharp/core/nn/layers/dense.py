"""Layers of rows of features: Dense, Dropout, Flatten, Reshape, Rescaling."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.plan import on_host
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.edits import Checked
from deepsharp.core.engine import Engine, Handle
from deepsharp.core.errors import ShapeError
from deepsharp.core.nn.initializers import check_initializer
from deepsharp.core.nn.layer import Layer, Pass, Shape, whole
from deepsharp.core.nn.layers.activations import activation, check_activation, ends_in
from deepsharp.core.random import Generator
from deepsharp.core.reals import brief, is_real

__all__ = ["Dense", "Dropout", "Flatten", "Permute", "Rescaling", "Reshape", "dropout"]


class Dense(Layer):
    """x @ weights + bias: `units` outputs from every input feature (weights (in, units)), then
    the `activation` named, if any. Rows of features (N, F) -> (N, units); on sequences (N, L, D)
    each position's D values -> (N, L, units)."""

    activation = Checked(lambda layer, name: check_activation(name, type(layer).__name__))

    def __init__(
        self,
        units: int,
        activation: str | None = None,
        init: str = "glorot_uniform",
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.units = whole("Dense", "units", units)
        self.activation = activation
        self.init = check_initializer(init, "Dense")

    def build(self, shape: Shape) -> Shape:
        if len(shape) not in (1, 2):
            raise ShapeError(
                f"{self.label} takes rows of features (or sequences of them), not rows of shape "
                f"{shape}: put Flatten() before it"
            )
        features = shape[-1]
        self.slot("weights", (features, self.units), self.init, features, self.units)
        self.slot("bias", (self.units,), "zeros")
        return (*shape[:-1], self.units)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        if x.ndim == 2:
            out = ops.affine(x, slots["weights"], slots["bias"])  # x @ weights + bias
        else:  # each position of a sequence: (N·L, D) through the product, back to (N, L, units)
            flat = ops.reshape(x, (math.prod(x.shape[:-1]), x.shape[-1]))
            made = ops.affine(flat, slots["weights"], slots["bias"])
            out = ops.reshape(made, (*x.shape[:-1], self.units))
        return activation(self.activation, out)

    @property
    def ends_in(self) -> str | None:
        return ends_in(self.activation)

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {"units": self.units}
        if self.activation is not None:
            made["activation"] = self.activation
        if self.init != "glorot_uniform":
            made["init"] = self.init
        return made


class Dropout(Layer):
    """While training, zero each value with probability `rate` and scale the rest by 1/(1-rate).

    Masks come from the run's generator and are put on the engine (one transfer in a step).
    A value's draw is keyed by the step (each step takes a key of its own) and by its row's
    place in the whole batch, so processes sharing a batch draw one process's masks.
    """

    rate = Checked(lambda layer, rate: _rate(rate))

    def __init__(self, rate: float, name: str | None = None) -> None:
        super().__init__(name)
        self.rate = rate

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return dropout(x, self.rate, context)

    def config(self) -> dict[str, Any]:
        return {"rate": self.rate}


def _rate(rate: object) -> float:
    if not is_real(rate) or not 0.0 <= rate < 1.0:
        raise ValueError(f"Dropout's rate must be a number in [0, 1), not {rate!r}")
    return float(rate)


def dropout(x: Tensor, rate: float, context: Pass) -> Tensor:
    """x with each value zeroed with probability `rate` and the rest scaled by 1/(1 - rate),
    while training (x itself otherwise): the mask drawn from the step's key, keyed by each
    row's place in the whole batch, and put on the engine (one transfer)."""
    if not context.training or rate == 0.0 or context.generator is None:
        return x
    rows = x.shape[0]
    first, _, total = context.share or (0, rows, rows)
    # A host step: a compiled step draws its mask again from each step's generator.
    handle = on_host(context.engine, _mask, context.generator, x.shape, first, total, rate)
    return x * Tensor(handle, x.shape, context.engine)


def _mask(
    engine: Engine, generator: Generator, shape: Shape, first: int, total: int, rate: float
) -> Handle:
    """A dropout mask on the engine (one transfer): 1/(1 - rate) where a value is kept, else 0.
    Each value's draw is keyed by its row's place in the whole batch, not by who draws it."""
    drawn = generator.uniform_rows(shape[0], math.prod(shape[1:]), first, total)
    keep = drawn >= rate
    return engine.put((keep / (1.0 - rate)).astype(np.float32).reshape(shape))


class Flatten(Layer):
    """Each row's values in one line: (N, C, H, W) -> (N, C*H*W)."""

    keeps_positions = False  # every place's values in one row

    def build(self, shape: Shape) -> Shape:
        return (math.prod(shape),)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.reshape(x, (x.shape[0], math.prod(x.shape[1:])))


class Reshape(Layer):
    """Each row's values in another shape of as many values: `Reshape((4, 16))` makes rows of 64
    values (N, 4, 16). One size may be -1: whatever the others leave."""

    def __init__(self, shape: Sequence[int], name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(shape, (tuple, list)) or not 0 < len(shape) <= 8:  # a row's axes, as
            raise ValueError(  # an input's (72 loaded, then failed in NumPy: trial HF)
                f"Reshape: shape is a sequence of one to eight sizes, not {brief(shape, 80)}"
            )
        sizes = [
            int(s) if isinstance(s, (int, np.integer)) and not isinstance(s, bool) else 0
            for s in shape
        ]
        if sizes.count(-1) > 1 or any(s == 0 or s < -1 for s in sizes):
            raise ValueError(
                f"Reshape: shape is positive sizes, at most one of them -1, not {list(shape)!r}"
            )
        self.shape = tuple(sizes)

    def build(self, shape: Shape) -> Shape:
        count = math.prod(shape)
        known = math.prod(s for s in self.shape if s != -1)
        if -1 in self.shape:
            if count % known:
                raise ShapeError(
                    f"{self.label}: rows of {count} values ({shape}) do not make {self.shape}"
                )
            return tuple(count // known if s == -1 else s for s in self.shape)
        if known != count:
            raise ShapeError(
                f"{self.label}: rows of shape {shape} hold {count} values, {self.shape} holds "
                f"{known}: a reshape keeps every value"
            )
        return self.shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        assert self.output_shape is not None
        return ops.reshape(x, (x.shape[0], *self.output_shape))

    def config(self) -> dict[str, Any]:
        return {"shape": list(self.shape)}


class Permute(Layer):
    """Each row's axes in another order, Keras's `Permute`: `dims` names them from 1 (the batch's
    axis 0 stays first), `Permute((2, 1))` makes rows (L, D) into (D, L) — a sequence's features
    as a `Conv1D`'s channels. A sequence's padding mask goes on where its positions stay the
    first axis (dims starting with 1), and is let go of where they move."""

    def __init__(self, dims: Sequence[int], name: str | None = None) -> None:
        super().__init__(name)
        axes = (
            [int(d) for d in dims if isinstance(d, (int, np.integer)) and not isinstance(d, bool)]
            if isinstance(dims, (tuple, list)) and len(dims) <= 8
            else []
        )
        if not axes or len(axes) != len(dims) or sorted(axes) != list(range(1, len(axes) + 1)):
            raise ValueError(
                f"Permute: dims is an order of a row's axes counted from 1 (the batch's axis 0 "
                f"stays first), each once: (2, 1) swaps two; not {brief(dims, 80)}"
            )
        self.dims = tuple(axes)

    @property
    def keeps_positions(self) -> bool | None:
        """A sequence's positions stay where the first axis stays (the mask goes on), unless
        set (as any layer's may be)."""
        if "_keeps" in vars(self):
            kept: bool | None = vars(self)["_keeps"]
            return kept
        return None if self.dims[0] == 1 else False

    @keeps_positions.setter
    def keeps_positions(self, value: bool | None) -> None:
        self.__dict__["_keeps"] = value

    def build(self, shape: Shape) -> Shape:
        if len(shape) != len(self.dims):
            raise ShapeError(
                f"{self.label} orders {len(self.dims)} axes, and rows of shape {shape} have "
                f"{len(shape)}: give as many dims as a row has axes"
            )
        return tuple(shape[d - 1] for d in self.dims)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.transpose(x, (0, *self.dims))

    def config(self) -> dict[str, Any]:
        return {"dims": list(self.dims)}


class Rescaling(Layer):
    """x · scale + offset, as Keras's `Rescaling`: each value of the last axis by a number, or
    by its own (a list of one a feature). Nothing in it trains: its numbers are buffers. Last
    in a regression's network it gives predictions on the targets' scale: `deepsharp train`
    and `NetworkRegressor` train their networks on the targets standardised, this layer the
    identity, then set it to the targets' spread and mean (`nn.default.rescaled`)."""

    def __init__(
        self,
        scale: float | Sequence[float] = 1.0,
        offset: float | Sequence[float] = 0.0,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.scale, self.offset = _numbers("scale", scale), _numbers("offset", offset)

    def build(self, shape: Shape) -> Shape:
        width = shape[-1]
        for name, given in (("scale", self.scale), ("offset", self.offset)):
            if isinstance(given, list) and len(given) != width:
                raise ShapeError(
                    f"{self.label}: its {name} holds {len(given)} numbers, one a feature, and "
                    f"its rows hold {width} features on their last axis ({shape})"
                )
            self.buffer(name, (width,), functools.partial(_spread, given, width))
        return shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return x * slots["scale"] + slots["offset"]

    def config(self) -> dict[str, Any]:
        return {"scale": self.scale, "offset": self.offset}


def _numbers(name: str, given: object) -> float | list[float]:
    """A Rescaling's number, or list of numbers: finite, and within float32's range."""
    if isinstance(given, np.ndarray) and given.ndim == 0:  # np.array(2.0): one number
        given = given[()]
    several = isinstance(given, (list, tuple, np.ndarray))
    values: list[Any] = list(given) if isinstance(given, (list, tuple, np.ndarray)) else [given]
    numbers = [
        float(v)
        for v in values
        if isinstance(v, (int, float, np.integer, np.floating))
        and not isinstance(v, (bool, np.bool_))
    ]
    largest = float(np.finfo(np.float32).max)
    if not values or len(numbers) < len(values) or not all(abs(v) <= largest for v in numbers):
        raise ValueError(
            f"Rescaling: {name} is a finite number, or a list of them (one a feature), not "
            f"{given!r}"
        )
    return numbers if several else numbers[0]


def _spread(given: Any, width: int) -> NDArray[np.float32]:
    """A number, or one a feature, as `width` values (made once the buffer's size is checked)."""
    return np.broadcast_to(np.asarray(given, np.float32), (width,))

"""Activations: functions of each value (and softmax, of each row's last axis), as layers of their
own (`Relu()`) or by name on a layer with weights (`Dense(16, activation="relu")`)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.nn.layer import Layer, Pass
from deepsharp.core.reals import is_real

__all__ = [
    "ACTIVATIONS",
    "Gelu",
    "LeakyRelu",
    "Relu",
    "Sigmoid",
    "Silu",
    "Softmax",
    "Tanh",
    "activation",
    "check_activation",
]


def gelu(x: Tensor) -> Tensor:
    """GELU's exact form, x·Φ(x) = x/2·(1 + erf(x/√2)) (PyTorch's default, approximate='none'):
    one rule, a fast path each way (`fused.gelu`, `fused.gelu_back`)."""
    return ops.gelu(x)


SILU_FLOOR = -88.0
"""Where Silu's x is taken no lower: an engine's sigmoid holds -x at 88 at most (exp(88) is near
float32's largest), so sigmoid(x) is 6e-39 below it, which times x was -2.06 at -3.4e38 where
x·sigmoid(x) is -0 (trial E2). x·sigmoid(x) is under 6e-37 there: its floor changes no bit
above it, and gives about 0 below (its gradient too)."""


def silu(x: Tensor) -> Tensor:
    """x·sigmoid(x) (also called swish), x taken no lower than `SILU_FLOOR`."""
    return ops.maximum(x, SILU_FLOOR) * ops.sigmoid(x)


def leaky_relu(x: Tensor, slope: float = 0.01) -> Tensor:
    """x where x > 0, else slope·x: the larger of x and slope·x for a slope below 1."""
    return ops.maximum(x, x * slope)


def softmax(x: Tensor) -> Tensor:
    """Each row's values as probabilities over its last axis."""
    return ops.softmax(x)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": ops.relu,
    "sigmoid": ops.sigmoid,
    "tanh": ops.tanh,
    "gelu": gelu,
    "silu": silu,
    "leaky_relu": leaky_relu,
    "softmax": softmax,
}
"""Each activation's name -> its function of a tensor (what `activation=` takes)."""


def check_activation(name: object, where: str) -> str | None:
    """None, or the name of an activation; a ValueError naming `where` and the close names."""
    if name is None or (isinstance(name, str) and name in ACTIVATIONS):
        return name
    from deepsharp.core.nn.layer import Layer

    if isinstance(name, Layer) or (isinstance(name, type) and issubclass(name, Layer)):
        kind = name.__name__ if isinstance(name, type) else type(name).__name__
        raise ValueError(
            f"{where}: activation is a name, such as 'relu', not the layer {kind}: give "
            f"activation={kind.lower()!r} where that is one of {', '.join(map(repr, ACTIVATIONS))}"
            f", or put {kind}() after the layer"
        )
    close = difflib.get_close_matches(str(name), list(ACTIVATIONS), n=2)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise ValueError(
        f"{where}: no activation {name!r}{hint}; activation is None or one of "
        + ", ".join(repr(known) for known in ACTIVATIONS)
    )


def activation(name: str | None, x: Tensor) -> Tensor:
    """x through the activation `name` (x itself for None)."""
    return x if name is None else ACTIVATIONS[name](x)


def ends_in(name: str | None) -> str | None:
    """What outputs the activation gives, where a loss must know (probabilities)."""
    return name if name in ("sigmoid", "softmax") else None


class Relu(Layer):
    """max(x, 0), value by value."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.relu(x)


class Sigmoid(Layer):
    """1 / (1 + e^-x), value by value: probabilities for `BinaryCrossEntropy(from_logits=False)`."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.sigmoid(x)

    @property
    def ends_in(self) -> str | None:
        return "sigmoid"


class Tanh(Layer):
    """tanh(x), value by value."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.tanh(x)


class Softmax(Layer):
    """Each row's values as probabilities over its last axis (for a loss that takes
    probabilities: `CrossEntropy(from_logits=False)`)."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return softmax(x)

    @property
    def ends_in(self) -> str | None:
        return "softmax"


class Gelu(Layer):
    """GELU, exact: x·Φ(x) = x/2·(1 + erf(x/√2)), as PyTorch's `nn.GELU()`."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return gelu(x)


class Silu(Layer):
    """SiLU (swish): x·sigmoid(x), as PyTorch's `nn.SiLU()`."""

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return silu(x)


class LeakyRelu(Layer):
    """x where x > 0, else slope·x (`slope` in [0, 1); PyTorch's negative_slope, 0.01)."""

    def __init__(self, slope: float = 0.01, name: str | None = None) -> None:
        super().__init__(name)
        if not is_real(slope) or not 0.0 <= slope < 1.0:
            raise ValueError(f"LeakyRelu: slope is a number in [0, 1), not {slope!r}")
        self.slope = float(slope)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return leaky_relu(x, self.slope)

    def config(self) -> dict[str, Any]:
        return {"slope": self.slope}

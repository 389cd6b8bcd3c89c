"""An engine written before the operations networks as graphs need: the primitives of
`deepsharp.core.Engine` as they stood then, and nothing else.

They are the example engine's (the light engine's arithmetic); none of its fast paths reaches the
core through it, nor `batch_matmul`, `add_rows`, `erf` or the pair max-pooling, which came after:
the core runs each as its reference in these primitives. The whole contract must pass on it
(`pytest --pyargs deepsharp.contracts --engine engine_before:make`, this folder on PYTHONPATH).
"""

from __future__ import annotations

from typing import Any

from example_engine import ExampleEngine

PRIMITIVES = (
    *("counters", "identity", "put", "get", "zeros", "shape"),
    *("matmul", "sum", "mean", "conv2d", "conv2d_weight_grad", "conv2d_fold"),
    *("add", "sub", "mul", "div", "maximum", "greater", "where", "neg", "abs", "exp", "log"),
    *("log1p", "softplus", "sqrt", "tanh", "sigmoid", "relu"),
    *("copy", "assign", "reshape", "transpose", "slice", "take_rows", "concatenate", "split"),
    *("pad", "broadcast_to", "max", "one_hot", "maxpool2d", "maxpool2d_back"),
)
"""The engine protocol's members before networks as graphs (and `name`, below)."""


class EngineBefore:
    """The example engine's primitives, and nothing else. Each is a property of the class (not a
    `__getattr__` forward), so that `isinstance(..., Engine)` sees them on every Python."""

    name = "before"

    def __init__(self) -> None:
        self._engine = ExampleEngine()

    def __repr__(self) -> str:
        return "EngineBefore(the example engine's primitives alone)"


def _forward(member: str) -> Any:
    return property(lambda self: getattr(self._engine, member))


for _member in PRIMITIVES:
    setattr(EngineBefore, _member, _forward(_member))


def make() -> EngineBefore:
    """The factory a `module:factory` spec names."""
    return EngineBefore()

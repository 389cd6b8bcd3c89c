"""Engines broken on purpose that hand out memory they change later: each keeps every check made
right after one call, and only a later call shows the fault (`test_inputs.py`'s
`test_operation_s_result_and_inputs_keep_their_bits_after_its_next_call`, and the watched
engine of every check, `deepsharp.contracts.inputs`, for the fast paths). A result kept in a
Tensor then reads another call's values, or an input the caller still holds changes.

Each factory is a `module:factory` spec: `--engine reusing_engines:reuses_its_output`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from example_engine import ExampleEngine

Array = Any


class ReusesItsOutput(ExampleEngine):
    """exp writes each result into one buffer a shape: the last call's result overwrites the
    one before."""

    name = "reuses-its-output"

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self._buffers: dict[tuple[int, ...], Array] = {}

    def exp(self, x: Array) -> Array:
        buffer = self._buffers.setdefault(np.shape(x), np.empty(np.shape(x), np.float32))
        return np.exp(x, out=buffer)


class ChangesAnInputLater(ExampleEngine):
    """exp keeps the input it was given and halves it at its next call."""

    name = "changes-an-input-later"

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self._last: Array | None = None

    def exp(self, x: Array) -> Array:
        if self._last is not None and self._last.flags.writeable:
            self._last *= np.float32(0.5)
        self._last = x
        return np.exp(x)


class BatchProductsInOneBuffer(ExampleEngine):
    """The batch_matmul fast path writes each product into one buffer a shape (an attention
    layer's scores then read its values' product: it trained otherwise, and passed all 457
    checks before the watched engine read earlier results again)."""

    name = "batch-products-in-one-buffer"

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self._buffers: dict[tuple[int, ...], Array] = {}

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        made = super().batch_matmul(a, b, transpose_a, transpose_b)
        buffer = self._buffers.setdefault(np.shape(made), np.empty(np.shape(made), np.float32))
        buffer[...] = made
        return buffer


def batch_products_in_one_buffer() -> ExampleEngine:
    return BatchProductsInOneBuffer()


def reuses_its_output() -> ExampleEngine:
    return ReusesItsOutput()


def changes_an_input_later() -> ExampleEngine:
    return ChangesAnInputLater()

"""Engines broken on purpose that hand out memory they change later: each keeps every check made
right after one call, and only a later call shows the fault (`test_inputs.py`'s
`test_operation_s_result_and_inputs_keep_their_bits_after_its_next_call`, and the watched
engine of every check, `deepsharp.contracts.inputs`, for the fast paths). A result kept in a
Tensor then reads another call's values, or an input the caller still holds changes.

Each factory is a `module:factory` spec: `--engine reusing_engines:reuses_its_output`.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np
from example_engine import ExampleEngine

from deepsharp.core.engine import EngineIdentity

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


class KeepsWidenedOperands(ExampleEngine):
    """matmul keeps each operand's float64 widening while the operand lives (by its handle):
    a slot changed in place (assigned into, an optimizer's update) is read as it was. Passed
    every check and `compare`, and trained wrong (trial E)."""

    name = "keeps-widened-operands"

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self._kept: dict[int, tuple[Any, Array]] = {}

    def _wide(self, handle: Array) -> Array:
        kept = self._kept.get(id(handle))
        if kept is None or kept[0]() is not handle:
            kept = self._kept[id(handle)] = (weakref.ref(handle), handle.astype(np.float64))
        return kept[1]

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        x, y = self._wide(a), self._wide(b)
        return ((x.T if transpose_a else x) @ (y.T if transpose_b else y)).astype(np.float32)


class SharesZeros(ExampleEngine):
    """zeros hands out one array a shape: an optimizer's memories, made as zeros and changed in
    place, are one (the suite blamed adam_update, a run the learning rate: trial E)."""

    name = "shares-zeros"

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self._zeros: dict[tuple[int, ...], Array] = {}

    def zeros(self, shape: tuple[int, ...]) -> Array:
        return self._zeros.setdefault(tuple(shape), np.zeros(shape, np.float32))


_made = itertools.count()


class StampedIdentity(ExampleEngine):
    """An identity with a build stamp made anew each time it is read: every checkpoint's
    resume failed."""

    name = "stamped-identity"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, f"0.1+{next(_made)}", "cpu", "strict")


class ClaimsLight(ExampleEngine):
    """The light engine's identity, copied: its checkpoints resumed on the light engine."""

    name = "claims-light"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity("light", f"numpy {np.__version__}", "cpu", "strict")


def keeps_widened_operands() -> ExampleEngine:
    return KeepsWidenedOperands()


def shares_zeros() -> ExampleEngine:
    return SharesZeros()


def stamped_identity() -> ExampleEngine:
    return StampedIdentity()


def claims_light() -> ExampleEngine:
    return ClaimsLight()

"""The writing engine: an engine whose every operation writes its ONNX form instead of computing.

A network's forward pass run on a `WritingEngine` leaves, in its graph, the form of each engine
operation the pass made (`deepsharp.core.export.forms`, the forms the onnx engine is held to),
with the slots and buffers as named constants. Shapes come from a shadow: the same operations on
a light engine, on rows of zeros. The pass is traced at one batch size (`BATCH`); where an
operation names the batch's size (a reshape of the rows, a broadcast to them) the form is
written for any count of rows (-1, or the rows' size read from the input), and what would tie
the file to the traced size is refused, as is what ONNX cannot state: values brought back to the
host during the pass. The exporter traces the pass a second time, at `AGAIN` rows, and refuses a
graph written otherwise: what depends on the count of rows without an operation naming it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from deepsharp.core.engine import Counters, EngineIdentity
from deepsharp.core.engine import fused as fused_paths
from deepsharp.core.errors import ExportError
from deepsharp.core.export.forms import FORMS, float_inputs
from deepsharp.core.export.graph import OnnxGraph
from deepsharp.engines.light._engine import LightEngine  # not the package: it imports the core

__all__ = ["AGAIN", "BATCH", "TRACES", "Traced", "WritingEngine"]

BATCH = 17
"""The rows a pass is traced with: a prime no layer's size is likely to be a multiple of, so an
operation that names the batch's size is told apart from one that names a size of its own."""

AGAIN = 18
"""The rows a pass is traced with a second time: a graph that differs from the first one's
depends on the count of rows in a way no operation named (a layer's forward dividing by
`x.shape[0]`, a Python number), and is refused. Even where the first is odd: a forward that
reads the count's parity (`x.shape[0] % 2`) is told apart too."""

TRACES = ((BATCH, AGAIN), (31, 32))
"""The counts of rows a pass is traced with, a pair at a time: where the first pair's traces
are refused, the next pair's are tried, and the first refusal stands only where every pair is
refused. A size of a layer's own that is one of a pair (a table of 17 positions put on the
engine, zeros of 18) is taken for the batch's by that pair alone (trial O: a sequence of
length 17 or 18 could not be exported)."""

Padding = tuple[int, int]
Paddings = tuple[Padding, Padding]


class Traced:
    """A value of the graph being written: its name, its shadow (the same value's shape and
    dtype on the light engine), and whether its first axis is the batch's."""

    __slots__ = ("batched", "name", "shadow")

    def __init__(self, name: str, shadow: Any, batched: bool) -> None:
        self.name = name
        self.shadow = shadow
        self.batched = batched

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.shadow.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        found: np.dtype[Any] = self.shadow.dtype
        return found

    def __repr__(self) -> str:
        return f"Traced({self.name!r}, {self.shape}, {self.dtype})"


class WritingEngine:
    """An engine that writes each operation's ONNX form into `graph`; traced at `BATCH` rows.

    Its fast paths are those the onnx engine offers (the forms the contract holds): a
    convolution with its bias. `get` is refused: a value brought back to the host during a pass
    may steer the pass in ways a graph cannot state."""

    name = "onnx writer"

    def __init__(self, graph: OnnxGraph, batch: int = BATCH) -> None:
        self.graph = graph
        self.batch = batch
        """The rows the pass is traced with (`BATCH`, or `AGAIN` for the second trace)."""
        self.shadow = LightEngine()
        self.counters = Counters()
        self.batch_source: Traced | None = None

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, None, None, "float32")

    # --- values of the graph -------------------------------------------------------------------
    def input(self, name: str, dtype: Any, row: tuple[int, ...]) -> Traced:
        """A graph input of rows of shape `row`: its traced value of `BATCH` rows (zeros)."""
        self.graph.input(name, dtype, ["N", *row])
        made = Traced(name, self.shadow.put(np.zeros((self.batch, *row), dtype)), True)
        if self.batch_source is None:
            self.batch_source = made
        return made

    def constant(self, array: Any, name: str | None = None) -> Traced:
        """A constant of the graph (a slot's or a buffer's values, under its name)."""
        values = np.asarray(array)
        kept = values.astype(np.int64 if values.dtype.kind in "iub" else np.float32)
        return Traced(self.graph.constant(kept, name), self.shadow.put(kept), False)

    def _write(
        self, op: str, operands: Sequence[Any], shadowed: dict[str, Any] | None = None, **attrs: Any
    ) -> list[Traced]:
        """Write the operation's form; its outputs, shaped by the shadow (run with `shadowed`
        for attributes, where the form's differ: -1 for the rows' count)."""
        names, shapes, shadows = [], [], []
        batched = False
        for value in operands:
            if isinstance(value, Traced):
                names.append(value.name)
                shapes.append(value.shape)
                shadows.append(value.shadow)
                batched = batched or value.batched
            else:
                names.append(self.graph.scalar(float(value)))
                shapes.append(())
                shadows.append(value)
        dtypes = [v.dtype if isinstance(v, Traced) else np.dtype(np.float32) for v in operands]
        taken = float_inputs(self.graph, op, names, dtypes)
        outputs = FORMS[op](self.graph, taken, shapes, **attrs)
        with np.errstate(all="ignore"):
            made = _shadow(self.shadow, op, shadows, attrs if shadowed is None else shadowed)
        return [Traced(name, value, batched) for name, value in zip(outputs, made)]

    def _one(self, op: str, *operands: Any, **attrs: Any) -> Traced:
        return self._write(op, operands, **attrs)[0]

    def _rows(self) -> str:
        """The name of a one-value tensor holding the count of rows served (read from an input)."""
        if self.batch_source is None:
            raise ExportError("a value of the batch's size is made before any input is read")
        g = self.graph
        shape = g.one("Shape", self.batch_source.name)
        return g.one("Slice", shape, g.ints([0]), g.ints([1]), g.ints([0]))

    def _refuse_batch(self, x: Traced, axis: int, what: str) -> None:
        if x.batched and axis % max(len(x.shape), 1) == 0:
            raise ExportError(
                f"it {what} along the batch's axis (the rows), which would tie the file to the "
                f"{self.batch} rows it is traced with"
            )

    # --- transfers -----------------------------------------------------------------------------
    def put(self, array: Any) -> Traced:
        """Host values made during the pass become a constant of the graph; refused where they
        are as many as the traced rows (made for the batch, they would not fit another)."""
        self.counters.transfers_in += 1
        values = np.asarray(array)
        if values.ndim and values.shape[0] == self.batch:
            raise ExportError(
                "it puts host values made for the batch's rows on the engine during its pass "
                f"(shape {values.shape}): a graph must not depend on the count of rows"
            )
        return self.constant(values)

    def get(self, handle: Traced) -> Any:
        raise ExportError(
            "it brings values back to the host during its pass (engine.get), so what it does "
            "next may depend on them in a way an ONNX graph cannot state"
        )

    def zeros(self, shape: tuple[int, ...]) -> Traced:
        if shape and shape[0] == self.batch and self.batch_source is not None:
            g = self.graph
            full = g.one("Concat", self._rows(), g.ints(shape[1:]), axis=0)
            name = g.one("Expand", g.scalar(0.0), full)
            return Traced(name, self.shadow.zeros(shape), True)
        return self.constant(np.zeros(shape, np.float32))

    def shape(self, handle: Traced) -> tuple[int, ...]:
        return handle.shape

    # --- totals ----------------------------------------------------------------------------
    def matmul(
        self, a: Traced, b: Traced, transpose_a: bool = False, transpose_b: bool = False
    ) -> Traced:
        made = self._one("matmul", a, b, transpose_a=transpose_a, transpose_b=transpose_b)
        made.batched = (a.batched and not transpose_a) or (b.batched and transpose_b)
        return made

    def _reduced(self, op: str, x: Traced, axes: tuple[int, ...], keepdims: bool) -> Traced:
        made = self._one(op, x, axes=tuple(axes), keepdims=keepdims)
        made.batched = x.batched and 0 not in tuple(a % len(x.shape) for a in axes)
        return made

    def sum(self, x: Traced, axes: tuple[int, ...], keepdims: bool = False) -> Traced:
        return self._reduced("sum", x, axes, keepdims)

    def mean(self, x: Traced, axes: tuple[int, ...], keepdims: bool = False) -> Traced:
        return self._reduced("mean", x, axes, keepdims)

    def max(self, x: Traced, axes: tuple[int, ...], keepdims: bool = False) -> Traced:
        return self._reduced("max", x, axes, keepdims)

    def conv2d(self, x: Traced, w: Traced, stride: int, padding: Paddings) -> Traced:
        return self._one("conv2d", x, w, stride=stride, padding=padding)

    def conv2d_bias(
        self, x: Traced, w: Traced, bias: Traced, stride: int, padding: Paddings
    ) -> Traced:
        return self._one("conv2d_bias", x, w, bias, stride=stride, padding=padding)

    def conv2d_weight_grad(
        self, x: Traced, gy: Traced, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Traced:
        made = self._one(
            "conv2d_weight_grad", x, gy, kernel=tuple(kernel), stride=stride, padding=padding
        )
        made.batched = False
        return made

    def conv2d_fold(
        self, gy: Traced, w: Traced, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Traced:
        return self._one("conv2d_fold", gy, w, image=tuple(image), stride=stride, padding=padding)

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Traced:
        return self._one("add", a, b)

    def sub(self, a: Any, b: Any) -> Traced:
        return self._one("sub", a, b)

    def mul(self, a: Any, b: Any) -> Traced:
        return self._one("mul", a, b)

    def div(self, a: Any, b: Any) -> Traced:
        return self._one("div", a, b)

    def maximum(self, a: Any, b: Any) -> Traced:
        return self._one("maximum", a, b)

    def greater(self, a: Any, b: Any) -> Traced:
        return self._one("greater", a, b)

    def where(self, condition: Traced, a: Any, b: Any) -> Traced:
        return self._one("where", condition, a, b)

    def neg(self, x: Traced) -> Traced:
        return self._one("neg", x)

    def abs(self, x: Traced) -> Traced:
        return self._one("abs", x)

    def exp(self, x: Traced) -> Traced:
        return self._one("exp", x)

    def log(self, x: Traced) -> Traced:
        return self._one("log", x)

    def log1p(self, x: Traced) -> Traced:
        return self._one("log1p", x)

    def softplus(self, x: Traced) -> Traced:
        return self._one("softplus", x)

    def sqrt(self, x: Traced) -> Traced:
        return self._one("sqrt", x)

    def tanh(self, x: Traced) -> Traced:
        return self._one("tanh", x)

    def sigmoid(self, x: Traced) -> Traced:
        return self._one("sigmoid", x)

    def relu(self, x: Traced) -> Traced:
        return self._one("relu", x)

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Traced) -> Traced:
        return self._one("copy", x)

    def assign(self, target: Traced, source: Traced) -> None:
        raise ExportError(
            "it changes a value in place during its pass (a training pass's buffer update), "
            "which a served graph does not do"
        )

    def reshape(self, x: Traced, shape: tuple[int, ...]) -> Traced:
        shape = tuple(int(s) for s in shape)
        if not x.batched:
            return self._one("reshape", x, shape=shape)
        rest = math.prod(shape[1:])
        if not shape or shape[0] % self.batch or rest * shape[0] != math.prod(x.shape):
            raise ExportError(
                f"it reshapes rows of shape {x.shape} to {shape}, moving the batch's axis "
                "(the rows) away from the first: a graph written for any count of rows cannot"
            )
        return self._write("reshape", [x], {"shape": shape}, shape=(-1, *shape[1:]))[0]

    def transpose(self, x: Traced, axes: tuple[int, ...]) -> Traced:
        made = self._one("transpose", x, axes=tuple(axes))
        made.batched = x.batched and next(iter(axes)) == 0
        return made

    def slice(self, x: Traced, axis: int, start: int, stop: int) -> Traced:
        self._refuse_batch(x, axis, "slices")
        return self._one("slice", x, axis=axis, start=start, stop=stop)

    def take_rows(self, x: Traced, rows: Traced) -> Traced:
        made = self._one("take_rows", x, rows)
        made.batched = rows.batched
        return made

    def concatenate(self, xs: Sequence[Traced], axis: int) -> Traced:
        return self._write("concatenate", list(xs), axis=axis)[0]

    def split(self, x: Traced, sizes: Sequence[int], axis: int) -> list[Traced]:
        self._refuse_batch(x, axis, "splits")
        return self._write("split", [x], sizes=tuple(sizes), axis=axis)

    def pad(self, x: Traced, widths: Sequence[Padding]) -> Traced:
        return self._one("pad", x, widths=tuple((int(a), int(b)) for a, b in widths))

    def broadcast_to(self, x: Traced, shape: tuple[int, ...]) -> Traced:
        shape = tuple(int(s) for s in shape)
        if shape and shape[0] == self.batch and (x.batched or self.batch_source is not None):
            if x.batched:  # Expand keeps an axis given as 1: the rows stay as many as they are
                return self._write("broadcast_to", [x], {"shape": shape}, shape=(1, *shape[1:]))[0]
            g = self.graph
            full = g.one("Concat", self._rows(), g.ints(shape[1:]), axis=0)
            return Traced(
                g.one("Expand", x.name, full), self.shadow.broadcast_to(x.shadow, shape), True
            )
        return self._one("broadcast_to", x, shape=shape)

    def one_hot(self, indices: Traced, classes: int) -> Traced:
        return self._one("one_hot", indices, classes=classes)

    def maxpool2d(self, x: Traced, pool: int) -> tuple[Traced, Traced]:
        maxima, selection = self._write("maxpool2d", [x], pool=pool)
        return maxima, selection

    def maxpool2d_back(
        self, gy: Traced, selection: Traced, image: tuple[int, int], pool: int
    ) -> Traced:
        return self._one("maxpool2d_back", gy, selection, image=tuple(image), pool=pool)

    # --- fast paths: the layer operations ------------------------------------------------
    def batch_matmul(
        self, a: Traced, b: Traced, transpose_a: bool = False, transpose_b: bool = False
    ) -> Traced:
        return self._one("batch_matmul", a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    def add_rows(self, values: Traced, indices: Traced, rows: int) -> Traced:
        made = self._one("add_rows", values, indices, rows=int(rows))
        made.batched = False
        return made

    def erf(self, x: Traced) -> Traced:
        return self._one("erf", x)

    def maxpool2d_pair(self, x: Traced, pool: tuple[int, int]) -> tuple[Traced, Traced]:
        maxima, selection = self._write("maxpool2d_pair", [x], pool=tuple(pool))
        return maxima, selection

    def maxpool2d_pair_back(
        self, gy: Traced, selection: Traced, image: tuple[int, int], pool: tuple[int, int]
    ) -> Traced:
        return self._one("maxpool2d_pair_back", gy, selection, image=tuple(image), pool=tuple(pool))


def _shadow(engine: LightEngine, op: str, operands: list[Any], attrs: dict[str, Any]) -> list[Any]:
    """The operation on the light engine (for the shapes and dtypes of its outputs)."""
    if op in fused_paths.FAST_PATHS:  # the light engine's own, or the reference
        made: Any = getattr(fused_paths, op)(engine, *operands, **attrs)
    elif op == "concatenate":
        made = engine.concatenate(operands, **attrs)
    else:
        made = getattr(engine, op)(*operands, **attrs)
    return list(made) if isinstance(made, (list, tuple)) else [made]


OFFERED = frozenset(
    name for name in fused_paths.FAST_PATHS if callable(getattr(WritingEngine, name, None))
)
"""The fast paths the writing engine offers: each a form the onnx engine offers too."""

"""The onnx engine's operations: each a graph of its ONNX form alone, run by onnxruntime.

Handles are NumPy arrays on the host (onnxruntime's processor provider reads and writes host
memory). Every operation writes its form (`deepsharp.core.export.forms`) into a graph of its
own — its handles as inputs, a Python number as an input of one value, so one graph serves
every constant — and runs it in an onnxruntime session kept for operations of the same shapes
and attributes. The exporter writes the same forms, so the contract this engine is held to is
the contract of every operator an exported file holds.
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deepsharp.core.engine import Counters, EngineIdentity, int64_put
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.export.forms import FORMS, MOVES, Form, float_inputs
from deepsharp.core.export.graph import DEFAULT_OPSET, OnnxGraph

__all__ = ["INSTALL", "OnnxEngine"]

Array = Any  # a handle: a NumPy array on the host
Padding = tuple[int, int]
Paddings = tuple[Padding, Padding]

INSTALL = (
    "pip install 'deepsharp[onnx]' (onnx and onnxruntime; from a checkout, pip install "
    "'./packages/core[onnx]' -c ci/constraints.txt for the tested versions)"
)
_KEPT = 512  # sessions kept, the least recently used dropped first


def _runtime() -> Any:
    try:
        return importlib.import_module("onnxruntime")
    except ImportError as error:
        raise EngineUnavailableError(
            f"the onnx engine runs each operation in onnxruntime, which is not installed here "
            f"({error}): {INSTALL}"
        ) from None


class OnnxEngine:
    """Every operation a graph of its ONNX form alone, run by onnxruntime on the processor.

    `OnnxEngine(opset=17)` (spec `onnx`, or `onnx:opset18`): the forms written for that opset,
    run with one thread (onnxruntime's results then do not depend on a thread count). Its
    precision is `float32`: onnxruntime adds totals in its own float32 kernels. It exists to hold
    the operators an exported file holds to the contract (`pytest --pyargs deepsharp.contracts
    --engine onnx`), and trains and serves as any engine does — slowly, one session call an
    operation.
    """

    name = "onnx"

    forms: Mapping[str, Form] = FORMS
    """The forms it runs (the exporter's; the contract's own tests plant broken ones)."""

    def __init__(self, opset: int = DEFAULT_OPSET) -> None:
        runtime = _runtime()
        _onnx()
        self._runtime = runtime
        self.opset = opset
        self.version = str(runtime.__version__)
        self.counters = Counters()
        self._sessions: OrderedDict[tuple[Any, ...], tuple[Any, list[str]]] = OrderedDict()
        options = runtime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._options = options
        if not self._serves(opset):
            served = [n for n in range(opset - 1, DEFAULT_OPSET - 1, -1) if self._serves(n)]
            highest = f"opset {served[0]} is the highest it serves" if served else "it serves none"
            raise EngineUnavailableError(
                f"the onnx engine cannot run opset {opset} here (onnxruntime {self.version}): "
                f"{highest}; use onnx (opset {DEFAULT_OPSET}, the one deepsharp's operators are "
                "held to the contract at)"
                + (f" up to onnx:opset{served[0]}" if served and served[0] > DEFAULT_OPSET else "")
            )

    def _serves(self, opset: int) -> bool:
        """Whether onnxruntime runs a file written for `opset` (one Identity of it)."""
        graph = OnnxGraph(opset)
        graph.output(
            graph.node("Identity", [graph.input("x", np.float32, [1])])[0], np.float32, [1]
        )
        try:
            made = graph.model(doc="a probe of the opset")
            self._runtime.InferenceSession(
                made.SerializeToString(), self._options, providers=["CPUExecutionProvider"]
            )
        except Exception:  # onnx's and onnxruntime's refusals have no common type
            return False
        return True

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        """Pickled (copied) as its opset: onnxruntime's module and sessions are made anew."""
        return type(self), (self.opset,)

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(
            self.name, f"onnxruntime {self.version}, opset {self.opset}", "cpu", "float32"
        )

    def __repr__(self) -> str:
        return f"OnnxEngine(onnxruntime {self.version}, opset {self.opset})"

    # --- running one form ----------------------------------------------------------------------
    def _run(self, op: str, operands: Sequence[Any], **attrs: Any) -> list[Array]:
        feeds: list[Array] = []
        signature: list[tuple[Any, ...]] = []
        for value in operands:
            if isinstance(value, np.ndarray):
                feeds.append(value)
                signature.append((value.shape, value.dtype.str))
            else:
                feeds.append(np.asarray(value, np.float32))
                signature.append(((), "number"))
        key = (op, tuple(signature), _frozen(attrs))
        found = self._sessions.get(key)
        if found is None:
            found = self._build(op, signature, attrs)
            self._sessions[key] = found
            if len(self._sessions) > _KEPT:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        session, names = found
        outputs: list[Array] = session.run(None, dict(zip(names, feeds)))
        return [np.asarray(out) for out in outputs]

    def _build(
        self, op: str, signature: list[tuple[Any, ...]], attrs: dict[str, Any]
    ) -> tuple[Any, list[str]]:
        graph = OnnxGraph(self.opset)
        names, shapes, dtypes = [], [], []
        for place, (shape, kind) in enumerate(signature):
            dtype = np.dtype(np.float32) if kind == "number" else np.dtype(kind)
            names.append(graph.input(f"x{place}", dtype, list(shape)))
            shapes.append(tuple(shape))
            dtypes.append(dtype)
        taken = float_inputs(graph, op, names, dtypes)
        outputs = self.forms[op](graph, taken, shapes, **attrs)
        for place, output in enumerate(outputs):
            graph.output(output, _output_dtype(op, place, dtypes), None)
        model = graph.model(doc=f"deepsharp's form of {op}")
        session = self._runtime.InferenceSession(
            model.SerializeToString(), self._options, providers=["CPUExecutionProvider"]
        )
        return session, names

    def _one(self, op: str, *operands: Any, **attrs: Any) -> Array:
        return self._run(op, operands, **attrs)[0]

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: Array) -> Array:
        self.counters.transfers_in += 1
        source = np.asarray(array)
        kind = np.int64 if int64_put(source) else np.float32
        return np.array(source, dtype=kind, order="C", copy=True)

    def get(self, handle: Array) -> Array:
        self.counters.transfers_out += 1
        return np.array(handle, order="C", copy=True)

    def zeros(self, shape: tuple[int, ...]) -> Array:
        return np.zeros(shape, np.float32)

    def shape(self, handle: Array) -> tuple[int, ...]:
        return tuple(handle.shape)

    # --- totals ----------------------------------------------------------------------------
    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return self._one("matmul", a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return self._one("sum", x, axes=tuple(axes), keepdims=keepdims)

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return self._one("mean", x, axes=tuple(axes), keepdims=keepdims)

    def conv2d(self, x: Array, w: Array, stride: int, padding: Paddings) -> Array:
        return self._one("conv2d", x, w, stride=stride, padding=_paddings(padding))

    def conv2d_bias(self, x: Array, w: Array, bias: Array, stride: int, padding: Paddings) -> Array:
        return self._one("conv2d_bias", x, w, bias, stride=stride, padding=_paddings(padding))

    def conv2d_weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: Paddings,
    ) -> Array:
        return self._one(
            "conv2d_weight_grad",
            x,
            gy,
            kernel=tuple(kernel),
            stride=stride,
            padding=_paddings(padding),
        )

    def conv2d_fold(
        self, gy: Array, w: Array, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        return self._one(
            "conv2d_fold", gy, w, image=tuple(image), stride=stride, padding=_paddings(padding)
        )

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Array:
        return self._one("add", a, b)

    def sub(self, a: Any, b: Any) -> Array:
        return self._one("sub", a, b)

    def mul(self, a: Any, b: Any) -> Array:
        return self._one("mul", a, b)

    def div(self, a: Any, b: Any) -> Array:
        return self._one("div", a, b)

    def maximum(self, a: Any, b: Any) -> Array:
        return self._one("maximum", a, b)

    def greater(self, a: Any, b: Any) -> Array:
        return self._one("greater", a, b)

    def where(self, condition: Array, a: Any, b: Any) -> Array:
        return self._one("where", condition, a, b)

    def neg(self, x: Array) -> Array:
        return self._one("neg", x)

    def abs(self, x: Array) -> Array:
        return self._one("abs", x)

    def exp(self, x: Array) -> Array:
        return self._one("exp", x)

    def log(self, x: Array) -> Array:
        return self._one("log", x)

    def log1p(self, x: Array) -> Array:
        return self._one("log1p", x)

    def softplus(self, x: Array) -> Array:
        return self._one("softplus", x)

    def sqrt(self, x: Array) -> Array:
        return self._one("sqrt", x)

    def tanh(self, x: Array) -> Array:
        return self._one("tanh", x)

    def sigmoid(self, x: Array) -> Array:
        return self._one("sigmoid", x)

    def relu(self, x: Array) -> Array:
        return self._one("relu", x)

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Array) -> Array:
        return self._one("copy", x)

    def assign(self, target: Array, source: Array) -> None:
        np.copyto(target, self._one("copy", source))

    def reshape(self, x: Array, shape: tuple[int, ...]) -> Array:
        return self._one("reshape", x, shape=tuple(shape))

    def transpose(self, x: Array, axes: tuple[int, ...]) -> Array:
        return self._one("transpose", x, axes=tuple(axes))

    def slice(self, x: Array, axis: int, start: int, stop: int) -> Array:
        return self._one("slice", x, axis=axis, start=start, stop=stop)

    def take_rows(self, x: Array, rows: Array) -> Array:
        return self._one("take_rows", x, rows)

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        return self._run("concatenate", list(xs), axis=axis)[0]

    def split(self, x: Array, sizes: Sequence[int], axis: int) -> list[Array]:
        return self._run("split", [x], sizes=tuple(sizes), axis=axis)

    def pad(self, x: Array, widths: Sequence[Padding]) -> Array:
        return self._one("pad", x, widths=tuple((int(a), int(b)) for a, b in widths))

    def broadcast_to(self, x: Array, shape: tuple[int, ...]) -> Array:
        return self._one("broadcast_to", x, shape=tuple(shape))

    def max(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return self._one("max", x, axes=tuple(axes), keepdims=keepdims)

    def one_hot(self, indices: Array, classes: int) -> Array:
        return self._one("one_hot", indices, classes=classes)

    def maxpool2d(self, x: Array, pool: int) -> tuple[Array, Array]:
        maxima, selection = self._run("maxpool2d", [x], pool=pool)
        return maxima, selection

    def maxpool2d_back(
        self, gy: Array, selection: Array, image: tuple[int, int], pool: int
    ) -> Array:
        return self._one("maxpool2d_back", gy, selection, image=tuple(image), pool=pool)

    # --- fast paths: the layer operations ------------------------------------------------
    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return self._one("batch_matmul", a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    def add_rows(self, values: Array, indices: Array, rows: int) -> Array:
        return self._one("add_rows", values, indices, rows=int(rows))

    def erf(self, x: Array) -> Array:
        return self._one("erf", x)

    def maxpool2d_pair(self, x: Array, pool: tuple[int, int]) -> tuple[Array, Array]:
        maxima, selection = self._run("maxpool2d_pair", [x], pool=tuple(pool))
        return maxima, selection

    def maxpool2d_pair_back(
        self, gy: Array, selection: Array, image: tuple[int, int], pool: tuple[int, int]
    ) -> Array:
        return self._one("maxpool2d_pair_back", gy, selection, image=tuple(image), pool=tuple(pool))


def _onnx() -> Any:
    try:
        return importlib.import_module("onnx")
    except ImportError as error:
        raise EngineUnavailableError(
            f"the onnx engine writes each operation with the onnx package, which is not "
            f"installed here ({error}): {INSTALL}"
        ) from None


def _paddings(padding: Any) -> Paddings:
    (top, bottom), (left, right) = padding
    return ((int(top), int(bottom)), (int(left), int(right)))


def _frozen(attrs: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((name, repr(value)) for name, value in attrs.items()))


def _output_dtype(op: str, place: int, inputs: list[np.dtype[Any]]) -> np.dtype[Any]:
    """A form's output dtype: a move's is its input's (ids stay int64), a max-pool's selection
    is int64, every other output float32."""
    if op in MOVES:
        return inputs[0]
    if op in ("maxpool2d", "maxpool2d_pair") and place == 1:
        return np.dtype(np.int64)
    return np.dtype(np.float32)

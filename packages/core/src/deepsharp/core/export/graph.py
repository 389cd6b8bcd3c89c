"""An ONNX graph as deepsharp writes it: nodes, constants, inputs and outputs, named as they come.

`OnnxGraph` collects what is written — by the exporter (a whole network and its pipeline) and by
the onnx engine (one operation at a time) — as plain Python values, and checks each operator
against the opset it is written for. `model()` makes the `onnx.ModelProto` (it needs the `onnx`
package, the optional extra `deepsharp[onnx]`); nothing else here does.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import ExportError

__all__ = [
    "DEFAULT_OPSET",
    "MIN_OPSET",
    "ML_OPSET",
    "SINCE",
    "OnnxGraph",
    "Written",
    "highest_opset",
    "onnx_module",
]

DEFAULT_OPSET = 17
"""The opset `export_onnx` writes unless told: the one the onnx engine is held at."""

MIN_OPSET = 13
"""The least opset deepsharp writes: from 13 on, ONNX takes reductions' and splits' axes as
inputs, and Softmax's meaning no longer depends on the opset (deepsharp writes none anyway)."""

ML_OPSET = 3
"""The ai.onnx.ml opset of the pipeline's operators (LabelEncoder)."""

SINCE: dict[str, int] = {
    "Abs": MIN_OPSET,
    "Add": MIN_OPSET,
    "Cast": MIN_OPSET,
    "Concat": MIN_OPSET,
    "Conv": MIN_OPSET,
    "ConvTranspose": MIN_OPSET,
    "Div": MIN_OPSET,
    "Equal": MIN_OPSET,
    "Erf": MIN_OPSET,
    "Exp": MIN_OPSET,
    "Expand": MIN_OPSET,
    "Gather": MIN_OPSET,
    "Gemm": MIN_OPSET,
    "Greater": MIN_OPSET,
    "Identity": MIN_OPSET,
    "IsNaN": MIN_OPSET,
    "Less": MIN_OPSET,
    "Log": MIN_OPSET,
    "MatMul": MIN_OPSET,
    "Max": MIN_OPSET,
    "MaxPool": MIN_OPSET,
    "Mod": MIN_OPSET,
    "Mul": MIN_OPSET,
    "Or": MIN_OPSET,
    "Neg": MIN_OPSET,
    "OneHot": MIN_OPSET,
    "Pad": MIN_OPSET,
    "ReduceMax": MIN_OPSET,
    "ReduceMean": MIN_OPSET,
    "ReduceSum": MIN_OPSET,
    "Relu": MIN_OPSET,
    "Reshape": MIN_OPSET,
    "ScatterElements": MIN_OPSET,
    "Shape": MIN_OPSET,
    "Sigmoid": MIN_OPSET,
    "Slice": MIN_OPSET,
    "Softplus": MIN_OPSET,
    "Split": MIN_OPSET,
    "Sqrt": MIN_OPSET,
    "Sub": MIN_OPSET,
    "Tanh": MIN_OPSET,
    "Transpose": MIN_OPSET,
    "Unsqueeze": MIN_OPSET,
    "Where": MIN_OPSET,
    "ScatterND": 16,  # with reduction="add"
    "LabelEncoder": 2,  # ai.onnx.ml
}
"""Each operator deepsharp writes and the least opset it is written for: the forms of opset 13
and later (axes as inputs) for ai.onnx, ai.onnx.ml's version for LabelEncoder."""

_ELEMENTS = {
    np.dtype(np.float32): 1,
    np.dtype(np.int64): 7,
    np.dtype(np.bool_): 9,
    np.dtype(np.float64): 11,
}
_STRING = 8


def onnx_module() -> Any:
    """The `onnx` package, or an ExportError saying how to install it."""
    try:
        return importlib.import_module("onnx")
    except ImportError as error:
        raise ExportError(
            "writing ONNX files needs the onnx package, which is not installed here "
            f"({error}): pip install 'deepsharp[onnx]' (onnx and onnxruntime, the versions "
            "ci/constraints.txt pins)"
        ) from None


def highest_opset() -> int:
    """The highest ai.onnx opset the installed onnx package knows."""
    found: int = onnx_module().defs.onnx_opset_version()
    return found


def element(dtype: Any) -> int:
    """ONNX's element type of a NumPy dtype (or "string")."""
    if isinstance(dtype, str) and dtype == "string":
        return _STRING
    return _ELEMENTS[np.dtype(dtype)]


@dataclass
class Written:
    """One node as written: its operator, inputs, outputs, attributes and domain."""

    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    scope: str = ""


class OnnxGraph:
    """Nodes, constants, inputs and outputs being written, for one opset.

    `scope` prefixes the names of what is written next (the exporter sets it to the layer or
    column being written, so a node's name says where it came from). Each operator is checked
    against the opset: one whose form needs a later opset is an ExportError naming both.
    """

    def __init__(self, opset: int = DEFAULT_OPSET) -> None:
        self.opset = opset
        self.scope = ""
        self.nodes: list[Written] = []
        self.constants: dict[str, NDArray[Any]] = {}
        self.inputs: list[tuple[str, Any, list[int | str | None]]] = []
        self.outputs: list[tuple[str, Any, list[int | str | None]]] = []
        self._counts: dict[str, int] = {}
        self._shared: dict[tuple[Any, ...], str] = {}
        self._reserved: set[str] = set()

    # --- names -------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        """A name not used yet, `<scope>/<base>` (then `_1`, `_2`, ...)."""
        stem = f"{self.scope}/{base}" if self.scope else base
        while True:  # never an input's name (a column named "dense/gemm")
            count = self._counts.get(stem, 0)
            self._counts[stem] = count + 1
            name = stem if count == 0 else f"{stem}_{count}"
            if name not in self._reserved:
                return name

    def reserve(self, names: Iterable[str]) -> None:
        """Names no node takes: the inputs', declared before any node is written."""
        self._reserved.update(names)

    # --- what is written ---------------------------------------------------------------------
    def node(
        self, op: str, inputs: list[str], outputs: int = 1, domain: str = "", **attrs: Any
    ) -> list[str]:
        """Write one node; the names of its outputs."""
        least = SINCE.get(op)
        if least is None:
            raise ExportError(f"deepsharp does not write the ONNX operator {op!r}")
        if domain == "" and self.opset < least:
            raise ExportError(
                f"the ONNX operator {op} is written in its opset-{least} form, and the file "
                f"is asked for opset {self.opset}: export at opset {max(least, MIN_OPSET)} or "
                "later"
            )
        names = [self.fresh(op.lower()) for _ in range(outputs)]
        self.nodes.append(Written(op, list(inputs), names, dict(attrs), domain, self.scope))
        return names

    def one(self, op: str, *inputs: str, domain: str = "", **attrs: Any) -> str:
        """Write one node of one output; its name."""
        return self.node(op, list(inputs), 1, domain, **attrs)[0]

    def constant(self, array: NDArray[Any], name: str | None = None) -> str:
        """A constant (an initializer): given a name (a slot's), or a fresh one."""
        made = self.fresh("constant") if name is None else name
        if any(made == taken for taken, _, _ in self.inputs):  # a column named as a slot
            made = self.fresh(made)
        if made in self.constants:
            raise ExportError(f"two constants are named {made!r}")
        self.constants[made] = np.array(array, order="C")  # keeps a shape of () as it is
        return made

    def first_difference(self, other: OnnxGraph) -> str | None:
        """Where this graph and another traced of the same pass first differ, in words (the
        scope that wrote it: a layer's name); None where they are the same."""
        for one, two in zip(self.nodes, other.nodes):
            if (one.op, one.inputs, one.outputs, one.domain) != (
                two.op,
                two.inputs,
                two.outputs,
                two.domain,
            ) or not _same(one.attrs, two.attrs):
                return f"the {one.op} node written by {_where(one.scope)}"
        if len(self.nodes) != len(other.nodes):
            return "the graph's count of nodes"
        for name, values in self.constants.items():
            theirs = other.constants.get(name)
            if theirs is None or not _same(values, theirs):
                return f"the constant {name!r} written by {_where(name.rpartition('/')[0])}"
        if set(other.constants) != set(self.constants) or (self.inputs, self.outputs) != (
            other.inputs,
            other.outputs,
        ):
            return "the graph's constants, inputs or outputs"
        return None

    def scalar(self, value: float, dtype: Any = np.float32) -> str:
        """A constant of one value (shape ()), written once however often it is used."""
        array = np.asarray(value, dtype)
        key = ("scalar", array.dtype.str, array.tobytes())
        if key not in self._shared:
            self._shared[key] = self.constant(array)
        return self._shared[key]

    def ints(self, values: Any) -> str:
        """A constant of int64 values in one line (shapes, axes, sizes), written once."""
        array = np.asarray(list(values), np.int64).reshape(-1)
        key = ("ints", array.tobytes(), array.size)
        if key not in self._shared:
            self._shared[key] = self.constant(array)
        return self._shared[key]

    def floats(self, values: Any, dtype: Any = np.float32) -> str:
        """A constant array of these values, written once."""
        array = np.array(values, dtype, order="C")
        key = ("floats", array.dtype.str, array.shape, array.tobytes())
        if key not in self._shared:
            self._shared[key] = self.constant(array)
        return self._shared[key]

    def input(self, name: str, dtype: Any, shape: list[int | str | None]) -> str:
        """A graph input of `dtype` (a NumPy dtype, or "string") and `shape` ("N": any count)."""
        self.inputs.append((name, dtype, list(shape)))
        self._reserved.add(name)
        return name

    def output(self, name: str, dtype: Any, shape: list[int | str | None] | None) -> None:
        """A graph output (the value named `name`); shape None where it is not stated."""
        self.outputs.append((name, dtype, [] if shape is None else list(shape)))

    # --- the model ---------------------------------------------------------------------------
    def prune(self) -> None:
        """Drop the nodes and constants no output needs (a max-pool's selection, which only a
        way back reads)."""
        needed = {name for name, _, _ in self.outputs}
        kept: list[Written] = []
        for written in reversed(self.nodes):
            if any(output in needed for output in written.outputs):
                kept.append(written)
                needed.update(written.inputs)
        self.nodes = kept[::-1]
        self.constants = {n: v for n, v in self.constants.items() if n in needed}

    def model(self, doc: str = "", metadata: dict[str, str] | None = None) -> Any:
        """The onnx.ModelProto of what was written (needs the onnx package)."""
        onnx = onnx_module()
        helper, numpy_helper = onnx.helper, onnx.numpy_helper
        nodes = [
            helper.make_node(
                w.op,
                w.inputs,
                w.outputs,
                name=w.outputs[0],
                domain=w.domain or None,
                **w.attrs,
            )
            for w in self.nodes
        ]
        constants = [numpy_helper.from_array(value, name) for name, value in self.constants.items()]
        inputs = [
            helper.make_tensor_value_info(name, element(dtype), shape)
            for name, dtype, shape in self.inputs
        ]
        outputs = [
            helper.make_tensor_value_info(name, element(dtype), shape or None)
            for name, dtype, shape in self.outputs
        ]
        graph = helper.make_graph(nodes, "deepsharp", inputs, outputs, constants, doc_string=doc)
        opsets = [helper.make_opsetid("", self.opset)]
        if any(w.domain == "ai.onnx.ml" for w in self.nodes):
            opsets.append(helper.make_opsetid("ai.onnx.ml", ML_OPSET))
        made = helper.make_model(graph, opset_imports=opsets, ir_version=_ir_version(self.opset))
        if metadata:
            helper.set_model_props(made, metadata)
        return made


def _where(scope: str) -> str:
    return repr(scope) if scope else "the graph itself"


def _same(one: Any, two: Any) -> bool:
    """Two attributes' or constants' values are the same, arrays compared value by value (and
    dtype and shape)."""
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_same(one[k], two[k]) for k in one)
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(_same(a, b) for a, b in zip(one, two))
    if isinstance(one, np.ndarray) or isinstance(two, np.ndarray):
        a, b = np.asarray(one), np.asarray(two)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return bool(one == two)


def _ir_version(opset: int) -> int:
    """The IR version that goes with the opset (onnx's own table; 8 for opsets 13 to 17)."""
    onnx = onnx_module()
    table = onnx.helper.VERSION_TABLE
    for _, ir, ai_onnx, *_ in table:
        if ai_onnx >= opset:
            return int(ir)
    return int(table[-1][1])

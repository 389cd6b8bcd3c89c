"""ONNX forms broken on purpose, each in one way an exporter gets wrong, run by the onnx engine:
the contract must catch each (`--engine broken_forms:transposed_gemm`). The exporter writes the
same forms, so these are faults an exported file would hold.

- `transposed_gemm`: a product written with its second factor transposed (transB=1 always).
- `odd_pad_before`: 'same' padding's odd zero put before the image, not after (PyTorch's
  convention, not TensorFlow's that deepsharp keeps): shapes fit, values shift.
- `softmax_wrong_axis`: a total kept for broadcasting (a softmax's) taken over the first axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from deepsharp.core.export.forms import FORMS, Form
from deepsharp.core.export.graph import OnnxGraph
from deepsharp.engines.onnx import OnnxEngine


def _transposed(g: OnnxGraph, xs: list[str], shapes: Any, **flags: bool) -> list[str]:
    transpose_a = int(flags.get("transpose_a", False))
    return [g.one("Gemm", xs[0], xs[1], transA=transpose_a, transB=1)]


def _before(g: OnnxGraph, xs: list[str], shapes: Any, stride: int, padding: Any) -> list[str]:
    (top, bottom), (left, right) = padding
    return [g.one("Conv", *xs, strides=[stride, stride], pads=[bottom, right, top, left])]


def _first_axis(
    g: OnnxGraph, xs: list[str], shapes: Any, axes: Any, keepdims: bool = False
) -> list[str]:
    wrong = tuple(0 if keepdims else axis for axis in axes)
    if not wrong:
        return [g.one("Identity", xs[0])]
    return [g.one("ReduceSum", xs[0], g.ints(wrong), keepdims=int(keepdims))]


def _engine(name: str, broken: dict[str, Form]) -> OnnxEngine:
    class Broken(OnnxEngine):
        forms: Mapping[str, Form] = MappingProxyType({**FORMS, **broken})

    Broken.name = name
    return Broken()


def transposed_gemm() -> OnnxEngine:
    return _engine("transposed-gemm", {"matmul": _transposed})


def odd_pad_before() -> OnnxEngine:
    return _engine("odd-pad-before", {"conv2d": _before, "conv2d_bias": _before})


def softmax_wrong_axis() -> OnnxEngine:
    return _engine("softmax-wrong-axis", {"sum": _first_axis})

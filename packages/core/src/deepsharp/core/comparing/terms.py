"""The totals again, on the host in float64, written plainly: what a total's bound is made of.

A total's bound is a multiple of Σ|terms| (the sizes of the terms it adds) and, at the float32
and mixed precisions, of n (how many terms it adds); a mixed precision's products also add an
absolute part that grows with the sizes of the inputs each term multiplies. All three are the
same total taken over other values — over the inputs' sizes, over ones, over one input's sizes
and ones — so each operation is taken as a definition in float64, never by an engine: a product
with `np.matmul` here, a convolution and its gradients as the float64 reference writes them
(`exact.Float64Engine`, a loop over the kernel's places).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.comparing.exact import Float64Engine

__all__ = ["TOTALS", "Terms", "terms_of"]

Array = NDArray[Any]
Paddings = tuple[tuple[int, int], tuple[int, int]]

_EXACT = Float64Engine()
"""The float64 reference, whose convolutions the totals' terms are taken by."""


def _wide(value: Any) -> Array:
    return np.asarray(value, np.float64)


def matmul(a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False) -> Array:
    made: Array = np.matmul(a.T if transpose_a else a, b.T if transpose_b else b)
    return made


def batch_matmul(a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False) -> Array:
    made: Array = np.matmul(
        np.swapaxes(a, -1, -2) if transpose_a else a, np.swapaxes(b, -1, -2) if transpose_b else b
    )
    return made


def total(x: Array, axes: Sequence[int], keepdims: bool = False) -> Array:
    made: Array = np.sum(x, axis=tuple(axes), keepdims=keepdims)
    return made


def add_rows(values: Array, indices: Array, rows: int) -> Array:
    """A (rows, ...) of zeros with values[i...] added into row indices[i...]."""
    flat = indices.reshape(-1)
    tail = values.shape[indices.ndim :]
    out = np.zeros((rows, *tail))
    np.add.at(out, flat, values.reshape(flat.shape[0], *tail))
    return out


class Terms:
    """What one output of a total is made of, element by element: `sizes` (Σ|terms|), `counts`
    (n), `inputs` (Σ(|a| + |b|) of the factors each term multiplies: a mixed precision's
    absolute part) and whether the total is a product (the half format applies to its inputs)."""

    __slots__ = ("counts", "inputs", "product", "sizes")

    def __init__(self, sizes: Array, counts: Array, inputs: Array, product: bool) -> None:
        self.sizes = sizes
        self.counts = counts
        self.inputs = inputs
        self.product = product


def _bilinear(function: Any, a: Array, b: Array, *rest: Any, **named: Any) -> Terms:
    """The terms of a total of products a·b (a product, a convolution and its gradients)."""
    size_a, size_b = np.abs(_wide(a)), np.abs(_wide(b))
    ones_a, ones_b = np.ones_like(size_a), np.ones_like(size_b)
    return Terms(
        function(size_a, size_b, *rest, **named),
        function(ones_a, ones_b, *rest, **named),
        function(size_a, ones_b, *rest, **named) + function(ones_a, size_b, *rest, **named),
        True,
    )


def _summed(x: Any, axes: Sequence[int], keepdims: bool = False, mean: bool = False) -> Terms:
    size = np.abs(_wide(x))
    count = math.prod(size.shape[axis] for axis in axes) if axes else 1
    sizes = total(size, axes, keepdims) / (count if mean else 1)
    counts = np.full(np.shape(sizes), float(count))
    return Terms(sizes, counts, np.zeros_like(counts), False)


def _conv2d_bias(x: Array, w: Array, bias: Array, stride: int, padding: Paddings) -> Terms:
    made = _bilinear(_EXACT.conv2d, x, w, stride, padding)
    size = np.abs(_wide(bias)).reshape(1, -1, 1, 1)
    return Terms(made.sizes + size, made.counts + 1.0, made.inputs, True)


def _matmul_bias(x: Array, w: Array, bias: Array, transpose_b: bool = False) -> Terms:
    made = _bilinear(matmul, x, w, False, transpose_b)
    size = np.abs(_wide(bias)).reshape(1, -1)
    return Terms(made.sizes + size, made.counts + 1.0, made.inputs, True)


def _add_rows(values: Array, indices: Array, rows: int) -> Terms:
    size = np.abs(_wide(values))
    counts = add_rows(np.ones_like(size), indices, rows)
    return Terms(add_rows(size, indices, rows), counts, add_rows(size + 1.0, indices, rows), True)


def terms_of(operation: str, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Terms]:
    """The terms of each output of the total `operation` on the host values `args` (the
    engine's arguments, handles brought to the host), in the order the operation gives them."""
    if operation == "conv2d_weight_bias_grad":
        x, gy, kernel, stride, padding = _arguments(args, kwargs, TOTALS[operation])
        weights = _bilinear(_EXACT.conv2d_weight_grad, x, gy, kernel, stride, padding)
        return [weights, _summed(gy, (0, 2, 3))]
    named = _arguments(args, kwargs, TOTALS[operation])
    if operation in ("sum", "mean"):
        x, axes, keepdims = [*named, False][:3]
        return [_summed(x, axes, keepdims, mean=operation == "mean")]
    if operation == "conv2d_bias":
        return [_conv2d_bias(*named)]
    if operation == "matmul_bias":
        return [_matmul_bias(*named)]
    if operation == "add_rows":
        return [_add_rows(*named)]
    function = {
        "matmul": matmul,
        "batch_matmul": batch_matmul,
        "conv2d": _EXACT.conv2d,
        "conv2d_weight_grad": _EXACT.conv2d_weight_grad,
        "conv2d_fold": _EXACT.conv2d_fold,
    }[operation]
    return [_bilinear(function, *named)]


def _arguments(args: Sequence[Any], kwargs: dict[str, Any], names: Sequence[str]) -> list[Any]:
    """The arguments in the order of `names`, positional or named, defaults left out."""
    given = list(args)
    for name in names[len(given) :]:
        if name in kwargs:
            given.append(kwargs[name])
    return given


TOTALS: dict[str, tuple[str, ...]] = {
    "matmul": ("a", "b", "transpose_a", "transpose_b"),
    "batch_matmul": ("a", "b", "transpose_a", "transpose_b"),
    "sum": ("x", "axes", "keepdims"),
    "mean": ("x", "axes", "keepdims"),
    "conv2d": ("x", "w", "stride", "padding"),
    "conv2d_bias": ("x", "w", "bias", "stride", "padding"),
    "matmul_bias": ("x", "w", "bias", "transpose_b"),
    "conv2d_weight_grad": ("x", "gy", "kernel", "stride", "padding"),
    "conv2d_weight_bias_grad": ("x", "gy", "kernel", "stride", "padding"),
    "conv2d_fold": ("gy", "w", "image", "stride", "padding"),
    "add_rows": ("values", "indices", "rows"),
}
"""The totals (primitives and fast paths) and their arguments' names, in order."""

PRODUCTS = frozenset(TOTALS) - {"sum", "mean", "add_rows"}
"""The totals of products a·b, whose output a mixed precision may keep in its half format."""

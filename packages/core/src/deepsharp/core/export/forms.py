"""The ONNX form of each engine operation: the nodes that compute it, written into an `OnnxGraph`.

One table, `FORMS`, serves both writers of ONNX: the exporter, whose writing engine turns every
engine operation of a network's forward pass into its form here, and the onnx engine
(`deepsharp.engines.onnx`), which runs each operation as a graph of its form alone in
onnxruntime, so that `pytest --pyargs deepsharp.contracts --engine onnx` holds every form to the
operation's contract (its family and bound, against the suite's float64 reference). An exported
file is thus made of forms each held to the contract; nothing else is written into its network.

A form is `form(graph, inputs, shapes, **attributes) -> outputs`: the names of its inputs
(handles, or constants of one value for a Python number), their shapes (() for a number), the
operation's attributes as the engine takes them; it returns the names of its outputs. Shapes
are read only where a form needs a size ONNX cannot take from its inputs (a way back's crop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from deepsharp.core.export.graph import OnnxGraph

__all__ = ["FORMS", "MIXED", "MOVES", "Form", "Shapes", "float_inputs"]

Shapes = list[tuple[int, ...]]
Form = Callable[..., list[str]]

_FLOAT, _BOOL = 1, 9  # ONNX's element types for Cast


def _pads(padding: tuple[tuple[int, int], tuple[int, int]]) -> list[int]:
    """ONNX's pads for ((top, bottom), (left, right)): every axis's start, then every end."""
    (top, bottom), (left, right) = padding
    return [int(top), int(left), int(bottom), int(right)]


def _reduce(g: OnnxGraph, op: str, x: str, axes: tuple[int, ...], keepdims: bool) -> str:
    """A reduction over `axes` (none: the values as they are); its axes an input where the opset
    takes them so (ReduceSum from 13, the others from 18), else an attribute."""
    if not axes:
        return g.one("Identity", x)
    if op == "ReduceSum" or g.opset >= 18:
        return g.one(op, x, g.ints(axes), keepdims=int(keepdims))
    return g.one(op, x, axes=[int(a) for a in axes], keepdims=int(keepdims))


# --- totals ----------------------------------------------------------------------------------


def matmul(
    g: OnnxGraph,
    xs: list[str],
    shapes: Shapes,
    transpose_a: bool = False,
    transpose_b: bool = False,
) -> list[str]:
    return [g.one("Gemm", xs[0], xs[1], transA=int(transpose_a), transB=int(transpose_b))]


def sum_(
    g: OnnxGraph, xs: list[str], shapes: Shapes, axes: Any, keepdims: bool = False
) -> list[str]:
    return [_reduce(g, "ReduceSum", xs[0], tuple(axes), keepdims)]


def mean(
    g: OnnxGraph, xs: list[str], shapes: Shapes, axes: Any, keepdims: bool = False
) -> list[str]:
    return [_reduce(g, "ReduceMean", xs[0], tuple(axes), keepdims)]


def conv2d(g: OnnxGraph, xs: list[str], shapes: Shapes, stride: int, padding: Any) -> list[str]:
    return [g.one("Conv", *xs, strides=[stride, stride], pads=_pads(padding))]


def conv2d_weight_grad(
    g: OnnxGraph, xs: list[str], shapes: Shapes, kernel: Any, stride: int, padding: Any
) -> list[str]:
    """The filters' gradient as a convolution of the images (channels as the batch) with the
    outputs' gradient (images as the channels), dilated by the stride, cropped to the kernel."""
    x, gy = xs
    images = g.one("Transpose", x, perm=[1, 0, 2, 3])
    grads = g.one("Transpose", gy, perm=[1, 0, 2, 3])
    total = g.one("Conv", images, grads, dilations=[stride, stride], pads=_pads(padding))
    kh, kw = kernel
    cropped = g.one("Slice", total, g.ints([0, 0]), g.ints([kh, kw]), g.ints([2, 3]))
    return [g.one("Transpose", cropped, perm=[1, 0, 2, 3])]


def conv2d_fold(
    g: OnnxGraph, xs: list[str], shapes: Shapes, image: Any, stride: int, padding: Any
) -> list[str]:
    """What folding gy through w adds onto each place: a transposed convolution, cropped by the
    padding, with zeros after where the stride dropped trailing rows or columns."""
    gy, w = xs
    (_, _, out_h, out_w), (_, _, kh, kw) = shapes[0], shapes[1]
    (top, _), (left, _) = padding
    height, width = image
    full = g.one("ConvTranspose", gy, w, strides=[stride, stride])
    took_h = min(height, (out_h - 1) * stride + kh - top)
    took_w = min(width, (out_w - 1) * stride + kw - left)
    cropped = g.one(
        "Slice", full, g.ints([top, left]), g.ints([top + took_h, left + took_w]), g.ints([2, 3])
    )
    if (took_h, took_w) == (height, width):
        return [cropped]
    return [g.one("Pad", cropped, g.ints([0, 0, 0, 0, 0, 0, height - took_h, width - took_w]))]


# --- value by value --------------------------------------------------------------------------


def _binary(op: str) -> Form:
    def form(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
        return [g.one(op, xs[0], xs[1])]

    form.__doc__ = f"ONNX's {op}, broadcasting as NumPy does."
    return form


def _unary(op: str) -> Form:
    def form(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
        return [g.one(op, xs[0])]

    form.__doc__ = f"ONNX's {op}, value by value."
    return form


def greater(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
    return [g.one("Cast", g.one("Greater", xs[0], xs[1]), to=_FLOAT)]


def where(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
    condition, a, b = xs
    return [g.one("Where", g.one("Cast", condition, to=_BOOL), a, b)]


def log1p(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
    """log(1 + x), which ONNX lacks, accurate relative to its value for small x too (Kahan's
    form): u = 1 + x; x where u rounds to 1, else log(u)·(x / (u - 1)), which cancels the
    rounding of u. The ratio is taken first, and is 1 where u - 1 is x exactly: log(u)·x
    overflowed past 4e36, and inf / inf was NaN (trial EN)."""
    x = xs[0]
    u = g.one("Add", x, g.scalar(1.0))
    shifted = g.one("Sub", u, g.scalar(1.0))
    ratio = g.one("Where", g.one("Equal", shifted, x), g.scalar(1.0), g.one("Div", x, shifted))
    corrected = g.one("Mul", g.one("Log", u), ratio)
    return [g.one("Where", g.one("Equal", shifted, g.scalar(0.0)), x, corrected)]


def sigmoid(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
    """1 / (1 + e^-x), accurate relative to its value in the far negative tail too
    (onnxruntime's Sigmoid gives 0 there): e = exp(-|x|); 1 / (1 + e) for x >= 0, e / (1 + e)
    below."""
    x = xs[0]
    e = g.one("Exp", g.one("Neg", g.one("Abs", x)))
    whole = g.one("Div", g.scalar(1.0), g.one("Add", g.scalar(1.0), e))
    below = g.one("Mul", e, whole)
    return [g.one("Where", g.one("Less", x, g.scalar(0.0)), below, whole)]


# --- moves -----------------------------------------------------------------------------------


def reshape(g: OnnxGraph, xs: list[str], shapes: Shapes, shape: Any) -> list[str]:
    return [g.one("Reshape", xs[0], g.ints(shape))]


def transpose(g: OnnxGraph, xs: list[str], shapes: Shapes, axes: Any) -> list[str]:
    return [g.one("Transpose", xs[0], perm=[int(a) for a in axes])]


def slice_(
    g: OnnxGraph, xs: list[str], shapes: Shapes, axis: int, start: int, stop: int
) -> list[str]:
    return [g.one("Slice", xs[0], g.ints([start]), g.ints([stop]), g.ints([axis]))]


def take_rows(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
    # ONNX's Gather counts a negative index from the end (id -1: the table's last row, silently);
    # made the row count, past the end, onnxruntime refuses it as it refuses any id too large,
    # as deepsharp refuses both.
    negative = g.one("Less", xs[1], g.ints([0]))
    ids = g.one("Where", negative, g.ints([shapes[0][0]]), xs[1])
    return [g.one("Gather", xs[0], ids, axis=0)]


def concatenate(g: OnnxGraph, xs: list[str], shapes: Shapes, axis: int) -> list[str]:
    return [g.one("Concat", *xs, axis=int(axis))]


def split(g: OnnxGraph, xs: list[str], shapes: Shapes, sizes: Any, axis: int) -> list[str]:
    return g.node("Split", [xs[0], g.ints(sizes)], len(sizes), axis=int(axis))


def pad(g: OnnxGraph, xs: list[str], shapes: Shapes, widths: Any) -> list[str]:
    befores = [int(before) for before, _ in widths]
    afters = [int(after) for _, after in widths]
    return [g.one("Pad", xs[0], g.ints(befores + afters))]


def broadcast_to(g: OnnxGraph, xs: list[str], shapes: Shapes, shape: Any) -> list[str]:
    return [g.one("Expand", xs[0], g.ints(shape))]


def max_(
    g: OnnxGraph, xs: list[str], shapes: Shapes, axes: Any, keepdims: bool = False
) -> list[str]:
    """ReduceMax, NaN where a NaN is among the values (onnxruntime's passes over NaN)."""
    highest = _reduce(g, "ReduceMax", xs[0], tuple(axes), keepdims)
    nans = _reduce(
        g, "ReduceMax", g.one("Cast", g.one("IsNaN", xs[0]), to=_FLOAT), tuple(axes), keepdims
    )
    return [g.one("Where", g.one("Greater", nans, g.scalar(0.0)), g.scalar(float("nan")), highest)]


def one_hot(g: OnnxGraph, xs: list[str], shapes: Shapes, classes: int) -> list[str]:
    values = g.floats(np.array([0.0, 1.0], np.float32))
    return [g.one("OneHot", xs[0], g.ints([classes]), values, axis=-1)]


def copy(g: OnnxGraph, xs: list[str], shapes: Shapes) -> list[str]:
    return [g.one("Identity", xs[0])]


def _window_place(g: OnnxGraph, indices: str, image: tuple[int, int], pool: tuple[int, int]) -> str:
    """MaxPool's indices (places in the whole (N, C, H, W) tensor, row by row) as the place of
    each maximum within its window, row by row: (h mod ph)·pw + (w mod pw)."""
    height, width = image
    ph, pw = pool
    column = g.one("Mod", indices, g.scalar(width, np.int64))
    row = g.one("Mod", g.one("Div", indices, g.scalar(width, np.int64)), g.scalar(height, np.int64))
    across = g.one("Mul", g.one("Mod", row, g.scalar(ph, np.int64)), g.scalar(pw, np.int64))
    return g.one("Add", across, g.one("Mod", column, g.scalar(pw, np.int64)))


def maxpool2d(g: OnnxGraph, xs: list[str], shapes: Shapes, pool: int) -> list[str]:
    """The maxima and the selection: ONNX's MaxPool (its first maximum where several tie) and
    its indices made places within each window."""
    maxima, indices = g.node("MaxPool", [xs[0]], 2, kernel_shape=[pool, pool], strides=[pool, pool])
    image = (shapes[0][2], shapes[0][3])
    return [maxima, _window_place(g, indices, image, (pool, pool))]


def _spread_back(
    g: OnnxGraph,
    gy: str,
    selection: str,
    out: tuple[int, int],
    image: tuple[int, int],
    pool: tuple[int, int],
) -> str:
    """Each window's gradient sent to the place its selection names, zeros elsewhere, laid out
    as the image (zeros after where the windows did not reach). Scattered into zeros, so each
    value keeps its bits (a -0.0 too, which a Where or a product would not keep)."""
    ph, pw = pool
    oh, ow = out
    height, width = image
    places = g.one("Concat", g.one("Shape", gy), g.ints([ph * pw]), axis=0)
    zeros = g.one("Expand", g.scalar(0.0), places)
    chosen = g.one("Unsqueeze", selection, g.ints([-1]))
    sent = g.one("Unsqueeze", gy, g.ints([-1]))
    spread = g.one("ScatterElements", zeros, chosen, sent, axis=-1)
    windows = g.one("Reshape", spread, g.ints([0, 0, oh, ow, ph, pw]))
    laid = g.one("Transpose", windows, perm=[0, 1, 2, 4, 3, 5])
    flat = g.one("Reshape", laid, g.ints([0, 0, oh * ph, ow * pw]))
    if (oh * ph, ow * pw) == (height, width):
        return flat
    return g.one("Pad", flat, g.ints([0, 0, 0, 0, 0, 0, height - oh * ph, width - ow * pw]))


def maxpool2d_back(g: OnnxGraph, xs: list[str], shapes: Shapes, image: Any, pool: int) -> list[str]:
    gy, selection = xs
    out = (shapes[0][2], shapes[0][3])
    return [_spread_back(g, gy, selection, out, tuple(image), (pool, pool))]


# --- fast paths --------------------------------------------------------------------------------


def conv2d_bias(
    g: OnnxGraph, xs: list[str], shapes: Shapes, stride: int, padding: Any
) -> list[str]:
    """The convolution with its bias as ONNX's third input (one more term of each total)."""
    return [g.one("Conv", *xs, strides=[stride, stride], pads=_pads(padding))]


def batch_matmul(
    g: OnnxGraph,
    xs: list[str],
    shapes: Shapes,
    transpose_a: bool = False,
    transpose_b: bool = False,
) -> list[str]:
    """A product of stacks: ONNX's MatMul over the leading axes, each factor's last two axes
    transposed first where asked."""
    a, b = xs
    if transpose_a:
        a = g.one("Transpose", a, perm=_last_two(len(shapes[0])))
    if transpose_b:
        b = g.one("Transpose", b, perm=_last_two(len(shapes[1])))
    return [g.one("MatMul", a, b)]


def _last_two(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


def add_rows(g: OnnxGraph, xs: list[str], shapes: Shapes, rows: int) -> list[str]:
    """Each value added into the row its index names (ScatterND's reduction "add", in the
    indices' order) of rows of zeros."""
    values, indices = xs
    kept = shapes[0][len(shapes[1]) :]
    zeros = g.one("Expand", g.scalar(0.0), g.ints([rows, *kept]))
    places = g.one("Unsqueeze", indices, g.ints([-1]))
    return [g.one("ScatterND", zeros, places, values, reduction="add")]


def maxpool2d_pair(g: OnnxGraph, xs: list[str], shapes: Shapes, pool: Any) -> list[str]:
    """Windows of pool[0] x pool[1]: ONNX's MaxPool, its indices made places within each window."""
    ph, pw = (int(p) for p in pool)
    maxima, indices = g.node("MaxPool", [xs[0]], 2, kernel_shape=[ph, pw], strides=[ph, pw])
    image = (shapes[0][2], shapes[0][3])
    return [maxima, _window_place(g, indices, image, (ph, pw))]


def maxpool2d_pair_back(
    g: OnnxGraph, xs: list[str], shapes: Shapes, image: Any, pool: Any
) -> list[str]:
    gy, selection = xs
    out = (shapes[0][2], shapes[0][3])
    ph, pw = (int(p) for p in pool)
    return [_spread_back(g, gy, selection, out, tuple(image), (ph, pw))]


FORMS: dict[str, Form] = {
    "matmul": matmul,
    "sum": sum_,
    "mean": mean,
    "conv2d": conv2d,
    "conv2d_weight_grad": conv2d_weight_grad,
    "conv2d_fold": conv2d_fold,
    "add": _binary("Add"),
    "sub": _binary("Sub"),
    "mul": _binary("Mul"),
    "div": _binary("Div"),
    "maximum": _binary("Max"),
    "greater": greater,
    "where": where,
    "neg": _unary("Neg"),
    "abs": _unary("Abs"),
    "exp": _unary("Exp"),
    "log": _unary("Log"),
    "log1p": log1p,
    "softplus": _unary("Softplus"),
    "sqrt": _unary("Sqrt"),
    "tanh": _unary("Tanh"),
    "sigmoid": sigmoid,
    "relu": _unary("Relu"),
    "copy": copy,
    "reshape": reshape,
    "transpose": transpose,
    "slice": slice_,
    "take_rows": take_rows,
    "concatenate": concatenate,
    "split": split,
    "pad": pad,
    "broadcast_to": broadcast_to,
    "max": max_,
    "one_hot": one_hot,
    "maxpool2d": maxpool2d,
    "maxpool2d_back": maxpool2d_back,
    "conv2d_bias": conv2d_bias,
    "batch_matmul": batch_matmul,
    "add_rows": add_rows,
    "erf": _unary("Erf"),
    "maxpool2d_pair": maxpool2d_pair,
    "maxpool2d_pair_back": maxpool2d_pair_back,
}
"""Each engine operation (a primitive, or a fast path an ONNX writer offers) -> its form."""

MIXED = frozenset({"add", "sub", "mul", "div", "maximum", "greater", "where"})
"""The operations that take float32 and int64 values together (a mask made of ids: greater(ids,
0.5)): ONNX's operators take one type, so their int64 inputs are cast to float32 first (exactly,
below 2**24)."""


def float_inputs(g: OnnxGraph, op: str, xs: list[str], dtypes: list[Any]) -> list[str]:
    """The inputs of `op` as its form takes them: int64 ones cast to float32 where `op` mixes."""
    if op not in MIXED or all(np.dtype(d) != np.int64 for d in dtypes):
        return xs
    return [
        g.one("Cast", x, to=_FLOAT) if np.dtype(d) == np.int64 else x for x, d in zip(xs, dtypes)
    ]


MOVES = frozenset(
    {
        "copy",
        "reshape",
        "transpose",
        "slice",
        "take_rows",
        "concatenate",
        "split",
        "pad",
        "broadcast_to",
    }
)
"""The operations whose outputs hold their (first) input's values, of its dtype (ids too)."""

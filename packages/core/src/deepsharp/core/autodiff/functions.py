"""The operations layers are written with: each applies its rule from the rulebook.

Layers call these (or the operators of `Tensor`, which call them); `deepsharp.core.autodiff.rulebook`
holds each operation's forward and the rule that sends its gradient back.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from contextvars import ContextVar

from deepsharp.core.autodiff.rules_images import same_padding
from deepsharp.core.autodiff.tensor import RULES, Rule, Tensor, Value, apply, unruled
from deepsharp.core.engine.fused import parts
from deepsharp.core.errors import ShapeError

__all__ = [
    "RULES",
    "Rule",
    "abs",
    "add",
    "affine",
    "apply",
    "assign",
    "binary_cross_entropy",
    "binary_cross_entropy_terms",
    "broadcast_to",
    "concatenate",
    "conv2d",
    "check_ids",
    "cross_entropy",
    "detached",
    "div",
    "erf",
    "exp",
    "gelu",
    "greater",
    "layer_norm",
    "log",
    "log1p",
    "log_softmax",
    "lstm",
    "matmul",
    "maximum",
    "maxpool2d",
    "mean",
    "mul",
    "neg",
    "one_hot",
    "pad",
    "parts",
    "relu",
    "reshape",
    "same_padding",
    "sigmoid",
    "slice",
    "softmax",
    "split",
    "sqrt",
    "sub",
    "sum",
    "take_rows",
    "tanh",
    "transpose",
]

# --- the functions layers call ---------------------------------------------------------------


def add(a: Value, b: Value) -> Tensor:
    return apply(RULES["add"], (a, b))


def sub(a: Value, b: Value) -> Tensor:
    return apply(RULES["sub"], (a, b))


def mul(a: Value, b: Value) -> Tensor:
    return apply(RULES["mul"], (a, b))


def div(a: Value, b: Value) -> Tensor:
    return apply(RULES["div"], (a, b))


def maximum(a: Value, b: Value) -> Tensor:
    return apply(RULES["maximum"], (a, b))


def neg(x: Tensor) -> Tensor:
    return apply(RULES["neg"], (x,))


def exp(x: Tensor) -> Tensor:
    return apply(RULES["exp"], (x,))


def log(x: Tensor) -> Tensor:
    return apply(RULES["log"], (x,))


def log1p(x: Tensor) -> Tensor:
    return apply(RULES["log1p"], (x,))


def sqrt(x: Tensor) -> Tensor:
    return apply(RULES["sqrt"], (x,))


def tanh(x: Tensor) -> Tensor:
    return apply(RULES["tanh"], (x,))


def sigmoid(x: Tensor) -> Tensor:
    return apply(RULES["sigmoid"], (x,))


def relu(x: Tensor) -> Tensor:
    return apply(RULES["relu"], (x,))


def abs(x: Tensor) -> Tensor:
    return apply(RULES["abs"], (x,))


def erf(x: Tensor) -> Tensor:
    """The error function, value by value (GELU's exact form: x·(1 + erf(x/√2))/2)."""
    return apply(RULES["erf"], (x,))


def gelu(x: Tensor) -> Tensor:
    """GELU's exact form, x·Φ(x) = x/2·(1 + erf(x/√2)), value by value (a fast path each way)."""
    return apply(RULES["gelu"], (x,))


def layer_norm(x: Tensor, scale: Tensor, shift: Tensor, epsilon: float = 1e-5) -> Tensor:
    """Each position's last axis made mean 0 and variance 1 (epsilon added to the variance),
    then times `scale` plus `shift` (each of the last axis's size): a fast path each way."""
    return apply(RULES["layer_norm"], (x, scale, shift), epsilon=float(epsilon))


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """op(a) @ op(b), op transposing the last two axes when asked: matrices (m, k) @ (k, n);
    stacks (..., m, k) @ (..., k, n) with the same leading axes (attention's (N, heads, L, d));
    or stacks times one matrix (k, n) shared by all (a dense layer over a sequence)."""
    rule = RULES["matmul" if a.ndim == 2 and b.ndim == 2 else "batch_matmul"]
    return apply(rule, (a, b), transpose_a=transpose_a, transpose_b=transpose_b)


def affine(x: Tensor, w: Tensor, b: Tensor, transpose_b: bool = False) -> Tensor:
    """x @ w + b for rows x (N, in), weights w (in, out) and bias b (out,); with `transpose_b`,
    x @ w.T + b for weights stored (out, in)."""
    if transpose_b:
        return apply(RULES["affine"], (x, w, b), transpose_b=True)
    return apply(RULES["affine"], (x, w, b))


def binary_cross_entropy(logits: Tensor, targets: Value) -> Tensor:
    """The mean binary cross entropy of logits against targets of the same shape."""
    return apply(RULES["binary_cross_entropy"], (logits, targets))


def cross_entropy(logits: Tensor, targets: Value) -> Tensor:
    """The mean over rows of -sum(targets * log_softmax(logits)), a target of 0 adding 0."""
    return apply(RULES["cross_entropy"], (logits, targets))


def _axes(x: Tensor, axes: int | Sequence[int] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(x.ndim))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(sorted(axis % x.ndim for axis in axes))


def sum(x: Tensor, axes: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    return apply(RULES["sum"], (x,), axes=_axes(x, axes), keepdims=keepdims)


def mean(x: Tensor, axes: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    return apply(RULES["mean"], (x,), axes=_axes(x, axes), keepdims=keepdims)


def log_softmax(x: Tensor) -> Tensor:
    return apply(RULES["log_softmax"], (x,))


def softmax(x: Tensor) -> Tensor:
    """Each row's values as probabilities over its last axis."""
    return apply(RULES["softmax"], (x,))


def binary_cross_entropy_terms(logits: Tensor, targets: Value) -> Tensor:
    return apply(RULES["binary_cross_entropy_terms"], (logits, targets))


def conv2d(
    x: Tensor,
    w: Tensor,
    stride: int = 1,
    padding: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0)),
    bias: Tensor | None = None,
) -> Tensor:
    """Images x (N, C, H, W) through filters w (F, C, kh, kw), plus each filter's bias (F,)."""
    inputs = (x, w) if bias is None else (x, w, bias)
    return apply(RULES["conv2d"], inputs, stride=stride, padding=padding)


def maxpool2d(x: Tensor, pool: int | tuple[int, int] = 2) -> Tensor:
    """The maximum of each window of images x (N, C, H, W): pool x pool, or (height, width)."""
    height, width = (pool, pool) if isinstance(pool, int) else (int(pool[0]), int(pool[1]))
    if height == width:
        return apply(RULES["maxpool2d"], (x,), pool=height)
    return apply(RULES["maxpool2d_pair"], (x,), pool=(height, width))


def take_rows(table: Tensor, ids: Tensor) -> Tensor:
    """The rows of `table` (V, ...) that int64 `ids` of any shape name: (*ids.shape, ...)."""
    check_ids(ids, "take_rows")
    return apply(RULES["take_rows"], (table, ids))


def lstm(
    x: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias: Tensor,
    sequences: bool = False,
    mask: Tensor | None = None,
) -> Tensor:
    """An LSTM over a whole sequence from zero states, one node: `x` (N, L, D), `weight_ih`
    (4·U, D), `weight_hh` (4·U, U), `bias` (4·U,) (both of PyTorch's biases added), the gates
    in PyTorch's order i, f, g, o -> every state (N, L, U) with `sequences`, else the last
    (N, U). A padding `mask` (N, L), 0 at padding: the state and the cell carried on over it."""
    inputs = (x, weight_ih, weight_hh, bias) + (() if mask is None else (mask,))
    return apply(RULES["lstm"], inputs, sequences=bool(sequences))


def reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return apply(RULES["reshape"], (x,), shape=tuple(shape))


def transpose(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    return apply(RULES["transpose"], (x,), axes=tuple(axes))


def slice(x: Tensor, axis: int, start: int, stop: int) -> Tensor:
    return apply(RULES["slice"], (x,), axis=axis % x.ndim, start=start, stop=stop)


def split(x: Tensor, sizes: Sequence[int], axis: int = 0) -> list[Tensor]:
    """Consecutive parts of x along `axis`, of the given sizes."""
    axis %= x.ndim
    if builtins.sum(sizes) != x.shape[axis]:
        raise ShapeError(
            f"split: sizes {list(sizes)} do not add up to {x.shape[axis]} (shape {x.shape})"
        )
    parts, start = [], 0
    for size in sizes:
        parts.append(slice(x, axis, start, start + size))
        start += size
    return parts


def pad(x: Tensor, widths: Sequence[tuple[int, int]]) -> Tensor:
    return apply(RULES["pad"], (x,), widths=tuple((int(a), int(b)) for a, b in widths))


def concatenate(xs: Sequence[Tensor], axis: int = 0) -> Tensor:
    return apply(RULES["concatenate"], tuple(xs), axis=axis % xs[0].ndim)


def broadcast_to(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    return apply(RULES["broadcast_to"], (x,), shape=tuple(shape))


# Operations without a rule: their outputs carry no gradient (comparisons, indices).


def greater(a: Value, b: Value) -> Tensor:
    """1.0 where a > b, else 0.0 (float32): a step, whose gradient is 0."""
    return apply(RULES["greater"], (a, b))


def one_hot(indices: Tensor, classes: int) -> Tensor:
    """float32 rows of `classes` values, 1 at each int64 index (float values are refused)."""
    check_ids(indices, "one_hot")
    unruled()
    handle = indices.engine.one_hot(indices.handle, classes)
    return Tensor(handle, indices.engine.shape(handle), indices.engine)


def check_ids(indices: Tensor, where: str) -> None:
    """Refuse (ShapeError naming `where`) a tensor of float values where int64 ids or indices
    belong: a float is not a place."""
    if not isinstance(indices, Tensor) or indices.dtype != "int64":
        raise ShapeError(
            f"{where} takes int64 indices (put an integer array: Tensor.put(engine, "
            f"ids.astype('int64'))), not {indices!r}"
        )


def detached(x: Tensor) -> Tensor:
    """The same values with no way back: nothing sent to x's gradient through what is made
    from it (a running statistic computed from a batch's)."""
    held = HELD_DETACHED.get()
    if held is not None:  # the layer harness's nudging: a constant, as the way back takes it
        x = held(x)
    return Tensor(x.handle, x.shape, x.engine, None, x.dtype)


HELD_DETACHED: ContextVar[Callable[[Tensor], Tensor] | None] = ContextVar(
    "held_detached", default=None
)
"""Where set, what `detached` gives in place of its value: the layer harness records a pass's
detached values and hands them back in the passes it nudges (`testing._Held`), so that the
nudging measures the derivative the way back takes, a detached value held (trial EX4: a layer
detaching a value in training was said to have a wrong way back)."""


def assign(target: Tensor, value: Tensor) -> None:
    """In place: target's values become value's (same shape), recorded by no rule — how a
    training pass updates a buffer. Never a slot: the optimizer alone changes those."""
    if target.shape != value.shape:
        raise ShapeError(
            f"assign: a target of shape {target.shape} and a value of shape {value.shape}"
        )
    unruled()
    target.engine.assign(target.handle, value.handle)

"""The contract's reference (`deepsharp.contracts.reference` names it for the suite): every
primitive operation in NumPy float64, written in the plainest way.

No engine under test is the reference, nor anything built on one: each operation here is a
definition (a product as `np.einsum`, a convolution as a loop over the kernel's places, a
max-pool as a loop over each window's places), evaluated in float64 from the values it is
given. Handles are float64 (or int64) NumPy arrays, and every operation returns a new one, so
no result shares memory with an input.

Two variants make the totals bound: `AbsoluteTotals` takes every total over absolute values
(Σ|terms|), `TermCounts` counts the terms of each total (n).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Counters, EngineIdentity

__all__ = ["AbsoluteTotals", "Float64Engine", "TermCounts"]

Array = NDArray[Any]
Padding = tuple[int, int]


def _operand(value: Any) -> Any:
    """A handle as it is; a Python (or NumPy) number as a float64 constant."""
    return value if isinstance(value, np.ndarray) else np.float64(value)


class Float64Engine:
    """Every primitive in float64 from the same inputs: the reference each engine is held to.

    The rulebook runs on it for the nudging check, and a Titanic step for the training check.
    It offers one fast path, `erf`, as erf itself (the core's reference in primitives is an
    approximation within 1.5e-7 whose slope strays further than nudging allows); every other
    fused operation (`deepsharp.core.engine.fused`) runs on it as its reference in these
    primitives.
    """

    name = "float64 reference"

    def __init__(self) -> None:
        self.counters = Counters()

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, f"numpy {np.__version__}", "cpu", "strict")

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: Any) -> Array:
        self.counters.transfers_in += 1
        source = np.asarray(array)
        return np.array(source, np.int64 if source.dtype.kind in "iub" else np.float64)

    def get(self, handle: Array) -> Array:
        self.counters.transfers_out += 1
        return np.array(handle)

    def zeros(self, shape: tuple[int, ...]) -> Array:
        return np.zeros(shape, np.float64)

    def shape(self, handle: Array) -> tuple[int, ...]:
        return tuple(handle.shape)

    # --- totals ----------------------------------------------------------------------------
    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a = a.T if transpose_a else a
        b = b.T if transpose_b else b
        product: Array = np.einsum("ik,kj->ij", a, b)
        return product

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.array(np.sum(x, axis=tuple(axes), keepdims=keepdims))

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        count = math.prod(x.shape[axis] for axis in axes)
        mean: Array = self.sum(x, axes, keepdims) / count
        return mean

    def conv2d(
        self,
        x: Array,
        w: Array,
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        """out[n, f, i, j] = Σ_c,p,q x[n, c, i·stride + p, j·stride + q] · w[f, c, p, q] over
        the padded images."""
        padded = _pad_images(x, padding)
        _, _, kh, kw = w.shape
        oh, ow = _out_size(padded.shape[2], kh, stride), _out_size(padded.shape[3], kw, stride)
        out = np.zeros((x.shape[0], w.shape[0], oh, ow))
        for p in range(kh):
            for q in range(kw):
                place = padded[:, :, p : p + stride * oh : stride, q : q + stride * ow : stride]
                out += np.einsum("nchw,fc->nfhw", place, w[:, :, p, q])
        return out

    def conv2d_weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        """gw[f, c, p, q] = Σ_n,i,j x[n, c, i·stride + p, j·stride + q] · gy[n, f, i, j]."""
        padded = _pad_images(x, padding)
        _, _, oh, ow = gy.shape
        grad = np.zeros((gy.shape[1], x.shape[1], *kernel))
        for p in range(kernel[0]):
            for q in range(kernel[1]):
                place = padded[:, :, p : p + stride * oh : stride, q : q + stride * ow : stride]
                grad[:, :, p, q] = np.einsum("nchw,nfhw->fc", place, gy)
        return grad

    def conv2d_fold(
        self,
        gy: Array,
        w: Array,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        """gx[n, c, i·stride + p, j·stride + q] += Σ_f gy[n, f, i, j] · w[f, c, p, q], over the
        padded images, the padding then cut away."""
        (top, bottom), (left, right) = padding
        count, _, oh, ow = gy.shape
        _, channels, kh, kw = w.shape
        folded = np.zeros((count, channels, image[0] + top + bottom, image[1] + left + right))
        for p in range(kh):
            for q in range(kw):
                place = folded[:, :, p : p + stride * oh : stride, q : q + stride * ow : stride]
                place += np.einsum("nfhw,fc->nchw", gy, w[:, :, p, q])
        return np.array(folded[:, :, top : top + image[0], left : left + image[1]])

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Array:
        return np.array(np.add(_operand(a), _operand(b)))

    def sub(self, a: Any, b: Any) -> Array:
        return np.array(np.subtract(_operand(a), _operand(b)))

    def mul(self, a: Any, b: Any) -> Array:
        return np.array(np.multiply(_operand(a), _operand(b)))

    def div(self, a: Any, b: Any) -> Array:
        return np.array(np.divide(_operand(a), _operand(b)))

    def maximum(self, a: Any, b: Any) -> Array:
        return np.array(np.maximum(_operand(a), _operand(b)))

    def greater(self, a: Any, b: Any) -> Array:
        return np.array(np.greater(_operand(a), _operand(b)), np.float64)

    def where(self, condition: Array, a: Any, b: Any) -> Array:
        return np.array(np.where(condition != 0, _operand(a), _operand(b)), np.float64)

    def neg(self, x: Array) -> Array:
        return -x

    def abs(self, x: Array) -> Array:
        return np.abs(x)

    def exp(self, x: Array) -> Array:
        return np.exp(x)

    def log(self, x: Array) -> Array:
        return np.log(x)

    def log1p(self, x: Array) -> Array:
        return np.log1p(x)

    def softplus(self, x: Array) -> Array:
        """log(1 + e^x) = max(x, 0) + log1p(e^-|x|), which neither overflows nor loses the tail."""
        return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))

    def sqrt(self, x: Array) -> Array:
        return np.sqrt(x)

    def tanh(self, x: Array) -> Array:
        return np.tanh(x)

    def sigmoid(self, x: Array) -> Array:
        """1 / (1 + e^-x), written as e^x / (1 + e^x) below 0 so that neither side overflows."""
        tail = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + tail), tail / (1.0 + tail))

    def relu(self, x: Array) -> Array:
        return np.maximum(x, 0.0)

    def erf(self, x: Array) -> Array:
        """The error function, value by value: the standard library's."""
        return np.asarray(np.vectorize(math.erf, otypes=[np.float64])(x), np.float64)

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Array) -> Array:
        return np.array(x)

    def assign(self, target: Array, source: Array) -> None:
        target[...] = source

    def reshape(self, x: Array, shape: tuple[int, ...]) -> Array:
        return np.array(x.reshape(shape))

    def transpose(self, x: Array, axes: tuple[int, ...]) -> Array:
        return np.array(x.transpose(axes))

    def slice(self, x: Array, axis: int, start: int, stop: int) -> Array:
        return np.array(np.take(x, range(start, stop), axis=axis))

    def take_rows(self, x: Array, rows: Array) -> Array:
        return np.array(x[rows])

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        return np.concatenate(list(xs), axis=axis)

    def split(self, x: Array, sizes: Sequence[int], axis: int) -> list[Array]:
        starts = [0, *itertools.accumulate(sizes)]
        return [self.slice(x, axis, a, b) for a, b in itertools.pairwise(starts)]

    def pad(self, x: Array, widths: Sequence[Padding]) -> Array:
        return np.pad(x, [tuple(w) for w in widths])

    def broadcast_to(self, x: Array, shape: tuple[int, ...]) -> Array:
        return np.array(np.broadcast_to(x, shape))

    def max(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.array(np.max(x, axis=tuple(axes), keepdims=keepdims))

    def one_hot(self, indices: Array, classes: int) -> Array:
        """(*indices.shape, classes): 1.0 at each index's class, indices of any shape."""
        out = np.zeros((indices.size, classes))
        out[np.arange(indices.size), indices.reshape(-1)] = 1.0
        return out.reshape(*indices.shape, classes)

    def maxpool2d(self, x: Array, pool: int) -> tuple[Array, Array]:
        """Each window's maximum and the place of its first maximum, counted row by row: a
        place replaces the best so far only when strictly larger."""
        oh, ow = x.shape[2] // pool, x.shape[3] // pool
        best = x[:, :, 0 : pool * oh : pool, 0 : pool * ow : pool].copy()
        selection = np.zeros(best.shape, np.int64)
        for p in range(pool):
            for q in range(pool):
                place = x[:, :, p : p + pool * oh : pool, q : q + pool * ow : pool]
                larger = place > best
                best = np.where(larger, place, best)
                selection = np.where(larger, p * pool + q, selection)
        return best, selection

    def maxpool2d_back(
        self, gy: Array, selection: Array, image: tuple[int, int], pool: int
    ) -> Array:
        count, channels, oh, ow = gy.shape
        out = np.zeros((count, channels, *image))
        for p in range(pool):
            for q in range(pool):
                place = out[:, :, p : p + pool * oh : pool, q : q + pool * ow : pool]
                place[...] = np.where(selection == p * pool + q, gy, place)  # -0.0 arrives
        return out


def _out_size(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


def _pad_images(x: Array, padding: tuple[Padding, Padding]) -> Array:
    return np.pad(x, [(0, 0), (0, 0), tuple(padding[0]), tuple(padding[1])])


class AbsoluteTotals(Float64Engine):
    """The reference with every total taken over absolute values: Σ|terms|, what the totals
    bound (and a rule's or a step's S) is made of. Every other operation is the reference's."""

    name = "float64 reference over absolute values"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return super().matmul(np.abs(a), np.abs(b), transpose_a, transpose_b)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return super().sum(np.abs(x), axes, keepdims)

    def conv2d(
        self,
        x: Array,
        w: Array,
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        return super().conv2d(np.abs(x), np.abs(w), stride, padding)

    def conv2d_weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        return super().conv2d_weight_grad(np.abs(x), np.abs(gy), kernel, stride, padding)

    def conv2d_fold(
        self,
        gy: Array,
        w: Array,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        return super().conv2d_fold(np.abs(gy), np.abs(w), image, stride, padding)


class TermCounts(Float64Engine):
    """The reference over ones, a mean taken as a sum: how many terms each element's total
    adds (n), what the bounds of float32 and mixed totals are made of."""

    name = "float64 reference counting terms"

    def put(self, array: Any) -> Array:
        held = super().put(array)
        return np.ones_like(held) if held.dtype.kind == "f" else held

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return self.sum(x, axes, keepdims)

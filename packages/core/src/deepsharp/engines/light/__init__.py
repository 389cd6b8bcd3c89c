"""The light engine: NumPy float32 arrays in the process's memory.

By default every total — products, convolutions, sums and means — is added in float64 and
rounded to float32 once (`totals="float32"` gives NumPy's own float32 kernels instead: see
`LightEngine`). That keeps each element within half a unit of float32 of the exact total (the
contract asks 3 units of 2**-24 times the sum of the terms' sizes), and it makes a row's
answer independent of the rows beside it: float32 BLAS kernels treat the rows of a block
differently, so a row's bits would depend on its place in a chunk. Handles are the NumPy
arrays themselves, so an operation costs what NumPy costs and nothing more.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from deepsharp.core.engine import (
    Counters,
    EngineIdentity,
    images_a_block,
    product_blocks,
    use_totals,
)
from deepsharp.core.engine.memory import keep_freed_memory

__all__ = ["LightEngine", "ReferenceEngine", "from_spec"]

F32 = np.float32
Array = Any  # a handle: the NumPy array itself
Padding = tuple[int, int]

_BLOCK = 1 << 18
"""How many float64 values a large total's temporaries may hold (2 MiB). A large product or
convolution is worked a block of rows (or images) at a time, so the float64 copies stay in
the processor's caches instead of crossing memory whole; each element is still one float64
total rounded once."""


class LightEngine:
    """The engine that ships with the core: needs nothing but NumPy, trains and serves.

    `LightEngine(totals="float32")` (spec `light:float32-totals`) adds products, sums and
    convolutions in float32, as NumPy's own kernels do: about twice as fast on convolutions,
    held by the contract to (n + 1)u·Σ|terms| for a total of n terms instead of 3u·Σ|terms|,
    and a row's bits may then depend on the rows served beside it. The precision is part of
    the engine's identity, so a checkpoint goes on only with the same totals.
    """

    name = "light"
    dtype: type[np.floating[Any]] = np.float32

    def __init__(self, totals: str = "float64") -> None:
        self.precision = use_totals(self, "light", totals)
        self.counters = Counters()
        self.version = np.__version__
        self.device = "cpu"
        self.totals = totals
        # Flat arrays the core laid out as parts (slots, optimizer memory): id of the first
        # part -> (the flat array, the parts), all held weakly.
        self._groups: dict[int, tuple[Any, list[Any]]] = {}
        keep_freed_memory()  # a step's freed arrays stay in the heap for the next

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, f"numpy {self.version}", self.device, self.precision)

    def __repr__(self) -> str:
        precision = "" if self.precision is None else f", {self.precision}"
        return f"LightEngine(numpy {self.version}{precision})"

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: Array) -> Array:
        self.counters.transfers_in += 1
        source = np.asarray(array)
        kind = np.int64 if source.dtype.kind in "iub" else self.dtype
        return np.array(source, dtype=kind, order="C", copy=True)

    def get(self, handle: Array) -> Array:
        self.counters.transfers_out += 1
        return np.array(handle, order="C", copy=True)

    def zeros(self, shape: tuple[int, ...]) -> Array:
        return np.zeros(shape, self.dtype)

    def shape(self, handle: Array) -> tuple[int, ...]:
        return tuple(handle.shape)

    # --- totals ----------------------------------------------------------------------------
    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a = a.T if transpose_a else a
        b = b.T if transpose_b else b
        (rows, inner), columns = a.shape, b.shape[1]
        # A large product: the small side widened once, the large one a block at a time.
        how, step = product_blocks(rows, inner, columns, transpose_a, _BLOCK)
        if how == "turned":
            return np.ascontiguousarray(self.matmul(b, a, True, True).T)
        if how == "rows":
            out = np.empty((rows, columns), self.dtype)
            wide = b.astype(np.float64)
            for i in range(0, rows, step):
                out[i : i + step] = np.matmul(a[i : i + step], wide, dtype=np.float64)
            return out
        if how == "columns":
            out = np.empty((rows, columns), self.dtype)
            wide = a.astype(np.float64)
            for j in range(0, columns, step):
                out[:, j : j + step] = np.matmul(wide, b[:, j : j + step], dtype=np.float64)
            return out
        return np.matmul(a, b, dtype=np.float64).astype(self.dtype)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        total = np.add.reduce(x, axis=axes, dtype=np.float64, keepdims=keepdims)  # type: ignore[call-overload]
        return total.astype(self.dtype)

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        count = 1
        for axis in axes:
            count *= x.shape[axis]
        total = np.add.reduce(x, axis=axes, dtype=np.float64, keepdims=keepdims)  # type: ignore[call-overload]
        return np.asarray(total / count).astype(self.dtype)

    # Convolutions work image by image in NCHW order: windows as columns (N, C*kh*kw, P),
    # one batched product with the filters, no transposed copies of the large tensors.
    def conv2d(
        self,
        x: Array,
        w: Array,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: Array | None = None,
    ) -> Array:
        return self._conv2d(x, w, stride, padding, bias, np.float64)

    def _conv2d(
        self,
        x: Array,
        w: Array,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: Array | None,
        totals: type[np.floating[Any]],
    ) -> Array:
        """`conv2d` with its totals (the bias one more term of each) added in `totals`."""
        cols, out_h, out_w = _columns(x, w.shape[2], w.shape[3], stride, padding)
        count, depth, places = cols.shape
        filters = w.shape[0]
        out = np.empty((count, filters, places), self.dtype)
        flat = w.reshape(filters, depth)
        wide_bias = None if bias is None else np.asarray(bias, totals).reshape(filters, 1)
        step = images_a_block(filters, depth, places, _BLOCK)
        for i in range(0, count, step):  # (n, F, P) in `totals`, a few images at a time
            part = out[i : i + step]
            if totals is self.dtype:  # float32 totals: formed where they are kept, no copy
                np.matmul(flat, cols[i : i + step], out=part)
                if wide_bias is not None:
                    part += wide_bias
                continue
            block = np.matmul(flat, cols[i : i + step], dtype=totals)
            if wide_bias is not None:  # one more term of each total, before it is rounded
                block += wide_bias
            part[...] = block
        return out.reshape(count, filters, out_h, out_w)

    def conv2d_weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Any:
        return self._weight_grad(x, gy, kernel, stride, padding, bias, np.float64)

    def _weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool,
        totals: type[np.floating[Any]],
    ) -> Any:
        """`conv2d_weight_grad` with its totals added in `totals`."""
        cols, _, _ = _columns(x, kernel[0], kernel[1], stride, padding)
        count, depth, places = cols.shape
        filters = gy.shape[1]
        grads = gy.reshape(count, filters, places)
        total = np.zeros((filters, depth), totals)
        biases = np.zeros(filters, totals)
        step = images_a_block(filters, depth, places, _BLOCK)
        for i in range(0, count, step):  # each image's share (F, C*kh*kw), added in `totals`
            block = grads[i : i + step]
            each = np.matmul(block, cols[i : i + step].transpose(0, 2, 1), dtype=totals)
            total += np.add.reduce(each, axis=0)
            if bias:
                biases += np.add.reduce(block, axis=(0, 2), dtype=totals)
        weights = total.astype(self.dtype).reshape(filters, x.shape[1], kernel[0], kernel[1])
        return (weights, biases.astype(self.dtype)) if bias else weights

    def conv2d_fold(
        self,
        gy: Array,
        w: Array,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        return self._fold(gy, w, image, stride, padding, np.float64)

    def _fold(
        self,
        gy: Array,
        w: Array,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        totals: type[np.floating[Any]],
    ) -> Array:
        """`conv2d_fold` with its products and their overlaps added in `totals`."""
        count, filters, out_h, out_w = gy.shape
        _, channels, kh, kw = w.shape
        (top, bottom), (left, right) = padding
        parts = np.matmul(
            w.reshape(filters, -1).T, gy.reshape(count, filters, -1), dtype=totals
        )  # (N, C*kh*kw, P)
        parts = parts.reshape(count, channels, kh, kw, out_h, out_w)
        height, width = image[0] + top + bottom, image[1] + left + right
        folded = np.zeros((count, channels, height, width), totals)
        for i in range(kh):
            for j in range(kw):
                folded[:, :, i : i + stride * out_h : stride, j : j + stride * out_w : stride] += (
                    parts[:, :, i, j]
                )
        return np.ascontiguousarray(
            folded[:, :, top : top + image[0], left : left + image[1]], dtype=self.dtype
        )

    # --- totals in NumPy's float32 kernels (totals="float32") ----------------------------
    def _matmul_float32(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        b = b.T if transpose_b else b
        if transpose_a and a.shape[1] > b.shape[1]:
            # A tall product from a stored transposed (a dense layer's weight gradient):
            # (b.T @ a).T reads a by its rows, as sgemm prefers.
            return np.ascontiguousarray(np.matmul(b.T, a).T)
        return np.matmul(a.T if transpose_a else a, b)

    def _sum_float32(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.add.reduce(x, axis=axes, keepdims=keepdims) if axes else x  # type: ignore[call-overload]

    def _mean_float32(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.mean(x, axis=axes, keepdims=keepdims) if axes else x

    def _conv2d_float32(
        self,
        x: Array,
        w: Array,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: Array | None = None,
    ) -> Array:
        return self._conv2d(x, w, stride, padding, bias, np.float32)

    def _conv2d_weight_grad_float32(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Any:
        return self._weight_grad(x, gy, kernel, stride, padding, bias, np.float32)

    def _conv2d_fold_float32(
        self,
        gy: Array,
        w: Array,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Array:
        return self._fold(gy, w, image, stride, padding, np.float32)

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Array:
        return np.add(a, b)

    def sub(self, a: Any, b: Any) -> Array:
        return np.subtract(a, b)

    def mul(self, a: Any, b: Any) -> Array:
        return np.multiply(a, b)

    def div(self, a: Any, b: Any) -> Array:
        return np.divide(a, b)

    def maximum(self, a: Any, b: Any) -> Array:
        return np.maximum(a, b, dtype=self.dtype)

    def greater(self, a: Any, b: Any) -> Array:
        return np.greater(a, b).astype(self.dtype)

    def relu_back(self, x: Array, grad: Array) -> Array:
        # A product with the mask: measured 3-4x faster than np.where on 5.5 M values.
        return np.multiply(grad, np.greater(x, 0), dtype=self.dtype)

    def where(self, condition: Array, a: Any, b: Any) -> Array:
        return np.where(condition != 0, a, b).astype(self.dtype, copy=False)

    def neg(self, x: Array) -> Array:
        return np.negative(x)

    def abs(self, x: Array) -> Array:
        return np.abs(x)

    def exp(self, x: Array) -> Array:
        return np.exp(x)

    def log(self, x: Array) -> Array:
        return np.log(x)

    def log1p(self, x: Array) -> Array:
        return np.log1p(x)

    def softplus(self, x: Array) -> Array:
        return np.logaddexp(self.dtype(0.0), x)

    def sqrt(self, x: Array) -> Array:
        return np.sqrt(x)

    def tanh(self, x: Array) -> Array:
        return np.tanh(x)

    def sigmoid(self, x: Array) -> Array:
        # 0.5 * (1 + tanh(x / 2)): no overflow for any float32, three passes.
        out = np.tanh(np.multiply(x, self.dtype(0.5)))
        out += self.dtype(1.0)
        out *= self.dtype(0.5)
        return out

    def relu(self, x: Array) -> Array:
        return np.maximum(x, self.dtype(0.0))

    def sgd_update(
        self,
        slots: Sequence[Array],
        grads: Sequence[Array],
        velocities: Sequence[Array],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        rate, keep = self.dtype(learning_rate), self.dtype(momentum)
        flat = self._flat(slots, velocities) if len(slots) > 1 else None
        if flat is not None:  # one pass over every slot at once
            slots, velocities = flat
            grads = [np.concatenate([grad.ravel() for grad in grads])]
        for slot, grad, velocity in zip(slots, grads, velocities):
            velocity *= keep
            velocity -= rate * grad
            slot += velocity

    def adam_update(
        self,
        slots: Sequence[Array],
        grads: Sequence[Array],
        firsts: Sequence[Array],
        seconds: Sequence[Array],
        *,
        step_size: float,
        beta1: float,
        beta2: float,
        epsilon: float,
    ) -> None:
        rate1, rate2 = self.dtype(1.0 - beta1), self.dtype(1.0 - beta2)
        size, tiny = self.dtype(step_size), self.dtype(epsilon)
        flat = self._flat(slots, firsts, seconds) if len(slots) > 1 else None
        if flat is not None:  # one pass over every slot at once
            slots, firsts, seconds = flat
            grads = [np.concatenate([grad.ravel() for grad in grads])]
        for slot, grad, first, second in zip(slots, grads, firsts, seconds):
            scratch = np.subtract(grad, first, out=np.empty_like(first))
            scratch *= rate1
            first += scratch
            np.multiply(grad, grad, out=scratch)
            scratch -= second
            scratch *= rate2
            second += scratch
            np.sqrt(second, out=scratch)
            scratch += tiny
            np.divide(first, scratch, out=scratch)
            scratch *= size
            slot -= scratch

    def parts(self, flat: Array, shapes: Sequence[tuple[int, ...]]) -> list[Array]:
        """Views of consecutive parts of a flat array; remembered, so that an optimizer's update
        over exactly these parts is one pass over the flat array."""
        views, start = [], 0
        for shape in shapes:
            count = math.prod(shape)
            views.append(flat[start : start + count].reshape(shape))
            start += count
        if views:
            key = id(views[0])
            self._groups[key] = (weakref.ref(flat), [weakref.ref(view) for view in views])
            weakref.finalize(views[0], self._groups.pop, key, None)
        return views

    def _flat(self, *groups: Sequence[Array]) -> tuple[list[Array], ...] | None:
        """The flat arrays behind these groups, when each group is exactly one array's parts."""
        flats = []
        for group in groups:
            known = self._groups.get(id(group[0])) if group else None
            if known is None or len(known[1]) != len(group):
                return None
            for held, array in zip(known[1], group):
                if held() is not array:
                    return None
            flats.append([known[0]()])
        return tuple(flats)

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Array) -> Array:
        return x.copy()

    def assign(self, target: Array, source: Array) -> None:
        np.copyto(target, source)

    def reshape(self, x: Array, shape: tuple[int, ...]) -> Array:
        return x.reshape(shape)

    def transpose(self, x: Array, axes: tuple[int, ...]) -> Array:
        return x.transpose(axes)

    def slice(self, x: Array, axis: int, start: int, stop: int) -> Array:
        index: list[Any] = [slice(None)] * x.ndim
        index[axis] = slice(start, stop)
        return x[tuple(index)]

    def take_rows(self, x: Array, rows: Array) -> Array:
        return np.take(x, rows, axis=0)

    def concatenate(self, xs: Sequence[Array], axis: int) -> Array:
        return np.concatenate(list(xs), axis=axis)

    def split(self, x: Array, sizes: Sequence[int], axis: int) -> list[Array]:
        bounds = np.cumsum(sizes)[:-1]
        return list(np.split(x, bounds, axis=axis))

    def pad(self, x: Array, widths: Sequence[Padding]) -> Array:
        return np.pad(x, [tuple(w) for w in widths])

    def broadcast_to(self, x: Array, shape: tuple[int, ...]) -> Array:
        return np.broadcast_to(x, shape)

    def max(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.max(x, axis=axes, keepdims=keepdims)

    def one_hot(self, indices: Array, classes: int) -> Array:
        return np.eye(classes, dtype=self.dtype)[indices]

    def maxpool2d(self, x: Array, pool: int) -> tuple[Array, Array]:
        windows = _windows(x, pool)
        selection = windows.argmax(axis=-1)
        return np.take_along_axis(windows, selection[..., None], -1)[..., 0], selection

    def maxpool2d_back(
        self, gy: Array, selection: Array, image: tuple[int, int], pool: int
    ) -> Array:
        count, channels, out_h, out_w = gy.shape
        spread = np.zeros((count, channels, out_h, out_w, pool * pool), self.dtype)
        np.put_along_axis(spread, selection[..., None], gy[..., None], -1)
        grid = spread.reshape(count, channels, out_h, out_w, pool, pool)
        grid = grid.transpose(0, 1, 2, 4, 3, 5).reshape(count, channels, out_h * pool, out_w * pool)
        height, width = image
        if (height, width) == grid.shape[2:]:
            return grid
        return np.pad(grid, [(0, 0), (0, 0), (0, height - out_h * pool), (0, width - out_w * pool)])


def _columns(
    x: Array, kh: int, kw: int, stride: int, padding: tuple[Padding, Padding]
) -> tuple[Array, int, int]:
    """Every window of each image as one column (N, C*kh*kw, oh*ow): a convolution becomes
    one product an image."""
    if any(any(side) for side in padding):
        x = np.pad(x, [(0, 0), (0, 0), padding[0], padding[1]])
    windows = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    count, channels, out_h, out_w = windows.shape[:4]
    cols = windows.transpose(0, 1, 4, 5, 2, 3).reshape(count, channels * kh * kw, out_h * out_w)
    return cols, out_h, out_w


def _windows(x: Array, pool: int) -> Array:
    """(N, C, H//pool, W//pool, pool*pool): each pooling window's places in reading order."""
    count, channels, height, width = x.shape
    out_h, out_w = height // pool, width // pool
    cropped = x[:, :, : out_h * pool, : out_w * pool]
    grid = cropped.reshape(count, channels, out_h, pool, out_w, pool).transpose(0, 1, 2, 4, 3, 5)
    return grid.reshape(count, channels, out_h, out_w, pool * pool)


class ReferenceEngine(LightEngine):
    """The same operations in float64: the reference the contracts and the rule checks use."""

    name = "reference"
    dtype = np.float64

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, f"numpy {self.version}", self.device)


def from_spec(option: str = "") -> LightEngine:
    """The entry point's factory: `light`, or `light:float32-totals` for float32 totals."""
    text = option.strip().lower()
    if text == "":
        return LightEngine()
    if text == "float32-totals":
        return LightEngine(totals="float32")
    from deepsharp.core.errors import EngineUnavailableError

    raise EngineUnavailableError(
        f"the light engine takes no option but 'float32-totals', not {option!r}: "
        "use 'light' or 'light:float32-totals'"
    )

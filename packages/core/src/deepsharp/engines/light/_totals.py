"""How the light engine adds its totals: one strategy for each precision it offers.

- `StrictTotals` (precision `strict`, the default): every total added in float64 and rounded
  once to float32. Each element is within half a unit of float32 of the exact total, and a
  row's answer does not depend on the rows beside it (float32 BLAS kernels treat the rows of a
  block differently, so a row's bits would depend on its place in a chunk).
- `Float32Totals` (precision `float32`): NumPy's own float32 kernels (sgemm, pairwise sums),
  as a hand-written NumPy network adds them: about twice as fast on convolutions.
- `MixedTotals` (precisions `mixed_bfloat16`, `mixed_float16`): products and convolutions take
  their inputs rounded to the half format (`deepsharp.core.engine.half`) and add them in
  NumPy's float32 kernels, as a kernel that reads the half format and adds in float32 does
  (each product of two half values is exact in float32); their outputs stay float32. Sums and
  means are float32 totals. The semantics of the mixed precisions, exactly, without a card.

Convolutions work image by image in NCHW order: windows as columns (N, C*kh*kw, P), one batched
product with the filters, no transposed copies of the large tensors. A product of stacks is
NumPy's matmul over them (a few stacks at a time where the totals are widened); rows added into
places (`add_rows`) are each row's values gathered by a stable sort of the indices and added by
`np.add.reduceat`, in the order they come: no one-hot, and the same bits every time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any, TypeVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from deepsharp.core.engine import (
    FLOAT32,
    MIXED_BFLOAT16,
    MIXED_FLOAT16,
    STRICT,
    Precision,
    Totals,
    images_a_block,
    product_blocks,
)
from deepsharp.core.engine.half import HALF_FORMATS
from deepsharp.engines.light._threads import (
    PARALLEL,
    PRODUCT,
    SHARED,
    Pool,
    one_blas_thread,
    pool,
)

__all__ = ["OFFERED", "Float32Totals", "MixedTotals", "StrictTotals"]

Array = Any  # the engine's handles are the NumPy arrays themselves
Padding = tuple[int, int]
Paddings = tuple[Padding, Padding]
T = TypeVar("T")

PIECES = 2
"""How many pieces a large product is worked in, at most (`_Totals._product`), the same at
every count of threads (so a product's bits do not depend on it): each piece is one more call
into BLAS, which packs its operands again. In the benchmarks' 256-image convolution step, on
two threads, its dense layer's three products took 2.3, 2.6 and 2.2 ms in two pieces, 2.9, 3.4
and 3.0 ms in four; more pieces would serve more cores only on a larger machine."""
DOT = 10_000
"""The most terms a total may add for a BLAS call to be left unheld below `SHARED`: OpenBLAS
0.3.31 shares a float64 dot product (1 x N by N x 1, wherever one arises: a Dense(1)'s weight
gradient over one feature, one filter over one place) of more terms among its threads, and adds
its parts in another order. So an operation whose totals add more terms than this is held to
one thread whatever its multiply-adds."""
PIECE = 64
"""The fewest rows (or columns) a piece of a product has: OpenBLAS 0.3.31 takes 32 rows by
another path, a third slower on that product."""


def _shared(work: int, terms: int) -> bool:
    """Whether OpenBLAS might share an operation of `work` multiply-adds, whose totals add
    `terms` terms, among its threads: from `_threads.SHARED` multiply-adds, or over `DOT`
    terms (a long dot product)."""
    return work >= SHARED or terms > DOT


BLOCK = 1 << 18
"""How many float64 values a large total's temporaries may hold (2 MiB). A large product or
convolution is worked a block of rows (or images) at a time, so the float64 copies stay in
the processor's caches instead of crossing memory whole; each element is still one float64
total rounded once."""


class _Totals:
    """What every strategy shares: the convolutions and the rows added into places, their
    totals added in `wide` and kept in `dtype`."""

    wide: type[np.floating[Any]] = np.float64

    def __init__(
        self, dtype: type[np.floating[Any]] = np.float32, threads: Pool | None = None
    ) -> None:
        self.dtype = dtype
        self.pool = threads if threads is not None else pool(1)
        """The threads a convolution's blocks of images are shared among (`_threads`)."""

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        raise NotImplementedError

    def conv2d(self, x: Array, w: Array, stride: int, padding: Paddings) -> Array:
        return self._conv2d(x, w, None, stride, padding)

    def conv2d_bias(self, x: Array, w: Array, bias: Array, stride: int, padding: Paddings) -> Array:
        return self._conv2d(x, w, bias, stride, padding)

    def _conv2d(
        self, x: Array, w: Array, bias: Array | None, stride: int, padding: Paddings
    ) -> Array:
        cols = Columns(x, w.shape[2], w.shape[3], stride, padding)
        count, depth, places, out_h, out_w = cols.shape
        filters = w.shape[0]
        out = np.empty((count, filters, places), self.dtype)
        flat = w.reshape(filters, depth)
        # Each filter's bias spread over its places: NumPy adds a whole plane twice as fast as
        # it adds one value along a row (measured on blocks of 9 images, 32 filters, 676 places).
        wide_bias = None
        if bias is not None:
            wide_bias = np.repeat(np.asarray(bias, self.wide).reshape(filters, 1), places, axis=1)
        step = images_a_block(filters, depth, places, BLOCK)

        def images(i: int) -> None:  # (n, F, P) a few images at a time
            part = out[i : i + step]
            if self.wide is self.dtype:  # totals in the kept type: formed where they are kept
                np.matmul(flat, cols.block(i, step), out=part)
                if wide_bias is not None:
                    part += wide_bias
                return
            block = np.matmul(flat, cols.block(i, step), dtype=self.wide)
            if wide_bias is not None:  # one more term of each total, before it is rounded
                block += wide_bias
            part[...] = block

        with self._held(count * filters * depth * places, depth):
            self._blocks(images, count, step, filters * places)
        return out.reshape(count, filters, out_h, out_w)

    @staticmethod
    def _held(work: int, terms: int) -> AbstractContextManager[None]:
        """NumPy's BLAS held to one thread for an operation of `work` multiply-adds, whose
        totals add `terms` terms, where OpenBLAS might share it among its own threads."""
        return one_blas_thread() if _shared(work, terms) else nullcontext()

    def _blocks(self, work: Callable[[int], Any], count: int, step: int, each: int) -> list[Any]:
        """`work(i)` for each block of images i .. i + step - 1, in order; the blocks shared
        among the threads where the pass is large (`each`: values an image), each block the
        same calls whichever thread makes them. Their results, in the blocks' order."""
        starts = list(range(0, count, step))
        if count * each < 2 * PARALLEL:
            return [work(i) for i in starts]
        return self._runs(work, starts)

    def _runs(self, work: Callable[[T], Any], items: list[T]) -> list[Any]:
        """`work(item)` for each item, the items shared among the threads in runs of
        consecutive ones, a run a thread (the pool takes one item a thread at once: more would
        queue behind one worker while this thread waited). Their results, in the items' order."""
        if len(items) < 2 or self.pool.threads == 1:
            return [work(item) for item in items]
        runs = self.pool.spans(len(items), PARALLEL)
        done = self.pool.map(lambda run: [work(item) for item in items[run]], runs)
        return [result for results in done for result in results]

    def _product(self, a: Array, b: Array) -> Array:
        """a (m, k) @ b (k, n) as they stand, in NumPy's kernels. A large product is worked in
        pieces of its rows (of its columns, where it has more of them) that its shape alone
        sets, shared among the threads, NumPy's BLAS held to one thread meanwhile
        (`_threads.one_blas_thread`): each element is made by the same call at any count of
        threads."""
        (rows, inner), columns = a.shape, b.shape[1]
        work = rows * inner * columns
        if not _shared(work, inner):  # BLAS keeps it on this thread
            return np.matmul(a, b)
        length = max(rows, columns)
        count = min(PIECES, length // PIECE, work // PRODUCT)
        if count < 2:  # whole, on this thread
            with one_blas_thread():
                return np.matmul(a, b)
        pieces = [slice(length * i // count, length * (i + 1) // count) for i in range(count)]
        out = np.empty((rows, columns), np.result_type(a, b))
        if rows >= columns:

            def piece(part: slice) -> None:
                np.matmul(a[part], b, out=out[part])

        else:

            def piece(part: slice) -> None:
                np.matmul(a, b[:, part], out=out[:, part])

        with one_blas_thread():
            self._runs(piece, pieces)
        return out

    def conv2d_weight_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        return self._weight_grad(x, gy, kernel, stride, padding, False)[0]

    def conv2d_weight_bias_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> tuple[Array, Array]:
        weights, biases = self._weight_grad(x, gy, kernel, stride, padding, True)
        return weights, biases

    def _weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: Paddings,
        bias: bool,
    ) -> tuple[Array, Array | None]:
        cols = Columns(x, kernel[0], kernel[1], stride, padding)
        count, depth, places, _, _ = cols.shape
        filters = gy.shape[1]
        grads = gy.reshape(count, filters, places)
        total = np.zeros((filters, depth), self.wide)
        biases = np.zeros(filters, self.wide)
        step = images_a_block(filters, depth, places, BLOCK)
        # A filter's places summed as one product with ones (BLAS's gemv): NumPy's sums along
        # a short last axis took three times as long (blocks of 9 images, 32 filters, 676 places).
        ones = np.ones(places, self.wide)

        def images(i: int) -> tuple[Array, Array | None]:  # a block's share (F, C*kh*kw)
            block = grads[i : i + step]
            each = np.matmul(block, cols.block(i, step).transpose(0, 2, 1), dtype=self.wide)
            share = np.add.reduce(each, axis=0)
            if not bias:
                return share, None
            return share, np.add.reduce(np.matmul(block, ones, dtype=self.wide), axis=0)

        # Each block's share made on any thread; the shares added in the blocks' order.
        with self._held(count * filters * depth * places, places):
            shares = self._blocks(images, count, step, filters * places)
        for share, bias_share in shares:
            total += share
            if bias:
                biases += bias_share
        weights = total.astype(self.dtype).reshape(filters, x.shape[1], kernel[0], kernel[1])
        return weights, biases.astype(self.dtype) if bias else None

    def conv2d_fold(
        self, gy: Array, w: Array, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        count, filters, out_h, out_w = gy.shape
        _, channels, kh, kw = w.shape
        (top, bottom), (left, right) = padding
        with self._held(count * filters * channels * kh * kw * out_h * out_w, filters):
            parts = np.matmul(
                w.reshape(filters, -1).T, gy.reshape(count, filters, -1), dtype=self.wide
            )  # (N, C*kh*kw, P)
        parts = parts.reshape(count, channels, kh, kw, out_h, out_w)
        height, width = image[0] + top + bottom, image[1] + left + right
        folded = np.zeros((count, channels, height, width), self.wide)

        def images(span: slice) -> None:  # each image folded on its own: any thread
            for i in range(kh):
                for j in range(kw):
                    folded[
                        span, :, i : i + stride * out_h : stride, j : j + stride * out_w : stride
                    ] += parts[span, :, i, j]

        self.pool.map(images, self.pool.spans(count, channels * height * width))
        return np.ascontiguousarray(
            folded[:, :, top : top + image[0], left : left + image[1]], dtype=self.dtype
        )

    def add_rows(self, values: Array, indices: Array, rows: int) -> Array:
        ids = indices.reshape(-1)
        row_shape = values.shape[indices.ndim :]
        flat = values.reshape(ids.size, math.prod(row_shape))
        out = np.zeros((rows, flat.shape[1]), self.dtype)
        if ids.size:
            order = np.argsort(ids, kind="stable")  # each row's values in the order they come
            named = ids[order]
            starts = np.flatnonzero(np.concatenate([[True], named[1:] != named[:-1]]))
            totals = np.add.reduceat(flat[order], starts, axis=0, dtype=self.wide)
            out[named[starts]] = totals  # each total rounded once, where `wide` is wider
        return out.reshape(rows, *row_shape)

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        if a.ndim == 2:
            return self.matmul(a, b, transpose_a, transpose_b)
        a = np.swapaxes(a, -1, -2) if transpose_a else a
        b = np.swapaxes(b, -1, -2) if transpose_b else b
        return self._stacks(a, b)

    def _stacks(self, a: Array, b: Array) -> Array:
        """a (..., m, k) @ b (..., k, n), as they stand."""
        with self._held(math.prod(a.shape) * b.shape[-1], a.shape[-1]):
            return np.matmul(a, b)


class StrictTotals(_Totals):
    """Every total in float64, rounded once (precision strict)."""

    precision = STRICT

    def _stacks(self, a: Array, b: Array) -> Array:
        lead, (rows, inner), columns = a.shape[:-2], a.shape[-2:], b.shape[-1]
        stacks = math.prod(lead)
        a, b = a.reshape(stacks, rows, inner), b.reshape(stacks, inner, columns)
        out = np.empty((stacks, rows, columns), self.dtype)
        each = (rows + columns) * inner + rows * columns
        if each > BLOCK:  # a large stack: the product's own blocks
            for i in range(stacks):
                out[i] = self.matmul(a[i], b[i])
        else:  # a few stacks at a time, widened together
            step = max(1, BLOCK // max(1, each))
            with self._held(stacks * rows * inner * columns, inner):
                for i in range(0, stacks, step):
                    out[i : i + step] = np.matmul(
                        a[i : i + step], b[i : i + step], dtype=np.float64
                    )
        return out.reshape(*lead, rows, columns)

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a = a.T if transpose_a else a
        b = b.T if transpose_b else b
        (rows, inner), cols = a.shape, b.shape[1]
        # A large product: the small side widened once, the large one a block at a time.
        how, step = product_blocks(rows, inner, cols, transpose_a, BLOCK)
        if how == "turned":
            return np.ascontiguousarray(self.matmul(b, a, True, True).T)
        if how == "rows":
            out = np.empty((rows, cols), self.dtype)
            wide = b.astype(np.float64)

            def rows_from(i: int) -> None:
                out[i : i + step] = np.matmul(a[i : i + step], wide, dtype=np.float64)

            self._blocks_of(rows_from, rows, step, rows * inner * cols, inner)
            return out
        if how == "columns":
            out = np.empty((rows, cols), self.dtype)
            wide = a.astype(np.float64)

            def columns_from(j: int) -> None:
                out[:, j : j + step] = np.matmul(wide, b[:, j : j + step], dtype=np.float64)

            self._blocks_of(columns_from, cols, step, rows * inner * cols, inner)
            return out
        if not _shared(rows * inner * cols, inner):
            return np.matmul(a, b, dtype=np.float64).astype(self.dtype)  # no hold: microseconds
        with one_blas_thread():
            return np.matmul(a, b, dtype=np.float64).astype(self.dtype)

    def _blocks_of(
        self, work: Callable[[int], None], length: int, step: int, size: int, terms: int
    ) -> None:
        """A wide product's blocks (`work(i)`, i = 0, step, ...), NumPy's BLAS held to one
        thread where the product (`size` multiply-adds, `terms` a total) might be shared; those
        of a product as large as `_product` splits shared among the threads, a run a thread;
        each block the same call."""
        starts = list(range(0, length, step))
        with self._held(size, terms):
            if size < PRODUCT:
                for start in starts:
                    work(start)
            else:
                self._runs(work, starts)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        total = np.add.reduce(x, axis=axes, dtype=np.float64, keepdims=keepdims)  # type: ignore[call-overload]
        return total.astype(self.dtype)

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        count = 1
        for axis in axes:
            count *= x.shape[axis]
        total = np.add.reduce(x, axis=axes, dtype=np.float64, keepdims=keepdims)  # type: ignore[call-overload]
        return np.asarray(total / count).astype(self.dtype)


class Float32Totals(_Totals):
    """Totals in NumPy's own float32 kernels (precision float32)."""

    precision = FLOAT32
    wide = np.float32

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        # Straight to sgemm with its transpose flags. A dense layer's weight gradient was formed
        # wide, (b.T @ a).T, and copied into place: OpenBLAS 0.3.31 takes the tall product as it
        # stands faster or as fast (5,408 x 32 by 32 x 10: 29 us to 48 us; 21,632 x 256 by
        # 256 x 10: 1.53 ms to 2.02 ms; 512 x 2,048 by 2,048 x 128: 1.10 ms to 1.16 ms; two
        # threads, NumPy 2.4.6).
        return self._product(a.T if transpose_a else a, b.T if transpose_b else b)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.add.reduce(x, axis=axes, keepdims=keepdims) if axes else x  # type: ignore[call-overload]

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.mean(x, axis=axes, keepdims=keepdims) if axes else x


class MixedTotals(Float32Totals):
    """Products and convolutions on inputs rounded to the half format, added in float32
    (precisions mixed_bfloat16 and mixed_float16); sums and means as `Float32Totals`.

    A value beyond float16's range rounds to infinity, as the format says, and what a product
    makes of it (inf, or NaN from inf - inf) is what the format's arithmetic gives: the loss
    scale looks for it. A float16 product's output is kept in float32, but one that float16
    would round to infinity (`Precision.half_beyond`: 65,520 and more) is infinite, as a
    card's float16 output is — so the loss scale skips the steps a card's would (trial M: a
    product of 180,000 was finite here, and a run that skipped 12 steps under PyTorch's float16
    autocast skipped none). NumPy is not asked to warn about it."""

    def __init__(
        self, dtype: type[np.floating[Any]], threads: Pool | None = None, *, precision: Precision
    ) -> None:
        super().__init__(dtype, threads)
        self.precision = precision
        assert precision.half is not None, f"{precision} has no half format"
        self.half = HALF_FORMATS[precision.half]
        self.beyond = precision.half_beyond

    def _out(self, out: Array) -> Array:
        """A product's output as the half format bounds it: from `beyond` on, an infinity of
        its sign (in place)."""
        if self.beyond < math.inf:
            past = np.abs(out) >= self.beyond  # NaN compares False
            if past.any():
                out[past] = np.copysign(np.inf, out[past])
        return out

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        with np.errstate(over="ignore", invalid="ignore"):
            return self._out(super().matmul(self.half(a), self.half(b), transpose_a, transpose_b))

    def matmul_bias(self, x: Array, w: Array, bias: Array, transpose_b: bool) -> Array:
        """x @ w + bias, the bias added before the output is bounded, as a card's float16
        product takes its bias into its total (65,520 less 100 is finite there: a review)."""
        with np.errstate(over="ignore", invalid="ignore"):
            out = super().matmul(self.half(x), self.half(w), False, transpose_b)
            return self._out(np.add(out, bias, out=out))

    def conv2d(self, x: Array, w: Array, stride: int, padding: Paddings) -> Array:
        with np.errstate(over="ignore", invalid="ignore"):
            return self._out(super().conv2d(self.half(x), self.half(w), stride, padding))

    def conv2d_bias(self, x: Array, w: Array, bias: Array, stride: int, padding: Paddings) -> Array:
        # The bias is a term of each total, not a factor of a product: it stays float32.
        with np.errstate(over="ignore", invalid="ignore"):
            made = super().conv2d_bias(self.half(x), self.half(w), bias, stride, padding)
            return self._out(made)

    def conv2d_weight_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        with np.errstate(over="ignore", invalid="ignore"):
            made = super().conv2d_weight_grad(self.half(x), self.half(gy), kernel, stride, padding)
            return self._out(made)

    def conv2d_weight_bias_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> tuple[Array, Array]:
        weights = self.conv2d_weight_grad(x, gy, kernel, stride, padding)
        return weights, self.sum(gy, (0, 2, 3))  # the biases' gradient: a float32 sum of gy

    def conv2d_fold(
        self, gy: Array, w: Array, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        with np.errstate(over="ignore", invalid="ignore"):
            made = super().conv2d_fold(self.half(gy), self.half(w), image, stride, padding)
            return self._out(made)

    def _stacks(self, a: Array, b: Array) -> Array:
        with np.errstate(over="ignore", invalid="ignore"):
            return self._out(super()._stacks(self.half(a), self.half(b)))

    # add_rows: Float32Totals's, on the values as they are (a total, not a product's inputs)


OFFERED: dict[str, Callable[..., Totals]] = {
    "strict": StrictTotals,
    "float32": Float32Totals,
    "mixed_bfloat16": partial(MixedTotals, precision=MIXED_BFLOAT16),
    "mixed_float16": partial(MixedTotals, precision=MIXED_FLOAT16),
}
"""The light engine's precisions, its default first: name -> strategy (made with the dtype)."""


class Columns:
    """Every window of each image as one column (N, C*kh*kw, oh*ow): a convolution becomes
    one product an image. The columns are copied out a block of images at a time, on the
    thread that works on the block, while they are in its caches: all at once they were one
    more pass over memory, on one thread."""

    def __init__(self, x: Array, kh: int, kw: int, stride: int, padding: Paddings) -> None:
        if any(any(side) for side in padding):
            x = np.pad(x, [(0, 0), (0, 0), padding[0], padding[1]])
        windows = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
        count, channels, out_h, out_w = windows.shape[:4]
        self.windows = windows.transpose(0, 1, 4, 5, 2, 3)  # a view: (N, C, kh, kw, oh, ow)
        self.shape = (count, channels * kh * kw, out_h * out_w, out_h, out_w)

    def block(self, start: int, count: int) -> Array:
        """Images start .. start + count - 1's columns, (n, C*kh*kw, oh*ow)."""
        part = self.windows[start : start + count]
        return part.reshape(part.shape[0], self.shape[1], self.shape[2])

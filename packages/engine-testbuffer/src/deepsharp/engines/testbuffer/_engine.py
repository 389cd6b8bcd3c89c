"""The test engine: every value in memory from the C library's allocator, totals in float32.

Each handle (`TestBuffer`) owns one buffer from `malloc`, freed when the handle is collected.
Operations compute with NumPy views over those buffers and write their results into newly
allocated buffers, so no tensor's values live on Python's heap. Its counters add live buffers,
live bytes and the most buffers alive at once to the transfers every engine counts, so memory
and transfer promises are tested without a card.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from deepsharp.core.engine import Counters, EngineIdentity
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.engines.testbuffer._memory import (
    BufferCounters,
    TestBuffer,
    allocate,
    memmove,
    view,
)

__all__ = ["BufferCounters", "TestBuffer", "TestBufferEngine", "__version__", "from_spec"]

try:
    __version__ = _distribution_version("deepsharp-engine-testbuffer")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.1.0"

F32 = np.float32
I64 = np.int64
Array = NDArray[Any]
Padding = tuple[int, int]


class TestBufferEngine:
    """Every tensor in malloc'd memory, every total added in single precision, all counted."""

    __test__ = False  # not a pytest test class, despite the name

    name = "testbuffer"

    def __init__(self) -> None:
        self._counters = BufferCounters()
        self.version = __version__
        self.device = "cpu"

    @property
    def counters(self) -> BufferCounters:
        """Transfers, and the buffers alive now (count and bytes) and the most alive at once."""
        return self._counters

    @counters.setter
    def counters(self, value: Counters) -> None:
        # Settable because the Engine protocol declares a plain attribute. Buffers alive now
        # keep counting against the counters they were made under.
        if not isinstance(value, BufferCounters):
            raise TypeError(
                f"the test engine counts with BufferCounters, not {type(value).__name__}"
            )
        self._counters = value

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, self.version, self.device)

    def __repr__(self) -> str:
        return f"TestBufferEngine({self.version})"

    # --- helpers ---------------------------------------------------------------------------
    def _new(self, shape: tuple[int, ...], dtype: Any = F32) -> tuple[TestBuffer, Array]:
        handle = allocate(tuple(shape), dtype, self.counters)
        return handle, view(handle)

    def _operand(self, value: Any) -> Any:
        """A handle's view, or a Python number as a float32 constant."""
        if isinstance(value, TestBuffer):
            return view(value)
        if isinstance(value, (bool, int, float, np.integer, np.floating)):
            return F32(value)
        raise TypeError(
            f"the test engine takes its own handles or Python numbers, not {type(value).__name__}"
        )

    def _binary(self, function: np.ufunc, a: Any, b: Any) -> TestBuffer:
        left, right = self._operand(a), self._operand(b)
        handle, out = self._new(np.broadcast_shapes(np.shape(left), np.shape(right)))
        function(left, right, out=out, dtype=F32)
        return handle

    def _unary(self, function: np.ufunc, x: TestBuffer) -> TestBuffer:
        source = view(x)
        handle, out = self._new(source.shape)
        function(source, out=out, dtype=F32)
        return handle

    def _from(self, values: Array) -> TestBuffer:
        """A new buffer holding `values` (a computed array, a view, or a temporary)."""
        handle, out = self._new(values.shape, I64 if values.dtype.kind in "iub" else F32)
        np.copyto(out, values, casting="unsafe")
        return handle

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: Array) -> TestBuffer:
        source = np.asarray(array)
        kind = I64 if source.dtype.kind in "iub" else F32
        handle, out = self._new(source.shape, kind)
        np.copyto(out, source, casting="unsafe")
        self.counters.transfers_in += 1
        return handle

    def get(self, handle: TestBuffer) -> Array:
        result = np.array(view(handle), order="C", copy=True)
        self.counters.transfers_out += 1
        return result

    def zeros(self, shape: tuple[int, ...]) -> TestBuffer:
        handle, out = self._new(tuple(shape))
        out.fill(0)
        return handle

    def shape(self, handle: TestBuffer) -> tuple[int, ...]:
        if not isinstance(handle, TestBuffer):
            raise TypeError(f"the test engine works on its handles, not {type(handle).__name__}")
        return handle.shape

    # --- totals ----------------------------------------------------------------------------
    def matmul(
        self,
        a: TestBuffer,
        b: TestBuffer,
        transpose_a: bool = False,
        transpose_b: bool = False,
    ) -> TestBuffer:
        left, right = view(a), view(b)
        if left.ndim != 2 or right.ndim != 2:
            raise ValueError(f"matmul takes 2-D tensors, not {left.shape} and {right.shape}")
        left = left.T if transpose_a else left
        right = right.T if transpose_b else right
        if left.shape[1] != right.shape[0]:
            raise ValueError(f"matmul: inner sizes differ ({left.shape} @ {right.shape})")
        handle, out = self._new((left.shape[0], right.shape[1]))
        _products(left, right.T, out)
        return handle

    def _total(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool) -> tuple[Array, int]:
        """The float32 total over `axes` (compensated: the axes are brought last and contiguous)."""
        source = view(x)
        axes = tuple(sorted({axis % source.ndim for axis in axes})) if source.ndim else ()
        kept = tuple(axis for axis in range(source.ndim) if axis not in axes)
        count = 1
        for axis in axes:
            count *= source.shape[axis]
        shape = tuple(source.shape[axis] for axis in kept)
        rows = source.transpose(kept + axes).reshape(int(np.prod(shape, dtype=I64)), count)
        total = _row_totals(rows).reshape(shape)
        if keepdims:
            total = total.reshape(
                tuple(1 if axis in axes else n for axis, n in enumerate(source.shape))
            )
        return np.asarray(total, dtype=F32), count

    def sum(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool = False) -> TestBuffer:
        total, _ = self._total(x, axes, keepdims)
        return self._from(total)

    def mean(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool = False) -> TestBuffer:
        total, count = self._total(x, axes, keepdims)
        handle, out = self._new(total.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(total, F32(count), out=out)
        return handle

    def conv2d(
        self,
        x: TestBuffer,
        w: TestBuffer,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: TestBuffer | None = None,
    ) -> TestBuffer:
        images, filters = view(x), view(w)
        count = images.shape[0]
        number, _, kh, kw = filters.shape
        rows, out_h, out_w = _windows_as_rows(images, kh, kw, stride, padding)  # (N*oh*ow, CKK)
        flat = filters.reshape(number, -1)
        if bias is not None:  # the bias is one more term of each total: times a window's 1
            rows = np.concatenate([rows, np.ones((rows.shape[0], 1), F32)], axis=1)
            flat = np.concatenate([flat, view(bias).reshape(number, 1)], axis=1)
        handle, out = self._new((count, number, out_h, out_w))
        places = np.empty((number, rows.shape[0]), F32)
        _products(flat, rows, places)
        np.copyto(out, places.reshape(number, count, out_h, out_w).transpose(1, 0, 2, 3))
        return handle

    def conv2d_weight_grad(
        self,
        x: TestBuffer,
        gy: TestBuffer,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Any:
        if bias:
            weights = self.conv2d_weight_grad(x, gy, kernel, stride, padding)
            return weights, self.sum(gy, (0, 2, 3))
        images, grad = view(x), view(gy)
        channels = images.shape[1]
        filters = grad.shape[1]
        rows, _, _ = _windows_as_rows(images, kernel[0], kernel[1], stride, padding)
        # (F, N*oh*ow) against (C*kh*kw, N*oh*ow): every term of a place in one total.
        grad2 = grad.transpose(1, 0, 2, 3).reshape(filters, rows.shape[0])
        handle, out = self._new((filters, channels, kernel[0], kernel[1]))
        _products(grad2, rows.T, out.reshape(filters, -1))
        return handle

    def conv2d_fold(
        self,
        gy: TestBuffer,
        w: TestBuffer,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> TestBuffer:
        grad, filters = view(gy), view(w)
        count, number, out_h, out_w = grad.shape
        _, channels, kh, kw = filters.shape
        (top, bottom), (left, right) = padding
        height, width = image[0] + top + bottom, image[1] + left + right
        # spread[n, y, x, f, i, j]: the gradient that window (i, j) of filter f sends to place
        # (y, x), zero where none does; each place's fold is one total over (f, i, j).
        spread = np.zeros((count, height, width, number, kh, kw), F32)
        moved = grad.transpose(0, 2, 3, 1)
        for i in range(kh):
            for j in range(kw):
                spread[
                    :, i : i + stride * out_h : stride, j : j + stride * out_w : stride, :, i, j
                ] = moved
        places = spread[:, top : top + image[0], left : left + image[1]].reshape(
            count * image[0] * image[1], number * kh * kw
        )
        weights = filters.transpose(1, 0, 2, 3).reshape(channels, number * kh * kw)
        folded = np.empty((channels, places.shape[0]), F32)
        _products(weights, places, folded)
        return self._from(folded.reshape(channels, count, image[0], image[1]).transpose(1, 0, 2, 3))

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> TestBuffer:
        return self._binary(np.add, a, b)

    def sub(self, a: Any, b: Any) -> TestBuffer:
        return self._binary(np.subtract, a, b)

    def mul(self, a: Any, b: Any) -> TestBuffer:
        return self._binary(np.multiply, a, b)

    def div(self, a: Any, b: Any) -> TestBuffer:
        return self._binary(np.divide, a, b)

    def maximum(self, a: Any, b: Any) -> TestBuffer:
        return self._binary(np.maximum, a, b)

    def greater(self, a: Any, b: Any) -> TestBuffer:
        left, right = self._operand(a), self._operand(b)
        handle, out = self._new(np.broadcast_shapes(np.shape(left), np.shape(right)))
        np.greater(left, right, out=out)
        return handle

    def where(self, condition: TestBuffer, a: Any, b: Any) -> TestBuffer:
        chosen = view(condition) != 0
        left, right = self._operand(a), self._operand(b)
        shape = np.broadcast_shapes(chosen.shape, np.shape(left), np.shape(right))
        handle, out = self._new(shape)
        np.copyto(out, right, casting="unsafe")
        np.copyto(out, left, casting="unsafe", where=chosen)
        return handle

    def neg(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.negative, x)

    def abs(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.absolute, x)

    def exp(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.exp, x)

    def log(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.log, x)

    def log1p(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.log1p, x)

    def softplus(self, x: TestBuffer) -> TestBuffer:
        source = view(x)
        handle, out = self._new(source.shape)
        np.logaddexp(F32(0.0), source, out=out)
        return handle

    def sqrt(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.sqrt, x)

    def tanh(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.tanh, x)

    def sigmoid(self, x: TestBuffer) -> TestBuffer:
        # 0.5 * (1 + tanh(x / 2)): no overflow for any float32, as the light engine does it.
        source = view(x)
        handle, out = self._new(source.shape)
        np.multiply(source, F32(0.5), out=out, dtype=F32)
        np.tanh(out, out=out)
        out += F32(1.0)
        out *= F32(0.5)
        return handle

    def relu(self, x: TestBuffer) -> TestBuffer:
        source = view(x)
        handle, out = self._new(source.shape)
        np.maximum(source, F32(0.0), out=out, dtype=F32)
        return handle

    def relu_back(self, x: TestBuffer, grad: TestBuffer) -> TestBuffer:
        source, sent = view(x), view(grad)
        handle, out = self._new(np.broadcast_shapes(source.shape, sent.shape))
        np.multiply(sent, np.greater(source, F32(0.0)), out=out, dtype=F32)
        return handle

    def sgd_update(
        self,
        slots: Sequence[TestBuffer],
        grads: Sequence[TestBuffer],
        velocities: Sequence[TestBuffer],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        rate, keep = F32(learning_rate), F32(momentum)
        for slot, grad, velocity in zip(slots, grads, velocities, strict=True):
            s, g, v = view(slot), view(grad), view(velocity)
            v *= keep
            v -= rate * g
            s += v

    def adam_update(
        self,
        slots: Sequence[TestBuffer],
        grads: Sequence[TestBuffer],
        firsts: Sequence[TestBuffer],
        seconds: Sequence[TestBuffer],
        *,
        step_size: float,
        beta1: float,
        beta2: float,
        epsilon: float,
    ) -> None:
        rate1, rate2 = F32(1.0 - beta1), F32(1.0 - beta2)
        size, tiny = F32(step_size), F32(epsilon)
        for slot, grad, first, second in zip(slots, grads, firsts, seconds, strict=True):
            s, g, m, v = view(slot), view(grad), view(first), view(second)
            scratch = np.empty(g.shape, F32)
            np.subtract(g, m, out=scratch)
            scratch *= rate1
            m += scratch
            np.multiply(g, g, out=scratch)
            scratch -= v
            scratch *= rate2
            v += scratch
            np.sqrt(v, out=scratch)
            scratch += tiny
            np.divide(m, scratch, out=scratch)
            scratch *= size
            s -= scratch

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: TestBuffer) -> TestBuffer:
        handle = allocate(x.shape, x.dtype, self.counters)
        memmove(handle, x)
        return handle

    def assign(self, target: TestBuffer, source: TestBuffer) -> None:
        if target.shape != source.shape:
            raise ValueError(f"assign: shapes differ ({target.shape} <- {source.shape})")
        if target.dtype == source.dtype:
            memmove(target, source)
        else:
            np.copyto(view(target), view(source), casting="unsafe")

    def reshape(self, x: TestBuffer, shape: tuple[int, ...]) -> TestBuffer:
        handle = allocate(_resolve_shape(x.size, shape), x.dtype, self.counters)
        memmove(handle, x)
        return handle

    def transpose(self, x: TestBuffer, axes: tuple[int, ...]) -> TestBuffer:
        return self._from(view(x).transpose(axes))

    def slice(self, x: TestBuffer, axis: int, start: int, stop: int) -> TestBuffer:
        source = view(x)
        index: list[Any] = [slice(None)] * source.ndim
        index[axis] = slice(start, stop)
        return self._from(source[tuple(index)])

    def take_rows(self, x: TestBuffer, rows: TestBuffer) -> TestBuffer:
        source, chosen = view(x), view(rows)
        handle, out = self._new(chosen.shape + source.shape[1:], source.dtype)
        np.take(source, chosen, axis=0, out=out)
        return handle

    def concatenate(self, xs: Sequence[TestBuffer], axis: int) -> TestBuffer:
        parts = [view(x) for x in xs]
        if not parts:
            raise ValueError("concatenate needs at least one tensor")
        return self._from(np.concatenate(parts, axis=axis))

    def split(self, x: TestBuffer, sizes: Sequence[int], axis: int) -> list[TestBuffer]:
        source = view(x)
        bounds = np.cumsum(list(sizes))[:-1]
        return [self._from(part) for part in np.split(source, bounds, axis=axis)]

    def pad(self, x: TestBuffer, widths: Sequence[Padding]) -> TestBuffer:
        source = view(x)
        pairs = [(int(before), int(after)) for before, after in widths]
        if len(pairs) != source.ndim or any(b < 0 or a < 0 for b, a in pairs):
            raise ValueError(f"pad: one non-negative (before, after) pair per axis, not {widths}")
        shape = tuple(n + b + a for n, (b, a) in zip(source.shape, pairs, strict=True))
        handle, out = self._new(shape, source.dtype)
        out.fill(0)
        out[tuple(slice(b, b + n) for n, (b, _) in zip(source.shape, pairs, strict=True))] = source
        return handle

    def broadcast_to(self, x: TestBuffer, shape: tuple[int, ...]) -> TestBuffer:
        return self._from(np.broadcast_to(view(x), shape))

    def max(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool = False) -> TestBuffer:
        return self._from(np.asarray(np.max(view(x), axis=axes, keepdims=keepdims)))

    def one_hot(self, indices: TestBuffer, classes: int) -> TestBuffer:
        chosen = view(indices)
        handle, out = self._new((*chosen.shape, classes))
        out.fill(0)
        flat = out.reshape(chosen.size, classes)
        flat[np.arange(chosen.size), chosen.reshape(-1)] = F32(1.0)
        return handle

    def maxpool2d(self, x: TestBuffer, pool: int) -> tuple[TestBuffer, TestBuffer]:
        windows = _windows(view(x), pool)
        selection, chosen = self._new(windows.shape[:-1], I64)
        np.argmax(windows, axis=-1, out=chosen)
        maxima = self._from(np.take_along_axis(windows, chosen[..., None], -1)[..., 0])
        return maxima, selection

    def maxpool2d_back(
        self, gy: TestBuffer, selection: TestBuffer, image: tuple[int, int], pool: int
    ) -> TestBuffer:
        grad, chosen = view(gy), view(selection)
        count, channels, out_h, out_w = grad.shape
        spread = np.zeros((count, channels, out_h, out_w, pool * pool), F32)
        np.put_along_axis(spread, chosen[..., None], grad[..., None], -1)
        grid = spread.reshape(count, channels, out_h, out_w, pool, pool).transpose(0, 1, 2, 4, 3, 5)
        handle, out = self._new((count, channels, image[0], image[1]))
        out.fill(0)
        out[:, :, : out_h * pool, : out_w * pool] = grid.reshape(
            count, channels, out_h * pool, out_w * pool
        )
        return handle


def _resolve_shape(size: int, shape: Sequence[int]) -> tuple[int, ...]:
    """`shape` with its one -1 worked out; a ValueError when it cannot hold `size` values."""
    wanted = tuple(int(n) for n in shape)
    unknown = [i for i, n in enumerate(wanted) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in wanted):
        raise ValueError(f"cannot reshape {size} values into {wanted}")
    known = 1
    for n in wanted:
        if n != -1:
            known *= n
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape {size} values into {wanted}")
        wanted = (*wanted[: unknown[0]], size // known, *wanted[unknown[0] + 1 :])
    elif known != size:
        raise ValueError(f"cannot reshape {size} values into {wanted}")
    return wanted


_BLOCK = 1 << 22
"""The most float32 terms one block of a total holds (16 MB): temporaries stay near 64 MB."""


def _compensated(terms: Array) -> Array:
    """Each row's total, added pairwise in float32 with every addition's rounding carried.

    `terms` is (rows, width), width a power of two (zeros pad a row). Each level adds the second
    half onto the first; the exact rounding error of every addition (Knuth's TwoSum, itself
    float32 arithmetic) is kept, and the errors of a row, tiny beside its total, are added
    (pairwise, float32) and join the total at the end. So a total is off by about one rounding
    of its value, however long and of whatever signs, and every row's total depends on its own
    terms alone, in a fixed order.
    """
    rows, width = terms.shape
    if width == 1:
        single: Array = terms[:, 0].copy()
        return single
    errors = np.empty((rows, width - 1), F32)
    place = 0
    with np.errstate(invalid="ignore", over="ignore"):
        while width > 1:
            half = width // 2
            first, second = terms[:, :half], terms[:, half:width]
            total = first + second
            late = total - first
            early = total - late
            np.subtract(first, early, out=early)
            np.subtract(second, late, out=late)
            np.add(early, late, out=errors[:, place : place + half])
            place += half
            terms, width = total, half
        result: Array = terms[:, 0]
        carry = np.add.reduce(errors, axis=1, dtype=F32)
        # Infinities and NaNs make no rounding to carry: such a total stays as added.
        np.add(result, carry, out=result, where=np.isfinite(result))
    return result


def _width(count: int) -> int:
    """The power of two a total of `count` terms is padded to."""
    return 1 << max(count - 1, 0).bit_length()


def _row_totals(rows: Array) -> Array:
    """The float32 total of each row of `rows` (rows, count), compensated, in bounded blocks."""
    number, count = rows.shape
    totals = np.zeros(number, F32)
    if count == 0 or number == 0:
        return totals
    width = _width(count)
    step = max(1, _BLOCK // width)
    for start in range(0, number, step):
        block = rows[start : start + step]
        terms = np.zeros((block.shape[0], width), F32)
        terms[:, :count] = block
        totals[start : start + step] = _compensated(terms)
    return totals


def _products(left: Array, right_rows: Array, out: Array) -> None:
    """out[i, j] = the total of left[i, :] * right_rows[j, :], products and additions in float32.

    Each product is rounded once to float32; the products of a place are then added by
    `_compensated`, so a place's total depends on its own terms alone, never on its neighbours.
    """
    rows, count = left.shape
    columns = right_rows.shape[0]
    if out.size == 0:
        return
    if count == 0:
        out.fill(0)
        return
    a = np.ascontiguousarray(left, dtype=F32)
    b = np.ascontiguousarray(right_rows, dtype=F32)
    width = _width(count)
    places = max(1, _BLOCK // width)
    across = min(columns, places)
    down = max(1, places // across)
    for i in range(0, rows, down):
        part_a = a[i : i + down]
        for j in range(0, columns, across):
            part_b = b[j : j + across]
            terms = np.empty((part_a.shape[0], part_b.shape[0], width), F32)
            np.multiply(part_a[:, None, :], part_b[None, :, :], out=terms[:, :, :count])
            terms[:, :, count:] = 0
            totals = _compensated(terms.reshape(-1, width))
            out[i : i + down, j : j + across] = totals.reshape(part_a.shape[0], part_b.shape[0])


def _windows_as_rows(
    x: Array, kh: int, kw: int, stride: int, padding: tuple[Padding, Padding]
) -> tuple[Array, int, int]:
    """Every window of x as one row (N*oh*ow, C*kh*kw): a convolution is a product."""
    if any(any(side) for side in padding):
        x = np.pad(x, [(0, 0), (0, 0), padding[0], padding[1]])
    windows = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    count, channels, out_h, out_w = windows.shape[:4]
    rows = windows.transpose(0, 2, 3, 1, 4, 5).reshape(count * out_h * out_w, channels * kh * kw)
    return np.ascontiguousarray(rows, dtype=F32), out_h, out_w


def _windows(x: Array, pool: int) -> Array:
    """(N, C, H//pool, W//pool, pool*pool): each pooling window's places in reading order."""
    count, channels, height, width = x.shape
    out_h, out_w = height // pool, width // pool
    cropped: Array = x[:, :, : out_h * pool, : out_w * pool]
    grid = cropped.reshape(count, channels, out_h, pool, out_w, pool).transpose(0, 1, 2, 4, 3, 5)
    windows: Array = grid.reshape(count, channels, out_h, out_w, pool * pool)
    return windows


def from_spec(option: str = "") -> TestBufferEngine:
    """The entry point's factory: `testbuffer` takes no option."""
    if option:
        raise EngineUnavailableError(
            f"the testbuffer engine takes no option, not {option!r}: use 'testbuffer'"
        )
    return TestBufferEngine()

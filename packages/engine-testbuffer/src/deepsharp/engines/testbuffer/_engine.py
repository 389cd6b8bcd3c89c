"""`TestBufferEngine`: every tensor in malloc'd memory, every total in float32, all counted.

Operations compute with NumPy views over the handles' buffers and write their results into newly
allocated buffers: NumPy temporaries live only during an operation, and no tensor's values live
on Python's heap. Totals are `_totals.dot` (float32 arithmetic, within 3u·Σ|terms|); a
convolution is a product of its filters with the image's windows; a product of stacks is one
`dot` a stack; rows added into places (`add_rows`) gather each row's values in the order they
come and add them by `_totals.totals`, whose tree depends on how many values the row gets
alone. Its erf is Numerical Recipes' Chebyshev fit of erfc (fractional error below 1.2e-7), in
float32 (`_erf`). The arithmetic of images' windows — convolutions, their way back, pooling — is
in `_images`, over NumPy arrays; this module allocates the buffers they write into.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Counters, EngineIdentity, int64_put
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.version import __version__ as _core_version
from deepsharp.engines.testbuffer._erf import erf_into
from deepsharp.engines.testbuffer._images import (
    convolve,
    filters_grad,
    fold,
    out_size,
    pool_windows,
    unpool,
)
from deepsharp.engines.testbuffer._memory import (
    BufferCounters,
    TestBuffer,
    allocate,
    memmove,
    view,
)
from deepsharp.engines.testbuffer._totals import add_rows_into, dot, totals

__all__ = ["PRECISION", "TestBufferEngine", "__version__", "from_spec"]

try:
    __version__ = _distribution_version("deepsharp-engine-testbuffer")
except PackageNotFoundError:  # a source tree not installed: the version is the core's (one source)
    __version__ = _core_version

F32 = np.float32
I64 = np.int64
Array = NDArray[Any]
Padding = tuple[int, int]

PRECISION = "strict"
"""How its totals are added: float32 arithmetic, each total within 3u·Σ|terms| at any size."""


class TestBufferEngine:
    """Every tensor in malloc'd memory, every total added in single precision, all counted.

    Its precision is `strict`: every total within 3u·Σ|terms| of the exact one, at any size, a
    place's answer the same bits whatever is worked out beside it.
    """

    __test__ = False  # not a pytest test class, despite the name

    name = "testbuffer"

    def __init__(self) -> None:
        self._counters = BufferCounters()
        self.version = __version__
        self.device = "cpu"
        self.precision = PRECISION

    def __copy__(self) -> TestBufferEngine:
        """A copy counts its own transfers and buffers from none (they were the original's,
        shared: trial PK); the buffers alive now stay counted where they were made."""
        return TestBufferEngine()

    def __deepcopy__(self, memo: dict[int, Any]) -> TestBufferEngine:
        return TestBufferEngine()

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
        return EngineIdentity(self.name, self.version, self.device, self.precision)

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
        kind = I64 if int64_put(source) else F32
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
        return self._from(dot(left, right))

    def _total(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool, mean: bool) -> Array:
        """The float32 totals (or means) over `axes`: each row of terms, the axes brought last."""
        source = view(x)
        axes = tuple(sorted({axis % source.ndim for axis in axes})) if source.ndim else ()
        kept = tuple(axis for axis in range(source.ndim) if axis not in axes)
        count = 1
        for axis in axes:
            count *= source.shape[axis]
        shape = tuple(source.shape[axis] for axis in kept)
        rows = source.transpose(kept + axes).reshape(int(np.prod(shape, dtype=I64)), count)
        total = totals(rows, mean).reshape(shape)
        if keepdims:
            total = total.reshape(
                tuple(1 if axis in axes else n for axis, n in enumerate(source.shape))
            )
        return total

    def sum(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool = False) -> TestBuffer:
        return self._from(self._total(x, axes, keepdims, mean=False))

    def mean(self, x: TestBuffer, axes: tuple[int, ...], keepdims: bool = False) -> TestBuffer:
        return self._from(self._total(x, axes, keepdims, mean=True))

    def conv2d(
        self,
        x: TestBuffer,
        w: TestBuffer,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: TestBuffer | None = None,
    ) -> TestBuffer:
        """Images x (N, C, H, W) with filters w (F, C, kh, kw) -> (N, F, oh, ow). `bias` is for
        the core before the fast paths; `conv2d_bias` is the fast path's name."""
        images, filters = view(x), view(w)
        biases = None if bias is None else view(bias)
        out_h, out_w = out_size(images.shape[2:], filters.shape[2:], stride, padding)
        handle, out = self._new((images.shape[0], filters.shape[0], out_h, out_w))
        convolve(images, filters, stride, padding, biases, out)
        return handle

    def conv2d_bias(
        self,
        x: TestBuffer,
        w: TestBuffer,
        bias: TestBuffer,
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> TestBuffer:
        """The fast path: the convolution with each filter's bias as one more term of its totals."""
        return self.conv2d(x, w, stride, padding, bias)

    def conv2d_weight_grad(
        self,
        x: TestBuffer,
        gy: TestBuffer,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Any:
        """The filters' gradient (F, C, kh, kw). With `bias` (the core before the fast paths) a
        pair with the biases' gradient; `conv2d_weight_bias_grad` is the fast path's name."""
        if bias:
            return self.conv2d_weight_bias_grad(x, gy, kernel, stride, padding)
        weights, _ = self._filters_grad(x, gy, kernel, stride, padding, False)
        return weights

    def conv2d_weight_bias_grad(
        self,
        x: TestBuffer,
        gy: TestBuffer,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> tuple[TestBuffer, TestBuffer]:
        """The fast path: the filters' and the biases' gradients from one pass over gy."""
        weights, biases = self._filters_grad(x, gy, kernel, stride, padding, True)
        assert biases is not None
        return weights, biases

    def _filters_grad(
        self,
        x: TestBuffer,
        gy: TestBuffer,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool,
    ) -> tuple[TestBuffer, TestBuffer | None]:
        images, grad = view(x), view(gy)
        filters, channels = grad.shape[1], images.shape[1]
        both = filters_grad(images, grad, kernel, stride, padding, bias)
        span = channels * kernel[0] * kernel[1]
        weights = self._from(both[:, :span].reshape(filters, channels, *kernel))
        return weights, (self._from(both[:, span]) if bias else None)

    def batch_matmul(
        self,
        a: TestBuffer,
        b: TestBuffer,
        transpose_a: bool = False,
        transpose_b: bool = False,
    ) -> TestBuffer:
        """The fast path: a (..., m, k) @ b (..., k, n), one `dot` a stack."""
        left, right = view(a), view(b)
        if left.ndim == 2 and right.ndim == 2:
            return self.matmul(a, b, transpose_a, transpose_b)
        left = np.swapaxes(left, -1, -2) if transpose_a else left
        right = np.swapaxes(right, -1, -2) if transpose_b else right
        if left.shape[:-2] != right.shape[:-2] or left.shape[-1] != right.shape[-2]:
            raise ValueError(f"batch_matmul: stacks {left.shape} @ {right.shape} do not multiply")
        rows, columns = left.shape[-2], right.shape[-1]
        handle, out = self._new((*left.shape[:-2], rows, columns))
        stacks = out.reshape(-1, rows, columns)
        lefts = left.reshape(-1, *left.shape[-2:])
        rights = right.reshape(-1, *right.shape[-2:])
        for i in range(stacks.shape[0]):
            stacks[i] = dot(lefts[i], rights[i])
        return handle

    def add_rows(self, values: TestBuffer, indices: TestBuffer, rows: int) -> TestBuffer:
        """The fast path: zeros (rows, ...) with values[i...] added into row indices[i...].

        Each row's values are gathered in the order they come (a stable sort of the indices)
        and added by `totals`, rows that get as many values together: each total within
        1.0005u·Σ|terms|, its bits the same whatever the other rows get."""
        source, chosen = view(values), view(indices)
        ids = chosen.reshape(-1)
        row_shape = source.shape[chosen.ndim :]
        width = int(np.prod(row_shape, dtype=I64))
        flat = source.reshape(ids.size, width)
        handle, out = self._new((rows, *row_shape))
        out.fill(0)
        table = out.reshape(rows, width)
        if ids.size:
            add_rows_into(table, flat, ids)
        return handle

    def conv2d_fold(
        self,
        gy: TestBuffer,
        w: TestBuffer,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> TestBuffer:
        """What each place of the images gets back (N, C, H, W): gy spread out by the stride and
        framed with zeros, convolved with the filters turned around (a transposed convolution)."""
        grad, filters = view(gy), view(w)
        handle, out = self._new((grad.shape[0], filters.shape[1], image[0], image[1]))
        fold(grad, filters, stride, padding, out)
        return handle

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
        return self._binary(np.logaddexp, 0.0, x)

    def sqrt(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.sqrt, x)

    def tanh(self, x: TestBuffer) -> TestBuffer:
        return self._unary(np.tanh, x)

    def sigmoid(self, x: TestBuffer) -> TestBuffer:
        # 1 / (1 + exp(-x)), accurate relative to its value in both tails (0.5·(1 + tanh(x/2))
        # is 0 below -17.3); -x capped at 88, where exp would overflow and the answer is below
        # float32's smallest normal value anyway. One formula at every size.
        source = view(x)
        handle, out = self._new(source.shape)
        np.negative(source, out=out)
        np.minimum(out, F32(88.0), out=out)
        np.exp(out, out=out)
        out += F32(1.0)
        np.divide(F32(1.0), out, out=out)
        return handle

    def relu(self, x: TestBuffer) -> TestBuffer:
        return self._binary(np.maximum, x, 0.0)

    def erf(self, x: TestBuffer) -> TestBuffer:
        """The fast path: 1 - erfc(|x|), signed, erfc by Numerical Recipes' Chebyshev fit
        t·exp(-z² + P(t)), t = 1/(1 + z/2) (fractional error below 1.2e-7), in float32."""
        source = view(x)
        handle, out = self._new(source.shape)
        erf_into(source, out)
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

    def decay_update(self, slots: Sequence[TestBuffer], *, factor: float) -> None:
        """The fast path of AdamW's decoupled decay: in place, each slot times `factor`."""
        kept = F32(factor)
        for slot in slots:
            values = view(slot)
            values *= kept

    def parts(self, flat: TestBuffer, shapes: Sequence[tuple[int, ...]]) -> list[TestBuffer]:
        """The fast path: consecutive parts of a flat tensor, each its own buffer, in one pass."""
        source = view(flat).reshape(-1)
        sizes = [int(np.prod(shape, dtype=I64)) for shape in shapes]
        if sum(sizes) > source.size:
            raise ValueError(
                f"parts: {sum(sizes)} values asked of a tensor of {source.size} ({list(shapes)})"
            )
        handles, start = [], 0
        for shape, size in zip(shapes, sizes, strict=True):
            handle, out = self._new(tuple(shape), source.dtype)
            np.copyto(out.reshape(-1), source[start : start + size])
            handles.append(handle)
            start += size
        return handles

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
        return self.maxpool2d_pair(x, (pool, pool))

    def maxpool2d_back(
        self, gy: TestBuffer, selection: TestBuffer, image: tuple[int, int], pool: int
    ) -> TestBuffer:
        return self.maxpool2d_pair_back(gy, selection, image, (pool, pool))

    def maxpool2d_pair(self, x: TestBuffer, pool: tuple[int, int]) -> tuple[TestBuffer, TestBuffer]:
        """The fast path: windows of pool[0] x pool[1], as the square ones are pooled."""
        windows = pool_windows(view(x), pool)
        selection, chosen = self._new(windows.shape[:-1], I64)
        np.argmax(windows, axis=-1, out=chosen)
        maxima = self._from(np.take_along_axis(windows, chosen[..., None], -1)[..., 0])
        return maxima, selection

    def maxpool2d_pair_back(
        self,
        gy: TestBuffer,
        selection: TestBuffer,
        image: tuple[int, int],
        pool: tuple[int, int],
    ) -> TestBuffer:
        """The fast path: each window's gradient to the place its selection names."""
        grad, chosen = view(gy), view(selection)
        handle, out = self._new((grad.shape[0], grad.shape[1], image[0], image[1]))
        unpool(grad, chosen, pool, out)
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


def from_spec(option: str = "") -> TestBufferEngine:
    """The entry point's factory: `testbuffer`, or `testbuffer:strict` (its one precision)."""
    if option not in ("", PRECISION):
        raise EngineUnavailableError(
            f"the testbuffer engine adds its totals one way, {PRECISION!r}, and takes no other "
            f"option: {option!r} is not one; use 'testbuffer'"
        )
    return TestBufferEngine()

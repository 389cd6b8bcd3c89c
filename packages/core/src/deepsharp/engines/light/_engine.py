"""The light engine's operations: handles are the NumPy arrays themselves, so an operation
costs what NumPy costs and nothing more.

Its totals (products, sums, means, convolutions, products of stacks, rows added into places)
are added by the strategy its precision names (`_totals`); every other operation is the same at
any precision. Value-by-value
functions give each element the same bits whatever its company (NumPy's vector loops and their
tails agree), and are accurate relative to their values in their tails: a sigmoid of -80 is
1.8e-35, not 0.
"""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from deepsharp.core.engine import Counters, EngineIdentity, Precision, Totals, choose_totals
from deepsharp.core.engine.fused import (
    all_finite,
    gelu_back_given,
    gelu_back_reference,
    gelu_rising,
    layer_norm_back_reference,
    layer_norm_reference,
)
from deepsharp.core.engine.fused_recurrent import lstm_cell_back_reference, lstm_cell_reference
from deepsharp.core.engine.memory import keep_freed_memory
from deepsharp.core.engine.protocol import int64_put, own_name
from deepsharp.engines.light._clamp import bounded
from deepsharp.engines.light._erf import erf as _erf64
from deepsharp.engines.light._threads import PARALLEL as PARALLEL_VALUES
from deepsharp.engines.light._threads import pool, thread_count
from deepsharp.engines.light._totals import OFFERED

__all__ = ["LightEngine", "ReferenceEngine"]

_VALUE_BASED = np.lib.NumpyVersion(np.__version__) < "2.0.0"
"""Whether NumPy promotes by value (before 2.0): a Python number beside a float32 scalar then
makes a float64, so the engine casts the number to its float first (NumPy 2 does by itself)."""

Array = Any  # a handle: the NumPy array itself
Padding = tuple[int, int]
Paddings = tuple[Padding, Padding]


class LightEngine:
    """The engine that ships with the core: needs nothing but NumPy, trains and serves.

    `LightEngine(precision="strict")` (spec `light`, or `light:strict`) adds every total in
    float64 and rounds it once: 3u·Σ|terms|, a row's answer the same bits in any company.
    `LightEngine(precision="float32")` (spec `light:float32`) adds them in NumPy's own float32
    kernels: about twice as fast on convolutions, held to (n + 1)u·Σ|terms| for a total of n
    terms, and a row's bits may then depend on the rows served beside it.
    `LightEngine(precision="mixed_bfloat16")` or `"mixed_float16"` (specs `light:mixed_bfloat16`,
    `light:mixed_float16`) takes the inputs of products and convolutions rounded to the half
    format and adds them in float32: the mixed precisions' arithmetic, exactly, on the
    processor (docs/mixed-precision.md). The precision is part of the engine's identity, so a
    checkpoint goes on only with the same one.

    Its large passes (ReLU and its way back, the optimizer's updates, a convolution's blocks of
    images) are split across `threads` threads (default: OMP_NUM_THREADS where set, else one a
    core), with the same bits at any count (`deepsharp.engines.light._threads`).
    """

    name = "light"
    dtype: type[np.floating[Any]] = np.float32

    def __init__(self, precision: str | Precision = "strict", threads: int | None = None) -> None:
        self.threads = thread_count(threads)
        """How many threads its large passes are split across (`_threads`: `threads`, else
        OMP_NUM_THREADS, else the process's cores); every count gives the same bits."""
        self._pool = pool(self.threads)
        offered = {name: partial(kind, self.dtype, self._pool) for name, kind in OFFERED.items()}
        self.totals: Totals = choose_totals("light", precision, offered)
        self.precision: str = self.totals.precision.name
        # A mixed precision's product with its bias, bounded after the bias; not where the
        # engine's own matmul (a subclass's) is the product it promises.
        own = getattr(self.totals, "matmul_bias", None)
        self._product_with_bias = own if type(self).matmul is LightEngine.matmul else None
        self.counters = Counters()
        self.version = np.__version__
        self.device = "cpu"
        # Flat arrays the core laid out as parts (slots, optimizer memory): id of the first
        # part -> (the flat array, the parts), all held weakly.
        self._groups: dict[int, tuple[Any, list[Any]]] = {}
        self._gelu_kept: dict[int, tuple[Any, Array]] = {}
        keep_freed_memory()  # a step's freed arrays stay in the heap for the next

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (copied: scikit-learn's clone) as its settings and counters: its thread pool
        as the count of its threads, without what it keeps of arrays it was handed (held
        weakly, by their identities in this process)."""
        # its own counters (copy.copy shared them with the original: trial PK)
        counters = copy.copy(self.counters)
        return {**vars(self), "counters": counters, "_groups": {}, "_gelu_kept": {}}

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.own_name, f"numpy {self.version}", self.device, self.precision)

    @property
    def own_name(self) -> str:
        """The name its identity records (`own_name`: a subclass's is its class's name)."""
        return own_name(self, LightEngine)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(numpy {self.version}, {self.precision})"

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: Array) -> Array:
        self.counters.transfers_in += 1
        source = np.asarray(array)
        kind = np.int64 if int64_put(source) else self.dtype
        return np.array(source, dtype=kind, order="C", copy=True)

    def put_checked(self, array: Array, *, owned: bool = False) -> tuple[Array, bool]:
        """Fast path: the array put (kept as it is where the caller hands over a float32 array
        in C order: no copy), and whether every value is finite (its total, `all_finite`)."""
        source = np.asarray(array)
        if owned and source.dtype == self.dtype and source.flags.c_contiguous:
            self.counters.transfers_in += 1
            handle = source
        else:
            handle = self.put(source)
        return handle, all_finite(handle)

    def get(self, handle: Array) -> Array:
        self.counters.transfers_out += 1
        return np.array(handle, order="C", copy=True)

    def zeros(self, shape: tuple[int, ...]) -> Array:
        return np.zeros(shape, self.dtype)

    def shape(self, handle: Array) -> tuple[int, ...]:
        return tuple(handle.shape)

    # --- totals: as the precision's strategy adds them -------------------------------------
    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return self.totals.matmul(a, b, transpose_a, transpose_b)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return self.totals.sum(x, axes, keepdims)

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return self.totals.mean(x, axes, keepdims)

    def conv2d(self, x: Array, w: Array, stride: int, padding: Paddings) -> Array:
        return self.totals.conv2d(x, w, stride, padding)

    def conv2d_bias(self, x: Array, w: Array, bias: Array, stride: int, padding: Paddings) -> Array:
        """Fast path: each filter's bias one more term of its totals, in the same pass."""
        return self.totals.conv2d_bias(x, w, bias, stride, padding)

    def conv2d_weight_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        return self.totals.conv2d_weight_grad(x, gy, kernel, stride, padding)

    def matmul_bias(self, x: Array, w: Array, bias: Array, transpose_b: bool = False) -> Array:
        """Fast path: the product (the engine's own `matmul`), then the bias added into it in
        place: the reference's bits, one array fewer."""
        if self._product_with_bias is not None:  # (a mixed precision's, found once)
            return self._product_with_bias(x, w, bias, transpose_b)
        out = self.matmul(x, w, False, transpose_b)
        return np.add(out, bias, out=out)

    def conv2d_weight_bias_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> tuple[Array, Array]:
        """Fast path: the filters' and the biases' gradients from one pass over gy."""
        return self.totals.conv2d_weight_bias_grad(x, gy, kernel, stride, padding)

    def conv2d_fold(
        self, gy: Array, w: Array, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Array:
        return self.totals.conv2d_fold(gy, w, image, stride, padding)

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        """Fast path: every stack's product in one call (NumPy's matmul over the stacks)."""
        return self.totals.batch_matmul(a, b, transpose_a, transpose_b)

    def add_rows(self, values: Array, indices: Array, rows: int) -> Array:
        """Fast path: each row's values gathered in the order they come (a stable sort of the
        indices) and added up, without the one-hot: the same bits every time."""
        return self.totals.add_rows(values, indices, rows)

    # --- value by value --------------------------------------------------------------------
    # A Python number beside a value is the engine's float (NEP 50, NumPy 2's own reading).
    # NumPy 1.26 would add a float32 scalar (a whole sum, the loss) and 64.0 in float64, and the
    # step would give back a float64 its plan cannot keep: there the number is cast first.
    def _number(self, value: Any) -> Any:
        return self.dtype(value) if type(value) is float or type(value) is int else value

    def add(self, a: Any, b: Any) -> Array:
        if _VALUE_BASED:
            a, b = self._number(a), self._number(b)
        return np.add(a, b)

    def sub(self, a: Any, b: Any) -> Array:
        if _VALUE_BASED:
            a, b = self._number(a), self._number(b)
        return np.subtract(a, b)

    def mul(self, a: Any, b: Any) -> Array:
        if _VALUE_BASED:
            a, b = self._number(a), self._number(b)
        return np.multiply(a, b)

    def div(self, a: Any, b: Any) -> Array:
        if _VALUE_BASED:
            a, b = self._number(a), self._number(b)
        return np.divide(a, b)

    def maximum(self, a: Any, b: Any) -> Array:
        return np.maximum(a, b, dtype=self.dtype)

    def greater(self, a: Any, b: Any) -> Array:
        return np.greater(a, b).astype(self.dtype)

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
        # 1/(1 + exp(-x)), accurate relative to its value in both tails (0.5·(1 + tanh(x/2))
        # is 0 below -17.3); -x capped at 88, where exp would overflow and the answer is
        # below float32's smallest normal value anyway.
        out = np.negative(x, out=np.empty(np.shape(x), self.dtype))
        bounded(np.minimum, out, 88.0, out)
        np.exp(out, out=out)
        out += self.dtype(1.0)
        return np.divide(self.dtype(1.0), out, out=out)

    def relu(self, x: Array) -> Array:
        out = np.empty(np.shape(x), self.dtype)
        spans = self._spans(x)
        if spans is None:
            return bounded(np.maximum, x, 0.0, out)
        flat, into = x.reshape(-1), out.reshape(-1)
        self._pool.map(lambda part: bounded(np.maximum, flat[part], 0.0, into[part]), spans)
        return out

    def _spans(self, *arrays: Array) -> list[slice] | None:
        """Where a value-by-value pass over these arrays (one shape, C order) is worth splitting
        across the threads: the spans of their flat values; else None."""
        first = arrays[0]
        if self.threads == 1 or first.size < 2 * PARALLEL_VALUES:
            return None
        if any(a.shape != first.shape or not a.flags.c_contiguous for a in arrays):
            return None
        spans = self._pool.spans(first.size)
        return spans if len(spans) > 1 else None

    def erf(self, x: Array) -> Array:
        """Fast path: Cody's rational approximations in float64 (`_erf`), rounded once; a large
        array's values split across the threads (each value's result is its own)."""
        out = np.empty(np.shape(x), self.dtype)
        spans = self._spans(x)
        if spans is None:
            return _erf64(x, out=out)
        flat, into = x.reshape(-1), out.reshape(-1)
        self._pool.map(lambda part: _erf64(flat[part], out=into[part]), spans)
        return out

    def gelu(self, x: Array) -> Array:
        """Fast path: the reference's calls (NumPy's already), 1 + erf(x/√2) kept for the way
        back while x lives: erf is the costly pass here (some forty float64 passes a value), and
        the reference's way back would make it again."""
        rising = gelu_rising(self, x)
        key = id(x)
        self._gelu_kept[key] = (weakref.ref(x), rising)
        weakref.finalize(x, self._gelu_kept.pop, key, None)
        return self.mul(self.mul(x, rising), 0.5)

    def gelu_back(self, x: Array, grad: Array) -> Array:
        """Fast path: the reference's calls, with the forward's 1 + erf(x/√2) where it kept it
        (the same values: the same bits)."""
        kept = self._gelu_kept.get(id(x))
        if kept is None or kept[0]() is not x:
            return gelu_back_reference(self, x, grad)
        return gelu_back_given(self, x, grad, kept[1])

    def layer_norm(self, x: Array, scale: Array, shift: Array, epsilon: float) -> Array:
        """Fast path: the reference's calls, which are NumPy's already (means at the engine's
        precision)."""
        return layer_norm_reference(self, x, scale, shift, epsilon)

    def layer_norm_back(
        self, x: Array, scale: Array, grad: Array, epsilon: float
    ) -> tuple[Array, Array, Array]:
        """Fast path: the reference's calls, which are NumPy's already."""
        return layer_norm_back_reference(self, x, scale, grad, epsilon)

    # --- fast paths (deepsharp.core.engine.fused) -----------------------------------------
    def lstm_cell(
        self, share: Array, state: Array | None, cell: Array | None, weight_hh: Array
    ) -> tuple[Array, ...]:
        """Fast path: the reference's calls, which are NumPy's already (the product at the
        engine's precision)."""
        return lstm_cell_reference(self, share, state, cell, weight_hh)

    def lstm_cell_back(
        self,
        dh: Array,
        dc: Array | None,
        entering: Array,
        forget: Array,
        candidate: Array,
        out: Array,
        squashed: Array,
        cell: Array | None,
    ) -> tuple[Array, Array | None]:
        """Fast path: the reference's calls, which are NumPy's already."""
        return lstm_cell_back_reference(
            self, dh, dc, entering, forget, candidate, out, squashed, cell
        )

    def relu_back(self, x: Array, grad: Array) -> Array:
        """Fast path: grad where x > 0, else 0, in one pass."""
        # A product with the mask, written as 1.0 and 0.0 into the output first: measured 5x
        # faster than np.where on 5.5 M values, and 1.2x faster than multiplying by a bool mask
        # (the same values: grad times 1.0 or 0.0).
        out = np.empty(np.shape(grad), self.dtype)
        spans = self._spans(x, grad)
        if spans is None:
            np.greater(x, 0, out=out)
            return np.multiply(out, grad, out=out)
        flat, back, into = x.reshape(-1), grad.reshape(-1), out.reshape(-1)

        def part(span: slice) -> None:
            np.greater(flat[span], 0, out=into[span])
            np.multiply(into[span], back[span], out=into[span])

        self._pool.map(part, spans)
        return out

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

        def update(slot: Array, grad: Array, velocity: Array) -> None:
            velocity *= keep
            velocity -= rate * grad
            slot += velocity

        for slot, grad, velocity in zip(slots, grads, velocities):
            self._split(update, slot, grad, velocity)

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

        def update(slot: Array, grad: Array, first: Array, second: Array) -> None:
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

        for slot, grad, first, second in zip(slots, grads, firsts, seconds):
            self._split(update, slot, grad, first, second)

    def decay_update(self, slots: Sequence[Array], *, factor: float) -> None:
        """Fast path: every slot times `factor`, one pass over a flat tensor's parts."""
        flat = self._flat(slots) if len(slots) > 1 else None
        keep = self.dtype(factor)

        def update(slot: Array) -> None:
            slot *= keep

        for slot in flat[0] if flat is not None else slots:
            self._split(update, slot)

    def _split(self, update: Callable[..., None], *arrays: Array) -> None:
        """An update in place, value by value, over arrays of one shape: across the threads
        where they are large, a span of their values each (the same bits as one pass)."""
        spans = self._spans(*arrays)
        if spans is None:
            update(*arrays)
            return
        flats = [array.reshape(-1) for array in arrays]
        self._pool.map(lambda span: update(*(flat[span] for flat in flats)), spans)

    def clip_norm(self, grads: Sequence[Array], *, clip_norm: float) -> list[Array]:
        """Fast path: each gradient's squares added as one total of the precision (float64,
        rounded once, when strict), then the gradient times c / max(its norm, c)."""
        return [np.multiply(g, self._clip_factor(self._squares(g), clip_norm)) for g in grads]

    def global_clip_norm(self, grads: Sequence[Array], *, clip_norm: float) -> list[Array]:
        """Fast path: every gradient's squares added as one total of the precision (float64,
        rounded once, when strict), then each gradient times c / max(the norm, c)."""
        if not grads:
            return []
        wide = np.float64 if self.precision == "strict" else self.dtype
        total = wide(0.0)
        for grad in grads:
            total = total + np.add.reduce(np.square(grad, dtype=wide), axis=None)
        factor = self._clip_factor(self.dtype(total), clip_norm)
        return [np.multiply(g, factor) for g in grads]

    def _squares(self, grad: Array) -> Any:
        wide = np.float64 if self.precision == "strict" else self.dtype
        return self.dtype(np.add.reduce(np.square(grad, dtype=wide), axis=None))

    def _clip_factor(self, squares: Any, clip_norm: float) -> Any:
        limit = self.dtype(clip_norm)
        return limit / np.maximum(np.sqrt(squares), limit)

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
        # Zeros with x written into place: np.pad's own bits, at a fifth of its cost on the
        # small arrays a slice's way back pads (a recurrent layer's: one a gate a step).
        shape = tuple(size + before + after for size, (before, after) in zip(x.shape, widths))
        out = np.zeros(shape, x.dtype)
        out[tuple(slice(before, before + size) for size, (before, _) in zip(x.shape, widths))] = x
        return out

    def broadcast_to(self, x: Array, shape: tuple[int, ...]) -> Array:
        return np.broadcast_to(x, shape)

    def max(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.max(x, axis=axes, keepdims=keepdims)

    def one_hot(self, indices: Array, classes: int) -> Array:
        return np.eye(classes, dtype=self.dtype)[indices]

    def maxpool2d(self, x: Array, pool: int) -> tuple[Array, Array]:
        return self.maxpool2d_pair(x, (pool, pool))

    def maxpool2d_back(
        self, gy: Array, selection: Array, image: tuple[int, int], pool: int
    ) -> Array:
        return self.maxpool2d_pair_back(gy, selection, image, (pool, pool))

    def maxpool2d_pair(self, x: Array, pool: tuple[int, int]) -> tuple[Array, Array]:
        """Fast path: windows of pool[0] x pool[1], as the square ones are pooled."""
        windows = _windows(x, pool)
        selection = windows.argmax(axis=-1)
        return np.take_along_axis(windows, selection[..., None], -1)[..., 0], selection

    def maxpool2d_pair_back(
        self, gy: Array, selection: Array, image: tuple[int, int], pool: tuple[int, int]
    ) -> Array:
        """Fast path: each window's gradient to the place its selection names."""
        (count, channels, out_h, out_w), (down, across) = gy.shape, pool
        spread = np.zeros((count, channels, out_h, out_w, down * across), self.dtype)
        np.put_along_axis(spread, selection[..., None], gy[..., None], -1)
        grid = spread.reshape(count, channels, out_h, out_w, down, across)
        grid = grid.transpose(0, 1, 2, 4, 3, 5)
        grid = grid.reshape(count, channels, out_h * down, out_w * across)
        height, width = image
        if (height, width) == grid.shape[2:]:
            return grid
        rest = [(0, height - out_h * down), (0, width - out_w * across)]
        return np.pad(grid, [(0, 0), (0, 0), *rest])


def _windows(x: Array, pool: tuple[int, int]) -> Array:
    """(N, C, H//ph, W//pw, ph*pw): each (ph, pw) pooling window's places in reading order."""
    (count, channels, height, width), (down, across) = x.shape, pool
    out_h, out_w = height // down, width // across
    cropped = x[:, :, : out_h * down, : out_w * across]
    grid = cropped.reshape(count, channels, out_h, down, out_w, across)
    return grid.transpose(0, 1, 2, 4, 3, 5).reshape(count, channels, out_h, out_w, down * across)


class ReferenceEngine(LightEngine):
    """The same operations in float64, every total added in float64 (the contract suite's
    reference until it has its own). Its `conv2d` and `conv2d_weight_grad` also take the bias
    arguments they took before the fused operations moved to `deepsharp.core.engine.fused`."""

    name = "reference"
    dtype = np.float64

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, f"numpy {self.version}", self.device)

    def conv2d(
        self, x: Array, w: Array, stride: int, padding: Paddings, bias: Array | None = None
    ) -> Array:
        if bias is None:
            return super().conv2d(x, w, stride, padding)
        return self.conv2d_bias(x, w, bias, stride, padding)

    def conv2d_weight_grad(
        self,
        x: Array,
        gy: Array,
        kernel: tuple[int, int],
        stride: int,
        padding: Paddings,
        bias: bool = False,
    ) -> Any:
        if bias:
            return self.conv2d_weight_bias_grad(x, gy, kernel, stride, padding)
        return super().conv2d_weight_grad(x, gy, kernel, stride, padding)

"""How the torch engine adds its totals: one strategy for each precision it offers.

- `Float32Totals` (precision `float32`, the default): libtorch's own float32 kernels, as
  PyTorch runs them (on a card with TF32 off): held to (n + 1)u·Σ|terms|; bit for bit run to
  run at one thread count. Its sums and convolution gradients split their work across threads,
  so their last bits may change with torch's thread count, and a product's with the rows
  beside it (docs/install.md says where, as measured).
- `StrictTotals` (precision `strict`): every total added in float64 and rounded once: within
  3u·Σ|terms| at any size, the same bits at any thread count and for a row in any company. On
  the processor a large total is worked a block of rows (or images) at a time, so the float64
  copies stay in the caches instead of crossing memory whole; on a card it is one call.
- `MixedTotals` (precisions `mixed_bfloat16`, `mixed_float16`): products and convolutions read
  their inputs in the half format (a float32 input converted, to nearest) and add in float32
  in libtorch's half kernels (oneDNN's AMX and AVX-512 BF16 ones on the processor, cuBLAS and
  cuDNN with float32 accumulation on a card); their outputs stay in the half format, as
  PyTorch's autocast keeps them, so the next product reads them as they are (a dense layer's
  weight gradient on the processor comes out in float32, laid out for the optimizer). Sums and
  means of any input are float32 totals, float32 out; so is the biases' gradient.

Every strategy multiplies stacks with one `bmm` (strict: float64, a few stacks at a time on the
processor; mixed: bfloat16 kept, as a product's output) and adds rows into places with
`index_add_` into zeros (float64 under strict, rounded once; float32 otherwise, half values
widened): libtorch adds them index by index in the order they come, so the same bits every
time and at any thread count, and on a card the guard's deterministic algorithms make it so.

torch is bound (`bind`) when the first engine is made, never when this module is imported.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

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
from deepsharp.engines.torch import _halfgrads

__all__ = ["OFFERED", "Float32Totals", "MixedTotals", "StrictTotals", "bind"]

Padding = tuple[int, int]
Paddings = tuple[Padding, Padding]
Tensor = Any

# Filled by bind() when the first engine is made.
torch: Any = None
F: Any = None
F32: Any = None
_conv_backward: Any = None

BLOCK = 1 << 19
"""How many float64 values a large total's temporaries may hold on the processor (4 MiB)."""


def bind(module: Any) -> None:
    global torch, F, F32, _conv_backward
    torch = module
    F = module.nn.functional
    F32 = module.float32
    _conv_backward = module.ops.aten.convolution_backward.default
    _halfgrads.bind(module)


class _Totals:
    """What the strategies share: whether the engine runs on a card, the guard that sets TF32
    off and deterministic algorithms around its products and convolutions there, and the
    convolution's entry points written once over `conv2d_bias` and `_weight_grad`."""

    def __init__(self, cuda: bool, guard: Any) -> None:
        self.cuda = cuda
        self.guard = guard

    def conv2d_bias(
        self, x: Tensor, w: Tensor, bias: Tensor | None, stride: int, padding: Paddings
    ) -> Tensor:
        raise NotImplementedError

    def _weight_grad(
        self,
        x: Tensor,
        gy: Tensor,
        kernel: tuple[int, int],
        stride: int,
        padding: Paddings,
        bias: bool,
    ) -> tuple[Tensor, Tensor]:
        """The filters' gradient and, with `bias`, the biases' (float32 and strict: one pass)."""
        raise NotImplementedError

    def conv2d(self, x: Tensor, w: Tensor, stride: int, padding: Paddings) -> Tensor:
        return self.conv2d_bias(x, w, None, stride, padding)

    def conv2d_weight_grad(
        self, x: Tensor, gy: Tensor, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        return self._weight_grad(x, gy, kernel, stride, padding, False)[0]

    def conv2d_weight_bias_grad(
        self, x: Tensor, gy: Tensor, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> tuple[Tensor, Tensor]:
        weights, biases = self._weight_grad(x, gy, kernel, stride, padding, True)
        return weights, biases

    def matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        raise NotImplementedError

    def _stacks(self, a: Tensor, b: Tensor) -> Tensor:
        """a (S, m, k) @ b (S, k, n), as they stand."""
        raise NotImplementedError

    def matmul_bias(self, x: Tensor, w: Tensor, bias: Tensor, transpose_b: bool) -> Tensor | None:
        """x @ w + bias in one kernel whose total starts from the bias (`addmm`, as PyTorch's
        Linear runs it), or None where the strategy adds the bias after the product (the
        engine then does: strict, whose float64 product is rounded once before the bias)."""
        return None

    wide_rows = False
    """Whether rows added into places (`add_rows`) are added in float64 (strict), not float32."""

    def batch_matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        if a.dim() == 2:
            return self.matmul(a, b, transpose_a, transpose_b)
        a = a.transpose(-1, -2) if transpose_a else a
        b = b.transpose(-1, -2) if transpose_b else b
        lead, (rows, inner), columns = tuple(a.shape[:-2]), tuple(a.shape[-2:]), b.shape[-1]
        stacks = math.prod(lead)  # named, not -1: a stack of no values has no -1 to find
        out = self._stacks(a.reshape(stacks, rows, inner), b.reshape(stacks, inner, columns))
        return out.reshape(*lead, rows, columns)

    def add_rows(self, values: Tensor, indices: Tensor, rows: int) -> Tensor:
        ids = indices.reshape(-1)
        row_shape = tuple(values.shape[indices.dim() :])
        flat = values.reshape(ids.numel(), math.prod(row_shape))
        kind = torch.float64 if self.wide_rows else F32
        total = torch.zeros((rows, flat.shape[1]), dtype=kind, device=values.device)
        with self.guard:
            total.index_add_(0, ids, flat.to(kind))
        return total.to(F32).reshape(rows, *row_shape)


NARROW = 16
"""The most columns of a weight gradient `Float32Totals.matmul` forms wide and copies into place
(where its rows are over 64 times as many); also sgemm's tile of columns, to which a narrow
right-hand side is padded (`Float32Totals.matmul`)."""

PADDED_ROWS, PADDED_VALUES = 32, 131_072
"""The fewest rows, and values on the left, of a product whose narrow right-hand side
`Float32Totals.matmul` pads (below, the padding costs more than the edge kernel)."""


class Float32Totals(_Totals):
    """libtorch's own float32 kernels (precision float32): what PyTorch itself runs."""

    precision = FLOAT32

    def matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        # Straight to sgemm with its transpose flags: the product comes out contiguous (the
        # weight gradient formed as (b.T @ a).T came out transposed, and each optimizer pass
        # over it then read it strided, 6x slower; 4 % of the small steps, measured). But a
        # tall, narrow weight gradient (a dense layer of few outputs over many features, after
        # a convolution) is sgemm's slow shape: formed wide, as PyTorch's own Linear does, and
        # copied into place (21,632 x 256 by 256 x 10: 9.0 ms as it stands, 2.8 ms so, one
        # thread; profiled in docs/performance.md) where it adds enough terms (`_formed_wide`).
        # And a product whose right-hand side is 2 to 15 columns (a dense layer of 10 outputs)
        # runs sgemm's edge kernel, 1.5 to 2.2x slower than 16 columns on the processor (256
        # rows of 21,632 by 10 columns: 2.55 ms, 1.40 ms padded to 16 with zeros, two
        # threads; 32 rows of 5,408: 80 us, 53 us padded): such products are padded to 16
        # columns and their first ones kept (the same terms in each total; `_padded` says
        # which, as measured; one column is a matrix-vector product, not padded). PyTorch's
        # Linear runs the fast kernel by its weights' layout, (out, in).
        left = a.t() if transpose_a else a
        right = b.t() if transpose_b else b
        columns = right.shape[1]
        if columns <= NARROW and not transpose_b:  # checked only here: 0.4 us a small call
            if transpose_a and _formed_wide(a, columns):
                with self.guard:
                    return torch.mm(b.t(), a).t().contiguous()
            if not self.cuda and _padded(left, columns, transpose_a):
                wide = torch.mm(left, F.pad(right, (0, NARROW - columns)))
                return wide[:, :columns].contiguous()
        if self.cuda:
            with self.guard:
                return torch.mm(left, right)
        return torch.mm(left, right)

    def _stacks(self, a: Tensor, b: Tensor) -> Tensor:
        with self.guard:
            return torch.bmm(a, b)

    def matmul_bias(self, x: Tensor, w: Tensor, bias: Tensor, transpose_b: bool) -> Tensor:
        # The bias one more term of each total, in sgemm's own pass (its output starts as the
        # bias): a pass over the output fewer than the product and an add (a transformer
        # block's four projections of 2,048 rows), and one call instead of two (a Titanic
        # layer: 2.0 us against 2.3 us). A narrow right-hand side is padded to sgemm's 16
        # columns as the product's is (`_padded`).
        right = w.t() if transpose_b else w
        columns = right.shape[1]
        if not transpose_b and not self.cuda and _padded(x, columns, False):
            pad = NARROW - columns
            wide = torch.addmm(F.pad(bias, (0, pad)), x, F.pad(right, (0, pad)))
            return wide[:, :columns].contiguous()
        if self.cuda:
            with self.guard:
                return torch.addmm(bias, x, right)
        return torch.addmm(bias, x, right)

    def sum(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        return torch.sum(x, axes, keepdims) if axes else x

    def mean(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        return torch.mean(x, axes, keepdims) if axes else x

    def conv2d_bias(
        self, x: Tensor, w: Tensor, bias: Tensor | None, stride: int, padding: Paddings
    ) -> Tensor:
        images, pads = padded(x, padding)
        with self.guard:
            return F.conv2d(images, w, bias, stride, pads)

    def _weight_grad(
        self,
        x: Tensor,
        gy: Tensor,
        kernel: tuple[int, int],
        stride: int,
        padding: Paddings,
        bias: bool,
    ) -> tuple[Tensor, Tensor]:
        images, pads = padded(x, padding)
        # Only the weights' shape is read: uninitialised memory of that shape stands in for
        # them (an expanded scalar costs oneDNN's kernel 10 % more, measured).
        w = x.new_empty((gy.shape[1], x.shape[1], *kernel))
        sizes = [gy.shape[1]] if bias else None
        args = (gy, images, w, sizes, (stride, stride), pads, (1, 1), False, (0, 0), 1)
        with self.guard:
            _, weights, biases = _conv_backward(*args, (False, True, bias))
        return weights, biases

    def conv2d_fold(
        self, gy: Tensor, w: Tensor, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        (top, bottom), (left, right) = padding
        even = top == bottom and left == right
        height = image[0] if even else image[0] + top + bottom
        width = image[1] if even else image[1] + left + right
        x = gy.new_empty(1).expand(gy.shape[0], w.shape[1], height, width)
        pads = (top, left) if even else (0, 0)
        args = (gy, x, w, None, (stride, stride), pads, (1, 1), False, (0, 0), 1)
        with self.guard:
            folded = _conv_backward(*args, (True, False, False))[0]
        if even:
            return folded
        return folded[:, :, top : top + image[0], left : left + image[1]].contiguous()


def _formed_wide(a: Tensor, columns: int) -> bool:
    """Whether `Float32Totals.matmul` forms a narrow weight gradient a.T @ b wide, (b.T @ a).T,
    and copies it into place: where its rows are 1,088 or more (a 64th of them over sgemm's tile
    of 16 columns), and it adds 64 terms or more (fewer columns than 10: any). Two threads, torch 2.13.0, 10 columns:
    21,632 x 256 by 256 x 10 took 1.12 ms so, 2.40 ms padded to 16 columns, 2.97 ms as it
    stands; 5,408 x 128, 0.17 ms to 0.26 ms; 21,632 x 64, 0.49 ms to 0.60 ms; but 21,632 x 32,
    0.40 ms to 0.25 ms as it stands, and 5,408 x 32, 90 us to 72 us."""
    return NARROW < a.shape[1] // 64 and (columns < 10 or a.shape[0] >= 64)


def _padded(left: Tensor, columns: int, transposed: bool) -> bool:
    """Whether `Float32Totals.matmul` pads a product's 2 to 15 columns to sgemm's 16 (two
    threads, this machine's figures in its comment): from 32 rows and 131,072 values on the
    left; a weight gradient (the left transposed) not formed wide (`_formed_wide`), from 10
    columns."""
    if not 2 <= columns < NARROW or left.numel() < PADDED_VALUES:
        return False
    if transposed:
        return columns >= 10
    return bool(left.shape[0] >= PADDED_ROWS)


class StrictTotals(_Totals):
    """Every total added in float64 and rounded once (precision strict)."""

    precision = STRICT
    wide_rows = True

    def _stacks(self, a: Tensor, b: Tensor) -> Tensor:
        (stacks, rows, inner), columns = a.shape, b.shape[2]
        each = (rows + columns) * inner + rows * columns
        if each > BLOCK and not self.cuda:  # a large stack: the product's own blocks
            return torch.stack([self.matmul(a[i], b[i]) for i in range(stacks)])
        step = stacks if self.cuda else max(1, BLOCK // max(1, each))
        out = torch.empty((stacks, rows, columns), dtype=F32, device=a.device)
        with self.guard:
            for i in range(0, stacks, step):
                out[i : i + step] = torch.bmm(_wide(a[i : i + step]), _wide(b[i : i + step]))
        return out

    def matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        a = a.t() if transpose_a else a
        b = b.t() if transpose_b else b
        (rows, inner), columns = a.shape, b.shape[1]
        how, step = (
            ("whole", 0) if self.cuda else product_blocks(rows, inner, columns, transpose_a, BLOCK)
        )
        if how == "turned":
            return self.matmul(b, a, True, True).t().contiguous()
        with self.guard:
            if how == "rows":
                out = torch.empty((rows, columns), dtype=F32)
                wide = _wide(b)
                for i in range(0, rows, step):
                    out[i : i + step] = torch.mm(_wide(a[i : i + step]), wide)
                return out
            if how == "columns":
                out = torch.empty((rows, columns), dtype=F32)
                wide = _wide(a)
                for j in range(0, columns, step):
                    out[:, j : j + step] = torch.mm(wide, _wide(b[:, j : j + step]))
                return out
            return torch.mm(_wide(a), _wide(b)).to(F32)

    def sum(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        if not axes:
            return x if x.dtype == F32 else x.to(F32)
        return self._total(x, axes, keepdims).to(F32)

    def mean(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        if not axes:
            return x if x.dtype == F32 else x.to(F32)
        count = 1
        for axis in axes:
            count *= x.shape[axis]
        return self._total(x, axes, keepdims).div_(count).to(F32)

    def _total(self, x: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
        """The float64 total over `axes`. libtorch widens a whole tensor before it adds it up
        in float64, so on the processor a large one is added a block of its first axis at a
        time: the blocks' totals added in float64 where that axis is summed, else laid end
        to end."""
        count = x.shape[0] if x.dim() else 1
        if self.cuda or count < 2 or x.numel() <= BLOCK:
            return torch.sum(x, axes, keepdims, dtype=torch.float64)
        step = max(1, BLOCK * count // x.numel())
        parts = [
            torch.sum(x[i : i + step], axes, keepdims, dtype=torch.float64)
            for i in range(0, count, step)
        ]
        if 0 not in {axis % x.dim() for axis in axes}:
            return torch.cat(parts, 0)
        total = parts[0]
        for part in parts[1:]:
            total += part
        return total

    def _images_a_block(self, shape: Sequence[int], filters: int, kernel: Sequence[int]) -> int:
        """How many images a convolution's block takes: its float64 windows and outputs (about
        (filters + C*kh*kw) * H * W values an image) within BLOCK; every image on a card."""
        count, channels, height, width = shape
        if self.cuda:
            return max(1, count)
        return images_a_block(filters, channels * kernel[0] * kernel[1], height * width, BLOCK)

    def conv2d_bias(
        self, x: Tensor, w: Tensor, bias: Tensor | None, stride: int, padding: Paddings
    ) -> Tensor:
        count = x.shape[0]
        step = self._images_a_block(x.shape, w.shape[0], w.shape[2:])
        wide = _wide(w)
        wide_bias = None if bias is None else _wide(bias)  # a term of each float64 total
        with self.guard:
            if step >= count:  # on a card, or few images: one call
                images, pads = padded(_wide(x), padding)
                return F.conv2d(images, wide, wide_bias, stride, pads).to(F32)
            out: Tensor = None
            for i in range(0, count, step):
                images, pads = padded(_wide(x[i : i + step]), padding)
                y = F.conv2d(images, wide, wide_bias, stride, pads)
                if out is None:
                    out = torch.empty((count, *y.shape[1:]), dtype=F32)
                out[i : i + step] = y
        return out

    def _weight_grad(
        self,
        x: Tensor,
        gy: Tensor,
        kernel: tuple[int, int],
        stride: int,
        padding: Paddings,
        bias: bool,
    ) -> tuple[Tensor, Tensor]:
        # Each image's windows (unfolded) times its outputs' gradient, the images' shares added
        # in float64: libtorch's own weight gradient splits its sum over the rows across
        # threads, so its bits would change with the thread count.
        count, channels = x.shape[:2]
        filters = gy.shape[1]
        step = self._images_a_block(x.shape, filters, kernel)
        total = torch.zeros(
            (filters, channels * kernel[0] * kernel[1]), dtype=torch.float64, device=x.device
        )
        biases = torch.zeros(filters, dtype=torch.float64, device=x.device)
        with self.guard:
            for i in range(0, count, step):
                images, pads = padded(_wide(x[i : i + step]), padding)
                windows = F.unfold(images, kernel, 1, pads, stride)  # (n, C*kh*kw, P)
                grads = _wide(gy[i : i + step]).reshape(images.shape[0], filters, -1)
                total += torch.bmm(grads, windows.transpose(1, 2)).sum(0)
                if bias:
                    biases += grads.sum((0, 2))
        return total.reshape(filters, channels, *kernel).to(F32), biases.to(F32)

    def conv2d_fold(
        self, gy: Tensor, w: Tensor, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        (top, bottom), (left, right) = padding
        even = top == bottom and left == right
        height = image[0] if even else image[0] + top + bottom
        width = image[1] if even else image[1] + left + right
        count, filters = gy.shape[:2]
        channels = w.shape[1]
        step = self._images_a_block(
            (count, channels, height, width), filters, (w.shape[2], w.shape[3])
        )
        wide = _wide(w)
        pads = (top, left) if even else (0, 0)
        out = torch.empty((count, channels, *image), dtype=F32, device=gy.device)
        with self.guard:
            for i in range(0, count, step):
                grads = _wide(gy[i : i + step])
                x = grads.new_empty(1).expand(grads.shape[0], channels, height, width)
                args = (grads, x, wide, None, (stride, stride), pads, (1, 1), False, (0, 0), 1)
                folded = _conv_backward(*args, (True, False, False))[0]
                if not even:
                    folded = folded[:, :, top : top + image[0], left : left + image[1]]
                out[i : i + step] = folded
        return out


def _forget(halves: dict[int, Any], key: int, _: Any) -> None:
    """A float32 tensor is gone: its half copy goes too."""
    halves.pop(key, None)


HALF_BLOCK = 1 << 19
"""How many values of a half tensor a float32 total widens at a time on the processor (2 MiB)."""

SMALL = 1 << 20
"""Multiply-adds below which a product or convolution on the processor runs in libtorch's float32
kernels on inputs rounded to the half format, its output rounded to it too (the same
arithmetic: half inputs, float32 totals, an output in the half format): oneDNN's half kernels
cost about 30 us a call to set up. Measured on one thread of an Intel Xeon with AMX, libtorch
2.13: bfloat16 against float32 products 31 against 4 us at 32 x 14 x 16, 30 against 15 us at
32 x 64 x 256 (an LSTM's state, 2^19), 30 against 27 us at 64 x 64 x 256 (2^20), 37 against
47 us at 128 x 128 x 128 (2^21). The two add their terms in other orders, so an output may differ by the last bits
of its float32 total, and so by one unit of the half format where that total lies next to a
rounding boundary of the half format (docs/mixed-precision.md)."""


class MixedTotals(_Totals):
    """Products and convolutions on half-format inputs, added in float32 and kept in the half
    format (precisions mixed_bfloat16, mixed_float16); sums and means float32 totals.

    On the processor a small product or convolution (under `SMALL` multiply-adds) runs in the
    float32 kernels on its inputs rounded to the half format, and gives its output in the half
    format: the same arithmetic, without the half kernels' cost of setting up."""

    def __init__(self, cuda: bool, guard: Any, precision: Precision) -> None:
        super().__init__(cuda, guard)
        self.precision = precision
        self.half = getattr(torch, str(precision.half))
        self.float32 = Float32Totals(cuda, guard)
        # float32 tensor's id -> (a weak reference to it, its version, its half copy)
        self._halves: dict[int, tuple[Any, int, Tensor]] = {}

    def _half(self, x: Tensor) -> Tensor:
        """x in the half format. A float32 tensor's conversion is kept while the tensor lives
        unchanged (its version counter says), as autocast keeps its weights' within a pass: a
        step reads each slot, and the rows of its first layer, twice (forward and back), and
        converts them once."""
        if x.dtype is self.half:
            return x
        key = id(x)
        kept = self._halves.get(key)
        if kept is not None and kept[0]() is x and kept[1] == x._version:
            return kept[2]
        half = x.to(self.half)
        self._halves[key] = (weakref.ref(x, partial(_forget, self._halves, key)), x._version, half)
        return half

    def _rounded(self, x: Tensor) -> Tensor:
        """x's values in the half format, held in float32 (exactly)."""
        return x.to(self.half).to(F32) if x.dtype is F32 else x.to(F32)

    def _small(self, work: int) -> bool:
        return not self.cuda and work < SMALL

    def matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        rows = a.shape[1] if transpose_a else a.shape[0]
        if self._small(rows * a.shape[0 if transpose_a else 1] * b.shape[0 if transpose_b else 1]):
            out = self.float32.matmul(self._rounded(a), self._rounded(b), transpose_a, transpose_b)
            # rounded as the half kernels round theirs (a weight gradient's laid out in float32)
            return out.to(self.half).to(F32) if transpose_a else out.to(self.half)
        a, b = self._half(a), self._half(b)
        with self.guard:
            if transpose_a and not self.cuda:  # a weight gradient, x.T @ grad with x tall
                return _halfgrads.weight_gradient(a, b.t() if transpose_b else b)
            return torch.mm(a.t() if transpose_a else a, b.t() if transpose_b else b)

    def matmul_bias(self, x: Tensor, w: Tensor, bias: Tensor, transpose_b: bool) -> Tensor | None:
        # As autocast runs a Linear: the bias in the half format one more term of each float32
        # total, the output rounded to the half format once (a product rounded, then the bias
        # added and rounded again, where the product is small).
        if self._small(x.shape[0] * x.shape[1] * w.shape[0 if transpose_b else 1]):
            return None
        right = self._half(w)
        with self.guard:
            return torch.addmm(self._half(bias), self._half(x), right.t() if transpose_b else right)

    def _stacks(self, a: Tensor, b: Tensor) -> Tensor:
        (stacks, rows, inner), columns = a.shape, b.shape[2]
        if self._small(stacks * rows * inner * columns):
            return self.float32._stacks(self._rounded(a), self._rounded(b))
        with self.guard:
            return torch.bmm(self._half(a), self._half(b))

    def sum(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        if not axes:
            return x if x.dtype is F32 else x.to(F32)
        if x.dtype is F32 or self.cuda or 0 not in axes or x.numel() <= HALF_BLOCK:
            return torch.sum(x, axes, keepdims, dtype=F32)
        last = x.dim() - 1
        inner = tuple(a for a in axes if a != 0)
        step = max(1, HALF_BLOCK * x.shape[0] // x.numel())
        if last in inner and x.is_contiguous():
            # Along the rows first (their values side by side), a block of the first axis at a
            # time (libtorch widens what it sums first: the block's float32 values are still in
            # the caches when they are added), then the rows' float32 totals across the first
            # axis. A convolution's bias gradient, 256 x 32 x 26 x 26 summed over (0, 2, 3),
            # two threads: 0.37 ms so, 1.16 ms rows first over the whole tensor, 0.66 ms in
            # blocks summed across the first axis too (AMD EPYC, torch 2.13.0). Each row's
            # total is the same call on the same row in a block as in the whole: libtorch
            # gives each thread whole totals where a sum makes several. Where an entry of the
            # first axis is one total, a block of one entry would be one total, which libtorch
            # splits among its threads: those are summed whole, as before.
            shape = [1 if a in inner else n for a, n in enumerate(x.shape)]
            if math.prod(shape[1:]) < 2:
                rows = torch.sum(x, inner, True, dtype=F32)
            else:
                rows = x.new_empty(shape, dtype=F32)
                for i in range(0, x.shape[0], step):
                    torch.sum(x[i : i + step], inner, True, dtype=F32, out=rows[i : i + step])
            return torch.sum(rows, axes, keepdims)
        # A half tensor's float32 total: libtorch widens the whole tensor first, so a large one
        # is added a block of its first axis at a time, the widened block still in the
        # caches, and the blocks' float32 totals added (the float32 bound holds in any order;
        # measured 1.5 against 2.5 ms for 256 x 32 x 26 x 26).
        total: Tensor = None
        for i in range(0, x.shape[0], step):
            part = torch.sum(x[i : i + step], axes, keepdims, dtype=F32)
            total = part if total is None else total.add_(part)
        return total

    def mean(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        if not axes:
            return x if x.dtype is F32 else x.to(F32)
        count = 1
        for axis in axes:
            count *= x.shape[axis]
        return self.sum(x, axes, keepdims).div_(count)

    @staticmethod
    def _work(images: Tensor, w: Tensor, stride: int) -> int:
        """About how many multiply-adds a convolution of these images and filters takes."""
        count, channels, height, width = images.shape
        return int(count * w.shape[0] * channels * w.shape[2] * w.shape[3] * height * width) // (
            stride * stride
        )

    def conv2d_bias(
        self, x: Tensor, w: Tensor, bias: Tensor | None, stride: int, padding: Paddings
    ) -> Tensor:
        if self._small(self._work(x, w, stride)):
            bias = None if bias is None else self._rounded(bias)
            out = self.float32.conv2d_bias(
                self._rounded(x), self._rounded(w), bias, stride, padding
            )
            return out.to(self.half)
        images, pads = padded(self._half(x), padding)
        # The bias in the half format too (one more term of each total, within the bound), so
        # the kernel adds it as it writes its outputs.
        bias = None if bias is None else self._half(bias)
        with self.guard:
            return F.conv2d(images, self._half(w), bias, stride, pads)

    def conv2d_weight_grad(
        self, x: Tensor, gy: Tensor, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        filters = gy.shape[1]
        if self._small(self._work(x, x.new_empty((filters, 1, *kernel)), stride)):
            grads = self._rounded(gy)
            out = self.float32.conv2d_weight_grad(self._rounded(x), grads, kernel, stride, padding)
            return out.to(self.half)
        images, pads = padded(self._half(x), padding)
        w = images.new_empty((filters, x.shape[1], *kernel))  # its shape is all that is read
        args = (self._half(gy), images, w, None, (stride, stride), pads, (1, 1), False, (0, 0), 1)
        with self.guard:
            return _conv_backward(*args, (False, True, False))[1]

    def conv2d_weight_bias_grad(
        self, x: Tensor, gy: Tensor, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> tuple[Tensor, Tensor]:
        # The biases' gradient is a sum, not a product: a float32 total of gy.
        return self.conv2d_weight_grad(x, gy, kernel, stride, padding), self.sum(gy, (0, 2, 3))

    def conv2d_fold(
        self, gy: Tensor, w: Tensor, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        count, channels = gy.shape[0], w.shape[1]
        shape = (count, channels, *image)
        if self._small(self._work(gy.new_empty(1).expand(shape), w, stride)):
            out = self.float32.conv2d_fold(
                self._rounded(gy), self._rounded(w), image, stride, padding
            )
            return out.to(self.half)
        (top, bottom), (left, right) = padding
        even = top == bottom and left == right
        height = image[0] if even else image[0] + top + bottom
        width = image[1] if even else image[1] + left + right
        grads = self._half(gy)
        x = grads.new_empty(1).expand(count, channels, height, width)
        pads = (top, left) if even else (0, 0)
        args = (grads, x, self._half(w), None, (stride, stride), pads, (1, 1), False, (0, 0), 1)
        with self.guard:
            folded = _conv_backward(*args, (True, False, False))[0]
        if even:
            return folded
        return folded[:, :, top : top + image[0], left : left + image[1]].contiguous()


OFFERED: dict[str, Callable[..., Totals]] = {
    "float32": Float32Totals,
    "strict": StrictTotals,
    "mixed_bfloat16": partial(MixedTotals, precision=MIXED_BFLOAT16),
    "mixed_float16": partial(MixedTotals, precision=MIXED_FLOAT16),
}
"""The torch engine's precisions, its default first: name -> strategy."""


def no_terms(x: Tensor, w: Tensor, bias: Tensor | None, stride: int, padding: Paddings) -> Tensor:
    """A convolution of no channels (its totals of no terms: 0, or the bias) or of no filters,
    which libtorch gives the wrong shape (0 channels) or refuses (0 filters) (trial TE)."""
    (top, bottom), (left, right) = padding
    height = (x.shape[2] + top + bottom - w.shape[2]) // stride + 1
    width = (x.shape[3] + left + right - w.shape[3]) // stride + 1
    out = x.new_zeros((x.shape[0], w.shape[0], height, width))
    return out if bias is None else out + bias.to(out.dtype).reshape(1, -1, 1, 1)


def padded(x: Tensor, padding: Paddings) -> tuple[Tensor, tuple[int, int]]:
    """x and the padding to hand libtorch: symmetric padding goes to the kernel, other is added."""
    (top, bottom), (left, right) = padding
    if top == bottom and left == right:
        return x, (top, left)
    return F.pad(x, (left, right, top, bottom)), (0, 0)


def _wide(x: Tensor) -> Tensor:
    """float64 for a total: float32 accumulation in libtorch's kernels strays past the strict
    bound 3·2⁻²⁴·Σ|terms| on long totals of one sign (measured 18 units for an inner size of
    4,096, 4 for a 3x3 convolution), and its bits depend on the thread count; float64 stays
    within half a unit once rounded."""
    return x.to(torch.float64)

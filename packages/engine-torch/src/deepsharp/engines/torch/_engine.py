"""The torch engine's operations: handles are torch tensors on the engine's device.

torch is imported when the first engine is made (`_bind`), never when this module is: the
module-level names `torch`, `F` and friends are filled in then, so every operation costs one
global lookup and torch's own dispatch, nothing more.

- Nothing the engine makes requires grad or has a grad_fn: no input ever requires grad, so
  autograd records nothing; grad mode is never switched.
- Results do not depend on torch's thread count (the application's to set): sums and means
  are added in float64 and rounded once (float32 sums split work across threads); a sigmoid
  too large to run on one thread is formed through tanh, whose vectorised and scalar paths
  agree (torch.sigmoid's do not, so chunk edges would change bits). Products, convolutions,
  maxima and the value-by-value kernels give the same bits whatever the thread count.
- On the processor, the first engine asks glibc's malloc to keep freed memory for reuse
  (`deepsharp.core.engine.memory`), so a step does not fault its memory in again each time.
- On a card, products and convolutions run with TF32 off and deterministic algorithms, set
  for the engine's own calls only and put back as the application had them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import (
    Counters,
    EngineIdentity,
    images_a_block,
    product_blocks,
    use_totals,
)
from deepsharp.core.engine.memory import keep_freed_memory
from deepsharp.core.errors import EngineUnavailableError, ShapeError
from deepsharp.engines.torch._probe import cuda_refusal, load_torch

__all__ = ["TorchEngine"]

Padding = tuple[int, int]
Tensor = Any

# Filled by _bind() when the first engine is made.
torch: Any = None
F: Any = None
F32: Any = None
I64: Any = None
TorchTensor: Any = None
_conv_backward: Any = None
_threshold_backward: Any = None

_BLOCK = 1 << 19
"""How many float64 values a large total's temporaries may hold on the processor (4 MiB)."""

_SERIAL_BELOW = 32768
"""libtorch's grain size: value-by-value kernels on fewer elements run on one thread."""


def _bind() -> Any:
    global torch, F, F32, I64, TorchTensor, _conv_backward, _threshold_backward
    module = load_torch()
    if torch is not module:
        torch = module
        F = module.nn.functional
        F32 = module.float32
        I64 = module.int64
        TorchTensor = module.Tensor
        _conv_backward = module.ops.aten.convolution_backward.default
        _threshold_backward = module.ops.aten.threshold_backward.default
    return module


def _attempt(read: Any) -> Any:
    """A setting's value, or None where torch refuses to say (settings mixed by the caller)."""
    try:
        return read()
    except (RuntimeError, AttributeError):
        return None


class _Exact:
    """On a card: TF32 off and deterministic algorithms for the engine's own calls only.

    Entered around products and convolutions on CUDA (value-by-value kernels, sums and moves
    are not affected by these settings). Since torch 2.9 TF32 has two APIs (the legacy flags
    and `fp32_precision`) that must agree or libtorch refuses to read them: the legacy setters
    keep both in step, so those are what is set; on the way out both are put back exactly as
    the application had them, whichever API it used.
    """

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: tuple[Any, ...] = ()

    def __enter__(self) -> None:
        backends, c = torch.backends, torch._C
        cudnn = backends.cudnn
        self._saved = (
            _attempt(torch.get_float32_matmul_precision),
            _attempt(lambda: backends.cuda.matmul.fp32_precision),
            _attempt(lambda: cudnn.allow_tf32),
            _attempt(lambda: cudnn.conv.fp32_precision),
            _attempt(lambda: cudnn.rnn.fp32_precision),
            c._get_deterministic_algorithms(),
            c._get_deterministic_algorithms_warn_only(),
            c._get_cudnn_benchmark(),
            c._get_cudnn_deterministic(),
        )
        torch.set_float32_matmul_precision("highest")
        cudnn.allow_tf32 = False
        for part in ("conv", "rnn"):  # explicit, should the application's 'all' say tf32
            owner = getattr(cudnn, part, None)
            if owner is not None and hasattr(owner, "fp32_precision"):
                owner.fp32_precision = "ieee"
        det, warn_only, benchmark, cudnn_det = self._saved[5:]
        if not det or warn_only:
            c._set_deterministic_algorithms(True, warn_only=False)
        if benchmark:
            c._set_cudnn_benchmark(False)
        if not cudnn_det:
            c._set_cudnn_deterministic(True)

    def __exit__(self, *exc: object) -> None:
        matmul, matmul_new, dnn, conv_new, rnn_new, det, warn_only, benchmark, cudnn_det = (
            self._saved
        )
        backends, c = torch.backends, torch._C
        if matmul is not None:
            torch.set_float32_matmul_precision(matmul)
        if dnn is not None:
            backends.cudnn.allow_tf32 = dnn
        for owner, value in (
            (backends.cuda.matmul, matmul_new),
            (getattr(backends.cudnn, "conv", None), conv_new),
            (getattr(backends.cudnn, "rnn", None), rnn_new),
        ):
            if owner is None or value is None:
                continue
            if _attempt(lambda o=owner: o.fp32_precision) != value:
                owner.fp32_precision = value
        if not det or warn_only:
            c._set_deterministic_algorithms(det, warn_only=warn_only)
        if benchmark:
            c._set_cudnn_benchmark(True)
        if not cudnn_det:
            c._set_cudnn_deterministic(False)


class TorchEngine:
    """deepsharp's engine on libtorch: `TorchEngine.on_cpu()` or `TorchEngine.on_gpu(index)`.

    Handles are torch tensors on the engine's device (float32; int64 for indices). Made where
    there is no torch, or asked for a card torch cannot use, it raises EngineUnavailableError
    saying why and which packages bring what is missing.
    """

    name = "torch"

    def __init__(self, device: str = "cpu", totals: str = "float64") -> None:
        self.precision = use_totals(self, "torch", totals)
        module = _bind()
        self.counters = Counters()
        self.version: str = str(module.__version__)
        self.device: str = device
        self.totals: str = totals
        self._device = module.device(device)
        self._cuda = self._device.type == "cuda"
        self._guard: Any = _Exact() if self._cuda else nullcontext()
        if not self._cuda:  # a step's freed memory stays in the heap for the next
            keep_freed_memory()

    @classmethod
    def on_cpu(cls, totals: str = "float64") -> TorchEngine:
        """The engine on the processor (any torch build).

        `totals="float32"` adds products, sums and convolutions as PyTorch does, in libtorch's
        float32 kernels: faster, held to a wider bound, and its bits may change with torch's
        thread count (docs/contracts.md says what it keeps and what it gives up).
        """
        return cls("cpu", totals)

    @classmethod
    def on_gpu(cls, index: int = 0, totals: str = "float64") -> TorchEngine:
        """The engine on NVIDIA card `index` (a CUDA build of torch and a card it finds)."""
        module = _bind()
        index = int(index)
        why = cuda_refusal(module, index)
        if why is not None:
            raise EngineUnavailableError(f"the torch engine cannot run on cuda:{index}: {why}")
        # Deterministic cuBLAS needs a fixed workspace; only filled in where the application
        # has not chosen one (read when cuBLAS makes its workspace).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        return cls(f"cuda:{index}", totals)

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, self.version, self.device, self.precision)

    def __repr__(self) -> str:
        precision = "" if self.precision is None else f", {self.precision}"
        return f"TorchEngine(torch {self.version} on {self.device}{precision})"

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: NDArray[Any]) -> Tensor:
        self.counters.transfers_in += 1
        source = np.asarray(array)
        kind = np.int64 if source.dtype.kind in "iub" else np.float32
        if self._cuda:
            return torch.from_numpy(np.ascontiguousarray(source, dtype=kind)).to(self._device)
        # A copy of our own: the caller's array may change after the put.
        return torch.from_numpy(np.array(source, dtype=kind, order="C", copy=True))

    def get(self, handle: Tensor) -> NDArray[Any]:
        self.counters.transfers_out += 1
        if self._cuda:
            return np.ascontiguousarray(handle.cpu().numpy())
        return np.array(handle.numpy(), order="C", copy=True)

    def zeros(self, shape: tuple[int, ...]) -> Tensor:
        return torch.zeros(shape, dtype=F32, device=self._device)

    def shape(self, handle: Tensor) -> tuple[int, ...]:
        return tuple(handle.shape)

    # --- totals ----------------------------------------------------------------------------
    # Every total is added in float64 and rounded once (see _wide). On the processor a large
    # one is worked a block of rows (or images) at a time, so that the float64 copies stay in
    # the caches instead of crossing memory whole; on a card it is one call.
    def matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        a = a.t() if transpose_a else a
        b = b.t() if transpose_b else b
        (rows, inner), columns = a.shape, b.shape[1]
        how, step = (
            ("whole", 0)
            if self._cuda
            else product_blocks(rows, inner, columns, transpose_a, _BLOCK)
        )
        if how == "turned":
            return self.matmul(b, a, True, True).t().contiguous()
        with self._guard:
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
        if self._cuda or count < 2 or x.numel() <= _BLOCK:
            return torch.sum(x, axes, keepdims, dtype=torch.float64)
        step = max(1, _BLOCK * count // x.numel())
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
        (filters + C*kh*kw) * H * W values an image) within _BLOCK; every image on a card."""
        count, channels, height, width = shape
        if self._cuda:
            return max(1, count)
        return images_a_block(filters, channels * kernel[0] * kernel[1], height * width, _BLOCK)

    def conv2d(
        self,
        x: Tensor,
        w: Tensor,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: Tensor | None = None,
    ) -> Tensor:
        count = x.shape[0]
        step = self._images_a_block(x.shape, w.shape[0], w.shape[2:])
        wide = _wide(w)
        wide_bias = None if bias is None else _wide(bias)  # a term of each float64 total
        with self._guard:
            if step >= count:  # on a card, or few images: one call
                images, pads = _padded(_wide(x), padding)
                return F.conv2d(images, wide, wide_bias, stride, pads).to(F32)
            out: Tensor = None
            for i in range(0, count, step):
                images, pads = _padded(_wide(x[i : i + step]), padding)
                y = F.conv2d(images, wide, wide_bias, stride, pads)
                if out is None:
                    out = torch.empty((count, *y.shape[1:]), dtype=F32)
                out[i : i + step] = y
        return out

    def conv2d_weight_grad(
        self,
        x: Tensor,
        gy: Tensor,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Any:
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
        with self._guard:
            for i in range(0, count, step):
                images, pads = _padded(_wide(x[i : i + step]), padding)
                windows = F.unfold(images, kernel, 1, pads, stride)  # (n, C*kh*kw, P)
                grads = _wide(gy[i : i + step]).reshape(images.shape[0], filters, -1)
                total += torch.bmm(grads, windows.transpose(1, 2)).sum(0)
                if bias:
                    biases += grads.sum((0, 2))
        weights = total.reshape(filters, channels, *kernel).to(F32)
        return (weights, biases.to(F32)) if bias else weights

    def conv2d_fold(
        self,
        gy: Tensor,
        w: Tensor,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
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
        with self._guard:
            for i in range(0, count, step):
                grads = _wide(gy[i : i + step])
                x = grads.new_empty(1).expand(grads.shape[0], channels, height, width)
                args = (grads, x, wide, None, (stride, stride), pads, (1, 1), False, (0, 0), 1)
                folded = _conv_backward(*args, (True, False, False))[0]
                if not even:
                    folded = folded[:, :, top : top + image[0], left : left + image[1]]
                out[i : i + step] = folded
        return out

    # --- totals in libtorch's float32 kernels (totals="float32"): what PyTorch itself runs --
    def _matmul_float32(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        b = b.t() if transpose_b else b
        with self._guard:
            if transpose_a and a.shape[1] > b.shape[1]:
                # A tall product from a stored transposed (a dense layer's weight gradient):
                # (b.T @ a).T reads a by its rows, 3-4x faster in libtorch's sgemm.
                return torch.mm(b.t(), a).t()
            return torch.mm(a.t() if transpose_a else a, b)

    def _sum_float32(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        return torch.sum(x, axes, keepdims) if axes else x

    def _mean_float32(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        return torch.mean(x, axes, keepdims) if axes else x

    def _conv2d_float32(
        self,
        x: Tensor,
        w: Tensor,
        stride: int,
        padding: tuple[Padding, Padding],
        bias: Tensor | None = None,
    ) -> Tensor:
        images, pads = _padded(x, padding)
        with self._guard:
            return F.conv2d(images, w, bias, stride, pads)

    def _conv2d_weight_grad_float32(
        self,
        x: Tensor,
        gy: Tensor,
        kernel: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
        bias: bool = False,
    ) -> Any:
        images, pads = _padded(x, padding)
        # Only the weights' shape is read: an expanded scalar stands in for them.
        w = x.new_empty(1).expand(gy.shape[1], x.shape[1], *kernel)
        sizes = [gy.shape[1]] if bias else None
        args = (gy, images, w, sizes, (stride, stride), pads, (1, 1), False, (0, 0), 1)
        with self._guard:
            _, weights, biases = _conv_backward(*args, (False, True, bias))
        return (weights, biases) if bias else weights

    def _conv2d_fold_float32(
        self,
        gy: Tensor,
        w: Tensor,
        image: tuple[int, int],
        stride: int,
        padding: tuple[Padding, Padding],
    ) -> Tensor:
        (top, bottom), (left, right) = padding
        even = top == bottom and left == right
        height = image[0] if even else image[0] + top + bottom
        width = image[1] if even else image[1] + left + right
        x = gy.new_empty(1).expand(gy.shape[0], w.shape[1], height, width)
        pads = (top, left) if even else (0, 0)
        args = (gy, x, w, None, (stride, stride), pads, (1, 1), False, (0, 0), 1)
        with self._guard:
            folded = _conv_backward(*args, (True, False, False))[0]
        if even:
            return folded
        return folded[:, :, top : top + image[0], left : left + image[1]].contiguous()

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Tensor:
        return a + b

    def sub(self, a: Any, b: Any) -> Tensor:
        return a - b

    def mul(self, a: Any, b: Any) -> Tensor:
        return a * b

    def div(self, a: Any, b: Any) -> Tensor:
        return a / b

    def maximum(self, a: Any, b: Any) -> Tensor:
        if not isinstance(b, TorchTensor):
            return torch.clamp_min(a, b)
        if not isinstance(a, TorchTensor):
            return torch.clamp_min(b, a)
        return torch.maximum(a, b)

    def greater(self, a: Any, b: Any) -> Tensor:
        # Compared straight into float32 (one pass, not a bool tensor and a conversion).
        if not isinstance(a, TorchTensor):
            return torch.lt(b, a, out=torch.empty(b.shape, dtype=F32, device=b.device))
        if not isinstance(b, TorchTensor):
            return torch.gt(a, b, out=torch.empty(a.shape, dtype=F32, device=a.device))
        shape = torch.broadcast_shapes(a.shape, b.shape)
        return torch.gt(a, b, out=torch.empty(shape, dtype=F32, device=a.device))

    def where(self, condition: Tensor, a: Any, b: Any) -> Tensor:
        out = torch.where(condition != 0, a, b)
        return out if out.dtype == F32 else out.to(F32)

    def neg(self, x: Tensor) -> Tensor:
        return torch.neg(x)

    def abs(self, x: Tensor) -> Tensor:
        return torch.abs(x)

    def exp(self, x: Tensor) -> Tensor:
        return torch.exp(x)

    def log(self, x: Tensor) -> Tensor:
        return torch.log(x)

    def log1p(self, x: Tensor) -> Tensor:
        return torch.log1p(x)

    def softplus(self, x: Tensor) -> Tensor:
        # Above 20, libtorch answers x itself: off by less than 3e-9, well within the contract.
        return F.softplus(x)

    def sqrt(self, x: Tensor) -> Tensor:
        return torch.sqrt(x)

    def tanh(self, x: Tensor) -> Tensor:
        return torch.tanh(x)

    def sigmoid(self, x: Tensor) -> Tensor:
        if self._cuda or x.numel() < _SERIAL_BELOW:
            return torch.sigmoid(x)
        # 0.5 * (1 + tanh(x / 2)), as the light engine: the same bits on any thread count.
        return torch.tanh(x * 0.5).add_(1.0).mul_(0.5)

    def relu(self, x: Tensor) -> Tensor:
        return torch.relu(x)

    def relu_back(self, x: Tensor, grad: Tensor) -> Tensor:
        # What PyTorch's own ReLU runs on its way back: grad where x > 0, one pass.
        return _threshold_backward(grad, x, 0.0)

    def sgd_update(
        self,
        slots: Sequence[Tensor],
        grads: Sequence[Tensor],
        velocities: Sequence[Tensor],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        if not slots:
            return
        velocities = list(velocities)
        torch._foreach_mul_(velocities, momentum)
        torch._foreach_add_(velocities, list(grads), alpha=-learning_rate)
        torch._foreach_add_(list(slots), velocities)

    def adam_update(
        self,
        slots: Sequence[Tensor],
        grads: Sequence[Tensor],
        firsts: Sequence[Tensor],
        seconds: Sequence[Tensor],
        *,
        step_size: float,
        beta1: float,
        beta2: float,
        epsilon: float,
    ) -> None:
        if not slots:
            return
        grads, firsts = list(grads), list(firsts)
        # lerp with a weight under 0.5 is m + w * (g - m): Keras's m += (g - m) * (1 - beta1).
        torch._foreach_lerp_(firsts, grads, 1.0 - beta1)
        squares = torch._foreach_mul(grads, grads)
        torch._foreach_lerp_(list(seconds), squares, 1.0 - beta2)
        roots = torch._foreach_sqrt(list(seconds))
        torch._foreach_add_(roots, epsilon)
        torch._foreach_addcdiv_(list(slots), firsts, roots, -step_size)

    # --- moves -----------------------------------------------------------------------------
    def copy(self, x: Tensor) -> Tensor:
        return x.clone(memory_format=torch.contiguous_format)

    def assign(self, target: Tensor, source: Tensor) -> None:
        if tuple(target.shape) != tuple(source.shape):
            raise ShapeError(
                f"assign: target of shape {tuple(target.shape)}, source of shape "
                f"{tuple(source.shape)}: they must be the same"
            )
        target.copy_(source)

    def reshape(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        return x.reshape(shape)

    def transpose(self, x: Tensor, axes: tuple[int, ...]) -> Tensor:
        return x.permute(axes)

    def slice(self, x: Tensor, axis: int, start: int, stop: int) -> Tensor:
        index: list[Any] = [slice(None)] * x.dim()
        index[axis] = slice(start, stop)
        return x[tuple(index)]

    def take_rows(self, x: Tensor, rows: Tensor) -> Tensor:
        if rows.dim() == 1:
            return torch.index_select(x, 0, rows)
        return x[rows]

    def concatenate(self, xs: Sequence[Tensor], axis: int) -> Tensor:
        return torch.cat(list(xs), axis)

    def split(self, x: Tensor, sizes: Sequence[int], axis: int) -> list[Tensor]:
        return list(torch.split(x, list(sizes), axis))

    def pad(self, x: Tensor, widths: Sequence[Padding]) -> Tensor:
        flat: list[int] = []
        for before, after in reversed(list(widths)):
            flat += (int(before), int(after))
        return F.pad(x, flat)

    def broadcast_to(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        return x.expand(shape)

    def max(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        if not axes:
            return x
        return torch.amax(x, axes, keepdims)

    def one_hot(self, indices: Tensor, classes: int) -> Tensor:
        out = torch.zeros((*indices.shape, classes), dtype=F32, device=indices.device)
        return out.scatter_(-1, indices.unsqueeze(-1), 1.0)

    def maxpool2d(self, x: Tensor, pool: int) -> tuple[Tensor, Tensor]:
        count, channels, height, width = x.shape
        out_h, out_w = height // pool, width // pool
        if (out_h * pool, out_w * pool) != (height, width):
            x = x[:, :, : out_h * pool, : out_w * pool]
        windows = (
            x.reshape(count, channels, out_h, pool, out_w, pool)
            .permute(0, 1, 2, 4, 3, 5)
            .reshape(count, channels, out_h, out_w, pool * pool)
        )
        # torch.max along a dimension names the first maximum, as NumPy's argmax does.
        values, selection = torch.max(windows, -1)
        return values, selection

    def maxpool2d_back(
        self, gy: Tensor, selection: Tensor, image: tuple[int, int], pool: int
    ) -> Tensor:
        count, channels, out_h, out_w = gy.shape
        spread = torch.zeros(
            (count, channels, out_h, out_w, pool * pool), dtype=gy.dtype, device=gy.device
        )
        spread.scatter_(-1, selection.unsqueeze(-1), gy.unsqueeze(-1))
        grid = (
            spread.reshape(count, channels, out_h, out_w, pool, pool)
            .permute(0, 1, 2, 4, 3, 5)
            .reshape(count, channels, out_h * pool, out_w * pool)
        )
        height, width = image
        if (height, width) == (out_h * pool, out_w * pool):
            return grid
        return F.pad(grid, (0, width - out_w * pool, 0, height - out_h * pool))


def _padded(x: Tensor, padding: tuple[Padding, Padding]) -> tuple[Tensor, tuple[int, int]]:
    """x and the padding to hand libtorch: symmetric padding goes to the kernel, other is added."""
    (top, bottom), (left, right) = padding
    if top == bottom and left == right:
        return x, (top, left)
    return F.pad(x, (left, right, top, bottom)), (0, 0)


def _wide(x: Tensor) -> Tensor:
    """float64 for a total: float32 accumulation in libtorch's kernels strays past the contract's
    3·2⁻²⁴·Σ|terms| on long totals of one sign (measured 18 units for an inner size of 4,096,
    4 for a 3x3 convolution), and its bits depend on the thread count; float64 stays within half
    a unit once rounded."""
    return x.to(torch.float64)

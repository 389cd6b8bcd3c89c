"""The torch engine's operations: handles are torch tensors on the engine's device.

torch is imported when the first engine is made (`_bind`), never when this module is: the
module-level names `torch`, `F` and friends are filled in then, so every operation costs one
global lookup and torch's own dispatch, nothing more.

- Nothing the engine makes requires grad: autograd records nothing, grad mode never switched.
- Its totals (products, sums, means, convolutions, products of stacks, rows added into places)
  are added by the strategy its precision names (`_totals`): `float32` (the default,
  libtorch's own kernels) or `strict` (float64, rounded once). Every other operation is the
  same at any precision.
- Value-by-value operations give each element the same bits whatever its company and torch's
  thread count (the application's to set): `sigmoid` and `softplus` are formed from `exp`,
  `log1p` and exact arithmetic, whose vectorised paths cover every element
  (`torch.sigmoid` and `F.softplus` finish each chunk on a scalar path that differs by an
  ulp, so a value's bits would depend on its place in the tensor), and each is accurate
  relative to its value in its tails; GELU's kernels (each way) take their values padded to
  whole vector passes in every thread's share, so that none is finished on the scalar path.
- On the processor, the first engine asks glibc's malloc to keep freed memory for reuse.
- On a card, products and convolutions run with TF32 off and deterministic algorithms, set
  for the engine's own calls only and put back as the application had them (`_exact`).
- At a mixed precision (`mixed_bfloat16` on the processor; both on a card) handles may hold
  the half format: products and convolutions give their outputs in it (`_totals.MixedTotals`),
  and `_mixed.HalfOutputs` says what every other operation does with such a handle (docs/contracts.md
  and docs/mixed-precision.md): `get` gives float32; moves, ReLU and its way back, max-pooling
  (over squares and pairs) and adding a float32 bias keep the half format; products of stacks
  give it as products do; every other operation (erf and rows added into places among them)
  reads the half values exactly, widened, and gives float32.
"""

from __future__ import annotations

import copy
import math
import operator
import os
from collections.abc import Sequence
from contextlib import nullcontext
from functools import partial
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Counters, EngineIdentity, Precision, Totals, choose_totals
from deepsharp.core.engine.fused import (
    all_finite,
    binary_cross_entropy_terms_reference,
    layer_norm_back_reference,
    layer_norm_reference,
)
from deepsharp.core.engine.fused_recurrent import lstm_cell_back_reference, lstm_cell_reference
from deepsharp.core.engine.memory import keep_freed_memory
from deepsharp.core.engine.protocol import int64_put, own_name
from deepsharp.core.errors import EngineUnavailableError, ShapeError
from deepsharp.engines.torch import _exact, _groups, _norms, _recurrent, _totals
from deepsharp.engines.torch._graphs import cuda_graph
from deepsharp.engines.torch._groups import FLATS_KEPT, Scratch, flat_tensors, lanes
from deepsharp.engines.torch._pickled import remade
from deepsharp.engines.torch._probe import checked_device, cuda_refusal, load_torch

__all__ = ["TorchEngine"]

Padding = tuple[int, int]
Paddings = tuple[Padding, Padding]
Tensor = Any

# Filled by _bind() when the first engine is made.
torch: Any = None
F: Any = None
F32: Any = None
I64: Any = None
TorchTensor: Any = None
_threshold_backward: Any = None
_gelu: Any = None
_gelu_back: Any = None


def _bind() -> Any:
    global torch, F, F32, I64, TorchTensor, _threshold_backward, _gelu, _gelu_back
    module = load_torch()
    if torch is not module:
        torch = module
        F = module.nn.functional
        F32 = module.float32
        I64 = module.int64
        TorchTensor = module.Tensor
        _threshold_backward = module.ops.aten.threshold_backward.default
        _gelu, _gelu_back = module.ops.aten.gelu.default, module.ops.aten.gelu_backward.default
        _norms.bind(module)
        _totals.bind(module)
        _groups.bind(module)
        _exact.bind(module)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_one_thread_forked)
    return module


def _one_thread_forked() -> None:
    """In a process forked from one whose libtorch runs on several threads: libtorch at one
    thread, as PyTorch's DataLoader gives its workers. GNU OpenMP's pool does not survive a fork,
    and the child's first operation split over threads waited for it forever (trial K: a fork
    Pool calling predict hung; plain PyTorch does too)."""
    if torch is not None and torch.get_num_threads() > 1:
        torch.set_num_threads(1)


CHECKED_IN_LIBTORCH = 1 << 16
"""The fewest values of a batch `put_checked` copies and totals in libtorch (65,536: a 256-image
batch of 28 x 28 is 200,704; a Titanic batch 448)."""

MIXED = ("mixed_bfloat16", "mixed_float16")
CARD_ONLY = {"mixed_float16": "mixed_bfloat16"}
"""Precisions offered on cards only -> what to use on the processor instead: float16 products
run no faster than float32 on processors without AMX-FP16 (measured: 16 ms either way for
1,024 x 1,024 x 1,024 on this machine's Xeon, 2.2 ms in bfloat16)."""


class TorchEngine:
    """deepsharp's engine on libtorch: `TorchEngine.on_cpu()` or `TorchEngine.on_gpu(index)`.

    Handles are torch tensors on the engine's device (float32; int64 for indices; at a mixed
    precision also the half format). Made where there is no torch, or asked for a card torch
    cannot use, it raises EngineUnavailableError saying why and which packages bring what is
    missing. Its precision (`float32` by default, `strict`, `mixed_bfloat16`, or on a card
    `mixed_float16`) says how it adds its totals and is part of its identity.
    """

    name = "torch"
    _mixed: ClassVar[type[TorchEngine] | None] = None
    # The class a mixed precision makes: `_mixed.HalfOutputs`, entered by its class statement
    # (`mixed=True`); the package imports that module, so it is there before any engine is made.

    def __init_subclass__(cls, mixed: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if mixed:
            TorchEngine._mixed = cls

    def __new__(cls, device: str = "cpu", precision: str | Precision = "float32") -> TorchEngine:
        named = precision.name if isinstance(precision, Precision) else precision
        if cls is TorchEngine and named in MIXED and TorchEngine._mixed is not None:
            cls = TorchEngine._mixed
        return super().__new__(cls)

    def __init__(self, device: str = "cpu", precision: str | Precision = "float32") -> None:
        module = _bind()
        self.counters = Counters()
        self._flats: dict[tuple[int, ...], tuple[list[tuple[Tensor, ...]], list[Tensor] | None]]
        self._flats = {}
        self._scratch = Scratch()  # a flat update's blocks
        self._layer_norms = _norms.Norms()
        self.version: str = str(module.__version__)
        self.device: str = device
        self._device = checked_device(module, device)
        self._cuda = self._device.type == "cuda"
        named = precision.name if isinstance(precision, Precision) else precision
        if named in CARD_ONLY and not self._cuda:
            instead = CARD_ONLY[named]
            raise EngineUnavailableError(
                f"the torch engine runs {named} on NVIDIA cards only (torch:cuda:0:{named}): "
                f"on the processor its products run no faster than float32. Use "
                f"torch:cpu:{instead}, or light:{named} for its arithmetic on the processor"
            )
        mixed = named in MIXED
        guard = _exact.HalfExact if mixed else _exact.Exact
        self._guard: Any = guard() if self._cuda else nullcontext()
        offered = {
            name: partial(kind, self._cuda, self._guard) for name, kind in _totals.OFFERED.items()
        }
        self.totals: Totals = choose_totals("torch", precision, offered)
        self.precision: str = self.totals.precision.name
        if not self._cuda:  # a step's freed memory stays in the heap for the next
            keep_freed_memory()
        if self.precision == "float32" and not self._cuda and _recurrent.available(module):
            # Fast paths of this engine alone: oneDNN's LSTM kernel over a whole sequence,
            # each way (float32 on the processor; elsewhere the LSTM's positions run). A
            # subclass's own method of either name is its own, not hidden by these.
            for name in ("lstm_sequence", "lstm_sequence_back"):
                if not hasattr(type(self), name):
                    setattr(self, name, getattr(self, f"_{name}"))
            _recurrent.offer_masked(self, torch)  # a padded sequence's, turned to its tokens

    @classmethod
    def on_cpu(cls, precision: str | Precision = "float32") -> TorchEngine:
        """The engine on the processor (any torch build).

        `precision="float32"` (the default) adds products, sums and convolutions as PyTorch
        does, in libtorch's float32 kernels; `precision="strict"` adds each total in float64
        and rounds it once: within 3u·Σ|terms|, the same bits on any thread count and for a
        row in any company, at up to twice the time on convolutions (docs/install.md);
        `precision="mixed_bfloat16"` takes products and convolutions in bfloat16, added in
        float32, as PyTorch's autocast does (docs/mixed-precision.md).
        """
        return cls("cpu", precision)

    @classmethod
    def on_gpu(cls, index: int = 0, precision: str | Precision = "float32") -> TorchEngine:
        """The engine on NVIDIA card `index` (a CUDA build of torch and a card it finds)."""
        module = _bind()
        index = int(index)
        why = cuda_refusal(module, index)
        if why is not None:
            raise EngineUnavailableError(f"the torch engine cannot run on cuda:{index}: {why}")
        # Deterministic cuBLAS needs a fixed workspace; only filled in where the application
        # has not chosen one (read when cuBLAS makes its workspace).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        return cls(f"cuda:{index}", precision)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        """Pickled (copied: scikit-learn's clone, a worker process of `n_jobs`) as its class,
        device, precision and counters: unpickled, the engine is made again as `on_cpu` or
        `on_gpu` make it, which imports torch (this module imports it lazily: unpickled as its
        attributes, the engine found `torch` unbound in a new process); where torch or the
        card is not there, as a stand-in that refuses every use, naming what is missing
        (`_pickled.UnavailableEngine`: what holds it, a fitted estimator, still loads)."""
        counters = copy.copy(self.counters)  # a copy's own (copy.copy shared them)
        return remade, (type(self), self.device, self.precision), {"counters": counters}

    @property
    def identity(self) -> EngineIdentity:  # a subclass's own name (trial CP4)
        name = own_name(self, TorchEngine)
        return EngineIdentity(name, self.version, self.device, self.precision)

    @property
    def thread_bits(self) -> int | None:
        """The thread count its bits depend on: libtorch's on the processor, but at strict
        (its totals in float64, the same bits at any count); None on a card."""
        if self._cuda or self.precision == "strict":
            return None
        return int(torch.get_num_threads())

    def __repr__(self) -> str:
        kind = "TorchEngine" if own_name(self, TorchEngine) == "torch" else type(self).__name__
        return f"{kind}(torch {self.version} on {self.device}, {self.precision})"

    # --- transfers -------------------------------------------------------------------------
    def put(self, array: NDArray[Any]) -> Tensor:
        self.counters.transfers_in += 1
        source = np.asarray(array)
        kind = np.int64 if int64_put(source) else np.float32
        if self._cuda:
            return torch.from_numpy(np.ascontiguousarray(source, dtype=kind)).to(self._device)
        # A copy of our own: the caller's array may change after the put.
        return torch.from_numpy(np.array(source, dtype=kind, order="C", copy=True))

    def put_checked(self, array: NDArray[Any], *, owned: bool = False) -> tuple[Tensor, bool]:
        """Fast path: the array put and whether every value is finite, both in libtorch's
        threads: the copy (none where the caller hands over a float32 array in C order), then
        its total while the copy is in the caches (a float64 total only where the float32 one
        overflowed). A small batch (under `CHECKED_IN_LIBTORCH` values), and on a card any
        batch, is checked on the host as the reference does: libtorch's calls cost more than
        NumPy's pass there, and a total read back from a card would wait for it."""
        source = np.asarray(array)
        if self._cuda or source.dtype.kind != "f" or source.size < CHECKED_IN_LIBTORCH:
            return self.put(source), all_finite(source)
        self.counters.transfers_in += 1
        kept = torch.from_numpy(np.ascontiguousarray(source, dtype=np.float32))
        if not owned and np.shares_memory(kept.numpy(), source):
            kept = kept.clone()  # ours: the caller's array may change after the put
        if math.isfinite(float(torch.sum(kept))):
            return kept, True
        return kept, math.isfinite(float(torch.sum(kept, dtype=torch.float64)))

    def get(self, handle: Tensor) -> NDArray[Any]:
        self.counters.transfers_out += 1
        if self._cuda:
            return np.ascontiguousarray(handle.cpu().numpy())
        return np.array(handle.numpy(), order="C", copy=True)

    def zeros(self, shape: tuple[int, ...]) -> Tensor:
        return torch.zeros(shape, dtype=F32, device=self._device)

    def shape(self, handle: Tensor) -> tuple[int, ...]:
        return tuple(handle.shape)

    # --- totals: as the precision's strategy adds them -------------------------------------
    def matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        return self.totals.matmul(a, b, transpose_a, transpose_b)

    def sum(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        return self.totals.sum(x, axes, keepdims)

    def mean(self, x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> Tensor:
        return self.totals.mean(x, axes, keepdims)

    def conv2d(self, x: Tensor, w: Tensor, stride: int, padding: Paddings) -> Tensor:
        if not (x.shape[1] and w.shape[0]):
            return _totals.no_terms(x, w, None, stride, padding)
        return self.totals.conv2d(x, w, stride, padding)

    def conv2d_bias(
        self, x: Tensor, w: Tensor, bias: Tensor, stride: int, padding: Paddings
    ) -> Tensor:
        """Fast path: each filter's bias one more term of its totals, in the same call."""
        if not (x.shape[1] and w.shape[0]):
            return _totals.no_terms(x, w, bias, stride, padding)
        return self.totals.conv2d_bias(x, w, bias, stride, padding)

    def conv2d_weight_grad(
        self, x: Tensor, gy: Tensor, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        return self.totals.conv2d_weight_grad(x, gy, kernel, stride, padding)

    def matmul_bias(self, x: Tensor, w: Tensor, bias: Tensor, transpose_b: bool = False) -> Tensor:
        """Fast path: the bias one more term of each total, in the product's call (float32 and
        the mixed precisions); strict adds it after its float64 product, as the reference."""
        strategy: Any = self.totals  # one of this engine's (`_totals`), beyond the protocol
        made = strategy.matmul_bias(x, w, bias, transpose_b)
        return self.add(self.matmul(x, w, False, transpose_b), bias) if made is None else made

    def conv2d_weight_bias_grad(
        self, x: Tensor, gy: Tensor, kernel: tuple[int, int], stride: int, padding: Paddings
    ) -> tuple[Tensor, Tensor]:
        """Fast path: the filters' and the biases' gradients from one pass over gy."""
        return self.totals.conv2d_weight_bias_grad(x, gy, kernel, stride, padding)

    def conv2d_fold(
        self, gy: Tensor, w: Tensor, image: tuple[int, int], stride: int, padding: Paddings
    ) -> Tensor:
        return self.totals.conv2d_fold(gy, w, image, stride, padding)

    def batch_matmul(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        """Fast path: every stack's product in one `bmm`, as the precision adds it."""
        return self.totals.batch_matmul(a, b, transpose_a, transpose_b)

    def add_rows(self, values: Tensor, indices: Tensor, rows: int) -> Tensor:
        """Fast path: `index_add_` into zeros, as the precision adds it: no one-hot, the
        values added index by index in the order they come."""
        return self.totals.add_rows(values, indices, rows)

    # --- value by value --------------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Tensor:
        return a + b

    def sub(self, a: Any, b: Any) -> Tensor:
        return a - b

    def mul(self, a: Any, b: Any) -> Tensor:
        return a * b

    def div(self, a: Any, b: Any) -> Tensor:
        if not isinstance(a, TorchTensor):  # libtorch's number / tensor multiplies by the
            # tensor's reciprocal: a unit off, and inf for 1e-38 / 1e-39 (trial TE)
            return torch.div(b.new_full((), a), b)
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
        # max(x, 0) + log1p(exp(-|x|)): no overflow, and accurate relative to its value for
        # x far below 0, where it is exp(x).
        tail = torch.log1p_(torch.exp_(torch.abs(x).neg_()))
        return tail.add_(torch.relu(x))

    def sqrt(self, x: Tensor) -> Tensor:
        return torch.sqrt(x)

    def tanh(self, x: Tensor) -> Tensor:
        return torch.tanh(x)

    def sigmoid(self, x: Tensor) -> Tensor:
        # 1/(1 + exp(-x)), accurate relative to its value in both tails (sigmoid(-80) is
        # 1.8e-35, not 0); -x capped at 88, where exp would overflow and the answer is below
        # float32's smallest normal value anyway.
        return torch.neg(x).clamp_max_(88.0).exp_().add_(1.0).reciprocal_()

    def relu(self, x: Tensor) -> Tensor:
        return torch.relu(x)

    def erf(self, x: Tensor) -> Tensor:
        """Fast path: libtorch's erf (within 3.3e-8 on the processor), one vectorised formula
        at every size: a value's bits do not depend on its company."""
        return torch.erf(x)

    def gelu(self, x: Tensor) -> Tensor:
        """Fast path: libtorch's GELU kernel (the exact form, as `nn.GELU()`), one pass. It
        takes a value alone on a scalar formula an ulp from its vector one, so a value's bits
        would depend on its company: the values go in padded to whole vector passes in every
        thread's share (`lanes`), which they then all take."""
        (flat,), count = lanes(x)
        return _gelu(flat)[:count].view(x.shape)

    def gelu_back(self, x: Tensor, grad: Tensor) -> Tensor:
        """Fast path: libtorch's GELU way back, grad·(Φ(x) + x·φ(x)), one pass, padded as
        `gelu`'s."""
        (flat_grad, flat), count = lanes(grad, x)
        return _gelu_back(flat_grad, flat)[:count].view(x.shape)

    def layer_norm(self, x: Tensor, scale: Tensor, shift: Tensor, epsilon: float) -> Tensor:
        """Fast path: libtorch's LayerNorm kernel, one pass over each position's last axis; at
        strict, the reference, its totals in float64 (libtorch's kernel takes each row's mean
        and variance in float32: a constant row of -1e10 came out of variance 0.006, trial NU2)."""
        if self.precision == "strict":
            return layer_norm_reference(self, x, scale, shift, epsilon)
        return self._layer_norms.forward(x, scale, shift, epsilon)

    def layer_norm_back(
        self, x: Tensor, scale: Tensor, grad: Tensor, epsilon: float
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Fast path: libtorch's LayerNorm way back (`_norms.Norms.back`); at strict, the
        reference (its row totals float64's: the kernel's, float32's, gave a constant row of
        -1e10 a gradient of 0 where it is 790, trial NU2)."""
        if self.precision == "strict":
            return layer_norm_back_reference(self, x, scale, grad, epsilon)
        return self._layer_norms.back(x, scale, grad, epsilon)

    # --- fast paths (deepsharp.core.engine.fused) -----------------------------------------
    def lstm_cell(
        self, share: Tensor, state: Tensor | None, cell: Tensor | None, weight_hh: Tensor
    ) -> tuple[Tensor, ...]:
        """Fast path: one position of an LSTM in seven libtorch calls at float32 (the state's
        product added into the share in one `addmm`, one sigmoid over the four gates, the
        cell's two products in one `addcmul_`), where the reference makes a dozen engine
        calls and sigmoid's careful five; at another precision, the reference."""
        if self.precision != "float32":
            return lstm_cell_reference(self, share, state, cell, weight_hh)
        if state is None:
            gates = share
        else:
            with self._guard:
                gates = torch.addmm(share, state, weight_hh.t())
        return _recurrent.cell(torch, gates, cell, weight_hh.shape[1])

    def lstm_cell_back(
        self,
        dh: Tensor,
        dc: Tensor | None,
        entering: Tensor,
        forget: Tensor,
        candidate: Tensor,
        out: Tensor,
        squashed: Tensor,
        cell: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """Fast path: one position's way back at float32, each gate's gradient written into
        its quarter of one tensor (a sigmoid's slope s - s·s in one `addcmul`); at another
        precision, the reference."""
        if self.precision != "float32":
            return lstm_cell_back_reference(
                self, dh, dc, entering, forget, candidate, out, squashed, cell
            )
        return _recurrent.cell_back(torch, dh, dc, entering, forget, candidate, out, squashed, cell)

    lstm_sequence: Any
    lstm_sequence_back: Any
    """Offered at float32 on the processor where libtorch has oneDNN (`_lstm_sequence`)."""

    def _lstm_sequence(
        self, x: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias: Tensor
    ) -> Tensor:
        """Fast path: a whole LSTM sequence forward in oneDNN's kernel (PyTorch's nn.LSTM's
        on the processor): one call, where the positions make a dozen each."""
        return _recurrent.forward(torch, x, weight_ih, weight_hh, bias)

    def _lstm_sequence_back(
        self,
        grad_states: Tensor | None,
        grad_last: Tensor | None,
        x: Tensor,
        weight_ih: Tensor,
        weight_hh: Tensor,
        bias: Tensor,
        states: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Fast path: the sequence's way back in oneDNN's kernel, from what its forward kept."""
        return _recurrent.backward(
            torch, grad_states, grad_last, x, weight_ih, weight_hh, bias, states
        )

    def relu_back(self, x: Tensor, grad: Tensor) -> Tensor:
        """Fast path: what PyTorch's own ReLU runs on its way back: grad where x > 0."""
        return _threshold_backward(grad, x, 0.0)

    def binary_cross_entropy_terms(self, z: Tensor, y: Any) -> Tensor:
        """Fast path: softplus(z) - z·y, in libtorch's softplus (log1p(e^z); z itself above 20,
        where the two differ by under 2e-9) and two more calls: the reference's seven took
        11 us on a Titanic batch, these 3 us. Not PyTorch's own BCEWithLogitsLoss, (1 - y)·z -
        log_sigmoid(z): far below 0 with a target just above 0 (label smoothing's) its two terms
        of z's size cancel, and it strayed past the bound the reference carries (z = -3,000,
        y = 0.005: 8e-5 from 15.0035, 2.8 times the value tolerance)."""
        if not isinstance(y, TorchTensor) or y.shape != z.shape or y.dtype is not z.dtype:
            return binary_cross_entropy_terms_reference(self, z, y)
        return F.softplus(z).sub_(torch.mul(z, y))

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
        flat = self._flat(slots, velocities)
        if flat is not None:  # passes over every slot's values at once, a block at a time
            kw = {"learning_rate": learning_rate, "momentum": momentum}
            _groups.sgd_blocks(flat, grads, self._scratch, **kw)
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
        flat = self._flat(slots, firsts, seconds)
        if flat is not None:  # the lists' passes below over every slot at once, in blocks
            kw = {"step_size": step_size, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
            _groups.adam_blocks(flat, grads, self._scratch, **kw)
            return
        grads, firsts = list(grads), list(firsts)
        # lerp with a weight under 0.5 is m + w * (g - m): Keras's m += (g - m) * (1 - beta1).
        torch._foreach_lerp_(firsts, grads, 1.0 - beta1)
        squares = torch._foreach_mul(grads, grads)
        torch._foreach_lerp_(list(seconds), squares, 1.0 - beta2)
        roots = torch._foreach_sqrt(list(seconds))
        torch._foreach_add_(roots, epsilon)
        torch._foreach_addcdiv_(list(slots), firsts, roots, -step_size)

    def decay_update(self, slots: Sequence[Tensor], *, factor: float) -> None:
        """Fast path: every slot times `factor`, in one call over them all."""
        if slots:
            flat = self._flat(slots)
            torch._foreach_mul_(list(slots) if flat is None else flat, factor)

    def _flat(self, *groups: Sequence[Tensor]) -> list[Tensor] | None:
        """The flat tensor behind each group (`flat_tensors`), remembered for groups of the same
        tensors: an update asks it every step of the same slots and memories, and looking
        again took 4 us of a 100 us step."""
        key = tuple(map(id, groups))
        known = self._flats.get(key)
        if known is not None and all(
            len(group) == len(held) and all(map(operator.is_, group, held))
            for group, held in zip(groups, known[0])
        ):
            return known[1]
        found = flat_tensors(*groups)
        if len(self._flats) >= FLATS_KEPT:
            del self._flats[next(iter(self._flats))]
        self._flats[key] = ([tuple(group) for group in groups], found)
        return found

    # --- a compiled step's plan as one launch (deepsharp.core.training.compiled) ---------------
    @property
    def graphs(self) -> bool:
        """Whether a compiled step's plan is captured as one graph (`graph_plan`): on a card."""
        return bool(self._cuda)

    def graph_plan(self, plan: Any, inputs: Sequence[Any]) -> Any:
        """On a card: `plan` (a compiled step's pass, this engine's calls on `inputs`, already
        run once as it is) captured as one CUDA graph. The function returned copies its inputs
        into the graph's own and replays it — every kernel of the pass in one launch, the same
        kernels on the same values, so the same bits — and gives back the graph's outputs
        (rewritten by its next replay). None on the processor, where there is no graph."""
        return cuda_graph(torch, self._device, plan, inputs) if self._cuda else None

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
        return self.maxpool2d_pair(x, (pool, pool))

    def maxpool2d_back(
        self, gy: Tensor, selection: Tensor, image: tuple[int, int], pool: int
    ) -> Tensor:
        return self.maxpool2d_pair_back(gy, selection, image, (pool, pool))

    def maxpool2d_pair(self, x: Tensor, pool: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """Fast path: windows of pool[0] x pool[1], as the square ones are pooled."""
        (count, channels, height, width), (down, across) = x.shape, pool
        out_h, out_w = height // down, width // across
        if (out_h * down, out_w * across) != (height, width):
            x = x[:, :, : out_h * down, : out_w * across]
        windows = (
            x.reshape(count, channels, out_h, down, out_w, across)
            .permute(0, 1, 2, 4, 3, 5)
            .reshape(count, channels, out_h, out_w, down * across)
        )
        # torch.max along a dimension names the first maximum, as NumPy's argmax does.
        values, selection = torch.max(windows, -1)
        return values, selection

    def maxpool2d_pair_back(
        self, gy: Tensor, selection: Tensor, image: tuple[int, int], pool: tuple[int, int]
    ) -> Tensor:
        """Fast path: each window's gradient to the place its selection names."""
        (count, channels, out_h, out_w), (down, across) = gy.shape, pool
        spread = torch.zeros(
            (count, channels, out_h, out_w, down * across), dtype=gy.dtype, device=gy.device
        )
        spread.scatter_(-1, selection.unsqueeze(-1), gy.unsqueeze(-1))
        grid = (
            spread.reshape(count, channels, out_h, out_w, down, across)
            .permute(0, 1, 2, 4, 3, 5)
            .reshape(count, channels, out_h * down, out_w * across)
        )
        height, width = image
        if (height, width) == (out_h * down, out_w * across):
            return grid
        return F.pad(grid, (0, width - out_w * across, 0, height - out_h * down))

"""The torch engine at a mixed precision (`mixed_bfloat16`; `mixed_float16` on a card): what
each operation does with a handle in the half format (`HalfOutputs`). `TorchEngine(device,
precision)` makes one where the precision is mixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numpy.typing import NDArray

from deepsharp.core.engine import Precision
from deepsharp.engines.torch import _engine, _recurrent
from deepsharp.engines.torch._engine import Tensor, TorchEngine

__all__ = ["HalfOutputs"]


class HalfOutputs(TorchEngine, mixed=True):
    """The torch engine at a mixed precision: products and convolutions give their outputs in
    the half format (where PyTorch's autocast gets its speed: the next product reads them as
    they are, and a pass over them moves half the bytes). What the other operations do with a
    half handle:

    - `get` gives float32 (the half values, exactly);
    - the moves, `max`, `relu`, ReLU's way back and max-pooling (squares and pairs) keep the
      half format (they select values, exactly); products of stacks give it, as products do;
    - `add` of a float32 tensor broadcast onto a half one (a bias) gives the half format: the
      bias rounded to it, the sum in float32 rounded once more (u_h·|sum| + u_h·|bias|), as a
      product's kernel adds its bias (a float32 bias onto a half tensor is libtorch's slow path:
      5.5 against 1.2 ms on 4,096 x 1,024);
    - every other operation widens its half inputs to float32, exactly, and gives float32:
      losses, softmax, exp, log, erf, GELU and LayerNorm, rows added into places (an embedding's gradient, for
      the optimizer), the optimizer's updates, the gradients' scaling.
    """

    name = "torch"  # the torch engine itself, at a mixed precision (not one of its own)

    def __init__(self, device: str = "cpu", precision: str | Precision = "mixed_bfloat16") -> None:
        super().__init__(device, precision)  # binds torch
        self._half = getattr(_engine.torch, str(self.totals.precision.half))
        self._float32, self._tensor, self._add = _engine.F32, _engine.TorchTensor, _engine.torch.add
        if not self._cuda and _recurrent.available(_engine.torch):
            # oneDNN's float32 LSTM kernel on inputs rounded to the half format (_recurrent)
            self.lstm_sequence = self._half_lstm_sequence
            self.lstm_sequence_back = self._half_lstm_sequence_back
            _recurrent.offer_masked(self, _engine.torch)

    def _half_lstm_sequence(
        self, x: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias: Tensor
    ) -> Tensor:
        """Fast path: a whole LSTM sequence forward in oneDNN's float32 kernel, on its inputs
        rounded to the half format (faster at an LSTM's sizes than the half kernels)."""
        return _recurrent.forward(_engine.torch, x, weight_ih, weight_hh, bias, self._half)

    def _half_lstm_sequence_back(
        self,
        grad_states: Tensor | None,
        grad_last: Tensor | None,
        x: Tensor,
        weight_ih: Tensor,
        weight_hh: Tensor,
        bias: Tensor,
        states: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Fast path: its way back in the same kernel, from what its forward kept."""
        torch = _engine.torch
        given = (grad_states, grad_last, x, weight_ih, weight_hh, bias, states)
        return _recurrent.backward(torch, *given, half=self._half)

    def _wide(self, x: Any) -> Any:
        return x.to(self._float32) if isinstance(x, self._tensor) and x.dtype is self._half else x

    def get(self, handle: Tensor) -> NDArray[Any]:
        return super().get(self._wide(handle))

    def add(self, a: Any, b: Any) -> Tensor:
        if (
            isinstance(a, self._tensor)
            and isinstance(b, self._tensor)
            and a.dtype is self._half
            and b.dtype is self._float32
            and b.dim() <= a.dim()
            and b.numel() < a.numel()
        ):
            # A bias onto a product's output: in the half format, added in float32, kept.
            return self._add(a, b.to(self._half))
        return super().add(self._wide(a), self._wide(b))

    def sub(self, a: Any, b: Any) -> Tensor:
        return super().sub(self._wide(a), self._wide(b))

    def mul(self, a: Any, b: Any) -> Tensor:
        return super().mul(self._wide(a), self._wide(b))

    def div(self, a: Any, b: Any) -> Tensor:
        return super().div(self._wide(a), self._wide(b))

    def maximum(self, a: Any, b: Any) -> Tensor:
        return super().maximum(self._wide(a), self._wide(b))

    def greater(self, a: Any, b: Any) -> Tensor:
        return super().greater(self._wide(a), self._wide(b))

    def where(self, condition: Tensor, a: Any, b: Any) -> Tensor:
        return super().where(self._wide(condition), self._wide(a), self._wide(b))

    def neg(self, x: Tensor) -> Tensor:
        return super().neg(self._wide(x))

    def abs(self, x: Tensor) -> Tensor:
        return super().abs(self._wide(x))

    def exp(self, x: Tensor) -> Tensor:
        return super().exp(self._wide(x))

    def log(self, x: Tensor) -> Tensor:
        return super().log(self._wide(x))

    def log1p(self, x: Tensor) -> Tensor:
        return super().log1p(self._wide(x))

    def softplus(self, x: Tensor) -> Tensor:
        return super().softplus(self._wide(x))

    def sqrt(self, x: Tensor) -> Tensor:
        return super().sqrt(self._wide(x))

    def tanh(self, x: Tensor) -> Tensor:
        return super().tanh(self._wide(x))

    def sigmoid(self, x: Tensor) -> Tensor:
        return super().sigmoid(self._wide(x))

    def erf(self, x: Tensor) -> Tensor:
        return super().erf(self._wide(x))

    def gelu(self, x: Tensor) -> Tensor:
        return super().gelu(self._wide(x))

    def gelu_back(self, x: Tensor, grad: Tensor) -> Tensor:
        return super().gelu_back(self._wide(x), self._wide(grad))

    def layer_norm(self, x: Tensor, scale: Tensor, shift: Tensor, epsilon: float) -> Tensor:
        return super().layer_norm(self._wide(x), scale, shift, epsilon)

    def layer_norm_back(
        self, x: Tensor, scale: Tensor, grad: Tensor, epsilon: float
    ) -> tuple[Tensor, Tensor, Tensor]:
        return super().layer_norm_back(self._wide(x), scale, self._wide(grad), epsilon)

    def relu_back(self, x: Tensor, grad: Tensor) -> Tensor:
        if x.dtype is not grad.dtype:
            x, grad = self._wide(x), self._wide(grad)
        return super().relu_back(x, grad)

    def binary_cross_entropy_terms(self, z: Tensor, y: Any) -> Tensor:
        return super().binary_cross_entropy_terms(self._wide(z), self._wide(y))

    def lstm_cell(
        self, share: Tensor, state: Tensor | None, cell: Tensor | None, weight_hh: Tensor
    ) -> tuple[Tensor, ...]:
        """Fast path: the state's product in the half format, as `matmul` gives it, added to
        the share in float32 (as `add` adds two half handles), then the gates in float32 as
        float32's fast path works them (the reference widens at each of a dozen calls)."""
        gates = self._wide(share)
        if state is not None:
            gates = self._add(gates, self._wide(self.matmul(state, weight_hh, False, True)))
        return _recurrent.cell(_engine.torch, gates, self._wide(cell), weight_hh.shape[1])

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
        """Fast path: one position's way back in float32, as float32's fast path works it."""
        wide = [self._wide(x) for x in (dh, dc, entering, forget, candidate, out, squashed, cell)]
        return _recurrent.cell_back(_engine.torch, *wide)

    def concatenate(self, xs: Sequence[Tensor], axis: int) -> Tensor:
        parts = list(xs)
        if any(part.dtype is not parts[0].dtype for part in parts):
            parts = [self._wide(part) for part in parts]
        return super().concatenate(parts, axis)

    def sgd_update(
        self,
        slots: Sequence[Tensor],
        grads: Sequence[Tensor],
        velocities: Sequence[Tensor],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        wide = [self._wide(grad) for grad in grads]
        super().sgd_update(slots, wide, velocities, learning_rate=learning_rate, momentum=momentum)

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
        wide = [self._wide(grad) for grad in grads]
        super().adam_update(
            slots,
            wide,
            firsts,
            seconds,
            step_size=step_size,
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
        )

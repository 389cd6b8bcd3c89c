"""The torch engine's LSTM over a whole sequence: oneDNN's kernel each way, as PyTorch's own
`nn.LSTM` runs it on the processor (`aten::mkldnn_rnn_layer` and its backward, called as the
kernels they are: no autograd is involved, the rulebook's `lstm` rule decides what flows back).

The forward keeps what the kernel's way back reads — its workspace, the sequence laid out
position-first, the last state and cell — on the states it gives (an attribute of that tensor),
so the way back of the same states runs the kernel's backward at once. States of any other
making (a witness replaying a step on this engine, a check of the contract) are made again
from x first: the same answer either way.
"""

from __future__ import annotations

from typing import Any

LSTM_MODE = 2
"""The kernel's mode for an LSTM (RNN_RELU 0, RNN_TANH 1, LSTM 2, GRU 3)."""

KEPT = "_deepsharp_lstm"
"""The attribute of the states that holds what the kernel's way back reads."""


def available(torch: Any) -> bool:
    """Whether this torch has the oneDNN kernels (a CPU build with mkldnn)."""
    try:
        return bool(torch.backends.mkldnn.is_available()) and hasattr(
            torch.ops.aten, "mkldnn_rnn_layer_backward"
        )
    except (AttributeError, RuntimeError):  # pragma: no cover - a torch without them
        return False


def forward(torch: Any, x: Any, weight_ih: Any, weight_hh: Any, bias: Any) -> Any:
    """Every state (N, L, U) from zero states; what the way back reads kept on it."""
    rows, units = x.shape[0], weight_hh.shape[1]
    sequence = x.transpose(0, 1).contiguous()  # the kernel reads position-first (L, N, D)
    zero = torch.zeros((rows, units), dtype=x.dtype)
    no_bias = torch.zeros_like(bias)  # PyTorch's two biases, already added into one
    out, last, cell, workspace = torch.ops.aten.mkldnn_rnn_layer(
        sequence, weight_ih, weight_hh, bias, no_bias, zero, zero,
        False, [], LSTM_MODE, units, 1, True, False, False, True,
    )  # fmt: skip
    states = out.transpose(0, 1)  # a view: the kernel wrote position-first
    setattr(
        states,
        KEPT,
        (x, weight_ih, weight_hh, bias, sequence, out, last, cell, workspace, no_bias, zero),
    )
    return states


def backward(
    torch: Any,
    grad_states: Any,
    grad_last: Any,
    x: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any,
    states: Any,
) -> tuple[Any, Any, Any, Any]:
    """The gradients towards x, weight_ih, weight_hh and bias."""
    kept = getattr(states, KEPT, None)
    if kept is None or any(a is not b for a, b in zip(kept[:4], (x, weight_ih, weight_hh, bias))):
        kept = getattr(forward(torch, x, weight_ih, weight_hh, bias), KEPT)
    _, _, _, _, sequence, out, last, cell, workspace, no_bias, zero = kept
    units = weight_hh.shape[1]
    position_first = None if grad_states is None else grad_states.transpose(0, 1).contiguous()
    to_x, to_weight_ih, to_weight_hh, to_bias, _, _, _ = (
        torch.ops.aten.mkldnn_rnn_layer_backward(
            sequence, weight_ih, weight_hh, bias, no_bias, zero, zero, out, last, cell,
            position_first, grad_last, None, False, LSTM_MODE, units, 1, True, True, False,
            [], False, workspace,
        )
    )  # fmt: skip
    return to_x.transpose(0, 1).contiguous(), to_weight_ih, to_weight_hh, to_bias

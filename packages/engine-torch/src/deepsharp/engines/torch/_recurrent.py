"""The torch engine's LSTM: one position from its gates in float32, each way (`cell`,
`cell_back`: seven libtorch calls where the reference makes a dozen engine calls); over a whole
sequence, oneDNN's kernel each way, as PyTorch's own
`nn.LSTM` runs it on the processor (`aten::mkldnn_rnn_layer` and its backward, called as the
kernels they are: no autograd is involved, the rulebook's `lstm` rule decides what flows back).

The forward keeps what the kernel's way back reads — its workspace, the sequence laid out
position-first, the last state and cell — on the states it gives (an attribute of that tensor),
so the way back of the same states runs the kernel's backward at once. States of any other
making (a witness replaying a step on this engine, a check of the contract) are made again
from x first: the same answer either way.

At a mixed precision on the processor the same float32 kernel runs on x and the weights
rounded to the half format: oneDNN's half kernels (and libtorch's half products, a
position at a time) take longer at an LSTM's sizes than its float32 ones (4.8 against 17.6 ms
for the benchmarks' LSTM step on an Intel Xeon with AMX), and float32's totals lie within the
half format's bound (the contract suite holds the pair to the reference's at that precision).
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


def forward(torch: Any, x: Any, weight_ih: Any, weight_hh: Any, bias: Any, half: Any = None) -> Any:
    """Every state (N, L, U) from zero states; what the way back reads kept on it. With `half`
    (a mixed precision's half dtype), the kernel reads x and the weights rounded to the half
    format (held in float32), as a mixed precision's products read their inputs."""
    given = (x, weight_ih, weight_hh, bias)
    if half is not None:  # the bias stays float32, one more term of the float32 totals
        x, weight_ih, weight_hh = (t.to(half).to(torch.float32) for t in given[:3])
        bias = bias.to(torch.float32)
    rows, units = x.shape[0], weight_hh.shape[1]
    sequence = x.transpose(0, 1).contiguous()  # the kernel reads position-first (L, N, D)
    zero = torch.zeros((rows, units), dtype=x.dtype)
    no_bias = torch.zeros_like(bias)  # PyTorch's two biases, already added into one
    out, last, cell, workspace = torch.ops.aten.mkldnn_rnn_layer(
        sequence, weight_ih, weight_hh, bias, no_bias, zero, zero,
        False, [], LSTM_MODE, units, 1, True, False, False, True,
    )  # fmt: skip
    states = out.transpose(0, 1)  # a view: the kernel wrote position-first
    used = (weight_ih, weight_hh, bias)
    setattr(states, KEPT, (*given, sequence, out, last, cell, workspace, no_bias, zero, used))
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
    half: Any = None,
) -> tuple[Any, Any, Any, Any]:
    """The gradients towards x, weight_ih, weight_hh and bias (`half` as the forward's)."""
    kept = getattr(states, KEPT, None)
    if kept is None or any(a is not b for a, b in zip(kept[:4], (x, weight_ih, weight_hh, bias))):
        kept = getattr(forward(torch, x, weight_ih, weight_hh, bias, half), KEPT)
    _, _, _, _, sequence, out, last, cell, workspace, no_bias, zero, used = kept
    weight_ih, weight_hh, bias = used
    units = weight_hh.shape[1]
    position_first = None if grad_states is None else grad_states.transpose(0, 1).contiguous()
    if half is not None:  # a gradient may come from a product, in the half format
        position_first = None if position_first is None else position_first.to(torch.float32)
        grad_last = None if grad_last is None else grad_last.to(torch.float32)
    to_x, to_weight_ih, to_weight_hh, to_bias, _, _, _ = (
        torch.ops.aten.mkldnn_rnn_layer_backward(
            sequence, weight_ih, weight_hh, bias, no_bias, zero, zero, out, last, cell,
            position_first, grad_last, None, False, LSTM_MODE, units, 1, True, True, False,
            [], False, workspace,
        )
    )  # fmt: skip
    return to_x.transpose(0, 1).contiguous(), to_weight_ih, to_weight_hh, to_bias


def cell(torch: Any, gates: Any, cell: Any, units: int) -> tuple[Any, ...]:
    """One position from its gates (N, 4·U) in float32 (before their sigmoid or tanh) and the
    last cell (None at the first position): one sigmoid over the four gates, the cell's two
    products in one `addcmul_`. Gives what `fused.lstm_cell` gives."""
    entering, forget, _, out = torch.sigmoid(gates).split(units, 1)
    candidate = torch.tanh(gates[:, 2 * units : 3 * units])
    new_cell = entering * candidate
    if cell is not None:
        new_cell.addcmul_(forget, cell)
    squashed = torch.tanh(new_cell)
    return out * squashed, new_cell, entering, forget, candidate, out, squashed


def cell_back(
    torch: Any,
    dh: Any,
    dc: Any,
    entering: Any,
    forget: Any,
    candidate: Any,
    out: Any,
    squashed: Any,
    cell: Any,
) -> tuple[Any, Any]:
    """One position's way back in float32, each gate's gradient written into its quarter of one
    tensor (a sigmoid's slope s - s·s in one `addcmul`). Gives what `fused.lstm_cell_back`
    gives."""
    rows, units = dh.shape
    gates = torch.empty((rows, 4 * units), dtype=torch.float32, device=dh.device)
    to_entering, to_forget, to_candidate, to_out = gates.split(units, 1)
    towards_cell = (dh * out).mul_(torch.rsub(squashed * squashed, 1.0))
    if dc is not None:
        towards_cell.add_(dc)
    torch.mul(towards_cell, candidate, out=to_entering)
    to_entering.mul_(torch.addcmul(entering, entering, entering, value=-1.0))
    if cell is None:
        to_forget.zero_()
    else:
        torch.mul(towards_cell, cell, out=to_forget)
        to_forget.mul_(torch.addcmul(forget, forget, forget, value=-1.0))
    torch.mul(towards_cell, entering, out=to_candidate)
    to_candidate.mul_(torch.rsub(candidate * candidate, 1.0))
    torch.mul(dh, squashed, out=to_out)
    to_out.mul_(torch.addcmul(out, out, out, value=-1.0))
    return gates, None if cell is None else towards_cell * forget

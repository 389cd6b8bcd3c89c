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

from functools import partial
from typing import Any

from deepsharp.core.engine.fused_recurrent import (
    lstm_masked_sequence_back_reference,
    lstm_masked_sequence_reference,
)

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


MASKED = "_deepsharp_masked_lstm"
"""The attribute of a masked sequence's states that holds what its way back reads."""


def runs(torch: Any, mask: Any) -> tuple[Any, Any] | None:
    """Each row's kept places (non-zero in `mask` (N, L)) as one run, its start and length
    (N,) each; None where some row's are not one run (padding between tokens)."""
    kept = mask != 0
    length = kept.shape[1]
    lengths = kept.sum(1)
    starts = kept.to(torch.uint8).argmax(1)  # the first kept place (0 in a row of none)
    places = torch.arange(length, device=mask.device)
    inside = (places >= starts[:, None]) & (places < (starts + lengths)[:, None])
    return (starts, lengths) if bool(torch.equal(inside, kept)) else None


def _taken(torch: Any, values: Any, places: Any) -> Any:
    """values (N, L, W) at each row's places (N, L): out[n, t] = values[n, places[n, t]], in
    one row-wise `index_select` (gather over an expanded index took 100 us on (32, 40, 32))."""
    rows, length, width = values.shape
    flat = (places + torch.arange(rows, device=places.device)[:, None] * length).reshape(-1)
    return torch.index_select(values.reshape(rows * length, width), 0, flat).reshape(
        rows, length, width
    )


def masked_forward(
    engine: Any, torch: Any, x: Any, weight_ih: Any, weight_hh: Any, bias: Any, mask: Any
) -> Any:
    """`lstm_masked_sequence` in the engine's whole-sequence kernel: each row turned to start
    at its run of kept places (the padding before it moved after it), the kernel run over the
    turned rows from zero states, and each place given the state its run reached there (zeros
    before the run, the run's last state after it). Rows not one run each: the reference."""
    found = runs(torch, mask)
    if found is None:
        return lstm_masked_sequence_reference(engine, x, weight_ih, weight_hh, bias, mask)
    starts, lengths = found
    length = x.shape[1]
    places = torch.arange(length, device=x.device)
    turned = (places[None, :] + starts[:, None]) % length  # the run first
    x_turned = _taken(torch, x, turned)
    states = engine.lstm_sequence(x_turned, weight_ih, weight_hh, bias)
    last = (lengths - 1).clamp(min=0)
    at = torch.minimum((places[None, :] - starts[:, None]).clamp(min=0), last[:, None])
    before = (places[None, :] < starts[:, None]) | (lengths[:, None] == 0)
    out = _taken(torch, states, at).masked_fill_(before[:, :, None], 0.0)
    back = (places[None, :] - starts[:, None]) % length  # turned back
    given = (x, weight_ih, weight_hh, bias, mask)
    setattr(out, MASKED, (*given, x_turned, states, turned, back, before, lengths))
    return out


def masked_backward(
    engine: Any,
    torch: Any,
    grad_states: Any,
    grad_last: Any,
    x: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any,
    mask: Any,
    states: Any,
) -> tuple[Any, Any, Any, Any]:
    """`lstm_masked_sequence_back` from what `masked_forward` kept (made again for states of
    any other making): each place's gradient sent to the state it was given, the run's last
    state gathering those of the places after the run, then the kernel's way back over the
    turned rows, and x's gradient turned back."""
    given = (x, weight_ih, weight_hh, bias, mask)
    kept = getattr(states, MASKED, None)
    if kept is None or any(a is not b for a, b in zip(kept[:5], given)):
        kept = getattr(masked_forward(engine, torch, *given), MASKED, None)
        if kept is None:  # rows not one run each
            args = (grad_states, grad_last, *given[:4], mask, states)
            return lstm_masked_sequence_back_reference(engine, *args)
    x_turned, run, turned, back, before, lengths = kept[5:]
    rows, length, units = run.shape
    if grad_states is None:
        grad = torch.zeros((rows, length, units), dtype=torch.float32, device=run.device)
    else:
        grad = grad_states.to(torch.float32, copy=True)
    if grad_last is not None:
        grad[:, -1] += grad_last.to(torch.float32)
    grad = grad.masked_fill(before[:, :, None], 0.0)
    places = torch.arange(length, device=run.device)
    toward = _taken(torch, grad, turned)
    last = (lengths - 1).clamp(min=0)[:, None]
    tail = (toward * (places[None, :] >= last)[:, :, None]).sum(1, keepdim=True)
    toward = toward * (places[None, :] < last)[:, :, None]
    toward.scatter_(1, last[:, :, None].expand(rows, 1, units), tail)
    to_x, to_weight_ih, to_weight_hh, to_bias = engine.lstm_sequence_back(
        toward, None, x_turned, weight_ih, weight_hh, bias, run
    )
    return _taken(torch, to_x, back), to_weight_ih, to_weight_hh, to_bias


def offer_masked(engine: Any, torch: Any) -> None:
    """Offer `lstm_masked_sequence` and its way back on `engine`, which offers the whole
    sequence's pair (a subclass's own method of either name is its own)."""
    for name, made in (
        ("lstm_masked_sequence", masked_forward),
        ("lstm_masked_sequence_back", masked_backward),
    ):
        if not hasattr(type(engine), name):
            setattr(engine, name, partial(made, engine, torch))

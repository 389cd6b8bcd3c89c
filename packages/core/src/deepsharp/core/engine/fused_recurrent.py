"""Fast paths of the recurrent layers: one position of an LSTM, forward and back.

Entered in `deepsharp.core.engine.fused` (`fused.lstm_cell`, `fused.lstm_cell_back`, and in
`FAST_PATHS`), as every fast path is: the core calls the engine's own method of the name where
it offers one, else the reference below, written in the primitives.

- `lstm_cell(share, state, cell, weight_hh)`: one position of PyTorch's LSTM. `share` (N, 4·U)
  is the inputs' share of the gates at this position (x·W_ihᵀ + b_ih + b_hh), `state` and
  `cell` (N, U) the last position's h and c (None at the first position: zeros, whose share is
  nothing), `weight_hh` (4·U, U) with the gates' rows in the order i, f, g, o. Gives
  `(h, c, i, f, g, o, k)`: the new state h = o·k and cell c = f·c' + i·g (i·g at the first
  position), the gates after their sigmoid (i, f, o) or tanh (g), and k = tanh(c), each (N, U):
  what the way back reads.
- `lstm_cell_back(dh, dc, i, f, g, o, k, cell)`: the way back of one position: `dh` the
  gradient towards its h, `dc` towards its c from the next position (None at the last),
  `cell` the last position's c (None at the first). Gives `(dz, dc')`: the gradient towards
  the gates before their sigmoid or tanh (N, 4·U), in the order i, f, g, o (which is the
  gradient towards the position's share, and through `weight_hh` towards the last h), and the
  one towards the last position's c (None at the first).

- `lstm_sequence(x, weight_ih, weight_hh, bias)`: a whole sequence forward, from zero states:
  `x` (N, L, D), `weight_ih` (4·U, D), `weight_hh` (4·U, U), `bias` (4·U,) (b_ih + b_hh). Gives
  every position's state h, (N, L, U). Reference: the inputs' share of the gates in one
  product, then `lstm_cell` at each position.
- `lstm_sequence_back(grad_states, grad_last, x, weight_ih, weight_hh, bias, states)`: its way
  back: `grad_states` (N, L, U) towards every state and/or `grad_last` (N, U) towards the last
  (either may be None), `states` what the forward gave. Gives the gradients towards x,
  weight_ih, weight_hh and bias. Reference: the forward's positions again (`lstm_cell`, their
  gates kept), then `lstm_cell_back` from the last position to the first, and three products.
  An engine offers the pair or neither: it may keep what its forward made beside the states it
  gave (the torch engine keeps oneDNN's workspace), and must give the same for states of any
  other making (made again from x).

- `lstm_masked_sequence(x, weight_ih, weight_hh, bias, mask)`, `lstm_masked_sequence_back(
  grad_states, grad_last, x, weight_ih, weight_hh, bias, mask, states)`: the pair over a
  sequence with a padding mask (N, L), 0 at a place to pass over: there the state and the cell
  are the place before's, carried on unchanged (zeros before the first kept place), and the
  way back sends the gradients of a passed place on to the one before it, its gates none (as
  Keras's masked LSTM). Reference: `forward_positions` and `back_positions` with the mask. An
  engine offers the pair or neither (the torch engine runs oneDNN's kernel where each row's
  kept places are one run, its whole sequence turned to start at the run).

Family: the gates' products are totals, the rest value by value; an engine's own is held to the
bound its reference's operations give when each keeps the engine's contract (the contract's
`Propagated` engine runs the reference).
"""

from __future__ import annotations

from typing import Any

from deepsharp.core.engine.protocol import Engine, Handle

__all__ = [
    "back_positions",
    "forward_positions",
    "lstm_cell",
    "lstm_cell_back",
    "lstm_cell_back_reference",
    "lstm_cell_reference",
    "lstm_masked_sequence",
    "lstm_masked_sequence_back",
    "lstm_masked_sequence_back_reference",
    "lstm_masked_sequence_reference",
    "lstm_sequence",
    "lstm_sequence_back",
    "lstm_sequence_back_reference",
    "lstm_sequence_reference",
    "stacked",
]


def lstm_cell_reference(
    engine: Engine, share: Handle, state: Handle | None, cell: Handle | None, weight_hh: Handle
) -> tuple[Handle, ...]:
    units = engine.shape(weight_hh)[1]
    gates = (
        share if state is None else engine.add(share, engine.matmul(state, weight_hh, False, True))
    )
    opened = engine.sigmoid(gates)  # i, f and o (g's quarter goes through tanh instead)
    entering = engine.slice(opened, 1, 0, units)
    candidate = engine.tanh(engine.slice(gates, 1, 2 * units, 3 * units))
    forget = engine.slice(opened, 1, units, 2 * units)
    new_cell = engine.mul(entering, candidate)
    if cell is not None:
        new_cell = engine.add(engine.mul(forget, cell), new_cell)
    out = engine.slice(opened, 1, 3 * units, 4 * units)
    squashed = engine.tanh(new_cell)
    return engine.mul(out, squashed), new_cell, entering, forget, candidate, out, squashed


def _sigmoid_slope(engine: Engine, opened: Handle) -> Handle:
    """s·(1 - s): the slope of the sigmoid whose output is s."""
    return engine.mul(opened, engine.sub(1.0, opened))


def lstm_cell_back_reference(
    engine: Engine,
    dh: Handle,
    dc: Handle | None,
    entering: Handle,
    forget: Handle,
    candidate: Handle,
    out: Handle,
    squashed: Handle,
    cell: Handle | None,
) -> tuple[Handle, Handle | None]:
    # h = o·k, k = tanh(c), c = f·c' + i·g
    towards_cell = engine.mul(engine.mul(dh, out), engine.sub(1.0, engine.mul(squashed, squashed)))
    if dc is not None:
        towards_cell = engine.add(towards_cell, dc)
    parts = [
        engine.mul(engine.mul(towards_cell, candidate), _sigmoid_slope(engine, entering)),
        (
            engine.zeros(engine.shape(forget))
            if cell is None
            else engine.mul(engine.mul(towards_cell, cell), _sigmoid_slope(engine, forget))
        ),
        engine.mul(
            engine.mul(towards_cell, entering),
            engine.sub(1.0, engine.mul(candidate, candidate)),
        ),
        engine.mul(engine.mul(dh, squashed), _sigmoid_slope(engine, out)),
    ]
    gates = engine.concatenate(parts, 1)
    return gates, None if cell is None else engine.mul(towards_cell, forget)


def lstm_cell(
    engine: Engine, share: Handle, state: Handle | None, cell: Handle | None, weight_hh: Handle
) -> tuple[Handle, ...]:
    own = getattr(engine, "lstm_cell", None)
    if own is not None:
        made: tuple[Handle, ...] = own(share, state, cell, weight_hh)
        return made
    return lstm_cell_reference(engine, share, state, cell, weight_hh)


def lstm_cell_back(
    engine: Engine,
    dh: Handle,
    dc: Handle | None,
    entering: Handle,
    forget: Handle,
    candidate: Handle,
    out: Handle,
    squashed: Handle,
    cell: Handle | None,
) -> tuple[Handle, Handle | None]:
    args: tuple[Any, ...] = (dh, dc, entering, forget, candidate, out, squashed, cell)
    own = getattr(engine, "lstm_cell_back", None)
    if own is not None:
        made: tuple[Handle, Handle | None] = own(*args)
        return made
    return lstm_cell_back_reference(engine, *args)


def _shares(engine: Engine, x: Handle, weight_ih: Handle, bias: Handle) -> Handle:
    """x·W_ihᵀ + bias at every position, one product: (N, L, 4·U), the rows first throughout."""
    rows, length, features = engine.shape(x)
    flat = engine.reshape(x, (rows * length, features))
    made = engine.add(engine.matmul(flat, weight_ih, False, True), bias)
    return engine.reshape(made, (rows, length, engine.shape(weight_ih)[0]))


def _position(engine: Engine, sequence: Handle, t: int) -> Handle:
    """Position t of (N, L, W): (N, W)."""
    rows, _, wide = engine.shape(sequence)
    return engine.reshape(engine.slice(sequence, 1, t, t + 1), (rows, wide))


def stacked(engine: Engine, each: list[Handle]) -> Handle:
    """(N, W) at each of L positions -> (N, L, W)."""
    rows, wide = engine.shape(each[0])
    joined = each[0] if len(each) == 1 else engine.concatenate(each, 1)
    return engine.reshape(joined, (rows, len(each), wide))


Kept = list[tuple[Handle | None, list[Handle]]]
"""Each position's cell before it and its gates (i, f, g, o, tanh(c)): what its way back reads."""


def _spread(engine: Engine, mask: Handle, units: int) -> Handle:
    """A padding mask (N, L) spread over the units: (N, L, U), non-zero to keep; a position's
    is `_position` of it."""
    rows, length = engine.shape(mask)
    return engine.broadcast_to(engine.reshape(mask, (rows, length, 1)), (rows, length, units))


def forward_positions(
    engine: Engine,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    bias: Handle,
    mask: Handle | None = None,
) -> tuple[list[Handle], Kept]:
    """The sequence a position at a time (`lstm_cell`): every state, and what each position's
    way back reads. The LSTM's rule runs this where the engine runs no whole sequence, and
    wherever a padding `mask` (N, L) comes: at a position it marks (0), the state and the cell
    are the last position's, carried on unchanged (the zero state before the first kept one),
    as Keras's masked LSTM runs."""
    shares = _shares(engine, x, weight_ih, bias)
    keeps = None if mask is None else _spread(engine, mask, engine.shape(weight_hh)[1])
    state = cell = None
    states: list[Handle] = []
    kept: Kept = []
    for t in range(engine.shape(x)[1]):
        new_state, new_cell, *gates = lstm_cell(
            engine, _position(engine, shares, t), state, cell, weight_hh
        )
        kept.append((cell, gates))
        if keeps is not None:
            keep = _position(engine, keeps, t)
            new_state = engine.where(keep, new_state, 0.0 if state is None else state)
            new_cell = engine.where(keep, new_cell, 0.0 if cell is None else cell)
        states.append(new_state)
        state, cell = new_state, new_cell
    return states, kept


def back_positions(
    engine: Engine,
    grad_states: Handle | None,
    grad_last: Handle | None,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    states: list[Handle],
    kept: Kept,
    needs: tuple[bool, ...] = (True, True, True, True),
    mask: Handle | None = None,
) -> tuple[Handle | None, ...]:
    """The way back of `forward_positions` (`lstm_cell_back` from the last position to the
    first), then the three products: the gradients towards x, weight_ih, weight_hh and bias,
    None where `needs` says none is wanted. With a padding `mask`, a position it marks sends
    its state's and its cell's gradients on to the position before, and its gates none."""
    rows, length, features = engine.shape(x)
    wide = engine.shape(weight_ih)[0]
    keeps = None if mask is None else _spread(engine, mask, engine.shape(weight_hh)[1])
    towards: list[Handle] = []
    dh, dc = grad_last, None
    for t in reversed(range(length)):
        cell, (entering, forget, candidate, out, squashed) = kept[t]
        if grad_states is not None:
            own = _position(engine, grad_states, t)
            dh = own if dh is None else engine.add(dh, own)
        if dh is None:  # no gradient reached this position or a later one
            dh = engine.zeros(engine.shape(entering))
        passed = passed_cell = None
        if keeps is not None:  # what a marked position carried on goes back past it
            keep = _position(engine, keeps, t)
            passed = engine.where(keep, 0.0, dh)
            dh = engine.where(keep, dh, 0.0)
            if dc is not None:
                passed_cell = engine.where(keep, 0.0, dc)
                dc = engine.where(keep, dc, 0.0)
        gate_grad, dc = lstm_cell_back(
            engine, dh, dc, entering, forget, candidate, out, squashed, cell
        )
        towards.insert(0, gate_grad)
        dh = engine.matmul(gate_grad, weight_hh, False, False) if t > 0 else None
        if passed is not None and t > 0:
            dh = engine.add(dh, passed)
            if passed_cell is not None:
                dc = passed_cell if dc is None else engine.add(dc, passed_cell)
    flat = engine.reshape(stacked(engine, towards), (rows * length, wide))
    to_x = to_weight_ih = to_weight_hh = to_bias = None
    if needs[0]:
        to_x = engine.reshape(
            engine.matmul(flat, weight_ih, False, False), (rows, length, features)
        )
    if needs[1]:
        to_weight_ih = engine.matmul(
            flat, engine.reshape(x, (rows * length, features)), True, False
        )
    if needs[2]:
        if length == 1:  # from the zero state the weights had no share
            to_weight_hh = engine.zeros(engine.shape(weight_hh))
        else:  # every later position's gates against the state before it, in one product
            pairs, units = rows * (length - 1), engine.shape(weight_hh)[1]
            later = engine.reshape(stacked(engine, towards[1:]), (pairs, wide))
            earlier = engine.reshape(stacked(engine, states[:-1]), (pairs, units))
            to_weight_hh = engine.matmul(later, earlier, True, False)
    if needs[3]:
        to_bias = engine.sum(flat, (0,))
    return to_x, to_weight_ih, to_weight_hh, to_bias


def lstm_sequence_reference(
    engine: Engine, x: Handle, weight_ih: Handle, weight_hh: Handle, bias: Handle
) -> Handle:
    return stacked(engine, forward_positions(engine, x, weight_ih, weight_hh, bias)[0])


def lstm_sequence_back_reference(
    engine: Engine,
    grad_states: Handle | None,
    grad_last: Handle | None,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    bias: Handle,
    states: Handle,
) -> tuple[Handle, Handle, Handle, Handle]:
    return _back_made_again(engine, grad_states, grad_last, x, weight_ih, weight_hh, bias, None)


def _back_made_again(
    engine: Engine,
    grad_states: Handle | None,
    grad_last: Handle | None,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    bias: Handle,
    mask: Handle | None,
) -> tuple[Handle, Handle, Handle, Handle]:
    """A sequence's way back given only its states: the positions' gates made again."""
    made, kept = forward_positions(engine, x, weight_ih, weight_hh, bias, mask)
    given = (grad_states, grad_last, x, weight_ih, weight_hh, made, kept)
    to_x, to_weight_ih, to_weight_hh, to_bias = back_positions(engine, *given, mask=mask)
    assert to_x is not None and to_weight_ih is not None
    assert to_weight_hh is not None and to_bias is not None
    return to_x, to_weight_ih, to_weight_hh, to_bias


def lstm_masked_sequence_reference(
    engine: Engine, x: Handle, weight_ih: Handle, weight_hh: Handle, bias: Handle, mask: Handle
) -> Handle:
    return stacked(engine, forward_positions(engine, x, weight_ih, weight_hh, bias, mask)[0])


def lstm_masked_sequence_back_reference(
    engine: Engine,
    grad_states: Handle | None,
    grad_last: Handle | None,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    bias: Handle,
    mask: Handle,
    states: Handle,
) -> tuple[Handle, Handle, Handle, Handle]:
    return _back_made_again(engine, grad_states, grad_last, x, weight_ih, weight_hh, bias, mask)


def lstm_masked_sequence(
    engine: Engine, x: Handle, weight_ih: Handle, weight_hh: Handle, bias: Handle, mask: Handle
) -> Handle:
    own = getattr(engine, "lstm_masked_sequence", None)
    if own is not None:
        return own(x, weight_ih, weight_hh, bias, mask)
    return lstm_masked_sequence_reference(engine, x, weight_ih, weight_hh, bias, mask)


def lstm_masked_sequence_back(
    engine: Engine,
    grad_states: Handle | None,
    grad_last: Handle | None,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    bias: Handle,
    mask: Handle,
    states: Handle,
) -> tuple[Handle, Handle, Handle, Handle]:
    args = (grad_states, grad_last, x, weight_ih, weight_hh, bias, mask, states)
    own = getattr(engine, "lstm_masked_sequence_back", None)
    if own is not None:
        made: tuple[Handle, Handle, Handle, Handle] = own(*args)
        return made
    return lstm_masked_sequence_back_reference(engine, *args)


def lstm_sequence(
    engine: Engine, x: Handle, weight_ih: Handle, weight_hh: Handle, bias: Handle
) -> Handle:
    own = getattr(engine, "lstm_sequence", None)
    if own is not None:
        return own(x, weight_ih, weight_hh, bias)
    return lstm_sequence_reference(engine, x, weight_ih, weight_hh, bias)


def lstm_sequence_back(
    engine: Engine,
    grad_states: Handle | None,
    grad_last: Handle | None,
    x: Handle,
    weight_ih: Handle,
    weight_hh: Handle,
    bias: Handle,
    states: Handle,
) -> tuple[Handle, Handle, Handle, Handle]:
    args = (grad_states, grad_last, x, weight_ih, weight_hh, bias, states)
    own = getattr(engine, "lstm_sequence_back", None)
    if own is not None:
        made: tuple[Handle, Handle, Handle, Handle] = own(*args)
        return made
    return lstm_sequence_back_reference(engine, *args)

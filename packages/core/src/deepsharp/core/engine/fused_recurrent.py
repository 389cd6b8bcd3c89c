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

Family: the gates' product is a total, the rest value by value; an engine's own is held to the
bound its reference's operations give when each keeps the engine's contract (the contract's
`Propagated` engine runs the reference).
"""

from __future__ import annotations

from typing import Any

from deepsharp.core.engine.protocol import Engine, Handle

__all__ = ["lstm_cell", "lstm_cell_back", "lstm_cell_back_reference", "lstm_cell_reference"]


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

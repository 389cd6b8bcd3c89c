"""The rule of the recurrent layers: an LSTM over a whole sequence, one node on the tape.

Its forward runs `fused.lstm_cell` at each position and its way back `fused.lstm_cell_back`
(the engine's own where it offers them): one node and two fast-path calls a position instead
of some forty rules' calls, and no gradient of a slice laid out in zeros. Importing the module
enters it in `RULES`.
"""

from __future__ import annotations

from typing import Any

from deepsharp.core.autodiff.rulebook import shape_of
from deepsharp.core.autodiff.tensor import Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ShapeError

__all__: list[str] = []


@register
class Lstm(Rule):
    """shares (N, L, 4·U): the inputs' share of the gates at every position; weight_hh (4·U, U)
    -> every state (N, L, U) with `sequences`, else the last (N, U). From zero states; the
    gates' rows in PyTorch's order i, f, g, o (`deepsharp.core.engine.fused_recurrent`)."""

    name = "lstm"
    keeps_output = False  # its way back reads the states it saved

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        shares, weights = shape_of(inputs[0]), shape_of(inputs[1])
        if (
            len(shares) != 3
            or shares[1] < 1
            or len(weights) != 2
            or weights[0] != 4 * weights[1]
            or shares[2] != weights[0]
        ):
            raise ShapeError(
                f"lstm: shares of shape {shares} and a weight_hh of shape {weights}: shares "
                "(N, L, 4·U) over at least one position and weight_hh (4·U, U)"
            )

    def forward(
        self, engine: Engine, shares: Any, weight_hh: Any, sequences: bool = False
    ) -> tuple[Handle, Any]:
        rows, length, wide = engine.shape(shares)
        state = cell = None
        states: list[Handle] = []
        kept: list[tuple[Handle | None, tuple[Handle, ...]]] = []
        for t in range(length):
            share = engine.reshape(engine.slice(shares, 1, t, t + 1), (rows, wide))
            state, new_cell, *gates = fused.lstm_cell(engine, share, state, cell, weight_hh)
            kept.append((cell, tuple(gates)))
            states.append(state)
            cell = new_cell
        if not sequences:
            return states[-1], (states, kept)
        units = wide // 4
        joined = states[0] if length == 1 else engine.concatenate(states, 1)
        return engine.reshape(joined, (rows, length, units)), (states, kept)

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        shares, weight_hh = node.inputs
        assert isinstance(shares, Tensor) and isinstance(weight_hh, Tensor)
        rows, length, wide = shares.shape
        units = wide // 4
        states, kept = node.saved[1]
        sequences = node.attrs.get("sequences", False)
        towards: list[Handle] = [grad] * length  # each position's gradient towards its gates
        dh: Handle | None = None if sequences else grad
        dc: Handle | None = None
        for t in reversed(range(length)):
            if sequences:
                own = engine.reshape(engine.slice(grad, 1, t, t + 1), (rows, units))
                dh = own if dh is None else engine.add(dh, own)
            assert dh is not None
            cell, (entering, forget, candidate, out, squashed) = kept[t]
            towards[t], dc = fused.lstm_cell_back(
                engine, dh, dc, entering, forget, candidate, out, squashed, cell
            )
            if t > 0:
                dh = engine.matmul(towards[t], weight_hh.handle, False, False)
        to_shares = to_weights = None
        if node.needs[0]:
            joined = towards[0] if length == 1 else engine.concatenate(towards, 1)
            to_shares = engine.reshape(joined, (rows, length, wide))
        if node.needs[1]:
            if length == 1:  # from the zero state the weights had no share
                to_weights = engine.zeros((wide, units))
            else:  # every later position's gates against the state before it, in one product
                pairs = rows * (length - 1)
                later = engine.concatenate(towards[1:], 1) if length > 2 else towards[1]
                before = engine.concatenate(states[:-1], 1) if length > 2 else states[0]
                to_weights = engine.matmul(
                    engine.reshape(later, (pairs, wide)),
                    engine.reshape(before, (pairs, units)),
                    True,
                    False,
                )
        return to_shares, to_weights

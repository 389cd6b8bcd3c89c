"""The rule of the recurrent layers: an LSTM over a whole sequence, one node on the tape.

Where the engine offers the whole sequence (`lstm_sequence` and `lstm_sequence_back`: the torch
engine, oneDNN's kernel) the rule is one call each way. Elsewhere its forward takes the inputs'
share of the gates in one product and runs `fused.lstm_cell` at each position, keeping each
position's gates, and its way back runs `fused.lstm_cell_back` (the engine's own where it
offers them): one node and two fast-path calls a position instead of some forty rules' calls,
and no gradient of a slice laid out in zeros. Importing the module enters it in `RULES`.
"""

from __future__ import annotations

from typing import Any

from deepsharp.core.autodiff.rulebook import shape_of
from deepsharp.core.autodiff.tensor import Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ShapeError

__all__: list[str] = []


def _sequence(engine: Engine) -> bool:
    """Whether the engine runs a whole sequence itself (it offers the pair)."""
    return callable(getattr(engine, "lstm_sequence", None)) and callable(
        getattr(engine, "lstm_sequence_back", None)
    )


@register
class Lstm(Rule):
    """x (N, L, D), weight_ih (4·U, D), weight_hh (4·U, U), bias (4·U,) -> every state
    (N, L, U) with `sequences`, else the last (N, U). From zero states; the gates' rows in
    PyTorch's order i, f, g, o (`deepsharp.core.engine.fused_recurrent`)."""

    name = "lstm"
    keeps_output = False  # its way back reads the states it saved

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        x, w_ih, w_hh, bias = (shape_of(value) for value in inputs)
        if (
            len(x) != 3
            or x[1] < 1
            or len(w_hh) != 2
            or w_hh[0] != 4 * w_hh[1]
            or w_ih != (w_hh[0], x[2])
            or bias != (w_hh[0],)
        ):
            raise ShapeError(
                f"lstm: x of shape {x}, weight_ih {w_ih}, weight_hh {w_hh} and bias {bias}: x "
                "(N, L, D) over at least one position, weight_ih (4·U, D), weight_hh (4·U, U), "
                "bias (4·U,)"
            )

    def forward(
        self,
        engine: Engine,
        x: Any,
        weight_ih: Any,
        weight_hh: Any,
        bias: Any,
        sequences: bool = False,
    ) -> tuple[Handle, Any]:
        rows, length, features = engine.shape(x)
        if _sequence(engine):
            states = fused.lstm_sequence(engine, x, weight_ih, weight_hh, bias)
            units = engine.shape(states)[2]
            out = states
            if not sequences:
                out = engine.reshape(engine.slice(states, 1, length - 1, length), (rows, units))
            return out, (states, None)
        wide = engine.shape(weight_ih)[0]
        shares = engine.reshape(
            engine.add(
                engine.matmul(engine.reshape(x, (rows * length, features)), weight_ih, False, True),
                bias,
            ),
            (rows, length, wide),
        )
        state = cell = None
        kept: list[tuple[Handle | None, tuple[Handle, ...]]] = []
        each: list[Handle] = []
        for t in range(length):
            share = engine.reshape(engine.slice(shares, 1, t, t + 1), (rows, wide))
            state, new_cell, *gates = fused.lstm_cell(engine, share, state, cell, weight_hh)
            kept.append((cell, tuple(gates)))
            each.append(state)
            cell = new_cell
        if not sequences:
            return each[-1], (each, kept)
        joined = each[0] if length == 1 else engine.concatenate(each, 1)
        return engine.reshape(joined, (rows, length, wide // 4)), (each, kept)

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x, weight_ih, weight_hh, bias = node.inputs
        assert isinstance(x, Tensor) and isinstance(weight_ih, Tensor)
        assert isinstance(weight_hh, Tensor) and isinstance(bias, Tensor)
        sequences = node.attrs.get("sequences", False)
        first, second = node.saved[1]
        if not isinstance(first, list):  # the engine ran the whole sequence
            made = fused.lstm_sequence_back(
                engine,
                grad if sequences else None,
                None if sequences else grad,
                x.handle,
                weight_ih.handle,
                weight_hh.handle,
                bias.handle,
                first,
            )
            return tuple(part if need else None for part, need in zip(made, node.needs))
        return self._positions_back(engine, node, grad, first, second)

    def _positions_back(
        self,
        engine: Engine,
        node: Node,
        grad: Handle,
        states: list[Handle],
        kept: list[tuple[Handle | None, tuple[Handle, ...]]],
    ) -> Grads:
        x, weight_ih, weight_hh, _ = node.inputs
        assert isinstance(x, Tensor) and isinstance(weight_ih, Tensor)
        assert isinstance(weight_hh, Tensor)
        rows, length, features = x.shape
        wide = weight_ih.shape[0]
        units = wide // 4
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
        joined = towards[0] if length == 1 else engine.concatenate(towards, 1)
        flat = engine.reshape(joined, (rows * length, wide))  # every position's, rows first
        to_x = to_weight_ih = to_weight_hh = to_bias = None
        if node.needs[0]:
            to_x = engine.reshape(
                engine.matmul(flat, weight_ih.handle, False, False), (rows, length, features)
            )
        if node.needs[1]:
            to_weight_ih = engine.matmul(
                flat, engine.reshape(x.handle, (rows * length, features)), True, False
            )
        if node.needs[2]:
            if length == 1:  # from the zero state the weights had no share
                to_weight_hh = engine.zeros((wide, units))
            else:  # every later position's gates against the state before it, in one product
                pairs = rows * (length - 1)
                later = engine.concatenate(towards[1:], 1) if length > 2 else towards[1]
                before = engine.concatenate(states[:-1], 1) if length > 2 else states[0]
                to_weight_hh = engine.matmul(
                    engine.reshape(later, (pairs, wide)),
                    engine.reshape(before, (pairs, units)),
                    True,
                    False,
                )
        if node.needs[3]:
            to_bias = engine.sum(flat, (0,))
        return to_x, to_weight_ih, to_weight_hh, to_bias

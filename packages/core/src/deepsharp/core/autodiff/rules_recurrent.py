"""The rule of the recurrent layers: an LSTM over a whole sequence, one node on the tape.

Where the engine offers the whole sequence (`lstm_sequence` and `lstm_sequence_back`: the torch
engine, oneDNN's kernel) the rule is one call each way. Elsewhere it runs the sequence a
position at a time (`fused_recurrent.forward_positions`: the inputs' share of the gates in one
product, then `fused.lstm_cell` at each position), keeps each position's gates, and goes back
through them (`fused_recurrent.back_positions`: `fused.lstm_cell_back` a position, then three
products): one node and two fast-path calls a position instead of some forty rules' calls, and
no gradient of a slice laid out in zeros. Importing the module enters it in `RULES`.
"""

from __future__ import annotations

from typing import Any

from deepsharp.core.autodiff.rulebook import handle_of, shape_of
from deepsharp.core.autodiff.tensor import Grads, Node, Rule, Tensor, Value, register
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.engine.fused_recurrent import back_positions, forward_positions, stacked
from deepsharp.core.errors import ShapeError

__all__: list[str] = []


def _sequence(engine: Engine, masked: bool) -> bool:
    """Whether the engine runs a whole sequence itself (it offers the pair), with a padding
    mask where `masked`."""
    name = "lstm_masked_sequence" if masked else "lstm_sequence"
    return callable(getattr(engine, name, None)) and callable(getattr(engine, f"{name}_back", None))


@register
class Lstm(Rule):
    """x (N, L, D), weight_ih (4·U, D), weight_hh (4·U, U), bias (4·U,) -> every state
    (N, L, U) with `sequences`, else the last (N, U). From zero states; the gates' rows in
    PyTorch's order i, f, g, o (`deepsharp.core.engine.fused_recurrent`). A fifth input, a
    padding mask (N, L) (non-zero to keep a position), carries the state and the cell on
    unchanged over the positions it marks (`fused.lstm_masked_sequence` where the engine offers
    it); its gradient is 0 (a selection)."""

    name = "lstm"
    keeps_output = False  # its way back reads the states it saved

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        x, w_ih, w_hh, bias, *mask = (shape_of(value) for value in inputs)
        if (
            len(x) != 3
            or x[1] < 1
            or len(w_hh) != 2
            or w_hh[0] != 4 * w_hh[1]
            or w_ih != (w_hh[0], x[2])
            or bias != (w_hh[0],)
            or mask not in ([], [x[:2]])
        ):
            raise ShapeError(
                f"lstm: x of shape {x}, weight_ih {w_ih}, weight_hh {w_hh} and bias {bias}"
                + (f", mask {mask[0]}" if mask else "")
                + ": x (N, L, D) over at least one position, weight_ih (4·U, D), weight_hh "
                "(4·U, U), bias (4·U,), a mask (N, L)"
            )

    def forward(
        self,
        engine: Engine,
        x: Any,
        weight_ih: Any,
        weight_hh: Any,
        bias: Any,
        mask: Any = None,
        sequences: bool = False,
    ) -> tuple[Handle, Any]:
        if _sequence(engine, mask is not None):
            given = (engine, x, weight_ih, weight_hh, bias)
            states = (
                fused.lstm_sequence(*given)
                if mask is None
                else fused.lstm_masked_sequence(*given, mask)
            )
            if sequences:
                return states, (states, None)
            rows, length, units = engine.shape(states)
            last = engine.reshape(engine.slice(states, 1, length - 1, length), (rows, units))
            return last, (states, None)
        each, kept = forward_positions(engine, x, weight_ih, weight_hh, bias, mask)
        return (stacked(engine, each) if sequences else each[-1]), (each, kept)

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        x, weight_ih, weight_hh, bias, *masks = node.inputs
        assert isinstance(x, Tensor) and isinstance(weight_ih, Tensor)
        assert isinstance(weight_hh, Tensor) and isinstance(bias, Tensor)
        sequences = node.attrs.get("sequences", False)
        # towards every state, or towards the last
        to_states, to_last = (grad, None) if sequences else (None, grad)
        given = (to_states, to_last, x.handle, weight_ih.handle, weight_hh.handle)
        states, kept = node.saved[1]
        mask = handle_of(masks[0]) if masks else None
        if kept is None:  # the engine ran the whole sequence
            made = (
                fused.lstm_sequence_back(engine, *given, bias.handle, states)
                if mask is None
                else fused.lstm_masked_sequence_back(engine, *given, bias.handle, mask, states)
            )
            sent = tuple(part if need else None for part, need in zip(made, node.needs))
        else:
            sent = back_positions(engine, *given, states, kept, node.needs[:4], mask)
        if mask is None:
            return sent
        return (*sent, engine.zeros(engine.shape(mask)) if node.needs[4] else None)

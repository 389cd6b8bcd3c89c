"""Recurrent layers: LSTM and GRU over sequences (N, L, D), with PyTorch's gate equations and slot
layouts, so that weights can be exchanged with `torch.nn.LSTM` and `torch.nn.GRU` (one layer,
one direction, `batch_first=True`).

The inputs' share of every gate at every position is one product, taken before the first
step; each step then adds the state's share (one product) and mixes the gates. The state starts
at zeros. Where the sequence carries a padding mask (an `Embedding` of ids marks id 0), a
position it marks changes nothing: the state (and an LSTM's cell) is carried on from the
position before, zeros before the first token, as Keras's masked layers run — so a text padded
at its end ends on its last token's state, and one padded at its start begins at its first. GRU is written in the operations every engine has (products, slices, sigmoid, tanh,
sums and products value by value), so its way back is the rulebook's; LSTM is one rule over the
sequence (`ops.lstm`) whose positions are the fast paths `lstm_cell` and `lstm_cell_back`
(written in those same operations, and an engine's own where it offers them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import ShapeError
from deepsharp.core.nn.initializers import check_initializer
from deepsharp.core.nn.layer import Layer, Pass, Shape, whole

__all__ = ["GRU", "LSTM"]


class _Recurrent(Layer):
    """What LSTM and GRU share: the slots, their shapes and first values, the inputs' share of
    the gates at every position, and a second direction.

    With `bidirectional=True` (PyTorch's `bidirectional=True`, Keras's `Bidirectional`), a
    second set of slots (`weight_ih_reverse`, ..., PyTorch's `_l0_reverse` ones) reads the
    sequence from its end: the output is both directions' side by side, the forward's first —
    the last states (N, 2·units), PyTorch's h_n of both; or at every position (N, L, 2·units),
    the reverse direction's state there having read that position and every one after it.

    `skip_padding=False` reads the padding an Embedding's mask marks as it reads a token, as
    these layers did before they passed over it (files of format 3 and before load so)."""

    gates: ClassVar[int] = 1
    """How many gates share the slots' rows."""

    @property
    def keeps_positions(self) -> bool | None:
        """Every state keeps the positions; the last state alone keeps none (unless set)."""
        if "_keeps" in vars(self):
            kept: bool | None = vars(self)["_keeps"]
            return kept
        return None if self.return_sequences else False

    @keeps_positions.setter
    def keeps_positions(self, value: bool | None) -> None:
        self.__dict__["_keeps"] = value

    def __init__(
        self,
        units: int,
        return_sequences: bool = False,
        init: str | None = None,
        bidirectional: bool = False,
        skip_padding: bool = True,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.units = whole(self.kind, "units", units)
        for what, given in (
            ("return_sequences", return_sequences),
            ("bidirectional", bidirectional),
            ("skip_padding", skip_padding),
        ):
            if not isinstance(given, bool):
                raise ValueError(f"{self.kind}: {what} is True or False, not {given!r}")
        self.return_sequences = return_sequences
        self.bidirectional = bidirectional
        self.skip_padding = skip_padding
        self.init = None if init is None else check_initializer(init, self.kind)

    def build(self, shape: Shape) -> Shape:
        if len(shape) != 2:
            raise ShapeError(
                f"{self.label} takes sequences (N, L, D): rows of shape (L, D), not rows of "
                f"shape {shape}; an Embedding makes them from ids (N, L), Reshape((L, D)) from "
                "flat rows"
            )
        length, features = shape
        units, wide = self.units, self.gates * self.units
        for suffix in DIRECTIONS[: 2 if self.bidirectional else 1]:
            if self.init is None:
                # PyTorch's first values: every slot uniform in ±1/sqrt(units), which is
                # he_uniform (±sqrt(6 / fan_in)) with a fan_in of 6·units.
                for slot, size in (("weight_ih", features), ("weight_hh", units)):
                    self.slot(slot + suffix, (wide, size), "he_uniform", 6 * units)
                for slot in ("bias_ih", "bias_hh"):
                    self.slot(slot + suffix, (wide,), "he_uniform", 6 * units)
            else:
                self.slot("weight_ih" + suffix, (wide, features), self.init, features, wide)
                self.slot("weight_hh" + suffix, (wide, units), self.init, units, wide)
                for slot in ("bias_ih", "bias_hh"):
                    self.slot(slot + suffix, (wide,), "zeros")
        both = 2 * units if self.bidirectional else units
        return (length, both) if self.return_sequences else (both,)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        mask = getattr(x, "mask", None) if self.skip_padding else None
        out = self._direction(x, mask, slots, "")
        if not self.bidirectional:
            return out
        # The reverse direction reads the sequence from its end (the padding at a row's end
        # then comes first, and the mask passes over it), its states laid back in order.
        back = self._direction(_flipped(x), None if mask is None else _flipped(mask), slots, _R)
        return ops.concatenate([out, _flipped(back) if self.return_sequences else back], -1)

    def _direction(
        self, x: Tensor, mask: Tensor | None, slots: Mapping[str, Tensor], suffix: str
    ) -> Tensor:
        """One direction's states over x (its slots those named with `suffix`)."""
        raise NotImplementedError

    def _inputs_share(self, x: Tensor, weights: Tensor, bias: Tensor) -> list[Tensor]:
        """x @ weights.T + bias at every position, one product for them all: (N, gates·units)
        for each of the L positions, in order."""
        rows, length, features = x.shape
        wide = self.gates * self.units
        # The rows stay first throughout (N·L, then N, L, wide): an exported graph serves any
        # count of rows only where the batch's axis does not move.
        flat = ops.reshape(x, (rows * length, features))
        share = ops.reshape(ops.affine(flat, weights, bias, transpose_b=True), (rows, length, wide))
        return [ops.reshape(ops.slice(share, 1, t, t + 1), (rows, wide)) for t in range(length)]

    def _outputs(self, states: list[Tensor]) -> Tensor:
        """The last state (N, units), or every state (N, L, units) with `return_sequences`."""
        if not self.return_sequences:
            return states[-1]
        rows = states[0].shape[0]
        steps = [ops.reshape(state, (rows, 1, self.units)) for state in states]
        return steps[0] if len(steps) == 1 else ops.concatenate(steps, 1)

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {"units": self.units}
        if self.return_sequences:
            made["return_sequences"] = True
        if self.init is not None:
            made["init"] = self.init
        if self.bidirectional:
            made["bidirectional"] = True
        if not self.skip_padding:
            made["skip_padding"] = False
        return made


_R = "_reverse"
DIRECTIONS = ("", _R)
"""The slots' suffixes of each direction: PyTorch's names (weight_ih_l0, weight_ih_l0_reverse)
without the layer's number."""


def _flipped(x: Tensor) -> Tensor:
    """x (N, L, ...) with its positions in the reverse order."""
    length = x.shape[1]
    if length == 1:
        return x
    return ops.concatenate([ops.slice(x, 1, t, t + 1) for t in reversed(range(length))], 1)


class LSTM(_Recurrent):
    """A long short-term memory over sequences (N, L, D) -> the last state (N, units), or every
    state (N, L, units) with `return_sequences=True`.

    PyTorch's equations, at each position t from zero states h and c:
    i = sigmoid(W_ii x + b_ii + W_hi h + b_hi), f = sigmoid(W_if x + b_if + W_hf h + b_hf),
    g = tanh(W_ig x + b_ig + W_hg h + b_hg), o = sigmoid(W_io x + b_io + W_ho h + b_ho),
    c = f·c + i·g, h = o·tanh(c). Its slots are PyTorch's: `weight_ih` (4·units, D),
    `weight_hh` (4·units, units), `bias_ih` and `bias_hh` (4·units,), the gates' rows in the
    order i, f, g, o. First values as PyTorch draws them (uniform in ±1/√units), or weights by
    the initialiser `init` names and biases at zero.
    """

    gates = 4

    def _direction(
        self, x: Tensor, mask: Tensor | None, slots: Mapping[str, Tensor], suffix: str
    ) -> Tensor:
        # One node over the whole sequence (`ops.lstm`): the engine's own over the sequence
        # where it offers one, else each position the fast path `lstm_cell`, the equations
        # above in the order written, and its way back `lstm_cell_back`
        # (deepsharp.core.engine.fused_recurrent).
        bias = slots["bias_ih" + suffix] + slots["bias_hh" + suffix]
        weights = slots["weight_ih" + suffix], slots["weight_hh" + suffix]
        return ops.lstm(x, *weights, bias, self.return_sequences, mask)


class GRU(_Recurrent):
    """A gated recurrent unit over sequences (N, L, D) -> the last state (N, units), or every
    state (N, L, units) with `return_sequences=True`.

    PyTorch's equations, at each position t from a zero state h:
    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
    n = tanh(W_in x + b_in + r·(W_hn h + b_hn)), h = (1 - z)·n + z·h. Its slots are PyTorch's:
    `weight_ih` (3·units, D), `weight_hh` (3·units, units), `bias_ih` and `bias_hh`
    (3·units,), the gates' rows in the order r, z, n. First values as PyTorch draws them
    (uniform in ±1/√units), or weights by the initialiser `init` names and biases at zero.
    """

    gates = 3

    def _direction(
        self, x: Tensor, mask: Tensor | None, slots: Mapping[str, Tensor], suffix: str
    ) -> Tensor:
        units = self.units
        weights, bias = slots["weight_hh" + suffix], slots["bias_hh" + suffix]
        shares = self._inputs_share(x, slots["weight_ih" + suffix], slots["bias_ih" + suffix])
        states: list[Tensor] = []
        for t, share in enumerate(shares):
            # The state's share of the gates; from the zero state, its bias alone.
            own = bias if not states else ops.affine(states[-1], weights, bias, transpose_b=True)
            mixed = ops.sigmoid(
                ops.slice(share, 1, 0, 2 * units) + ops.slice(own, -1, 0, 2 * units)
            )
            reset, update = ops.slice(mixed, 1, 0, units), ops.slice(mixed, 1, units, 2 * units)
            new = ops.tanh(
                ops.slice(share, 1, 2 * units, 3 * units)
                + reset * ops.slice(own, -1, 2 * units, 3 * units)
            )
            # (1 - z)·n + z·h, written n + z·(h - n): one product fewer.
            made = (1.0 - update) * new if not states else new + update * (states[-1] - new)
            if mask is not None:  # padding carries the last state on (zeros before the first)
                keep = ops.reshape(ops.slice(mask, 1, t, t + 1), (x.shape[0], 1))
                made = made * keep
                if states:
                    made = made + states[-1] * (1.0 - keep)
            states.append(made)
        return self._outputs(states)

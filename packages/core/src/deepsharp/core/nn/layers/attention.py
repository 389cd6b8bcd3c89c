"""Attention over sequences (N, L, D): MultiHeadAttention, the pre-norm TransformerBlock, and
PositionalEmbedding (learned positions added to an embedding).

Padding takes no attention: an `Embedding` marks the positions of id 0 (its output carries a
mask, 1 where a token is, 0 where padding is, and the layers after it that keep the positions
carry it on), or a mask is given as a second input, `MultiHeadAttention(4)([x, mask])` with
`mask` rows of L values, above 0.5 to attend and not (0) not to (it stands in for the mask `x`
carries); no gradient flows into it. A key that takes no attention has its score replaced by
float32's lowest before the softmax (its weight underflows to exactly 0, however the others
score), never -inf: a row whose every key is masked stays finite, and its weights are then all 0 (PyTorch's too while it trains; NaN
in eval mode under a causal mask): a query no key is allowed to (under `causal`, padding before
a text's first token) reads nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import ShapeError
from deepsharp.core.nn.layer import Layer, Pass, Shape, whole
from deepsharp.core.nn.layers.activations import softmax
from deepsharp.core.nn.layers.dense import Dense, dropout
from deepsharp.core.nn.layers.normalization import LayerNorm
from deepsharp.core.reals import is_real

__all__ = ["MultiHeadAttention", "PositionalEmbedding", "TransformerBlock"]

BLOCKED = -float(np.finfo(np.float32).max)
"""The score a key that takes no attention is given, in place of its own: float32's lowest,
below any finite score, so its weight underflows to exactly 0 whatever the others' scores. (It
was -1e9 added to the key's score: a blocked key scoring over 1e9 above the others took the
weights, and under `causal` a position read the ones after it: trial NU.)"""


def _rate(layer: str, value: object) -> float:
    if not is_real(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{layer}: dropout is a number in [0, 1), not {value!r}")
    return float(value)


def _sequence(layer: Layer, shape: Shape) -> tuple[int, int]:
    if len(shape) != 2:
        raise ShapeError(
            f"{layer.label} takes sequences (length, width), not rows of shape {shape}: an "
            "Embedding makes them of ids"
        )
    return shape[0], shape[1]


class MultiHeadAttention(Layer):
    """Self-attention over (N, L, D) with `heads` heads of D / heads values, as PyTorch's
    `nn.MultiheadAttention(D, heads, batch_first=True)` computes it, with its slots' layout (so
    weights can be exchanged): `in_weights` (3D, D) and `in_bias` (3D,) make the queries, keys
    and values (x·Wᵀ + b), `out_weights` (D, D) and `out_bias` (D,) the output. Each head's
    weights are softmax(q·kᵀ/√(D/heads)) over the keys; `causal=True` lets a position attend to
    itself and those before it only (its triangle kept as a buffer, `causal`); padding takes
    none (see the module's docstring). `dropout` zeroes attention weights while training."""

    most_inputs = 2  # a sequence, and where given its mask

    def __init__(
        self, heads: int, causal: bool = False, dropout: float = 0.0, name: str | None = None
    ) -> None:
        super().__init__(name)
        self.heads = whole("MultiHeadAttention", "heads", heads)
        if not isinstance(causal, bool):
            raise TypeError(f"MultiHeadAttention: causal is True or False, not {causal!r}")
        self.causal = causal
        self.dropout = _rate("MultiHeadAttention", dropout)

    def build(self, shape: Shape | list[Shape]) -> Shape:
        if isinstance(shape, list):  # [x, mask]: a mask given as a second input
            shape, mask = (tuple(s) for s in shape)
            if mask != (shape[0],):
                raise ShapeError(
                    f"{self.label}: its mask gives rows of {mask} for sequences of {shape}: one "
                    f"value a position, shape ({shape[0]},)"
                )
        length, width = _sequence(self, tuple(shape))
        if width % self.heads:
            below = width // self.heads * self.heads
            raise ShapeError(
                f"{self.label}: sequences {width} wide cannot be split among {self.heads} heads "
                f"(the width must be a multiple of heads: {below or self.heads} or "
                f"{below + self.heads}, say)"
            )
        self.slot("in_weights", (3 * width, width), "glorot_uniform", width, width)
        self.slot("in_bias", (3 * width,), "zeros")
        self.slot("out_weights", (width, width), "glorot_uniform", width, width)
        self.slot("out_bias", (width,), "zeros")
        if self.causal:  # built once: a position may attend to itself and those before it
            self.buffer(
                "causal", (length, length), functools.partial(_causal_mask, length), only=(0.0, 1.0)
            )
        return (length, width)

    def values_a_row(self) -> int:
        """Its output's values, or its scores' where more: heads x L x L a row (a file of a few
        hundred bytes asked 128 GiB of them for one row: trial H)."""
        length = self.output_shape[0] if isinstance(self.output_shape, tuple) else 0
        return max(super().values_a_row(), self.heads * length * length)

    def forward(self, x: Any, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        given_mask = None
        if isinstance(x, (list, tuple)):
            x, given_mask = x
        count, length, width = x.shape
        heads, size = self.heads, width // self.heads
        flat = ops.reshape(x, (count * length, width))
        qkv = ops.affine(flat, slots["in_weights"], slots["in_bias"], transpose_b=True)

        def split(part: int) -> Tensor:  # (N·L, D) of one of q, k, v -> (N, heads, L, size)
            piece = ops.slice(qkv, 1, part * width, (part + 1) * width)
            return ops.transpose(ops.reshape(piece, (count, length, heads, size)), (0, 2, 1, 3))

        q, k, v = split(0), split(1), split(2)
        scores = ops.matmul(q * (1.0 / math.sqrt(size)), ops.transpose(k, (0, 1, 3, 2)))
        keys = x.mask if given_mask is None else ops.greater(given_mask, 0.5)  # no gradient
        # 1 where a query may attend to a key: a token's (N, L) -> (N, 1, 1, L), before or at
        # the query's place (1, 1, L, L), both (N, 1, L, L); BLOCKED wherever it is 0.
        allowed = None if keys is None else ops.reshape(keys, (count, 1, 1, length))
        if self.causal:
            triangle = ops.reshape(slots["causal"], (1, 1, length, length))
            allowed = triangle if allowed is None else allowed * triangle
        if allowed is not None:  # a blocked key's score set to BLOCKED: s·0 + BLOCKED, its
            # score first raised to BLOCKED at least (a score of -inf times 0 was NaN: review)
            scores = ops.maximum(scores, BLOCKED) * allowed + (1.0 - allowed) * BLOCKED
        weights = softmax(scores)
        if (
            keys is not None and allowed is not None
        ):  # a query no key is allowed to (the padding before a text's first
            # token, under causal; a text of no tokens) takes none: its weights spread over
            # keys it may not read. Elsewhere a blocked weight is already exactly 0.
            weights = weights * allowed
        weights = dropout(weights, self.dropout, context)
        mixed = ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))  # (N, L, heads, size)
        flat = ops.reshape(mixed, (count * length, width))
        out = ops.affine(flat, slots["out_weights"], slots["out_bias"], transpose_b=True)
        return ops.reshape(out, (count, length, width))

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {"heads": self.heads}
        if self.causal:
            made["causal"] = True
        if self.dropout:
            made["dropout"] = self.dropout
        return made


class TransformerBlock(Layer):
    """A pre-norm transformer block over (N, L, D), as PyTorch's
    `nn.TransformerEncoderLayer(D, heads, hidden, dropout, activation="gelu", batch_first=True,
    norm_first=True)`: h = x + attention(LayerNorm(x)), then h + Dense(D)(Gelu(Dense(hidden)(
    LayerNorm(h)))); with `dropout`, PyTorch's four: on the attention weights, after the
    attention, after the GELU and after the last Dense. Its parts: `norm1`, `attention`, `norm2`, `up`, `down` (slots
    `transformerblock.attention.in_weights`, ...; `up` and `down` are Dense layers, weights
    (in, out): the transposes of PyTorch's linear1 and linear2)."""

    def __init__(
        self,
        heads: int,
        hidden: int,
        dropout: float = 0.0,
        causal: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        self.heads = whole("TransformerBlock", "heads", heads)
        self.hidden = whole("TransformerBlock", "hidden", hidden)
        self.dropout = _rate("TransformerBlock", dropout)
        if not isinstance(causal, bool):
            raise TypeError(f"TransformerBlock: causal is True or False, not {causal!r}")
        self.causal = causal

    def build(self, shape: Shape) -> Shape:
        _, width = _sequence(self, shape)
        self.sublayer("norm1", LayerNorm(), shape)
        self.sublayer("attention", MultiHeadAttention(self.heads, self.causal, self.dropout), shape)
        self.sublayer("norm2", LayerNorm(), shape)
        self.sublayer("up", Dense(self.hidden, activation="gelu"), shape)
        self.sublayer("down", Dense(width), (shape[0], self.hidden))
        return shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        attended = self.call("attention", self.call("norm1", x, slots, context), slots, context)
        h = x + dropout(attended, self.dropout, context)
        inner = self.call("up", self.call("norm2", h, slots, context), slots, context)
        inner = dropout(inner, self.dropout, context)  # PyTorch's: linear2(dropout(gelu(...)))
        return h + dropout(self.call("down", inner, slots, context), self.dropout, context)

    def config(self) -> dict[str, Any]:
        made: dict[str, Any] = {"heads": self.heads, "hidden": self.hidden}
        if self.dropout:
            made["dropout"] = self.dropout
        if self.causal:
            made["causal"] = True
        return made


class PositionalEmbedding(Layer):
    """Learned positions added to an embedding: (N, L, dim) + table[:L], the table (slot
    `table`, (length, dim), drawn from a normal of deviation 0.05) trained. Sequences longer
    than `length` are refused."""

    def __init__(self, length: int, dim: int, name: str | None = None) -> None:
        super().__init__(name)
        self.length = whole("PositionalEmbedding", "length", length)
        self.dim = whole("PositionalEmbedding", "dim", dim)

    def build(self, shape: Shape) -> Shape:
        length, width = _sequence(self, shape)
        if width != self.dim:
            raise ShapeError(f"{self.label} adds positions of {self.dim} values to rows of {width}")
        if length > self.length:
            raise ShapeError(
                f"{self.label}: sequences of {length} positions, longer than its table of "
                f"{self.length}: give PositionalEmbedding({length}, {self.dim}) or shorter "
                "sequences"
            )
        self.slot("table", (self.length, self.dim), "normal", self.length, self.dim)
        return shape

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        table = slots["table"]
        if x.shape[1] != self.length:
            table = ops.slice(table, 0, 0, x.shape[1])
        return x + table

    def config(self) -> dict[str, Any]:
        return {"length": self.length, "dim": self.dim}


def _causal_mask(length: int) -> NDArray[np.float32]:
    """A position may attend to itself and those before it (made once the buffer's size is
    checked; a function of the module, so that a built network still pickles)."""
    return np.tril(np.ones((length, length), np.float32))

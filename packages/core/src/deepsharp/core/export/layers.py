"""How each layer kind is exported: one table, by kind.

A layer kind's export is a function `(layer, x, slots, context) -> output`, run on the writing
engine (`deepsharp.core.export.writer`): `forward`, the layer's own forward pass for serving
(context.training False), whose engine operations are written as their ONNX forms — so the
file computes what `predict` computes, operation by operation; `identity` for a layer that
serves its rows unchanged. A kind that cannot be exported is given the reason instead, and is
refused naming it. A layer kind of your own is exported by its forward (it must use engine
operations only) unless you enter it here: `LAYER_EXPORTS[MyLayer.key] = ...`.

Every layer kind deepsharp ships states its export below (tests hold that it does): a new kind
(MultiHeadAttention, LSTM, ...) adds its line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.nn.layer import Layer, Pass

__all__ = ["LAYER_EXPORTS", "LayerExport", "export_of", "forward", "identity"]

LayerExport = Callable[[Layer, Any, Mapping[str, Tensor], Pass], Tensor]


def forward(layer: Layer, x: Any, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
    """The layer's forward pass for serving, its engine operations written as ONNX forms."""
    return layer.forward(x, slots, context)


def identity(layer: Layer, x: Any, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
    """The rows unchanged (nothing written)."""
    made: Tensor = x
    return made


LAYER_EXPORTS: dict[str, LayerExport | str] = {
    # rows of features
    "Dense": forward,  # Gemm, the bias added, then its activation's forms
    "Dropout": identity,  # serving keeps every value
    "Flatten": forward,  # Reshape to (-1, C*H*W)
    "Reshape": forward,  # Reshape to (-1, *shape)
    "Rescaling": forward,  # Mul and Add of its buffers (constants)
    # activations
    "Relu": forward,
    "Sigmoid": forward,
    "Tanh": forward,
    "Softmax": forward,  # over the last axis: ReduceMax, Sub, Exp, ReduceSum, Log, Sub, Exp
    "Gelu": forward,
    "Silu": forward,
    "LeakyRelu": forward,
    # images and signals
    "Conv2D": forward,  # Conv with its bias and pads
    "Conv1D": forward,  # the signal as an image one place high
    "MaxPool2D": forward,  # MaxPool (its selection is not written: only a way back reads it)
    "AvgPool2D": forward,  # the windows laid out by Reshape, ReduceMean over them
    "GlobalAvgPool": forward,  # ReduceMean over every place
    # merges
    "Add": forward,
    "Concatenate": forward,
    # normalisation
    "BatchNorm": forward,  # the running statistics (buffers) as constants
    "LayerNorm": forward,
    # ids and sequences
    "Embedding": forward,  # Gather of the table's rows; its padding mask where id 0 is
    "PositionalEmbedding": forward,  # the table's first L rows added
    "MultiHeadAttention": forward,  # Gemm, MatMul over the heads, the masks (float32's lowest), softmax
    "TransformerBlock": forward,  # its parts' forms, in order
    "LSTM": forward,  # unrolled: each step's Gemms, Sigmoids, Tanhs and products, in order
    "GRU": forward,  # likewise
    "Permute": forward,  # Transpose
    "SequencePool": forward,  # ReduceMean, or MaxPool over the positions; the mask's weights
}
"""Each layer kind (its key) -> its export, or why it cannot be exported."""


def export_of(layer: Layer) -> LayerExport | str:
    """The export of the layer's kind: its entry, or its forward for a kind of your own."""
    return LAYER_EXPORTS.get(layer.key, forward)

"""Layers: what a network is made of, one family a module. None of them knows an engine.

`deepsharp.core.nn.layer` says what a layer is (`Layer`, its slots and buffers, the `Pass`);
here are deepsharp's own: activations, dense rows, images and signals, merges, normalisation,
embeddings, recurrent layers. docs/layers.md gives each one's shapes and an example.
"""

from deepsharp.core.nn.layer import LAYERS, BufferSpec, Layer, Pass, SlotSpec, layer_from_json
from deepsharp.core.nn.layers.activations import (
    Gelu,
    LeakyRelu,
    Relu,
    Sigmoid,
    Silu,
    Softmax,
    Tanh,
)
from deepsharp.core.nn.layers.attention import (
    MultiHeadAttention,
    PositionalEmbedding,
    TransformerBlock,
)
from deepsharp.core.nn.layers.convolution import AvgPool2D, Conv1D, Conv2D, GlobalAvgPool, MaxPool2D
from deepsharp.core.nn.layers.dense import Dense, Dropout, Flatten, Permute, Rescaling, Reshape
from deepsharp.core.nn.layers.embedding import Embedding
from deepsharp.core.nn.layers.merge import Add, Concatenate
from deepsharp.core.nn.layers.normalization import BatchNorm, LayerNorm
from deepsharp.core.nn.layers.pooling import SequencePool
from deepsharp.core.nn.layers.recurrent import GRU, LSTM

__all__ = [
    "LAYERS",
    "Add",
    "AvgPool2D",
    "BatchNorm",
    "BufferSpec",
    "Concatenate",
    "Conv1D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "GRU",
    "Flatten",
    "Gelu",
    "GlobalAvgPool",
    "Layer",
    "LSTM",
    "LayerNorm",
    "LeakyRelu",
    "MaxPool2D",
    "MultiHeadAttention",
    "Pass",
    "Permute",
    "PositionalEmbedding",
    "Relu",
    "Rescaling",
    "Reshape",
    "SequencePool",
    "Sigmoid",
    "Silu",
    "SlotSpec",
    "Softmax",
    "Tanh",
    "TransformerBlock",
    "layer_from_json",
]

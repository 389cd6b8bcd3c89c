"""deepsharp: deep learning in which the model never names its engine.

Everything a user calls is importable from here: `from deepsharp.core import Network, Dense, fit`.
What engine authors and the run's extensions use lives in its module (`deepsharp.core.engine`,
`deepsharp.core.training.trainer`, ...).
"""

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.comparing import Comparison, compare
from deepsharp.core.comparing.shadow import Shadow
from deepsharp.core.data.pipeline import Pipeline, read_csv
from deepsharp.core.data.scan import scan_csv, scan_parquet
from deepsharp.core.engine import Engine, EngineIdentity, available_engines, make_engine
from deepsharp.core.errors import (
    CheckpointMismatchError,
    ConfigurationError,
    DataError,
    DeepSharpError,
    DeepSharpWarning,
    EngineMismatchError,
    EngineUnavailableError,
    ExportError,
    FileFormatError,
    ShapeError,
    StateError,
    TrainingDivergedError,
)
from deepsharp.core.nn.graph import Input, Symbol
from deepsharp.core.nn.layers import (
    GRU,
    LSTM,
    Add,
    AvgPool2D,
    BatchNorm,
    Concatenate,
    Conv1D,
    Conv2D,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    Gelu,
    GlobalAvgPool,
    Layer,
    LayerNorm,
    LeakyRelu,
    MaxPool2D,
    MultiHeadAttention,
    Permute,
    PositionalEmbedding,
    Relu,
    Rescaling,
    Reshape,
    SequencePool,
    Sigmoid,
    Silu,
    Softmax,
    Tanh,
    TransformerBlock,
)
from deepsharp.core.nn.losses import (
    BinaryCrossEntropy,
    CrossEntropy,
    Huber,
    Loss,
    MeanAbsoluteError,
    MeanSquaredError,
)
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import SGD, Adam, AdamW, Optimizer
from deepsharp.core.nn.optimizers.schedules import CosineDecay, Schedule, StepDecay
from deepsharp.core.random import Generator
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.callbacks import Callback, ReduceOnPlateau, RunState
from deepsharp.core.training.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.loop import FitOptions, Report, Run, fit
from deepsharp.core.training.metrics import Metric, register_metric
from deepsharp.core.training.scaling import LossScale
from deepsharp.core.training.trainer import Trainer
from deepsharp.core.version import __version__

__all__ = [
    "Adam",
    "AdamW",
    "Add",
    "AvgPool2D",
    "BatchNorm",
    "BinaryCrossEntropy",
    "Callback",
    "Checkpoint",
    "CheckpointMismatchError",
    "Comparison",
    "Concatenate",
    "ConfigurationError",
    "Conv1D",
    "Conv2D",
    "CosineDecay",
    "CrossEntropy",
    "DataError",
    "DeepSharpError",
    "DeepSharpWarning",
    "Dense",
    "Dropout",
    "Embedding",
    "Engine",
    "EngineIdentity",
    "EngineMismatchError",
    "EngineUnavailableError",
    "EpochRecord",
    "ExportError",
    "FileFormatError",
    "FitOptions",
    "Flatten",
    "GRU",
    "Gelu",
    "Generator",
    "GlobalAvgPool",
    "Huber",
    "Input",
    "Layer",
    "LSTM",
    "LayerNorm",
    "LeakyRelu",
    "Loss",
    "LossScale",
    "MaxPool2D",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "Metric",
    "MultiHeadAttention",
    "Network",
    "Optimizer",
    "Pipeline",
    "Permute",
    "PositionalEmbedding",
    "ReduceOnPlateau",
    "Relu",
    "Report",
    "Rescaling",
    "Reshape",
    "SequencePool",
    "Run",
    "RunState",
    "SGD",
    "Shadow",
    "Schedule",
    "ShapeError",
    "Sigmoid",
    "Silu",
    "Softmax",
    "StateError",
    "StepDecay",
    "StepHook",
    "Symbol",
    "Tanh",
    "Tensor",
    "TrainedNetwork",
    "Trainer",
    "TrainingDivergedError",
    "TransformerBlock",
    "available_engines",
    "compare",
    "fit",
    "make_engine",
    "read_csv",
    "register_metric",
    "scan_csv",
    "scan_parquet",
    "__version__",
]


def __dir__() -> list[str]:
    """The public names only: the submodules stay importable (`deepsharp.core.engine`, ...) but
    are not the API a user browses."""
    return sorted(__all__)

"""deepsharp: deep learning in which the model never names its engine.

Everything a user calls is importable from here: `from deepsharp.core import Network, Dense, fit`.
"""

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.data.pipeline import Pipeline, read_csv
from deepsharp.core.engine import Counters, Engine, EngineIdentity, available_engines, make_engine
from deepsharp.core.engine.memory import heap_policy
from deepsharp.core.errors import (
    DataError,
    DeepSharpError,
    EngineMismatchError,
    EngineUnavailableError,
    FileFormatError,
    ShapeError,
    TrainingDivergedError,
)
from deepsharp.core.nn.layers import (
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    Layer,
    MaxPool2D,
    Pass,
    Relu,
    Sigmoid,
    Tanh,
)
from deepsharp.core.nn.losses import BinaryCrossEntropy, CrossEntropy, Loss, MeanSquaredError
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import SGD, Adam, AdamW, Optimizer
from deepsharp.core.random import Generator, Streams
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.training.loop import FitOptions, Report, Run, fit
from deepsharp.core.training.trainer import Trainer
from deepsharp.core.version import __version__

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "BinaryCrossEntropy",
    "Checkpoint",
    "Conv2D",
    "Counters",
    "CrossEntropy",
    "DataError",
    "DeepSharpError",
    "Dense",
    "Dropout",
    "Engine",
    "EpochRecord",
    "EngineIdentity",
    "EngineMismatchError",
    "EngineUnavailableError",
    "FileFormatError",
    "FitOptions",
    "Flatten",
    "Generator",
    "Layer",
    "Loss",
    "MaxPool2D",
    "MeanSquaredError",
    "Network",
    "Optimizer",
    "Pass",
    "Pipeline",
    "Relu",
    "Report",
    "Run",
    "ShapeError",
    "Sigmoid",
    "Streams",
    "Tanh",
    "Tensor",
    "TrainedNetwork",
    "Trainer",
    "TrainingDivergedError",
    "__version__",
    "available_engines",
    "fit",
    "heap_policy",
    "make_engine",
    "read_csv",
]

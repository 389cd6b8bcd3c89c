"""deepsharp: deep learning in which the model never names its engine.

Everything a user calls is importable from here: `from deepsharp.core import Network, Dense, fit`.
"""

from deepsharp.core.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.engine import Counters, Engine, EngineIdentity, available_engines, make_engine
from deepsharp.core.errors import (
    DataError,
    DeepSharpError,
    EngineMismatchError,
    EngineUnavailableError,
    FileFormatError,
    ShapeError,
    TrainingDivergedError,
)
from deepsharp.core.layers import (
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
from deepsharp.core.losses import BinaryCrossEntropy, CrossEntropy, Loss, MeanSquaredError
from deepsharp.core.memory import heap_policy
from deepsharp.core.network import Network
from deepsharp.core.optimizers import SGD, Adam, Optimizer
from deepsharp.core.pipeline import Pipeline, read_csv
from deepsharp.core.random import Generator, Streams
from deepsharp.core.run import FitOptions, Report, Run, fit
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.tensor import Tensor
from deepsharp.core.trainer import Trainer
from deepsharp.core.version import __version__

__all__ = [
    "SGD",
    "Adam",
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

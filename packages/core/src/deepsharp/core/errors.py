"""The exceptions deepsharp raises: one class per kind of failure.

Every message says what was wrong, where (row, column, layer, file) and what to do.
"""

from __future__ import annotations

__all__ = [
    "DataError",
    "DeepSharpError",
    "EngineMismatchError",
    "EngineUnavailableError",
    "FileFormatError",
    "ShapeError",
    "TrainingDivergedError",
]


class DeepSharpError(Exception):
    """Base class of every error deepsharp raises on purpose."""


class DataError(DeepSharpError, ValueError):
    """Rows that the pipeline cannot turn into features: names the row, the column and what was expected."""


class ShapeError(DeepSharpError, ValueError):
    """Values of the wrong shape for a layer, a loss or an engine operation: names the place and both shapes."""


class FileFormatError(DeepSharpError, ValueError):
    """A network, trained-network or checkpoint file that cannot be read: says what is wrong with it."""


class EngineUnavailableError(DeepSharpError, RuntimeError):
    """An engine that cannot be made here: says why and which packages bring what is missing."""


class EngineMismatchError(DeepSharpError, RuntimeError):
    """A checkpoint taken on one engine, handed to a run on another: names both."""


class TrainingDivergedError(DeepSharpError, FloatingPointError):
    """The loss turned NaN or infinite: names the epoch and the step."""

"""The exceptions deepsharp raises: one class per kind of failure.

Every message says what was wrong, where (row, column, layer, file) and what to do.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "names_shown",
    "outside",
    "CheckpointMismatchError",
    "ConfigurationError",
    "DataError",
    "DeepSharpError",
    "DeepSharpWarning",
    "EngineMismatchError",
    "EngineUnavailableError",
    "ExportError",
    "FileFormatError",
    "ShapeError",
    "StateError",
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


class ExportError(DeepSharpError, ValueError):
    """A network, layer, column or setting that cannot be written as an ONNX file: names which
    (layer, column, operator, opset) and why, and what to do."""


class EngineMismatchError(DeepSharpError, RuntimeError):
    """A checkpoint taken on one engine, handed to a run on another: names both."""


class CheckpointMismatchError(DeepSharpError, ValueError):
    """A checkpoint taken by another run (another optimizer, its settings, another seed or
    network) handed to a run that would not go on where it stopped: names both sides."""


class ConfigurationError(DeepSharpError, ValueError):
    """Parts of a run that do not go together (a loss for logits after a network that ends in
    a sigmoid, a network with no slots to train): says which, and the ways out."""


class StateError(DeepSharpError, RuntimeError):
    """Asked of something not in a state to do it: a network without slot values saved, slots
    that are not finite, a network bound to a run twice."""


class TrainingDivergedError(DeepSharpError, FloatingPointError):
    """The loss turned NaN or infinite: names the epoch and the step. The network holds the
    best epoch's slots (or those the run started from) when it is raised."""


class DeepSharpWarning(UserWarning):
    """Something deepsharp can go on with but that is likely a mistake (a target of one class,
    a category column with thousands of values)."""


def check_instance(what: str, value: Any, kind: type, where: str) -> None:
    """Refuse `value` unless it is a `kind`, saying what to write: a class handed where one of
    its instances belongs (`CrossEntropy` for `CrossEntropy()`) is a ConfigurationError, anything
    else a TypeError."""
    if isinstance(value, kind):
        return
    if isinstance(value, type) and issubclass(value, kind):
        raise ConfigurationError(
            f"{where}: the {what} is the class {value.__name__}, not one of its instances: "
            f"write {value.__name__}(...) — e.g. {value.__name__}() — with the parentheses"
        )
    article = "an" if kind.__name__[:1] in "AEIOU" else "a"
    raise TypeError(
        f"{where}: the {what} must be {article} {kind.__name__}, not {described(value)}"
    )


def described(value: Any, width: int = 80) -> str:
    """A value as a message shows it: an array by its kind, shape and dtype (never its whole
    contents), anything else by a repr cut to `width` characters."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if isinstance(shape, tuple) and dtype is not None:
        return f"{type(value).__name__} of shape {shape} and dtype {dtype}"
    shown = repr(value)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def names_shown(names: Sequence[Any], most: int = 30, width: int = 60) -> str:
    """Names as a message lists them: each repr cut to `width` characters, the first `most` of
    them and how many more (a header of a million columns was a message of 11 MB: trial HC)."""
    shown = ", ".join(described(name, width) for name in names[:most]) or "(none)"
    more = len(names) - most
    return shown + (f", and {more:,} more" if more > 0 else "")


def listed(given: Any, name: str, where: str) -> list[Any]:
    """The parts `given` as a list (a list, a tuple, any iterable of them; None for none); one
    part given alone, not in a list, is refused naming the list to write."""
    if given is None:
        return []
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable):
        raise TypeError(
            f"{where}: {name} is a list of them, not {described(given)}: give "
            f"{name}=[{type(given).__name__}(...)]"
        )
    return list(given)


def json_values(value: Any, whose: str) -> Any:
    """`value` as a file reads it back (a tuple a list), where it is JSON values; else a
    ConfigurationError saying `whose` it is (a NumPy number in a config() of one's own stopped a
    run at its first checkpoint with json's own error, naming nothing)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ConfigurationError(
            f"{whose} must be JSON values for files to record them (text, finite numbers, "
            f"lists, mappings; float(x) for a NumPy number), not {value!r}: {error}"
        ) from None


_HOME = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # deepsharp's folder


def outside() -> int:
    """The `stacklevel` of `warnings.warn` called here that names the first caller outside
    deepsharp (a script's line, not the library's), however deep the call came."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _HOME + os.sep
    ):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level

"""The column kinds of a pipeline's recipe, and its target: how each learns its statistics
from the training rows and writes its features (or answers), vectorised with NumPy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.sources import (
    FillSpec,
    ImageScale,
    TargetKind,
    UnknownRule,
    _Column,
    _column_labels,
    _distinct,
    _is_missing,
    _label,
    _labels,
    _numbers,
    _parse_number,
    _row_text,
    _shown,
    _sorted_labels,
)
from deepsharp.core.errors import DataError

# --------------------------------------------------------------------------------------------
# Columns of the recipe


@dataclass
class _Number:
    name: str
    fill: FillSpec
    missing_flag: bool
    log: bool
    scale: bool
    # learned
    fill_value: float | None = None  # in the transformed (log) space
    mean: float | None = None
    std: float | None = None

    kind = "number"

    def width(self) -> int:
        return 2 if self.missing_flag else 1

    def names(self) -> list[str]:
        return [self.name, f"{self.name}:missing"] if self.missing_flag else [self.name]

    def _transformed(
        self, column: _Column
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        values = _numbers(column, self.name)
        missing = np.isnan(values)
        if self.log:
            negative = values < 0.0  # NaN compares False
            if negative.any():
                i = int(np.argmax(negative))
                raise DataError(
                    f"{_row_text(i)}, column {self.name!r}: found {values[i]!r}, but this column "
                    f"takes the logarithm (log=True) and needs values of 0 or more"
                )
            values = np.log1p(values)
        return values, missing

    def learn(self, column: _Column) -> None:
        values, missing = self._transformed(column)
        present = values[~missing]
        if isinstance(self.fill, str):
            if present.size == 0:
                raise DataError(
                    f"column {self.name!r}: every training row is missing a value, so there is no "
                    f"{self.fill} to fill with; give fill=<number> or rows that hold numbers"
                )
            fill = float(np.median(present) if self.fill == "median" else np.mean(present))
        else:
            fill = math.log1p(self.fill) if self.log else float(self.fill)
        filled = np.where(missing, fill, values)
        mean = float(np.mean(filled))
        std = float(np.std(filled))
        if not (math.isfinite(mean) and math.isfinite(std)):
            raise DataError(
                f"column {self.name!r}: its values are too large to standardise in float64"
            )
        self.fill_value = fill
        self.mean = mean
        self.std = std if std > 0.0 else 1.0

    def write(self, column: _Column, out: npt.NDArray[np.float32], at: int) -> None:
        assert self.fill_value is not None and self.mean is not None and self.std is not None
        values, missing = self._transformed(column)
        values[missing] = self.fill_value
        if self.scale:
            values -= self.mean
            values /= self.std
        out[:, at] = values
        if self.missing_flag:
            out[:, at + 1] = missing

    def recipe(self) -> dict[str, Any]:
        return {
            "kind": "number",
            "name": self.name,
            "fill": self.fill if isinstance(self.fill, str) else float(self.fill),
            "missing_flag": self.missing_flag,
            "log": self.log,
            "scale": self.scale,
        }

    def learned(self) -> dict[str, Any]:
        return {"fill": self.fill_value, "mean": self.mean, "std": self.std}

    def forget(self) -> None:
        self.fill_value = self.mean = self.std = None


@dataclass
class _Category:
    name: str
    unknown: UnknownRule
    # learned: the known labels (text), then whether missing is a category of its own (last)
    values: list[str] | None = None
    has_missing: bool = False
    lookup: dict[str | None, int] = field(default_factory=dict)

    kind = "category"

    def width(self) -> int:
        assert self.values is not None
        return len(self.values) + (1 if self.has_missing else 0)

    def names(self) -> list[str]:
        assert self.values is not None
        out = [f"{self.name}={v}" for v in self.values]
        if self.has_missing:
            out.append(f"{self.name}:missing")
        return out

    def learn(self, column: _Column) -> None:
        labels, _ = _column_labels(column, self.name)
        self.set_learned(_sorted_labels(v for v in labels if v is not None), None in labels)

    def set_learned(self, values: list[str], has_missing: bool) -> None:
        self.values = values
        self.has_missing = has_missing
        self.lookup = {v: i for i, v in enumerate(values)}
        if has_missing:
            self.lookup[None] = len(values)

    def write(self, column: _Column, out: npt.NDArray[np.float32], at: int) -> None:
        index = _labels(column, self.name, self.lookup)
        unknown = index < 0
        if unknown.any():
            if self.unknown == "error":
                i = int(np.argmax(unknown))
                value = column[i]
                known = list(self.values or []) + (["(missing)"] if self.has_missing else [])
                raise DataError(
                    f"{_row_text(i)}, column {self.name!r}: the value {value!r} was not in the "
                    f"training rows; the known values are: {_shown(known)} "
                    f"(declare .category({self.name!r}, unknown='zeros') to give unseen values "
                    f"all zeros)"
                )
            rows = np.flatnonzero(~unknown)
            out[rows, at + index[rows]] = 1.0
        else:
            out[np.arange(index.shape[0]), at + index] = 1.0

    def recipe(self) -> dict[str, Any]:
        return {"kind": "category", "name": self.name, "unknown": self.unknown}

    def learned(self) -> dict[str, Any]:
        return {"values": list(self.values or []), "missing": self.has_missing}

    def forget(self) -> None:
        self.values = None
        self.has_missing = False
        self.lookup = {}


@dataclass
class _Flag:
    name: str

    kind = "flag"

    def width(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [f"{self.name}:flag"]

    def learn(self, column: _Column) -> None:
        pass

    def write(self, column: _Column, out: npt.NDArray[np.float32], at: int) -> None:
        if isinstance(column, np.ndarray):
            if column.dtype.kind == "f":
                out[:, at] = ~np.isnan(column)
            else:
                out[:, at] = 1.0
            return
        distinct = _distinct(column)
        if distinct is None:
            out[:, at] = [0.0 if _is_missing(v) else 1.0 for v in column]
            return
        for key in distinct:
            distinct[key] = 0.0 if _is_missing(key) else 1.0
        out[:, at] = np.fromiter(map(distinct.__getitem__, column), np.float64, len(column))

    def recipe(self) -> dict[str, Any]:
        return {"kind": "flag", "name": self.name}

    def learned(self) -> dict[str, Any]:
        return {}

    def forget(self) -> None:
        pass


def _short(value: object, limit: int = 60) -> str:
    """A value's repr, cut short for an error message (an image's row may hold thousands)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_image_shape(name: str, shape: object) -> tuple[int, ...]:
    """An image column's shape: a positive whole number or a sequence of them (e.g. (1, 8, 8))."""
    dims: Sequence[object]
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        dims = (shape,)
    elif isinstance(shape, Sequence) and not isinstance(shape, (str, bytes)):
        dims = shape
    else:
        raise TypeError(
            f"column {name!r}: shape must be a whole number or a sequence of them such as "
            f"(1, 8, 8), not {shape!r}"
        )
    out: list[int] = []
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
            out = []
            break
        out.append(int(d))
    if not out:
        raise ValueError(
            f"column {name!r}: shape must hold one or more positive whole numbers, such as "
            f"(1, 8, 8), not {shape!r}"
        )
    return tuple(out)


def _check_image_scale(name: str, scale: object) -> ImageScale:
    if scale is None or scale == "max":
        return "max" if scale == "max" else None
    if isinstance(scale, str):
        raise ValueError(
            f"column {name!r}: scale must be None, a positive number or 'max', not {scale!r}"
        )
    if isinstance(scale, (bool, np.bool_)) or not isinstance(
        scale, (int, float, np.integer, np.floating)
    ):
        raise TypeError(
            f"column {name!r}: scale must be None, a positive number or 'max', not {scale!r}"
        )
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"column {name!r}: scale must be a positive finite number, not {scale!r}")
    return value


@dataclass
class _Image:
    """A column whose field holds a whole image (or any fixed-shape block of numbers).

    Each row's field is a list, tuple or NumPy array (of any nesting) of ``prod(shape)`` numbers,
    or a text of numbers separated by spaces or commas; it is flattened in C order (channels,
    then rows, then columns) into ``prod(shape)`` features named ``name[0]``, ``name[1]``, ...
    Every value is divided by one number: ``scale`` when it is given, the largest absolute value
    of the training rows when it is ``"max"`` (1 where they are all 0), and 1 when it is None.
    A missing field, a wrong count, a value that is no number or not finite is a DataError.
    """

    name: str
    shape: tuple[int, ...]
    scale: ImageScale
    # learned: what every value is divided by
    divisor: float | None = None

    kind = "image"

    def width(self) -> int:
        return math.prod(self.shape)

    def names(self) -> list[str]:
        return [f"{self.name}[{i}]" for i in range(self.width())]

    def _expected(self) -> str:
        return f"{self.width()} numbers (an image of shape {self.shape})"

    def _values(self, column: _Column) -> npt.NDArray[np.float64]:
        """The column as one float64 matrix (rows, width), checked: stacked by NumPy in one go
        where it can, row by row (to name the bad row) where it cannot."""
        count = len(column)
        width = self.width()
        values: npt.NDArray[np.float64] | None = None
        try:  # the usual case: equal arrays or lists, stacked by NumPy at once
            stacked = np.asarray(column, dtype=np.float64)
        except (ValueError, TypeError, OverflowError):
            stacked = None
        if (
            stacked is not None
            and stacked.ndim >= 1
            and stacked.shape[0] == count
            and stacked.size == count * width
            and (stacked.ndim > 1 or width == 1)
        ):
            values = stacked.reshape(count, width)
        if values is None:
            values = np.empty((count, width), dtype=np.float64)
            for i, value in enumerate(column):
                values[i] = self._row(i, value)
        finite = np.isfinite(values)
        if not finite.all():
            i, k = (int(v) for v in np.argwhere(~finite)[0])
            raise DataError(
                f"{_row_text(i)}, column {self.name!r}: expected {self._expected()}, but "
                f"value {k} (counting from 0) is {float(values[i, k])!r}, not a finite number"
            )
        return values

    def _row(self, i: int, value: object) -> npt.NDArray[np.float64]:
        where = f"{_row_text(i)}, column {self.name!r}"
        if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
            raise DataError(f"{where}: the image is missing; expected {self._expected()}")
        if isinstance(value, str):
            tokens = value.replace(",", " ").split()
            if not tokens:
                raise DataError(
                    f"{where}: the image is missing (empty text); expected {self._expected()}"
                )
            try:
                parsed = np.array([float(t) for t in tokens], dtype=np.float64)
            except ValueError:
                bad = next(t for t in tokens if _parse_number(t) is None)
                raise DataError(
                    f"{where}: expected {self._expected()}, found {bad!r}, which is no number"
                ) from None
        elif isinstance(value, (bytes, Mapping, bool, int, float, np.generic)):
            raise DataError(
                f"{where}: expected {self._expected()} as a list, tuple, NumPy array or text, "
                f"found {type(value).__name__} {_short(value)}"
            )
        else:
            try:
                parsed = np.asarray(value, dtype=np.float64)
            except (ValueError, TypeError, OverflowError):
                raise DataError(
                    f"{where}: expected {self._expected()}, found {_short(value)}, which holds "
                    f"something that is no number (or rows of unequal length)"
                ) from None
            if parsed.ndim == 0:
                raise DataError(
                    f"{where}: expected {self._expected()}, found the single value {_short(value)}"
                )
        if parsed.size != self.width():
            raise DataError(f"{where}: expected {self._expected()}, found {parsed.size} numbers")
        return parsed.reshape(-1)

    def learn(self, column: _Column) -> None:
        values = self._values(column)  # checks every row, as the other columns do
        if self.scale == "max":
            largest = float(np.max(np.abs(values))) if values.size else 0.0
            self.divisor = largest if largest > 0.0 else 1.0
        else:
            self.divisor = 1.0 if self.scale is None else float(self.scale)

    def write(self, column: _Column, out: npt.NDArray[np.float32], at: int) -> None:
        assert self.divisor is not None
        values = self._values(column)
        if self.divisor != 1.0:
            values /= self.divisor
        out[:, at : at + self.width()] = values

    def recipe(self) -> dict[str, Any]:
        return {"kind": "image", "name": self.name, "shape": list(self.shape), "scale": self.scale}

    def learned(self) -> dict[str, Any]:
        return {"divisor": self.divisor}

    def forget(self) -> None:
        self.divisor = None


_Feature = _Number | _Category | _Flag | _Image


@dataclass
class _Target:
    name: str
    kind: TargetKind
    classes: list[str] | None = None
    lookup: dict[str | None, int] = field(default_factory=dict)

    def set_classes(self, classes: list[str] | None) -> None:
        self.classes = classes
        self.lookup = {c: i for i, c in enumerate(classes or [])}

    def learn(self, column: _Column) -> None:
        if self.kind == "number":
            self.answers(column)  # checks every value is a number
            self.set_classes(None)
            return
        labels, first_rows = _column_labels(column, self.name)
        for label, i in zip(labels, first_rows, strict=False):
            if label is None:
                raise DataError(
                    f"{_row_text(i)}, column {self.name!r}: the target is missing; every "
                    f"training row needs an answer"
                )
        known = [label for label in labels if label is not None]
        if self.kind == "binary":
            if len(known) > 2:
                i = first_rows[2]
                raise DataError(
                    f"{_row_text(i)}, column {self.name!r}: a binary target holds two values, but "
                    f"this row holds a third, {column[i]!r}, after {known[0]!r} and {known[1]!r} "
                    f"(declare .target({self.name!r}, kind='classes') for more than two)"
                )
            if len(known) == 1:
                if known[0] in ("0", "1"):
                    known = ["0", "1"]
                else:
                    raise DataError(
                        f"column {self.name!r}: a binary target needs two values in the "
                        f"training rows, but they all hold {known[0]!r}"
                    )
        self.set_classes(_sorted_labels(known))

    def answers(self, column: _Column) -> npt.NDArray[Any]:
        if self.kind == "number":
            values = _numbers(column, self.name)
            missing = np.isnan(values)
            if missing.any():
                i = int(np.argmax(missing))
                raise DataError(
                    f"{_row_text(i)}, column {self.name!r}: the target is missing (or not "
                    f"finite); every row needs an answer"
                )
            return np.ascontiguousarray(values.astype(np.float32).reshape(-1, 1))
        index = _labels(column, self.name, self.lookup)
        bad = index < 0
        if bad.any():
            i = int(np.argmax(bad))
            value = column[i]
            if _label(value) is None:
                raise DataError(
                    f"{_row_text(i)}, column {self.name!r}: the target is missing; every row "
                    f"needs an answer"
                )
            raise DataError(
                f"{_row_text(i)}, column {self.name!r}: the target value {value!r} was not in "
                f"the training rows; the known values are: {_shown(self.classes or [])}"
            )
        if self.kind == "binary":
            return index.astype(np.float32).reshape(-1, 1)
        return index.astype(np.int64)

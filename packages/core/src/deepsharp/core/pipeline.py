"""The data pipeline: the recipe for the data. It knows no learner.

A :class:`Pipeline` is declared column by column (``.number``, ``.category``, ``.flag``,
``.image`` and one ``.target``), learns its statistics from the training rows only
(:meth:`Pipeline.learn`) and then turns any rows into a float32 feature matrix
(:meth:`Pipeline.features`) and answers (:meth:`Pipeline.answers`). Rows are a sequence of
mappings (what :func:`read_csv` returns, or dicts written by hand) or a pandas ``DataFrame``
(pandas is optional and imported only when one is handed in). An image column's field holds a
whole image (an array, a list or a text of numbers), stacked by NumPy into the matrix at once.

The work is done column by column with NumPy. Each column's distinct values are found once (a dict
built in C), each distinct value is parsed once, and the column is then mapped in one pass; so a
column of a few hundred distinct values over a hundred thousand rows costs a few milliseconds.
Rows in error messages are counted from 1, in the rows as handed to that call.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.errors import DataError, FileFormatError

__all__ = ["Pipeline", "read_csv"]

FillSpec = Literal["median", "mean"] | float
TargetKind = Literal["binary", "classes", "number"]
UnknownRule = Literal["zeros", "error"]
ImageScale = float | Literal["max"] | None

_FORMAT = "deepsharp.pipeline"
_VERSION = 1
_NAN = float("nan")
_TARGET_KINDS = ("binary", "classes", "number")
_COLUMN_KINDS = ("number", "category", "flag", "image")
_SHOWN_VALUES = 20  # how many known values an error message lists before it says "and N more"


# --------------------------------------------------------------------------------------------
# read_csv


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str | None]]:
    """Read a CSV file with a header row into a list of dicts from column name to the field's text.

    An empty field is ``None``. Blank lines are skipped. A row with more or fewer fields than the
    header is a :class:`DataError` naming the file and the line.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise FileNotFoundError(f"no such CSV file: {name!r}")
    with open(name, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header: list[str] | None = None
        out: list[dict[str, str | None]] = []
        try:
            for record in reader:
                if not record:
                    continue
                if header is None:
                    header = record
                    seen: set[str] = set()
                    for column in header:
                        if column in seen:
                            raise DataError(
                                f"{name}, line {reader.line_num}: the header names column "
                                f"{column!r} twice; give each column its own name"
                            )
                        seen.add(column)
                    continue
                if len(record) != len(header):
                    raise DataError(
                        f"{name}, line {reader.line_num}: this row has {len(record)} fields but "
                        f"the header has {len(header)}; every row must have one field per column"
                    )
                out.append(
                    {k: (v if v != "" else None) for k, v in zip(header, record, strict=False)}
                )
        except csv.Error as exc:
            raise DataError(f"{name}, line {reader.line_num}: not valid CSV: {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataError(f"{name}: not UTF-8 text: {exc}") from None
    if header is None:
        raise DataError(f"{name}: the file is empty; expected a header row naming the columns")
    return out


# --------------------------------------------------------------------------------------------
# Helpers on values


def _row_text(index: int) -> str:
    return f"row {index + 1} (counting from 1)"


def _is_missing(value: object) -> bool:
    """None, an empty (or blank) text, or a float NaN."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    if isinstance(value, (float, np.floating)):
        return bool(math.isnan(value))
    return False


def _parse_number(value: object) -> float | None:
    """A finite float, NaN for a missing value (inf counts as missing), None for no number."""
    if value is None:
        return _NAN
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return _NAN
        try:
            number = float(text)
        except ValueError:
            return None
    elif isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        number = float(value)
    else:
        return None
    return number if math.isfinite(number) else _NAN


def _label(value: object) -> str | None:
    """A value's text as a category or a target label; None when it is missing.

    Text is stripped; an integral number gives its integer text (3, 3.0 and "3" are one label), so a
    pandas column of numbers and a CSV column of text give the same labels.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        return text if text else None
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return None
        if number.is_integer():
            return str(int(number))
        return repr(number)
    return str(value)


def _sorted_labels(labels: Iterable[str]) -> list[str]:
    """Numerically when every label parses as a number, otherwise as text."""
    items = list(labels)
    numbers: list[tuple[float, str]] = []
    for item in items:
        try:
            numbers.append((float(item), item))
        except ValueError:
            return sorted(items)
    return [item for _, item in sorted(numbers)]


def _shown(values: Sequence[str]) -> str:
    head = ", ".join(repr(v) for v in values[:_SHOWN_VALUES])
    if len(values) > _SHOWN_VALUES:
        head += f", and {len(values) - _SHOWN_VALUES} more"
    return head


def _distinct(column: Sequence[object]) -> dict[Any, Any] | None:
    """The column's distinct values as the keys of a dict (None when a value is not hashable)."""
    try:
        return dict.fromkeys(column)
    except TypeError:
        return None


def _first_row(column: Sequence[object], bad: object) -> int:
    for i, value in enumerate(column):
        if value is bad or value == bad:
            return i
    return 0  # pragma: no cover - the value came from this column


def _first_unhashable(column: Sequence[object]) -> int:
    for i, value in enumerate(column):
        try:
            hash(value)
        except TypeError:
            return i
    return 0  # pragma: no cover


# A column as taken from the rows: a list of Python values, or (from a DataFrame) a NumPy array of
# numbers or booleans.
_Column = list[object] | npt.NDArray[Any]


def _numbers(column: _Column, name: str) -> npt.NDArray[np.float64]:
    """Parse a column to float64; NaN marks a missing value (empty, None, NaN, inf, -inf)."""
    if isinstance(column, np.ndarray):
        values = column.astype(np.float64)
        values[~np.isfinite(values)] = _NAN
        return values
    count = len(column)
    distinct = _distinct(column)
    if distinct is None:
        i = _first_unhashable(column)
        raise DataError(f"{_row_text(i)}, column {name!r}: expected a number, found {column[i]!r}")
    if len(distinct) * 2 <= count:
        for key in distinct:
            number = _parse_number(key)
            if number is None:
                i = _first_row(column, key)
                raise DataError(
                    f"{_row_text(i)}, column {name!r}: expected a number, found {key!r}"
                )
            distinct[key] = number
        return np.fromiter(map(distinct.__getitem__, column), dtype=np.float64, count=count)
    # Mostly distinct values: let NumPy parse them in one go (None becomes NaN).
    try:
        values = np.array(column, dtype=np.float64)
        if values.shape != (count,):
            raise ValueError("not a flat column")
    except (ValueError, TypeError, OverflowError):
        parsed = np.empty(count, dtype=np.float64)
        for i, value in enumerate(column):
            number = _parse_number(value)
            if number is None:
                raise DataError(
                    f"{_row_text(i)}, column {name!r}: expected a number, found {value!r}"
                ) from None
            parsed[i] = number
        return parsed
    values[~np.isfinite(values)] = _NAN
    return values


def _labels(column: _Column, name: str, lookup: Mapping[str | None, int]) -> npt.NDArray[np.intp]:
    """Map a column to indices through ``lookup`` (label -> index); -1 for an unknown label."""
    if isinstance(column, np.ndarray):
        column = column.tolist()
    assert isinstance(column, list)
    count = len(column)
    distinct = _distinct(column)
    if distinct is None:
        i = _first_unhashable(column)
        raise DataError(
            f"{_row_text(i)}, column {name!r}: expected text or a number, found {column[i]!r}"
        )
    for key in distinct:
        distinct[key] = lookup.get(_label(key), -1)
    return np.fromiter(map(distinct.__getitem__, column), dtype=np.intp, count=count)


def _column_labels(column: _Column, name: str) -> tuple[list[str | None], list[int]]:
    """The distinct labels of a column in order of first appearance, with the row of each."""
    if isinstance(column, np.ndarray):
        column = column.tolist()
    assert isinstance(column, list)
    distinct = _distinct(column)
    if distinct is None:
        i = _first_unhashable(column)
        raise DataError(
            f"{_row_text(i)}, column {name!r}: expected text or a number, found {column[i]!r}"
        )
    by_label: dict[str | None, int] = {}
    for key in distinct:
        label = _label(key)
        if label not in by_label:
            by_label[label] = -1
    if len(by_label) > 0:
        # the first row of each label, found in one pass over the rows
        keys_of: dict[Any, str | None] = {key: _label(key) for key in distinct}
        pending = set(by_label)
        for i, value in enumerate(column):
            label = keys_of[value] if value in keys_of else _label(value)
            if label in pending:
                by_label[label] = i
                pending.discard(label)
                if not pending:
                    break
    labels = sorted(by_label, key=by_label.__getitem__)
    return labels, [by_label[label] for label in labels]


# --------------------------------------------------------------------------------------------
# Rows to columns


def _columns(rows: object, names: Sequence[str]) -> tuple[int, dict[str, _Column]]:
    """Take the named columns out of the rows once. Returns the row count and the columns."""
    if type(rows).__module__.startswith("pandas"):
        return _frame_columns(rows, names)
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise DataError(
            f"rows must be a list of mappings (dicts from column name to value) or a pandas "
            f"DataFrame, not {type(rows).__name__}"
        )
    seq: Sequence[Any] = rows if isinstance(rows, Sequence) else list(rows)
    count = len(seq)
    if count == 0:
        raise DataError("no rows: the rows handed in are empty; give at least one row")
    out: dict[str, _Column] = {}
    for name in names:
        if name in out:
            continue
        try:
            out[name] = [row[name] for row in seq]
        except (KeyError, TypeError, IndexError):
            _raise_missing_column(seq, name)
    return count, out


def _raise_missing_column(rows: Sequence[Any], name: str) -> None:
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DataError(
                f"{_row_text(i)} is of type {type(row).__name__}, not a mapping "
                f"from column name to value"
            ) from None
        if name not in row:
            columns = ", ".join(repr(str(k)) for k in row)
            raise DataError(
                f"{_row_text(i)} has no column {name!r}; that row has the columns: "
                f"{columns or '(none)'}"
            ) from None
    raise DataError(f"column {name!r} could not be read from the rows")  # pragma: no cover


def _frame_columns(frame: Any, names: Sequence[str]) -> tuple[int, dict[str, _Column]]:
    if not hasattr(frame, "columns") or not hasattr(frame, "__getitem__"):
        raise DataError(
            f"rows must be a list of mappings or a pandas DataFrame, not {type(frame).__name__}"
        )
    count = len(frame)
    if count == 0:
        raise DataError("no rows: the DataFrame handed in has no rows; give at least one row")
    present = [str(c) for c in frame.columns]
    out: dict[str, _Column] = {}
    for name in names:
        if name in out:
            continue
        if name not in frame.columns:
            raise DataError(
                f"{_row_text(0)} has no column {name!r}; the DataFrame has the columns: "
                f"{', '.join(repr(c) for c in present) or '(none)'}"
            )
        series = frame[name]
        if getattr(series, "ndim", 1) != 1:
            raise DataError(f"the DataFrame has more than one column named {name!r}")
        kind = getattr(getattr(series, "dtype", None), "kind", "O")
        if isinstance(series.dtype, np.dtype) and kind in "biuf":
            out[name] = series.to_numpy()
        else:
            out[name] = series.to_numpy(dtype=object, na_value=None).tolist()
    return count, out


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


# --------------------------------------------------------------------------------------------
# The pipeline


class Pipeline:
    """The recipe for the data: declared columns, one target, a split and learned statistics."""

    def __init__(self) -> None:
        self._features: list[_Feature] = []
        self._target: _Target | None = None
        self._train = 0.70
        self._validation = 0.15
        self._learned = False

    # -- declaring ----------------------------------------------------------------------------

    def number(
        self,
        name: str,
        fill: FillSpec = "median",
        missing_flag: bool = False,
        log: bool = False,
        scale: bool = True,
    ) -> Pipeline:
        """A column of numbers; a missing one is filled (median, mean or a given value)."""
        _check_name(name)
        if isinstance(fill, str):
            if fill not in ("median", "mean"):
                raise ValueError(
                    f"column {name!r}: fill must be 'median', 'mean' or a number, not {fill!r}"
                )
        elif isinstance(fill, bool) or not isinstance(fill, (int, float)):
            raise TypeError(
                f"column {name!r}: fill must be 'median', 'mean' or a number, not {fill!r}"
            )
        elif not math.isfinite(fill):
            raise ValueError(f"column {name!r}: fill must be a finite number, not {fill!r}")
        elif log and fill < 0:
            raise ValueError(
                f"column {name!r}: fill={fill!r} is negative, but log=True needs values of 0 "
                f"or more"
            )
        for flag_name, flag in (
            ("missing_flag", missing_flag),
            ("log", log),
            ("scale", scale),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"column {name!r}: {flag_name} must be True or False")
        fill_value: FillSpec = fill if isinstance(fill, str) else float(fill)
        return self._add(_Number(name, fill_value, missing_flag, log, scale))

    def category(self, name: str, unknown: UnknownRule = "zeros") -> Pipeline:
        """A column of categories, one-hot over the values the training rows hold."""
        _check_name(name)
        if unknown not in ("zeros", "error"):
            raise ValueError(
                f"column {name!r}: unknown must be 'zeros' or 'error', not {unknown!r}"
            )
        return self._add(_Category(name, unknown))

    def flag(self, name: str) -> Pipeline:
        """1.0 where the field holds anything, else 0.0."""
        _check_name(name)
        return self._add(_Flag(name))

    def image(
        self,
        name: str,
        shape: int | Sequence[int],
        scale: ImageScale = None,
    ) -> Pipeline:
        """A column whose field holds a whole image of ``shape`` (e.g. ``(1, 8, 8)``: channels,
        height, width), flattened into ``prod(shape)`` features ``name[0]``, ``name[1]``, ...

        A row's field is a list, tuple or NumPy array of that many numbers (nested or flat, read
        in C order), or a text of numbers separated by spaces or commas. ``scale`` divides every
        value by a fixed positive number (16.0 for the digits' counts 0..16); ``"max"`` learns the
        largest absolute value of the training rows and divides by it; None leaves values as they
        are. A run hands the flat features to a network whose ``inputs`` are ``shape`` as images.
        """
        _check_name(name)
        dims = _check_image_shape(name, shape)
        return self._add(_Image(name, dims, _check_image_scale(name, scale)))

    def target(self, name: str, kind: TargetKind = "binary") -> Pipeline:
        """The one column the network answers."""
        _check_name(name)
        if kind not in _TARGET_KINDS:
            raise ValueError(
                f"target {name!r}: kind must be 'binary', 'classes' or 'number', not {kind!r}"
            )
        if self._target is not None:
            raise ValueError(
                f"the pipeline already has the target {self._target.name!r}; a pipeline has "
                f"exactly one target"
            )
        if any(f.name == name for f in self._features):
            raise ValueError(f"column {name!r} is already a feature; it cannot be the target too")
        self._target = _Target(name, kind)
        self._forget()
        return self

    def split(self, train: float = 0.70, validation: float = 0.15) -> Pipeline:
        """Fractions of the rows for training and validation; the rest is the test rows."""
        for label, value in (("train", train), ("validation", validation)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"split: {label} must be a number, not {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"split: {label} must be finite, not {value!r}")
        if not train > 0:
            raise ValueError(f"split: train must be more than 0, not {train!r}")
        if not validation >= 0:
            raise ValueError(f"split: validation must be 0 or more, not {validation!r}")
        if not train + validation < 1:
            raise ValueError(
                f"split: train + validation must be less than 1 so that test rows remain, not "
                f"{train!r} + {validation!r}"
            )
        self._train = float(train)
        self._validation = float(validation)
        return self

    def _add(self, column: _Feature) -> Pipeline:
        if self._target is not None and column.name == self._target.name:
            raise ValueError(f"column {column.name!r} is the target; it cannot be a feature too")
        for other in self._features:
            if other.name == column.name and other.kind == column.kind:
                raise ValueError(f"column {column.name!r} is already declared as a {column.kind}")
        self._features.append(column)
        self._forget()
        return self

    def _forget(self) -> None:
        self._learned = False
        for column in self._features:
            column.forget()
        if self._target is not None:
            self._target.set_classes(None)

    # -- learning and applying ------------------------------------------------------------------

    def learn(self, rows: object) -> Pipeline:
        """Learn the statistics from these rows, which must be the training rows only."""
        if not self._features:
            raise DataError(
                "the pipeline has no feature columns; declare some with .number(), .category(), "
                ".flag() or .image() before learning"
            )
        names = [f.name for f in self._features]
        if self._target is not None:
            names.append(self._target.name)
        _, columns = _columns(rows, names)
        self._forget()
        try:
            for column in self._features:
                column.learn(columns[column.name])
            if self._target is not None:
                self._target.learn(columns[self._target.name])
        except BaseException:
            self._forget()
            raise
        self._learned = True
        return self

    def features(self, rows: object) -> npt.NDArray[np.float32]:
        """The rows as a float32 matrix of shape (rows, feature_count), C-contiguous."""
        self._require_learned("features()")
        count, columns = _columns(rows, [f.name for f in self._features])
        out = np.zeros((count, self.feature_count), dtype=np.float32)
        at = 0
        for column in self._features:
            column.write(columns[column.name], out, at)
            at += column.width()
        return out

    def answers(self, rows: object) -> npt.NDArray[Any]:
        """binary: float32 (N, 1) of 0/1; number: float32 (N, 1); classes: int64 (N,) indices."""
        if self._target is None:
            raise DataError(
                "the pipeline has no target; declare one with .target(name, kind=...) before "
                "asking for answers"
            )
        self._require_learned("answers()")
        _, columns = _columns(rows, [self._target.name])
        return self._target.answers(columns[self._target.name])

    def partition(
        self, count: int, order: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Train, validation and test row indices, cut from the permutation ``order``.

        train = floor(train * count) rows, validation = floor(validation * count), test the rest.
        """
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise ValueError(f"partition: count must be a whole number of rows, not {count!r}")
        count = int(count)
        perm = np.asarray(order)
        if perm.ndim != 1 or perm.shape[0] != count:
            raise ValueError(
                f"partition: order must be a permutation of the {count} row indices, but it has "
                f"shape {perm.shape}"
            )
        if count and perm.dtype.kind not in "iu":
            raise ValueError(f"partition: order must hold integers, not {perm.dtype}")
        perm = perm.astype(np.int64)
        if count and (
            perm.min() < 0
            or perm.max() >= count
            or not bool(np.all(np.bincount(perm, minlength=count) == 1))
        ):
            raise ValueError(
                f"partition: order must be a permutation of 0 .. {count - 1}, each index once"
            )
        n_train, n_validation, n_test = _split_sizes(count, self._train, self._validation)
        if n_train == 0 or n_test == 0 or (self._validation > 0 and n_validation == 0):
            needed = _rows_needed(self._train, self._validation)
            raise DataError(
                f"too few rows for the split: there are {count} rows, which give "
                f"{n_train} training, {n_validation} validation and {n_test} test rows; "
                f"split(train={self._train}, validation={self._validation}) needs at least "
                f"{needed} rows so that no part is empty"
            )
        return (
            perm[:n_train].copy(),
            perm[n_train : n_train + n_validation].copy(),
            perm[n_train + n_validation :].copy(),
        )

    # -- what it is -----------------------------------------------------------------------------

    @property
    def is_learned(self) -> bool:
        return self._learned

    @property
    def feature_names(self) -> list[str]:
        self._require_learned("feature_names")
        return [n for column in self._features for n in column.names()]

    @property
    def feature_count(self) -> int:
        self._require_learned("feature_count")
        return sum(column.width() for column in self._features)

    @property
    def target_name(self) -> str | None:
        return None if self._target is None else self._target.name

    @property
    def target_kind(self) -> TargetKind | None:
        return None if self._target is None else self._target.kind

    @property
    def classes(self) -> list[str] | None:
        """The target's labels as text (index 1 of a binary one is the positive label).

        None for a number target, for no target, and before learning.
        """
        if self._target is None or self._target.classes is None:
            return None
        return list(self._target.classes)

    @property
    def split_fractions(self) -> tuple[float, float]:
        return self._train, self._validation

    def __repr__(self) -> str:
        parts = [f"{c.kind}({c.name!r})" for c in self._features]
        if self._target is not None:
            parts.append(f"target({self._target.name!r}, {self._target.kind!r})")
        state = "learned" if self._learned else "not learned"
        return f"Pipeline({', '.join(parts)}; {state})"

    def _require_learned(self, what: str) -> None:
        if not self._learned:
            raise DataError(
                f"the pipeline has not learned its statistics yet; call "
                f"pipeline.learn(training_rows) before {what}"
            )

    # -- files ----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The recipe and the learned statistics as a plain JSON-able dict (floats round-trip)."""
        columns: list[dict[str, Any]] = []
        for column in self._features:
            entry = column.recipe()
            if self._learned:
                entry["learned"] = column.learned()
            columns.append(entry)
        target: dict[str, Any] | None = None
        if self._target is not None:
            target = {"name": self._target.name, "kind": self._target.kind}
            if self._learned:
                target["classes"] = (
                    None if self._target.classes is None else list(self._target.classes)
                )
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "split": {"train": self._train, "validation": self._validation},
            "columns": columns,
            "target": target,
            "learned": self._learned,
        }

    @classmethod
    def from_json(cls, data: object) -> Pipeline:
        """A pipeline from :meth:`to_json`'s dict; FileFormatError saying what is wrong if bad."""
        try:
            return _from_json(data)
        except FileFormatError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise FileFormatError(f"pipeline: not a valid pipeline: {exc}") from None


# --------------------------------------------------------------------------------------------
# Module helpers


def _check_name(name: object) -> None:
    if not isinstance(name, str) or name == "":
        raise ValueError(f"a column name must be a non-empty str, not {name!r}")


def _split_sizes(count: int, train: float, validation: float) -> tuple[int, int, int]:
    # A hair of tolerance so that, e.g., 0.29 * 100 (28.999999999999996) gives 29 rows.
    n_train = min(count, math.floor(train * count + 1e-9))
    n_validation = min(count - n_train, math.floor(validation * count + 1e-9))
    return n_train, n_validation, count - n_train - n_validation


def _rows_needed(train: float, validation: float) -> int:
    start = max(1, math.ceil(1 / train) - 1)
    if validation > 0:
        start = max(start, math.ceil(1 / validation) - 1)
    n = start
    while True:
        a, b, c = _split_sizes(n, train, validation)
        if a > 0 and c > 0 and (validation == 0 or b > 0):
            return n
        n += 1


def _fail(where: str, what: str) -> FileFormatError:
    return FileFormatError(f"pipeline{where}: {what}")


def _get(d: Mapping[str, Any], key: str, where: str, *types: type) -> Any:
    if key not in d:
        raise _fail(where, f"missing the key {key!r}")
    value = d[key]
    ok = any(
        isinstance(value, t) and not (isinstance(value, bool) and t in (int, float)) for t in types
    )
    if not ok:
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise _fail(
            f"{where}.{key}",
            f"expected {names}, found {type(value).__name__} {value!r}",
        )
    return value


def _float(d: Mapping[str, Any], key: str, where: str) -> float:
    value = float(_get(d, key, where, int, float))
    if not math.isfinite(value):
        raise _fail(f"{where}.{key}", f"expected a finite number, found {value!r}")
    return value


def _text_list(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"expected a list of text, found {value!r}")
    if len(set(value)) != len(value):
        raise _fail(where, "a value appears twice")
    return list(value)


def _from_json(data: object) -> Pipeline:
    if not isinstance(data, Mapping):
        raise _fail("", f"expected a JSON object (dict), found {type(data).__name__}")
    fmt = _get(data, "format", "", str)
    if fmt != _FORMAT:
        raise _fail(".format", f"expected {_FORMAT!r}, found {fmt!r}")
    version = _get(data, "version", "", int)
    if version != _VERSION:
        raise _fail(
            ".version",
            f"this deepsharp reads pipeline version {_VERSION}, the file holds {version}",
        )
    learned = _get(data, "learned", "", bool)
    split = _get(data, "split", "", dict)
    pipe = Pipeline()
    try:
        pipe.split(_float(split, "train", ".split"), _float(split, "validation", ".split"))
    except (ValueError, TypeError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise _fail(".split", str(exc)) from None
    columns = _get(data, "columns", "", list)
    for i, entry in enumerate(columns):
        where = f".columns[{i}]"
        if not isinstance(entry, Mapping):
            raise _fail(where, f"expected an object, found {type(entry).__name__}")
        kind = _get(entry, "kind", where, str)
        name = _get(entry, "name", where, str)
        try:
            if kind == "number":
                fill = _get(entry, "fill", where, str, int, float)
                pipe.number(
                    name,
                    fill=fill,
                    missing_flag=_get(entry, "missing_flag", where, bool),
                    log=_get(entry, "log", where, bool),
                    scale=_get(entry, "scale", where, bool),
                )
            elif kind == "category":
                pipe.category(name, unknown=_get(entry, "unknown", where, str))
            elif kind == "flag":
                pipe.flag(name)
            elif kind == "image":
                shape = _get(entry, "shape", where, list)
                scale = _get(entry, "scale", where, str, int, float, type(None))
                if isinstance(scale, str) and scale != "max":
                    raise _fail(
                        f"{where}.scale",
                        f"expected a positive number, 'max' or null, found {scale!r}",
                    )
                pipe.image(name, shape, scale=scale)
            else:
                raise _fail(
                    f"{where}.kind",
                    f"unknown column kind {kind!r} (expected one of {', '.join(_COLUMN_KINDS)})",
                )
        except (ValueError, TypeError) as exc:
            if isinstance(exc, FileFormatError):
                raise
            raise _fail(where, str(exc)) from None
    target = data.get("target") if "target" in data else None
    if "target" not in data:
        raise _fail("", "missing the key 'target'")
    if target is not None:
        if not isinstance(target, Mapping):
            raise _fail(".target", f"expected an object or null, found {type(target).__name__}")
        kind = _get(target, "kind", ".target", str)
        if kind not in _TARGET_KINDS:
            raise _fail(
                ".target.kind",
                f"unknown target kind {kind!r} (expected one of {', '.join(_TARGET_KINDS)})",
            )
        try:
            pipe.target(_get(target, "name", ".target", str), kind=kind)
        except (ValueError, TypeError) as exc:
            raise _fail(".target", str(exc)) from None
    if not learned:
        return pipe
    if not pipe._features:
        raise _fail(".columns", "a learned pipeline must have at least one column")
    for i, (column, entry) in enumerate(zip(pipe._features, columns, strict=False)):
        where = f".columns[{i}].learned"
        stats = _get(entry, "learned", f".columns[{i}]", dict)
        if isinstance(column, _Number):
            column.fill_value = _float(stats, "fill", where)
            column.mean = _float(stats, "mean", where)
            column.std = _float(stats, "std", where)
            if not column.std > 0:
                raise _fail(f"{where}.std", f"expected a positive number, found {column.std!r}")
        elif isinstance(column, _Category):
            values = _text_list(_get(stats, "values", where, list), f"{where}.values")
            column.set_learned(values, _get(stats, "missing", where, bool))
        elif isinstance(column, _Image):
            divisor = _float(stats, "divisor", where)
            if not divisor > 0:
                raise _fail(f"{where}.divisor", f"expected a positive number, found {divisor!r}")
            if isinstance(column.scale, float) and divisor != column.scale:
                raise _fail(
                    f"{where}.divisor",
                    f"the column's scale is {column.scale!r}, but its divisor is {divisor!r}",
                )
            if column.scale is None and divisor != 1.0:
                raise _fail(
                    f"{where}.divisor", f"a column without scale divides by 1, not {divisor!r}"
                )
            column.divisor = divisor
    if pipe._target is not None:
        classes = target.get("classes") if isinstance(target, Mapping) else None
        if pipe._target.kind == "number":
            if classes is not None:
                raise _fail(".target.classes", "a number target has no classes; expected null")
            pipe._target.set_classes(None)
        else:
            if classes is None:
                raise _fail(".target", "missing the learned classes of the target")
            labels = _text_list(classes, ".target.classes")
            if pipe._target.kind == "binary" and len(labels) != 2:
                raise _fail(
                    ".target.classes",
                    f"a binary target has exactly two classes, found {len(labels)}",
                )
            if pipe._target.kind == "classes" and not labels:
                raise _fail(".target.classes", "a classes target needs at least one class")
            pipe._target.set_classes(labels)
    pipe._learned = True
    return pipe

"""Rows and their values: reading a CSV file, taking columns out of rows, parsing fields.

Rows are a sequence of mappings (what :func:`read_csv` returns, or dicts written by hand) or a
pandas ``DataFrame`` (pandas is optional and imported only when one is handed in). Each
column's distinct values are found once (a dict built in C) and each distinct value is parsed
once. Rows in error messages are counted from 1, in the rows as handed to that call.
"""

from __future__ import annotations

import csv
import itertools
import math
import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.errors import DataError

__all__ = ["read_csv"]

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
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return count, {}
    # One pass over the rows, in C: each row's values in one tuple, the tuples laid end to
    # end, each column a stride through them (rows are visited once, not once a column).
    try:
        if len(wanted) == 1:
            return count, {wanted[0]: list(map(operator.itemgetter(wanted[0]), seq))}
        flat = list(itertools.chain.from_iterable(map(operator.itemgetter(*wanted), seq)))
    except (KeyError, TypeError, IndexError):
        raise _missing_column(seq, wanted) from None
    width = len(wanted)
    return count, {name: flat[i::width] for i, name in enumerate(wanted)}


def _missing_column(rows: Sequence[Any], names: Sequence[str]) -> DataError:
    """The error for the first row that is not a mapping or lacks one of `names`."""
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            return DataError(
                f"{_row_text(i)} is of type {type(row).__name__}, not a mapping "
                f"from column name to value"
            )
        for name in names:
            if name not in row:
                columns = ", ".join(repr(str(k)) for k in row)
                return DataError(
                    f"{_row_text(i)} has no column {name!r}; that row has the columns: "
                    f"{columns or '(none)'}"
                )
    shown = ", ".join(repr(name) for name in names)  # pragma: no cover - a lookup failed
    return DataError(f"the columns {shown} could not be read from the rows")  # pragma: no cover


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

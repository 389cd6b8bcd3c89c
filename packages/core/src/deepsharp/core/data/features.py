"""Features: what a pipeline hands a network, one array an input.

A pipeline of columns builds them: each input's columns' features side by side
(`column_groups`, `feature_matrix`: float32 numbers, or int64 ids), refusing a feature a column
kind made beyond float32's range. A pipeline that declares no columns takes arrays of numbers as
they are, checked (`array_features`). Either way features are an array, or a dict of one array
an input, of the same rows (`feature_rows`, `take_features`).
"""

from __future__ import annotations

import collections
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import ColumnKind
from deepsharp.core.data.values import (
    FLOAT32_MAX,
    ColumnName,
    a_time,
    pandas_missing,
    row_text,
    shown_value,
)
from deepsharp.core.errors import DataError, DeepSharpWarning, outside
from deepsharp.core.reals import refuse_masked

__all__ = ["array_features", "column_groups", "feature_matrix", "feature_rows", "take_features"]


def column_groups(columns: Sequence[ColumnKind]) -> dict[str | None, list[ColumnKind]]:
    """The columns of each input, the inputs in the order the columns first name them."""
    groups: dict[str | None, list[ColumnKind]] = {}
    for column in columns:
        groups.setdefault(column.input, []).append(column)
    return groups


def feature_matrix(
    group: Sequence[ColumnKind], count: int, taken: dict[ColumnName, Any]
) -> npt.NDArray[Any]:
    """One input's features: its columns' side by side (float32, or int64 ids)."""
    dtype = np.int64 if group[0].dtype == "int64" else np.float32
    out = np.zeros((count, sum(column.width() for column in group)), dtype=dtype)
    at = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for column in group:
            column.write(taken[column.name], out, at)
            at += column.width()
    if dtype is np.float32 and not np.isfinite(out).all():
        _refuse_overflow(out, group)
    return out


def _refuse_overflow(out: npt.NDArray[np.float32], group: Sequence[ColumnKind]) -> None:
    i, k = (int(v) for v in np.argwhere(~np.isfinite(out))[0])
    at = 0
    for column in group:
        if k < at + column.width():
            break
        at += column.width()
    raise DataError(
        f"{row_text(i)}, column {column.name!r}: its feature {column.names()[k - at]!r} is "
        f"{float(out[i, k])!r} once {column.kind} made it, beyond float32's range (largest "
        f"{FLOAT32_MAX:.8g}): the value lies too far from the training rows' values"
    )


def frame_names(data: object) -> list[str] | None:
    """A DataFrame's column names as text, where it is a table of one feature a column (each
    name its own as text); None for anything else."""
    columns = getattr(data, "columns", None)
    if (
        columns is None
        or not type(data).__module__.startswith("pandas")
        or len(getattr(data, "shape", ())) != 2
    ):
        return None
    names = [str(name) for name in columns]
    return names if len(set(names)) == len(names) else None


def by_names(data: Any, names: list[str]) -> Any:
    """A DataFrame's columns in the order `names` gives (the frame a pipeline of arrays learned
    from): read by name, not by place, so a frame of the same columns in another order is the
    same features (it was read by place, silently: trial PD). A frame of other columns is
    refused, naming both; anything but a frame is taken as it is, by place."""
    columns = getattr(data, "columns", None)
    if columns is not None and type(data).__module__.startswith("pandas"):
        counts = collections.Counter(str(name) for name in columns)
        twice = sorted(text for text, count in counts.items() if count > 1)
        if twice:  # was read by place, silently (a review)
            raise DataError(
                f"the features are a DataFrame naming {', '.join(map(repr, twice))} twice (as "
                "text); the pipeline reads its columns by their names "
                f"({', '.join(map(repr, names))}): give each column once"
            )
    given = frame_names(data)
    if given is None or given == names:
        return data
    if sorted(given) != sorted(names):
        missing = [name for name in names if name not in given]
        extra = [name for name in given if name not in names]
        raise DataError(
            "the features are a DataFrame of other columns than the one the pipeline learned "
            f"from ({', '.join(map(repr, names))})"
            + (f": it lacks {', '.join(map(repr, missing))}" if missing else "")
            + (f"{';' if missing else ':'} it holds {', '.join(map(repr, extra))}" if extra else "")
            + "; give a frame of those columns (in any order), or an array of them in that order"
        )
    place = {str(name): name for name in data.columns}
    return data[[place[name] for name in names]]


def by_place(data: Any) -> Any:
    """Features for a pipeline of arrays that learned no columns' names (from an array): a
    DataFrame is read by its columns' places, as the array was, and warned of, as
    scikit-learn warns of it (trial X3: a frame of the columns in another order gave other
    predictions without a word)."""
    names = frame_names(data)
    if names is not None:
        warnings.warn(
            "the features are a DataFrame, and the pipeline learned from an array without "
            f"columns' names: its columns are read by their places ({', '.join(names[:4])}"
            f"{', ...' if len(names) > 4 else ''}), as the array's were. Train on a DataFrame "
            "for its columns to be read by their names, or give an array",
            DeepSharpWarning,
            stacklevel=outside(),
        )
    return data


def _at(place: Sequence[Any]) -> str:
    """A value's place in arrays of rows: its row and feature, counting from 1 as a row is
    counted everywhere (the feature was counted from 0 here, from 1 in the network's checks)."""
    return (
        f"row {int(place[0]) + 1}, feature {[int(p) + 1 for p in place[1:]]} (each counting from 1)"
    )


def array_features(data: object) -> Any:
    """Numbers of shape (N, ...) as float32 — integers as int64 (ids) —, checked: no missing
    value, none infinite or beyond float32's range (a DataError names the row and the place in
    it). A dict of such arrays (a network of several inputs, one an input) gives a dict of them,
    each of the same rows."""
    if isinstance(data, Mapping):
        if not data:
            raise DataError("a dict of features holds one array an input, and this one is empty")
        made = {str(name): _array(value, f"input {name!r}: ") for name, value in data.items()}
        counts = {name: a.shape[0] for name, a in made.items()}
        if len(set(counts.values())) > 1:
            raise DataError(f"every input's array holds the same rows, and these hold {counts}")
        return made
    return _array(data)


def _array(data: object, where: str = "") -> npt.NDArray[Any]:
    refuse_masked(data, f"{where}the features")
    try:
        values = np.asarray(data)
    except (ValueError, TypeError):
        values = np.asarray(data, dtype=object)  # ragged: refused below, as it cannot be read
    _refuse_times(data, values, where)
    try:
        if values.dtype.kind not in "biufc":
            values = values.astype(np.float64)
    except (ValueError, TypeError) as error:
        values = _numbers_of_objects(data, values, where, error)
    if values.dtype.kind == "c":  # a cast to real would drop every imaginary part
        raise DataError(
            f"{where}the features are complex numbers ({values.dtype}); a network takes real "
            "ones: give their real and imaginary parts as features of their own, "
            "np.stack([x.real, x.imag], axis=-1), or their magnitudes, np.abs(x)"
        )
    if values.ndim < 2 or values.shape[0] == 0:
        raise DataError(
            f"{where}arrays of features are (rows, ...) with at least one row, not of shape "
            f"{values.shape}"
            + (
                ": a single row lacks its batch axis, so give x[None] (or a list of one row); a "
                "column of one feature a row is x.reshape(-1, 1)"
                if values.ndim == 1
                else ""
            )
        )
    if values.dtype.kind in "iu":
        if values.dtype.kind == "u" and values.size and values.max() > np.iinfo(np.int64).max:
            place = tuple(int(v) for v in np.argwhere(values > np.iinfo(np.int64).max)[0])
            raise DataError(
                f"{where}{_at(place)}: {int(values[place])} is "
                "beyond int64's range (what ids and whole numbers are taken as)"
            )
        return np.ascontiguousarray(values, dtype=np.int64)
    if values.dtype.kind == "f":
        if values.dtype.itemsize <= 4:  # float16, float32: beyond float32 is infinite
            bad = ~np.isfinite(values)  # (the bound cast to float16 is inf itself)
        else:
            with np.errstate(invalid="ignore"):
                bad = ~(np.abs(values) <= FLOAT32_MAX)  # NaN, inf and beyond float32
        if bad.any():
            place = tuple(int(v) for v in np.argwhere(bad)[0])
            value = float(values[place])
            said = "missing (nan)" if math.isnan(value) else f"{value!r}, beyond float32's range"
            raise DataError(
                f"{where}{_at(place)}: {said}; arrays are "
                "taken as they are: fill or drop such rows first"
            )
    return np.ascontiguousarray(values, dtype=np.float32)


def _numbers_of_objects(
    data: object, values: npt.NDArray[Any], where: str, error: Exception
) -> npt.NDArray[np.float64]:
    """An array of objects NumPy could not read as numbers, value by value: pandas' missing
    markers (a nullable column's pd.NA) as NaN, refused below as any missing value is, naming
    its row; the first value that is no number refused naming its row and place (both were
    "DataFrame cannot be read as one", naming neither: trial PD)."""
    if values.ndim >= 2 and values.dtype == object:
        out = np.empty(values.shape, np.float64)
        for place in np.ndindex(values.shape):
            value = values[place]
            if value is None or pandas_missing(value):
                out[place] = math.nan
                continue
            try:
                out[place] = float(value)
            except (ValueError, TypeError, OverflowError):
                raise DataError(
                    f"{where}{_at(place)}: "
                    f"{shown_value(value)} is no number; the pipeline declares no columns, so "
                    "it takes arrays of numbers (for rows of named columns declare them with "
                    ".number(), .category(), .text(), ...)"
                ) from None
        return out
    raise DataError(
        f"{where}the pipeline declares no columns, so it takes arrays of numbers; "
        f"{type(data).__name__} cannot be read as one ({error}); for rows of named columns "
        "declare them with .number(), .numbers(), .category(), .flag() or .image()"
    ) from None


def _refuse_times(data: object, values: npt.NDArray[Any], where: str) -> None:
    """Dates and times among arrays of features (a DataFrame's datetime64 or timedelta column,
    NumPy's dates, datetime objects) refused, as a number column refuses them: NumPy would take
    each as a count of its unit since 1970 (a DataFrame's column named)."""
    dtypes: Any = getattr(data, "dtypes", None)
    for name, dtype in dtypes.items() if hasattr(dtypes, "items") else ():
        if getattr(dtype, "kind", "") in ("M", "m"):
            found = data[name].iloc[0]  # type: ignore[index]
            raise DataError(
                f"{where}column {name!r} holds dates or times ({found!r} first): {_TIMES_ADVICE}"
            )
    flat = values.reshape(-1)
    if values.dtype.kind in "Mm":
        at = 0
    elif values.dtype.kind == "O" and any(a_time(kind) for kind in set(map(type, flat))):
        at = next(k for k, value in enumerate(flat) if a_time(type(value)))
    else:
        return
    place = np.unravel_index(at, values.shape) if values.ndim else (0,)
    raise DataError(f"{where}{_at(place)}: {flat[at]!r} is a date or time: {_TIMES_ADVICE}")


_TIMES_ADVICE = (
    "a network takes numbers, and NumPy would read a date as a count since 1970: give numbers "
    "(a count of days, say, or the date's parts in columns of their own)"
)


def feature_rows(features: Any) -> int:
    """How many rows features hold (an array, or a dict of one array an input)."""
    if isinstance(features, Mapping):
        features = next(iter(features.values()))
    return int(np.shape(features)[0])


def take_features(features: Any, rows: npt.NDArray[np.int64]) -> Any:
    """These rows of features (an array, or a dict of one array an input)."""
    if isinstance(features, Mapping):
        return {name: np.asarray(values)[rows] for name, values in features.items()}
    return np.asarray(features)[rows]

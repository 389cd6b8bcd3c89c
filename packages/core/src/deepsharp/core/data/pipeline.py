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

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import (
    _Category,
    _check_image_scale,
    _check_image_shape,
    _Feature,
    _Flag,
    _Image,
    _Number,
    _Target,
)
from deepsharp.core.data.sources import (
    _COLUMN_KINDS,
    _TARGET_KINDS,
    FillSpec,
    ImageScale,
    TargetKind,
    UnknownRule,
    _columns,
    read_csv,
)
from deepsharp.core.errors import DataError, FileFormatError

__all__ = ["Pipeline", "read_csv"]

_FORMAT = "deepsharp.pipeline"
_VERSION = 1

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

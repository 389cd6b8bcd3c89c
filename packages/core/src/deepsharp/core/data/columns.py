"""Column kinds: how each kind of column learns its statistics from the training rows, writes
its features (vectorised with NumPy), and reads itself back from a saved recipe; and the target.

A kind is one class: subclass `ColumnKind`, set `kind`, implement `width`, `names`, `learn` (or
`learner`) and `write`, and say what it records (`settings`, `statistics`) and how it reads that
back (`from_settings`, `read_statistics`). Every column may name the network input it feeds
(`input=`; a pipeline of several inputs gives one array an input); a kind's `dtype` says what
its features are (float32, or int64 ids). `Pipeline.column(...)` takes any kind; a saved recipe
names it by its key (deepsharp's own by their kind, a user's by module and name), and reading a
recipe makes only kinds already imported.

The image kind is in `deepsharp.core.data.images`, the target in `deepsharp.core.data.target`.

Rows that come in parts (a file too large for memory, `scan_csv`) are learned through each
kind's `learner()`: a `Learner` takes one part's values at a time and sets the statistics at
the end, in memory bounded by the part (see `deepsharp.core.data.summaries`). deepsharp's kinds
learn so, rows held in memory as one part; a kind of your own that overrides `learn` and not
`learner` has its training values gathered into one column first (it is warned once).
"""

from __future__ import annotations

import bisect
import contextvars
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.summaries import LabelCounts, Median, Moments
from deepsharp.core.data.values import (
    FLOAT32_MAX,
    FLOAT32_TINY,
    Column,
    ColumnName,
    distinct,
    is_missing,
    labels,
    numbers,
    row_text,
    rows_named,
    shown,
    shown_value,
    sorted_labels,
)
from deepsharp.core.errors import DataError, DeepSharpWarning, FileFormatError
from deepsharp.core.kinds import Kinds
from deepsharp.core.reals import brief, finite_real

__all__ = [
    "COLUMN_KINDS",
    "Category",
    "ColumnKind",
    "Flag",
    "Learner",
    "Number",
    "Numbers",
    "Recipe",
    "check_input",
    "check_name",
    "read_column",
]

FillSpec = Literal["median", "mean"] | float
UnknownRule = Literal["zeros", "error"]

WIDE_CATEGORY = 1000  # a one-hot this wide is worth a warning whatever the row count

COLUMN_KINDS: Kinds[ColumnKind] = Kinds("column kind")


def check_name(name: object) -> ColumnName:
    """A column's name: non-empty text or a whole number."""
    if isinstance(name, str) and name != "":
        return name
    if isinstance(name, (int, np.integer)) and not isinstance(name, (bool, np.bool_)):
        return int(name)
    raise ValueError(f"a column name is non-empty text or a whole number, not {name!r}")


_INPUT_NAME = re.compile(r"[A-Za-z0-9_-]+")


def check_input(name: object, column: object) -> str | None:
    """The network input a column feeds: None (the one input), or an input's name — letters,
    digits, '_' and '-', as a network names its inputs."""
    if name is None or (isinstance(name, str) and _INPUT_NAME.fullmatch(name)):
        return name
    raise ValueError(
        f"column {column!r}: input names the network input it feeds, and a name is letters, "
        f"digits, '_' and '-' (no dots, spaces or slashes), not {name!r}"
    )


class Recipe:
    """One object of a saved recipe, read with checks: every wrong value is a FileFormatError
    naming its place (`pipeline.columns[2].learned.std: ...`)."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping):
            raise FileFormatError(
                f"pipeline{where}: expected a JSON object, found {type(data).__name__}"
            )
        self.data = data
        self.where = where

    def fail(self, key: str, what: str) -> FileFormatError:
        return FileFormatError(f"pipeline{self.where}{'.' + key if key else ''}: {what}")

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, *types: type) -> Any:
        if key not in self.data:
            raise self.fail("", f"missing the key {key!r}")
        value = self.data[key]
        if not any(_is(value, t) for t in types):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise self.fail(key, f"expected {names}, found {type(value).__name__} {value!r}")
        return value

    def text(self, key: str) -> str:
        value: str = self.get(key, str)
        return value

    def flag(self, key: str) -> bool:
        value: bool = self.get(key, bool)
        return value

    def number(self, key: str, low: float = -FLOAT32_MAX, high: float = FLOAT32_MAX) -> float:
        """A finite number within [low, high] (float32's range unless said otherwise)."""
        found = self.get(key, int, float)
        value = finite_real(found)
        if value is None or not low <= value <= high:
            raise self.fail(
                key, f"expected a finite number in [{low:.8g}, {high:.8g}], found {brief(found)}"
            )
        return value

    def name(self) -> ColumnName:
        value: ColumnName = self.get("name", str, int)
        return value

    def texts(self, key: str) -> list[str]:
        value = self.get(key, list)
        if not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"expected a list of text, found {value!r}")
        if len(set(value)) != len(value):
            raise self.fail(key, "a value appears twice")
        return list(value)

    def part(self, key: str) -> Recipe:
        return Recipe(self.get(key, dict), f"{self.where}.{key}")


def _is(value: object, kind: type) -> bool:
    if kind in (int, float) and isinstance(value, bool):
        return False
    return isinstance(value, kind)


class Learner:
    """What a column kind learns from rows that come in parts: `add` takes one part's values
    (of the training rows), `finish` sets the kind's statistics once every part is in. This
    one learns nothing (a kind with no statistics)."""

    def add(self, values: Column) -> None:
        """Take one part's values."""

    def finish(self) -> None:
        """Set the statistics from every part taken."""


class Gathering(Learner):
    """A kind of your own with `learn` and no `learner`: its training values gathered into one
    column (memory grows with the rows), then `learn` once; rows are named as they were read."""

    _warned: ClassVar[set[type]] = set()

    def __init__(self, column: ColumnKind) -> None:
        self.column = column
        self.parts: list[Column] = []
        self.starts: list[int] = []  # where each part begins in the gathered column
        self.namings: list[contextvars.Context] = []  # how each part's rows were named
        if type(column) not in Gathering._warned:
            Gathering._warned.add(type(column))
            warnings.warn(
                f"column kind {type(column).__name__} learns from all its training rows at once "
                "(it has no learner()): learning from a scanned file, its values are gathered in "
                "memory first; give it a learner() to learn in parts",
                DeepSharpWarning,
                stacklevel=4,
            )

    def add(self, values: Column) -> None:
        self.starts.append(sum(len(p) for p in self.parts))
        self.parts.append(values)
        self.namings.append(contextvars.copy_context())

    def _row_text(self, index: int) -> str:
        at = bisect.bisect_right(self.starts, index) - 1
        return self.namings[at].run(row_text, index - self.starts[at])

    def finish(self) -> None:
        parts, self.parts = self.parts, []
        arrays = [p for p in parts if isinstance(p, np.ndarray)]
        if parts and len(arrays) == len(parts):
            whole: Column = np.concatenate(arrays)
        else:
            whole = [v for p in parts for v in (p.tolist() if isinstance(p, np.ndarray) else p)]
        with rows_named(self._row_text):
            self.column.learn(whole)


class ColumnKind:
    """A kind of column: its declaration, what it learns, and the features it writes.

    `input`: the network input its features feed (None: the network's one input)."""

    kind: ClassVar[str] = ""
    key: ClassVar[str] = ""
    dtype: ClassVar[str] = "float32"
    """What its features are: "float32" numbers, or "int64" ids (a text column's tokens)."""
    input: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.kind:
            cls.kind = cls.__name__.lower()
        cls.key = COLUMN_KINDS.add(cls, cls.kind)

    def __init__(self, name: object, input: str | None = None) -> None:
        self.name: ColumnName = check_name(name)
        self.input = check_input(input, self.name)

    def width(self) -> int:
        """How many features it writes for each row."""
        raise NotImplementedError

    def names(self) -> list[str]:
        """The features' names."""
        raise NotImplementedError

    def learn(self, values: Column) -> None:
        """Learn its statistics from the training rows' values: by default, through its
        `learner()` given them as one part (nothing to learn where it has none)."""
        learner = self.learner()
        learner.add(values)
        learner.finish()

    def learner(self) -> Learner:
        """What learns its statistics from training rows that come in parts."""
        if type(self).learn is ColumnKind.learn:
            return Learner()
        return Gathering(self)

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        """Write its features into out[:, at : at + width()] (float32, or int64 for ids)."""
        raise NotImplementedError

    def forget(self) -> None:
        """Drop what it learned."""

    def settings(self) -> dict[str, Any]:
        """Its declaration beyond its name, as JSON values."""
        return {}

    def statistics(self) -> dict[str, Any]:
        """What it learned, as JSON values."""
        return {}

    @classmethod
    def from_settings(cls, name: ColumnName, recipe: Recipe) -> ColumnKind:
        """The declared column, from what `settings` recorded."""
        return cls(name)

    def read_statistics(self, recipe: Recipe) -> None:
        """Take back what `statistics` recorded, checked (a FileFormatError names what is wrong)."""

    def entry(self, learned: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.key, "name": self.name, **self.settings()}
        if self.input is not None:
            out["input"] = self.input
        if learned:
            out["learned"] = self.statistics()
        return out

    def __repr__(self) -> str:
        return f"{self.kind}({self.name!r})"


def read_column(data: object, where: str, learned: bool) -> ColumnKind:
    """A column from its recipe entry; only kinds already imported are made."""
    recipe = Recipe(data, where)
    key = recipe.text("kind")
    cls = COLUMN_KINDS.get(key)
    if cls is None:
        raise recipe.fail("kind", COLUMN_KINDS.unknown(key))
    try:
        column = cls.from_settings(recipe.name(), recipe)
    except FileFormatError:
        raise
    except (ValueError, TypeError) as error:
        raise recipe.fail("", str(error)) from None
    if recipe.has("input"):
        try:
            column.input = check_input(recipe.get("input", str, type(None)), column.name)
        except ValueError as error:
            raise recipe.fail("input", str(error)) from None
    if learned:
        column.read_statistics(recipe.part("learned"))
    return column


# --- numbers ---------------------------------------------------------------------------------


def _check_flags(name: ColumnName, **flags: object) -> None:
    for flag_name, flag in flags.items():
        if not isinstance(flag, bool):
            raise TypeError(f"column {name!r}: {flag_name} must be True or False, not {flag!r}")


def _check_fill(name: ColumnName, fill: object, log: bool) -> FillSpec:
    if isinstance(fill, str):
        if fill not in ("median", "mean"):
            raise ValueError(
                f"column {name!r}: fill must be 'median', 'mean' or a number, not {fill!r}"
            )
        return "median" if fill == "median" else "mean"
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise TypeError(f"column {name!r}: fill must be 'median', 'mean' or a number, not {fill!r}")
    value = finite_real(fill)
    if value is None or abs(value) > FLOAT32_MAX:
        raise ValueError(
            f"column {name!r}: fill must be a finite float32 number, not {brief(fill)}"
        )
    if log and value < 0:
        raise ValueError(
            f"column {name!r}: fill={fill!r} is negative, but log=True needs values of 0 or more"
        )
    return value


def _number_settings(column: Number | Numbers) -> dict[str, Any]:
    """A number column's settings (or those `Numbers` gives each of its columns), as recorded
    and as the constructors take them."""
    return {
        "fill": column.fill,
        "missing_flag": column.missing_flag,
        "log": column.log,
        "scale": column.scale,
    }


def _number_options(recipe: Recipe) -> dict[str, Any]:
    """The settings `_number_settings` recorded, read back as the constructors take them."""
    return {
        "fill": recipe.get("fill", str, int, float),
        "missing_flag": recipe.flag("missing_flag"),
        "log": recipe.flag("log"),
        "scale": recipe.flag("scale"),
    }


class Number(ColumnKind):
    """A column of numbers; a missing one is filled (median, mean or a given value), and may be
    flagged; optionally log1p-transformed; standardised unless scale=False."""

    kind = "number"

    def __init__(
        self,
        name: object,
        fill: FillSpec = "median",
        missing_flag: bool = False,
        log: bool = False,
        scale: bool = True,
        input: str | None = None,
    ) -> None:
        super().__init__(name, input)
        _check_flags(self.name, missing_flag=missing_flag, log=log, scale=scale)
        self.fill = _check_fill(self.name, fill, log)
        self.missing_flag, self.log, self.scale = missing_flag, log, scale
        self.fill_value: float | None = None  # in the transformed (log) space
        self.mean: float | None = None
        self.std: float | None = None

    def width(self) -> int:
        return 2 if self.missing_flag else 1

    def names(self) -> list[str]:
        return [str(self.name), f"{self.name}:missing"] if self.missing_flag else [str(self.name)]

    def _transformed(self, column: Column) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        values = numbers(column, self.name)
        missing = np.isnan(values)
        if self.log:
            negative = values < 0.0  # NaN compares False
            if negative.any():
                i = int(np.argmax(negative))
                raise DataError(
                    f"{row_text(i)}, column {self.name!r}: found {values[i]!r}, but this column "
                    f"takes the logarithm (log=True) and needs values of 0 or more"
                )
            values = np.log1p(values)
        return values, missing

    def learn(self, values: Column) -> None:
        transformed, missing = self._transformed(values)
        present = transformed[~missing]
        if isinstance(self.fill, str):
            self._refuse_no_values(present.size)
            fill = float(np.median(present) if self.fill == "median" else np.mean(present))
        else:
            fill = self._given_fill()
        filled = np.where(missing, fill, transformed)
        self._settle(fill, float(np.mean(filled)), float(np.std(filled)))

    def learner(self) -> Learner:
        return NumberLearner(self)

    def _refuse_no_values(self, present: int) -> None:
        if present == 0:
            raise DataError(
                f"column {self.name!r}: every training row is missing a value, so there is no "
                f"{self.fill} to fill with; give fill=<number> or rows that hold numbers"
            )

    def _given_fill(self) -> float:
        assert not isinstance(self.fill, str)
        return math.log1p(self.fill) if self.log else float(self.fill)

    def _settle(self, fill: float, mean: float, std: float) -> None:
        if not (math.isfinite(mean) and math.isfinite(std) and std <= FLOAT32_MAX):
            raise DataError(
                f"column {self.name!r}: its values spread too far to standardise in float32 "
                f"(mean {mean!r}, standard deviation {std!r}): scale the column, or use log=True"
            )
        self.fill_value, self.mean = fill, mean
        # A column (nearly) constant in float32 is left unscaled rather than blown up.
        self.std = std if std >= FLOAT32_TINY else 1.0

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        assert self.fill_value is not None and self.mean is not None and self.std is not None
        transformed, missing = self._transformed(values)
        transformed[missing] = self.fill_value
        if self.scale:
            transformed -= self.mean
            transformed /= self.std
        out[:, at] = transformed
        if self.missing_flag:
            out[:, at + 1] = missing

    def forget(self) -> None:
        self.fill_value = self.mean = self.std = None

    def settings(self) -> dict[str, Any]:
        return _number_settings(self)

    def statistics(self) -> dict[str, Any]:
        return {"fill": self.fill_value, "mean": self.mean, "std": self.std}

    @classmethod
    def from_settings(cls, name: ColumnName, recipe: Recipe) -> Number:
        return cls(name, **_number_options(recipe))

    def read_statistics(self, recipe: Recipe) -> None:
        self.fill_value = recipe.number("fill")
        self.mean = recipe.number("mean")
        self.std = recipe.number("std", FLOAT32_TINY)

    def __repr__(self) -> str:
        return f"number({self.name!r})"


class NumberLearner(Learner):
    """A number column's statistics in parts: the present values' moments (and their median,
    for fill="median"), the missing ones counted; the fill joins the moments at the end."""

    def __init__(self, column: Number) -> None:
        self.column = column
        self.moments = Moments()
        self.median = Median() if column.fill == "median" else None
        self.missing = 0

    def add(self, values: Column) -> None:
        transformed, missing = self.column._transformed(values)
        present = transformed[~missing]
        self.moments.add(present)
        if self.median is not None:
            self.median.add(present)
        self.missing += int(missing.sum())

    def finish(self) -> None:
        column, moments = self.column, self.moments
        if isinstance(column.fill, str):
            column._refuse_no_values(moments.count)
            fill = moments.mean if self.median is None else self.median.median()
        else:
            fill = column._given_fill()
        moments.merge(self.missing, fill, 0.0)
        column._settle(fill, moments.mean, moments.std)


class Numbers(ColumnKind):
    """Every column the training rows hold that no other declaration names (nor the target),
    each a `Number` with these settings: the columns are found when the pipeline learns."""

    kind = "numbers"

    def __init__(
        self,
        fill: FillSpec = "median",
        missing_flag: bool = False,
        log: bool = False,
        scale: bool = True,
        input: str | None = None,
    ) -> None:
        self.name = "*"
        self.input = check_input(input, "*")
        _check_flags("*", missing_flag=missing_flag, log=log, scale=scale)
        self.fill = _check_fill("*", fill, log)
        self.missing_flag, self.log, self.scale = missing_flag, log, scale

    def expand(self, names: Sequence[ColumnName]) -> list[Number]:
        return [Number(n, **_number_settings(self), input=self.input) for n in names]

    def settings(self) -> dict[str, Any]:
        return _number_settings(self)

    @classmethod
    def from_settings(cls, name: ColumnName, recipe: Recipe) -> Numbers:
        return cls(**_number_options(recipe))

    def __repr__(self) -> str:
        return "numbers(every other column)"


# --- categories and flags ----------------------------------------------------------------------


class Category(ColumnKind):
    """One-hot over the values the training rows hold; a missing value is a category of its own.

    `max_values` keeps the most frequent values (ties in sorted order) and gives the others all
    zeros, as it gives a value the training rows never held.
    """

    kind = "category"

    def __init__(
        self,
        name: object,
        unknown: UnknownRule = "zeros",
        max_values: int | None = None,
        input: str | None = None,
    ) -> None:
        super().__init__(name, input)
        if unknown not in ("zeros", "error"):
            raise ValueError(
                f"column {self.name!r}: unknown must be 'zeros' or 'error', not {unknown!r}"
            )
        if max_values is not None and (
            isinstance(max_values, bool) or not isinstance(max_values, int) or max_values < 1
        ):
            raise ValueError(
                f"column {self.name!r}: max_values is a positive whole number or None, not "
                f"{max_values!r}"
            )
        if max_values is not None and unknown == "error":
            raise ValueError(
                f"column {self.name!r}: max_values gives the values it drops all zeros, which "
                "unknown='error' forbids: choose one of them"
            )
        self.unknown: UnknownRule = unknown
        self.max_values = max_values
        self.values: list[str] | None = None
        self.has_missing = False
        self.lookup: dict[str | None, int] = {}

    def width(self) -> int:
        assert self.values is not None
        return len(self.values) + (1 if self.has_missing else 0)

    def names(self) -> list[str]:
        assert self.values is not None
        out = [f"{self.name}={v}" for v in self.values]
        if self.has_missing:
            out.append(f"{self.name}:missing")
        return out

    def learner(self) -> Learner:
        return CategoryLearner(self)

    def _settle(self, counts: dict[str | None, int], rows: int) -> None:
        known = [v for v in counts if v is not None]
        if self.max_values is not None and len(known) > self.max_values:
            ranked = sorted(sorted_labels(known), key=lambda v: -counts[v])
            known = ranked[: self.max_values]
        self.set_learned(sorted_labels(known), None in counts)
        self._warn_if_wide(rows)

    def _warn_if_wide(self, rows: int) -> None:
        width = self.width()
        if width > WIDE_CATEGORY or (width > 100 and width * 2 > rows):
            warnings.warn(
                f"column {self.name!r} holds {width} distinct values in {rows} training rows: a "
                f"one-hot {width} features wide ({width * 4} bytes a row), which an ID-like "
                f"column rarely repays; drop the column, or declare .category({self.name!r}, "
                f"max_values=N) to keep its N most frequent values",
                DeepSharpWarning,
                stacklevel=7,
            )

    def set_learned(self, values: list[str], has_missing: bool) -> None:
        self.values = values
        self.has_missing = has_missing
        self.lookup = {v: i for i, v in enumerate(values)}
        if has_missing:
            self.lookup[None] = len(values)

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        index = labels(values, self.name, self.lookup)
        unknown = index < 0
        if unknown.any():
            if self.unknown == "error":
                i = int(np.argmax(unknown))
                known = list(self.values or []) + (["(missing)"] if self.has_missing else [])
                raise DataError(
                    f"{row_text(i)}, column {self.name!r}: the value {shown_value(values[i])} was not in the "
                    f"training rows; the known values are: {shown(known)} "
                    f"(declare .category({self.name!r}, unknown='zeros') to give unseen values "
                    f"all zeros)"
                )
            rows = np.flatnonzero(~unknown)
            out[rows, at + index[rows]] = 1.0
        else:
            out[np.arange(index.shape[0]), at + index] = 1.0

    def forget(self) -> None:
        self.values = None
        self.has_missing = False
        self.lookup = {}

    def settings(self) -> dict[str, Any]:
        return {"unknown": self.unknown, "max_values": self.max_values}

    def statistics(self) -> dict[str, Any]:
        return {"values": list(self.values or []), "missing": self.has_missing}

    @classmethod
    def from_settings(cls, name: ColumnName, recipe: Recipe) -> Category:
        cap = recipe.get("max_values", int, type(None)) if recipe.has("max_values") else None
        return cls(name, unknown=recipe.get("unknown", str), max_values=cap)

    def read_statistics(self, recipe: Recipe) -> None:
        values = recipe.texts("values")
        if self.max_values is not None and len(values) > self.max_values:
            raise recipe.fail("values", f"{len(values)} values, over max_values={self.max_values}")
        self.set_learned(values, recipe.flag("missing"))


class CategoryLearner(Learner):
    """How many training rows hold each label, over every part."""

    def __init__(self, column: Category) -> None:
        self.column = column
        self.counts = LabelCounts(column.name)

    def add(self, values: Column) -> None:
        self.counts.add(values)

    def finish(self) -> None:
        self.column._settle(self.counts.counts, self.counts.rows)


class Flag(ColumnKind):
    """1.0 where the field holds anything, else 0.0."""

    kind = "flag"

    def width(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [f"{self.name}:flag"]

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        if isinstance(values, np.ndarray):
            out[:, at] = ~np.isnan(values) if values.dtype.kind == "f" else 1.0
            return
        found = distinct(values)
        if found is None:
            out[:, at] = [0.0 if is_missing(v) else 1.0 for v in values]
            return
        for key in found:
            found[key] = 0.0 if is_missing(key) else 1.0
        out[:, at] = np.fromiter(map(found.__getitem__, values), np.float64, len(values))

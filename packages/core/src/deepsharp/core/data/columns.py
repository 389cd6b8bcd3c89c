"""What a column kind is: how each kind of column learns its statistics from the training
rows, writes its features (vectorised with NumPy), and reads itself back from a saved recipe.

A kind is one class: subclass `ColumnKind`, set `kind`, implement `width`, `names`, `learn` (or
`learner`) and `write`, and say what it records (`settings`, `statistics`) and how it reads that
back (`from_settings`, `read_statistics`). Every column may name the network input it feeds
(`input=`; a pipeline of several inputs gives one array an input); a kind's `dtype` says what
its features are (float32, or int64 ids). `Pipeline.column(...)` takes any kind; a saved recipe
names it by its key (deepsharp's own by their kind, a user's by module and name), and reading a
recipe makes only kinds already imported.

deepsharp's kinds are each in a module of their own: the numbers (`Number`, `Numbers`) in
`deepsharp.core.data.numbers`, the categories and flags in `deepsharp.core.data.categories`, the
image kind in `deepsharp.core.data.images`, the text kind in `deepsharp.core.data.text`; the
target is in `deepsharp.core.data.target`.

Rows that come in parts (a file too large for memory, `scan_csv`) are learned through each
kind's `learner()`: a `Learner` takes one part's values at a time and sets the statistics at
the end, in memory bounded by the part (see `deepsharp.core.data.summaries`). deepsharp's kinds
learn so, rows held in memory as one part; a kind of your own that overrides `learn` and not
`learner` has its training values gathered into one column first (it is warned once).
"""

from __future__ import annotations

import bisect
import contextvars
import re
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.values import (
    FLOAT32_MAX,
    Column,
    ColumnName,
    row_text,
    rows_named,
)
from deepsharp.core.errors import DeepSharpWarning, FileFormatError, outside
from deepsharp.core.kinds import Kinds
from deepsharp.core.reals import brief, finite_real

__all__ = [
    "COLUMN_KINDS",
    "ColumnKind",
    "Learner",
    "Recipe",
    "check_input",
    "check_name",
    "read_column",
]

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
            raise self.fail(
                key, f"expected {names}, found {type(value).__name__} {brief(value, 80)}"
            )
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
            raise self.fail(key, f"expected a list of text, found {brief(value, 80)}")
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
                stacklevel=outside(),
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

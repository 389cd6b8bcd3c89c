"""The data pipeline: the recipe for the data. It knows no learner.

A :class:`Pipeline` is declared column by column (``.number``, ``.numbers`` for every other
column, ``.category``, ``.flag``, ``.image``, ``.text``, ``.column`` for a kind of your own, and
one ``.target``), learns its statistics from the training rows only (:meth:`Pipeline.learn`)
and then turns any rows into a float32 feature matrix (:meth:`Pipeline.features`) and targets
(:meth:`Pipeline.targets`). Rows are a sequence of mappings (what :func:`read_csv` returns, or
dicts written by hand) or a pandas ``DataFrame``.

Rows too many for memory (a file read by `scan_csv` or `scan_parquet`) are learned in parts:
`Pipeline.learning(names)` takes the training rows one `Part` at a time, each column kind
keeping bounded statistics (counts, sums, categories, a median's table), and `features` and
`targets` take a part as they take any rows; errors name its rows by file and line.

Each column may name the network input it feeds (`input="tokens"`): a pipeline whose columns
name several inputs gives a dict of one array an input (each its columns' features side by
side, float32 numbers or int64 ids), for a network of several inputs; where no column names one
(or all name the same), one array.

A pipeline that declares no columns takes arrays of numbers as they are: it learns the shape of
one row, and its features are the array itself, in float32 (integers stay int64: ids for an
embedding); a dict of such arrays feeds a network of several inputs, one array an input (this
is what ``fit(None, (x, y), ...)`` uses). Its recipe says so, and a file that holds it serves
arrays.

The work is done column by column with NumPy (see `deepsharp.core.data.values`): a column of a
few hundred distinct values over a hundred thousand rows costs a few milliseconds. Rows in error
messages are counted from 1, in the rows as handed to that call.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.categories import Category, Flag, UnknownRule
from deepsharp.core.data.columns import ColumnKind
from deepsharp.core.data.features import (
    array_features,
    by_names,
    by_place,
    column_groups,
    feature_matrix,
    frame_names,
)
from deepsharp.core.data.images import Image, ImageScale
from deepsharp.core.data.learning import Learning
from deepsharp.core.data.numbers import FillSpec, Number, Numbers
from deepsharp.core.data.pipeline_reading import FORMAT, VERSION, read_pipeline
from deepsharp.core.data.sources import column_names, columns, named_in_messages, read_csv
from deepsharp.core.data.splitting import permutation, rows_needed, split_shares, split_sizes
from deepsharp.core.data.target import Target, TargetKind
from deepsharp.core.data.text import Padding, Text, TokenKind
from deepsharp.core.data.values import ColumnName
from deepsharp.core.errors import DataError, FileFormatError

__all__ = ["Pipeline", "read_csv"]


class Pipeline:
    """The recipe for the data: declared columns, one target, a split and learned statistics."""

    def __init__(self) -> None:
        self._declared: list[ColumnKind] = []
        self._columns: list[ColumnKind] = []  # the declared ones, numbers() resolved by learn
        self._target: Target | None = None
        self._train = 0.70
        self._validation = 0.15
        self._learned = False
        self._shape: tuple[int, ...] | None = None  # arrays: the shape of one row
        self._shapes: dict[str, tuple[int, ...]] | None = None  # a dict of arrays: each one's
        self._names: list[str] | None = None  # arrays learned from a DataFrame: its columns

    # -- declaring ----------------------------------------------------------------------------

    def number(
        self,
        name: ColumnName,
        fill: FillSpec = "median",
        missing_flag: bool = False,
        log: bool = False,
        scale: bool = True,
        input: str | None = None,
    ) -> Pipeline:
        """A column of numbers; a missing one is filled (median, mean or a given value).
        `input`: the network input it feeds, where the pipeline feeds several."""
        return self.column(Number(name, fill, missing_flag, log, scale, input))

    def numbers(
        self,
        fill: FillSpec = "median",
        missing_flag: bool = False,
        log: bool = False,
        scale: bool = True,
        input: str | None = None,
    ) -> Pipeline:
        """Every column of the training rows that no other declaration names (nor the target),
        each a number column with these settings (feeding `input`); the columns are found when
        the pipeline learns (a DataFrame's in its order, or the first row's keys)."""
        if any(isinstance(c, Numbers) for c in self._declared):
            raise ValueError("numbers() is declared already: it takes every other column once")
        return self.column(Numbers(fill, missing_flag, log, scale, input))

    def category(
        self,
        name: ColumnName,
        unknown: UnknownRule = "zeros",
        max_values: int | None = None,
        input: str | None = None,
    ) -> Pipeline:
        """A column of categories, one-hot over the values the training rows hold (the
        `max_values` most frequent of them, when given); feeding `input`, if named."""
        return self.column(Category(name, unknown, max_values, input))

    def flag(self, name: ColumnName, input: str | None = None) -> Pipeline:
        """1.0 where the field holds a value, 0.0 where it is missing (None, an empty or blank
        text, a text pandas reads as missing — "NA", "None", "nan", "NULL", ...: `MISSING_TEXTS`
        — or NaN); feeding `input`, if named."""
        return self.column(Flag(name, input))

    def image(
        self,
        name: ColumnName,
        shape: int | Sequence[int],
        scale: ImageScale = None,
        input: str | None = None,
    ) -> Pipeline:
        """A column whose field holds a whole image of ``shape`` (e.g. ``(1, 8, 8)``: channels,
        height, width), flattened into ``prod(shape)`` features ``name[0]``, ``name[1]``, ...

        A row's field is a list, tuple or NumPy array of that many numbers (nested or flat, read
        in C order), or a text of numbers separated by spaces or commas. ``scale`` divides every
        value by a fixed positive number (16.0 for the digits' counts 0..16); ``"max"`` learns the
        largest absolute value of the training rows and divides by it; None leaves values as they
        are. A run hands the flat features to a network whose ``inputs`` are ``shape`` as images
        (the input named `input`, where the pipeline feeds several).
        """
        return self.column(Image(name, shape, scale, input))

    def text(
        self,
        name: ColumnName,
        tokens: TokenKind = "words",
        length: int = 64,
        vocabulary: int = 20000,
        padding: Padding = "end",
        input: str | None = None,
    ) -> Pipeline:
        """A column of texts as int64 ids (`length` of them a row) for an `Embedding`: cut into
        words (lower case) or characters, over the `vocabulary - 2` tokens the training rows
        hold most often, ids 2 onwards (most frequent first); 0 is padding, 1 a token the
        vocabulary lacks. A longer text keeps its first `length` tokens; a shorter one is padded
        after its ids (`padding="end"`) or before them (`"start"`). An empty or missing text is
        all padding. Ids feed an input of their own: a pipeline with other columns too names
        the input each feeds (`input=`)."""
        return self.column(Text(name, tokens, length, vocabulary, padding, input))

    def column(self, column: ColumnKind) -> Pipeline:
        """A column of any kind (a `ColumnKind`, deepsharp's or your own)."""
        self._check_new(column)
        self._declared.append(column)
        self._forget()
        return self

    def _check_new(self, column: ColumnKind) -> None:
        if not isinstance(column, ColumnKind):
            raise TypeError(f"column takes a ColumnKind, not {column!r}")
        if self._target is not None and column.name == self._target.name:
            raise ValueError(f"column {column.name!r} is the target; it cannot be a feature too")
        for other in self._declared:
            if other.name == column.name and other.kind == column.kind:
                raise ValueError(f"column {column.name!r} is already declared as a {column.kind}")
            if (other.input is None) != (column.input is None):
                raise ValueError(
                    f"column {column.name!r} {_feeds(column)}, while column {other.name!r} "
                    f"{_feeds(other)}: a pipeline feeds one input (no column names one), or "
                    "every column names the input it feeds (input=...)"
                )
            if other.input == column.input and other.dtype != column.dtype:
                where = "the one input" if column.input is None else f"input {column.input!r}"
                raise ValueError(
                    f"column {column.name!r} makes {column.dtype} values and column "
                    f"{other.name!r} {other.dtype} ones, both for {where}; an input takes one "
                    "kind of values: give them inputs of their own (input=...), for a network "
                    "of several inputs"
                )
            if other.input == column.input and other.kind == column.kind == "text":
                where = "the one input" if column.input is None else f"input {column.input!r}"
                raise ValueError(
                    f"text columns {other.name!r} and {column.name!r} both feed {where}; each "
                    "learns its own vocabulary, ids from 2 up, so one id would stand for two "
                    "words: give each text an input of its own (input=...) and its own "
                    "Embedding"
                )

    def target(self, name: ColumnName, kind: TargetKind = "binary") -> Pipeline:
        """The one column the network is trained to predict."""
        target = Target(name, kind)
        if self._target is not None:
            raise ValueError(
                f"the pipeline already has the target {self._target.name!r}; a pipeline has "
                f"exactly one target"
            )
        if any(c.name == target.name for c in self._declared):
            raise ValueError(
                f"column {target.name!r} is already a feature; it cannot be the target too"
            )
        self._target = target
        self._forget()
        return self

    def split(self, train: float = 0.70, validation: float = 0.15) -> Pipeline:
        """Fractions of the rows for training and validation; the rest is the test rows.

        When a run is given test rows of its own, only the ratio of the two counts, and
        train + validation may be 1 (no test fraction)."""
        for what, value in (("train", train), ("validation", validation)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise TypeError(f"split: {what} must be a number, not {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"split: {what} must be finite, not {value!r}")
        train, validation = float(train), float(validation)  # a NumPy number's too
        if not train > 0:
            raise ValueError(f"split: train must be more than 0, not {train!r}")
        if not validation >= 0:
            raise ValueError(f"split: validation must be 0 or more, not {validation!r}")
        if not train + validation <= 1:
            raise ValueError(
                f"split: train + validation must be at most 1 (the rest is test rows), not "
                f"{train!r} + {validation!r}"
            )
        self._train = float(train)
        self._validation = float(validation)
        return self

    def _forget(self) -> None:
        self._learned = False
        self._shape = None
        self._shapes = None
        self._names = None
        self._columns = []
        for column in self._declared:
            column.forget()
        if self._target is not None:
            self._target.set_classes(None)

    # -- learning and applying ------------------------------------------------------------------

    def learn(self, rows: object) -> Pipeline:
        """Learn the statistics from these rows, which must be the training rows only.

        A pipeline that declares no columns takes an array of numbers (N, ...) and learns the
        shape of its rows."""
        if not self._declared:
            return self._learn_arrays(rows)
        self._forget()
        try:
            resolved = self._resolve(rows)
            names = [c.name for c in resolved]
            if self._target is not None:
                names.append(self._target.name)
            with named_in_messages(rows):
                _, taken = columns(rows, names)
                for column in resolved:
                    column.learn(taken[column.name])
                if self._target is not None:
                    self._target.learn(taken[self._target.name])
            self._columns = resolved
            self._learned = True
        except BaseException:
            self._forget()
            raise
        return self

    def learning(self, names: Sequence[ColumnName]) -> Learning:
        """Learn from training rows that come in parts: `names` are the columns the rows hold
        (numbers() takes those no other declaration names); hand each part of the training rows
        to `add`, then call `finish`. Memory is bounded by a part (and each kind's summaries)."""
        if not self._declared:
            raise DataError(
                "a pipeline of arrays learns from the arrays at once; rows read in parts need "
                "columns declared with .number(), .numbers(), .category(), .flag() or .image()"
            )
        return Learning(self, names)

    def reads(self, names: Sequence[ColumnName], target: bool = True) -> list[ColumnName]:
        """The columns this pipeline reads of rows that hold `names`: its features' (those it
        learned, or numbers() resolved against `names`), then the target's (unless not)."""
        columns = self._columns if self._learned else self._resolve_names(names)
        wanted = [c.name for c in columns]
        if target and self._target is not None:
            wanted.append(self._target.name)
        return wanted

    def _resolve(self, rows: object) -> list[ColumnKind]:
        """The declared columns, numbers() replaced by every column no other one names."""
        if not any(isinstance(c, Numbers) for c in self._declared):
            return list(self._declared)
        return self._resolve_names(column_names(rows, every=True))

    def _resolve_names(self, names: Sequence[ColumnName]) -> list[ColumnKind]:
        wildcard = [c for c in self._declared if isinstance(c, Numbers)]
        if not wildcard:
            return list(self._declared)
        taken = {c.name for c in self._declared}
        if self._target is not None:
            taken.add(self._target.name)
        free = [name for name in names if name not in taken]
        out: list[ColumnKind] = []
        for column in self._declared:
            out.extend(column.expand(free) if isinstance(column, Numbers) else [column])
        if not out:
            raise DataError(
                "numbers() found no columns: the rows hold none beyond the declared ones and the "
                "target"
            )
        return out

    def _learn_arrays(self, rows: object) -> Pipeline:
        if self._target is not None:
            raise DataError(
                "the pipeline declares a target but no feature columns; declare some with "
                ".number(), .numbers(), .category(), .flag() or .image()"
            )
        values = array_features(rows)
        self._forget()
        if isinstance(values, dict):
            self._shapes = {name: tuple(int(s) for s in a.shape[1:]) for name, a in values.items()}
        else:
            self._shape = tuple(int(s) for s in values.shape[1:])
            self._names = frame_names(rows)
        self._learned = True
        return self

    def features(self, rows: object) -> Any:
        """The rows as a float32 matrix of shape (rows, feature_count), C-contiguous (int64 ids
        for text columns); a dict of such matrices, one an input, where the columns feed several
        inputs; for a pipeline of arrays, the array as it is (N, *shape), in float32 (integers in
        int64), or the dict of such arrays it learned."""
        self._require_learned("features()")
        if self._shapes is not None:
            values = array_features(rows)
            found = (
                {n: a.shape[1:] for n, a in values.items()} if isinstance(values, dict) else None
            )
            if found != self._shapes:
                raise DataError(
                    f"the pipeline learned a dict of arrays of rows {self._shapes}; these "
                    f"features are {found if found is not None else 'one array'}"
                )
            return values
        if self._shape is not None:
            if isinstance(rows, Mapping):  # (said "rows of shape (a dict)": trial O; its
                # arrays refused one by one as inputs', each told x[None]: trial SV5)
                learned = (
                    f"a frame of the columns {', '.join(map(repr, self._names))} (give a "
                    "DataFrame of them) or an array of them"
                    if self._names is not None
                    else "an array"
                )
                raise DataError(
                    f"the features are a dict of arrays ({', '.join(map(repr, rows))}); the "
                    f"pipeline learned one array of rows of shape {self._shape}, for a network "
                    f"of one input, from {learned}: give the array itself"
                )
            values = array_features(
                by_place(rows) if self._names is None else by_names(rows, self._names)
            )
            if values.shape[1:] != self._shape:
                raise DataError(
                    f"the features have rows of shape {values.shape[1:]}; the pipeline learned "
                    f"rows of shape {self._shape}"
                )
            return values
        with named_in_messages(rows):
            count, taken = columns(rows, [c.name for c in self._columns])
            return self._features_of(count, taken)

    def _features_of(self, count: int, taken: dict[ColumnName, Any]) -> Any:
        made = {
            name: feature_matrix(group, count, taken)
            for name, group in column_groups(self._columns).items()
        }
        return next(iter(made.values())) if len(made) == 1 else made

    def targets(self, rows: object) -> npt.NDArray[Any]:
        """binary: float32 (N, 1) of 0/1; number: float32 (N, 1); classes: int64 (N,) indices."""
        if self._target is None:
            raise DataError(
                "the pipeline has no target; declare one with .target(name, kind=...) before "
                "asking for targets"
            )
        self._require_learned("targets()")
        with named_in_messages(rows):
            _, taken = columns(rows, [self._target.name])
            return self._target.targets(taken[self._target.name])

    def partition(
        self, count: int, order: npt.ArrayLike, test: bool = True, validation: bool = True
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Train, validation and test row indices, cut from the permutation ``order``.

        train = floor(train * count) rows, validation = floor(validation * count), test the rest.
        A part given apart (``test=False``: test rows of their own; ``validation=False``:
        validation rows of their own) takes none: the rows are cut among the others in the
        ratio of their fractions (all of them training rows, where both are given apart).
        """
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise ValueError(f"partition: count must be a whole number of rows, not {count!r}")
        count = int(count)
        perm = permutation(count, order)
        train, validation_share = split_shares(self._train, self._validation, test, validation)
        n_train, n_validation, n_test = split_sizes(count, train, validation_share)
        if not test:
            n_train, n_test = n_train + n_test, 0
        if n_train == 0 or (test and n_test == 0) or (validation_share > 0 and n_validation == 0):
            if test and self._train + self._validation >= 1:  # (no test fraction)
                raise DataError(
                    f"split(train={self._train}, validation={self._validation}) leaves no test "
                    "rows: give the run test rows of their own (test_rows=...), or split with "
                    "train + validation below 1"
                )
            needed = rows_needed(train, validation_share, test)
            raise DataError(
                f"too few rows for the split: there are {count} rows, which give "
                f"{n_train} training, {n_validation} validation and {n_test} test rows; "
                f"split(train={self._train}, validation={self._validation})"
                + (
                    " (the default split, deepsharp train's)"
                    if (self._train, self._validation) == (0.70, 0.15)
                    else ""
                )
                + f" needs at least {needed} rows so that no part is empty"
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
    def declared(self) -> list[ColumnKind]:
        """The columns as declared, in order (numbers() one column, as declared)."""
        return list(self._declared)

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]] | None:
        """A pipeline that feeds several inputs (a dict of arrays, or columns naming several
        inputs): each input's row shape by name; None for a pipeline of one input."""
        if self._shapes is not None:
            return dict(self._shapes)
        groups = column_groups(self._columns if self._learned else [])
        if len(groups) < 2:
            return None
        return {str(name): (sum(c.width() for c in group),) for name, group in groups.items()}

    def column_groups(self) -> dict[str | None, list[ColumnKind]]:
        """The learned columns of each input it feeds (None: the one input), in order."""
        self._require_learned("column_groups")
        return column_groups(self._columns)

    @property
    def columns(self) -> list[ColumnKind]:
        """The learned columns, in the order their features stand (empty for arrays)."""
        self._require_learned("columns")
        return list(self._columns)

    @property
    def takes_arrays(self) -> bool:
        """Whether it takes arrays of numbers as they are (no columns declared)."""
        return not self._declared

    @property
    def row_shape(self) -> tuple[int, ...]:
        """The shape of one row's features: (feature_count,), or an array's learned row shape."""
        self._require_learned("row_shape")
        several = self.input_shapes
        if several is not None:
            raise DataError(
                "the pipeline feeds several inputs, one array an input: its rows' shapes are "
                f"{several} (a network of several inputs knows its own)"
            )
        return self._shape if self._shape is not None else (self.feature_count,)

    @property
    def feature_names(self) -> list[str]:
        self._require_learned("feature_names")
        if self._shapes is not None:
            return [
                f"{n}[{i}]" for n, shape in self._shapes.items() for i in range(math.prod(shape))
            ]
        if self._shape is not None:
            return [f"x[{i}]" for i in range(math.prod(self._shape))]
        return [n for column in self._columns for n in column.names()]

    @property
    def feature_count(self) -> int:
        self._require_learned("feature_count")
        if self._shapes is not None:
            return sum(math.prod(shape) for shape in self._shapes.values())
        if self._shape is not None:
            return math.prod(self._shape)
        return sum(column.width() for column in self._columns)

    @property
    def target_name(self) -> ColumnName | None:
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

    def __copy__(self) -> Pipeline:
        """A copy is its own, as a deep copy is: copy.copy shared the column objects (and their
        list), so learning the copy, or declaring a column on it, changed the original, and the
        predictions of the network trained with it (trial PK)."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        parts = [repr(c) for c in (self._columns if self._learned else self._declared)]
        if self._shape is not None:
            parts.append(f"arrays of rows {self._shape}")
        if self._shapes is not None:
            parts.append(f"arrays of rows {self._shapes}")
        if self._target is not None:
            parts.append(f"target({self._target.name!r}, {self._target.kind!r})")
        state = "learned" if self._learned else "not learned"
        return f"Pipeline({', '.join(parts)}; {state})"

    def _require_learned(self, what: str) -> None:
        if not self._learned:
            raise DataError(
                "the pipeline has not learned its statistics yet"
                + (f", which {what} needs" if what.endswith("()") else "")
                + ": call pipeline.learn(training_rows) first (fit learns them from its rows)"
            )

    # -- files ----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The recipe and the learned statistics as a plain JSON-able dict (floats round-trip)."""
        listed = self._columns if self._learned else self._declared
        return {
            "format": FORMAT,
            "version": VERSION,
            "split": {"train": self._train, "validation": self._validation},
            "columns": [column.entry(self._learned) for column in listed],
            "target": None if self._target is None else self._target.entry(self._learned),
            "arrays": self._arrays_json(),
            "learned": self._learned,
        }

    def _arrays_json(self) -> dict[str, Any] | None:
        if self._shapes is not None:
            return {"inputs": {name: list(shape) for name, shape in self._shapes.items()}}
        if self._shape is None:
            return None
        return {
            "shape": list(self._shape),
            **({} if self._names is None else {"names": self._names}),
        }

    @classmethod
    def from_json(cls, data: object) -> Pipeline:
        """A pipeline from :meth:`to_json`'s dict; FileFormatError saying what is wrong if bad."""
        try:
            return read_pipeline(cls(), data)
        except FileFormatError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise FileFormatError(f"pipeline: not a valid pipeline: {exc}") from None


def _feeds(column: ColumnKind) -> str:
    return "names no input" if column.input is None else f"feeds {column.input!r}"

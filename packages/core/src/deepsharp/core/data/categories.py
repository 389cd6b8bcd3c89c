"""The category and flag kinds: `Category`, a one-hot over the values the training rows hold
(the most frequent `max_values` of them where given), and the `Learner` counting its labels over
parts of the rows; `Flag`, 1.0 where a field holds a value (one not missing).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import ColumnKind, Learner, Recipe
from deepsharp.core.data.summaries import LabelCounts
from deepsharp.core.data.values import (
    MISSING_TEXTS,
    Column,
    ColumnName,
    each_distinct,
    is_missing,
    label_lookup,
    labels,
    plain_label,
    row_text,
    shown,
    shown_value,
    sorted_labels,
)
from deepsharp.core.errors import DataError, DeepSharpWarning, outside
from deepsharp.core.reals import is_whole

__all__ = ["Category", "CategoryLearner", "Flag", "UnknownRule"]

UnknownRule = Literal["zeros", "error"]

WIDE_CATEGORY = 1000  # a one-hot this wide is worth a warning whatever the row count


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
        if max_values is not None and (not is_whole(max_values) or max_values < 1):
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
        self.max_values = None if max_values is None else int(max_values)
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
        self._warn_of_one_number(known)

    def _warn_of_one_number(self, known: list[str]) -> None:
        """Warn where two learned values are one number written two ways ("01" and "1"): read
        as text (read_csv, deepsharp predict) each is its own, read as numbers (pandas,
        Parquet) all are one, which finds one of them or none (trial P: rows read by pandas
        took another one-hot, silently)."""
        forms: dict[str, list[str]] = {}
        for value in known:
            forms.setdefault(plain_label(value) or value, []).append(value)
        alike = [sorted_labels(held) for held in forms.values() if len(held) > 1]
        if not alike:
            return
        pairs = "; ".join(" and ".join(map(repr, held)) for held in alike[:3])
        warnings.warn(
            f"column {self.name!r} holds values that are one number (or truth value) written "
            f"two ways ({pairs}{', ...' if len(alike) > 3 else ''}): each is a category of its "
            "own here, and rows read by pandas' read_csv or from Parquet give them one value, "
            "which takes one of their categories or none: write each value one way in the "
            "training rows, or read the column as text wherever it is read (pandas: "
            f"dtype={{{self.name!r}: str}})",
            DeepSharpWarning,
            stacklevel=outside(),
        )

    def _warn_if_wide(self, rows: int) -> None:
        width = self.width()
        if width > WIDE_CATEGORY or (width > 100 and width * 2 > rows):
            warnings.warn(
                f"column {self.name!r} holds {width} distinct values in {rows} training rows: a "
                f"one-hot {width} features wide ({width * 4} bytes a row), which an ID-like "
                f"column rarely repays; drop the column, or declare .category({self.name!r}, "
                f"max_values=N) to keep its N most frequent values",
                DeepSharpWarning,
                stacklevel=outside(),
            )

    def set_learned(self, values: list[str], has_missing: bool) -> None:
        self.values = values
        self.has_missing = has_missing
        self.lookup = label_lookup(values)
        # pandas reads "NA", "NULL", ... as missing: rows read by pandas and rows read as text
        # (read_csv, deepsharp predict) find one category. Trained on missing fields and none
        # of these texts, a row's text "NA" is missing; trained on one such text and no missing
        # field, a row pandas read as missing, or holding another of them, is that text's.
        held = [value for value in values if value in MISSING_TEXTS]
        missing = len(values) if has_missing else self.lookup[held[0]] if len(held) == 1 else None
        if has_missing:
            self.lookup[None] = len(values)
        if missing is not None:  # the others too: pandas reads each of them as missing
            self.lookup.setdefault(None, missing)
            for text in sorted(MISSING_TEXTS):  # (a set's order: the file's bytes, trial O)
                self.lookup.setdefault(text, missing)

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
        self.counts = LabelCounts(column.name, kept=column.max_values)

    def add(self, values: Column) -> None:
        self.counts.add(values)

    def finish(self) -> None:
        self.column._settle(self.counts.counts, self.counts.rows)


class Flag(ColumnKind):
    """1.0 where the field holds a value, 0.0 where it is missing (`is_missing`: None, an empty
    or blank text, a text pandas reads as missing such as "NA" or "None", NaN). A category reads
    such texts as values of their own: a missing field alone is its missing category."""

    kind = "flag"

    def width(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [f"{self.name}:flag"]

    def learner(self) -> Learner:
        return _FlagLearner(self)

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        out[:, at] = _flags(values)


def _flags(values: Column) -> npt.NDArray[np.float64]:
    if isinstance(values, np.ndarray):
        return ~np.isnan(values) if values.dtype.kind == "f" else np.ones(len(values))
    held = each_distinct(values, _held, np.float64)
    if held is None:
        held = np.array([_held(v) for v in values], np.float64)
    return held


def _held(value: object) -> float:
    return 0.0 if is_missing(value) else 1.0


class _FlagLearner(Learner):
    """A flag learns nothing; it warns where every training row holds a value (its feature is
    then 1 on every row and tells the network nothing), saying so for True/False values."""

    def __init__(self, column: Flag) -> None:
        self.column = column
        self.empty = False
        self.booleans = True

    def add(self, values: Column) -> None:
        flags = _flags(values)
        self.empty = self.empty or bool(np.any(flags == 0))
        if len(flags) and self.booleans:
            if isinstance(values, np.ndarray):
                self.booleans = values.dtype.kind == "b"
            else:
                self.booleans = all(
                    isinstance(v, (bool, np.bool_))
                    or (isinstance(v, str) and v in ("True", "False", "true", "false"))
                    for v in values
                )

    def finish(self) -> None:
        if self.empty:
            return
        hint = (
            ": its True and False are both values, so both flag 1; declare it "
            f".category({self.column.name!r}) to tell them apart"
            if self.booleans
            else ""
        )
        warnings.warn(
            f"flag column {self.column.name!r} holds a value on every training row, so its flag "
            f"is 1 on every row and tells the network nothing (a flag is 1 where a field holds "
            f"a value){hint}",
            DeepSharpWarning,
            stacklevel=outside(),
        )

"""The number kinds: `Number`, one column of numbers (missing values filled with the median or
mean, optionally flagged, log1p-transformed and standardised), and `Numbers`, every column no
other declaration names, each made a `Number` when the pipeline learns; and the `Learner` that
keeps a number column's moments and median over parts of the rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import ColumnKind, Learner, Recipe, check_input
from deepsharp.core.data.summaries import Median, Moments
from deepsharp.core.data.values import (
    FLOAT32_MAX,
    FLOAT32_TINY,
    Column,
    ColumnName,
    numbers,
    row_text,
    shown_value,
)
from deepsharp.core.errors import DataError
from deepsharp.core.reals import brief, finite_real, is_real

__all__ = ["FillSpec", "Number", "NumberLearner", "Numbers"]

FillSpec = Literal["median", "mean"] | float


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
    if not is_real(fill):  # (a NumPy number is one: a review)
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
                    f"{row_text(i)}, column {self.name!r}: found {shown_value(values[i])}, but "
                    "this column takes the logarithm of its values (log=True: log1p, which "
                    "deepsharp train and infer_pipeline choose for a skewed column whose "
                    "training values were never negative) and needs values of 0 or more: give "
                    "such values (clip the column at 0), or train with the column's values as "
                    f"they are (.number({self.name!r}, log=False))"
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
        given = missing.any() and not isinstance(self.fill, str)  # a fill of its own
        ends = [float(present.min()), float(present.max())] if present.size else []
        constant = _one_value(ends + ([fill] if given else []))
        mean = [*ends, fill][0] if constant else float(np.mean(filled))
        self._settle(fill, mean, float(np.std(filled)), constant)

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

    def _settle(self, fill: float, mean: float, std: float, constant: bool) -> None:
        """The learned statistics; `constant`: every training row holds one value (the missing
        ones filled with their mean or median, or with that value), which is then the mean
        itself (a mean of log1p's values rounded away from them: a constant column gave
        -2.2e-16, not 0, trial P)."""
        if not (math.isfinite(mean) and math.isfinite(std) and std <= FLOAT32_MAX):
            raise DataError(
                f"column {self.name!r}: its values spread too far to standardise in float32 "
                f"(mean {mean!r}, standard deviation {std!r}): scale the column, or use log=True"
            )
        self.fill_value, self.mean = fill, mean
        # A constant column is left unscaled rather than blown up: its std is the float64 sums'
        # rounding, not the values' (six rows of 0.1 have a std of 1.4e-17, and 0.2 became
        # 7.2e15). Whether it is constant is asked of the values themselves: a small spread
        # of large values (times in nanoseconds since 1970, a millisecond apart; IDs 2^53 + 1
        # and + 3) is the values' own and is scaled.
        self.std = std if std >= FLOAT32_TINY and not constant else 1.0

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


def _one_value(values: list[float]) -> bool:
    """Whether these (a column's least and largest values, and a fill of its own) are one value:
    whole numbers where they are equal (IDs 2^53 + 1 and + 3, times in nanoseconds a
    microsecond apart, are two), others to within four units in the last place (0.1 + 0.2,
    0.3 and 0.7 - 0.4, one value worked out three ways, are one)."""
    if not values:
        return True
    least, most = min(values), max(values)
    if all(float(v).is_integer() for v in values):
        return least == most
    return bool(most - least <= 4 * np.spacing(max(abs(least), abs(most))))


class NumberLearner(Learner):
    """A number column's statistics in parts: the present values' moments (and their median,
    for fill="median"), the missing ones counted; the fill joins the moments at the end."""

    def __init__(self, column: Number) -> None:
        self.column = column
        self.moments = Moments()
        self.median = Median() if column.fill == "median" else None
        self.missing = 0
        self.least, self.most = math.inf, -math.inf

    def add(self, values: Column) -> None:
        transformed, missing = self.column._transformed(values)
        present = transformed[~missing]
        self.moments.add(present)
        if present.size:
            self.least = min(self.least, float(present.min()))
            self.most = max(self.most, float(present.max()))
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
        given = self.missing and not isinstance(column.fill, str)  # a fill of its own
        ends = [self.least, self.most] if moments.count else []
        constant = _one_value(ends + ([fill] if given else []))
        mean = [*ends, fill][0] if constant else moments.mean
        column._settle(fill, mean, moments.std, constant)


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

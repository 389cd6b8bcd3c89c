"""The image column kind: each row's field holds a fixed-shape block of numbers (a nested
sequence, an array, or a text of numbers), flattened into features and divided by one number,
given or learned from the training rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import ColumnKind, Learner, Recipe
from deepsharp.core.data.values import (
    FLOAT32_MAX,
    FLOAT32_TINY,
    Column,
    ColumnName,
    pandas_missing,
    parse_number,
    refuse_beyond_float32,
    refuse_times,
    row_text,
)
from deepsharp.core.errors import DataError
from deepsharp.core.reals import brief, finite_real

__all__ = ["Image", "ImageLearner", "ImageScale", "check_image_scale", "check_image_shape"]

ImageScale = float | Literal["max"] | None


def _plain(values: npt.NDArray[np.floating[Any]]) -> bool:
    """Whether floating-point values hold nothing to refuse (no NaN, none infinite or beyond
    float32's range), told by two reductions that allocate nothing: NaN spreads to the least
    and the largest value."""
    if not values.size:
        return True
    return -FLOAT32_MAX <= float(values.min()) and float(values.max()) <= FLOAT32_MAX


def _complex(value: object) -> bool:
    """Whether a row holds complex numbers (which np.asarray(..., float64) drops the imaginary
    parts of, warning at most)."""
    try:
        return np.asarray(value).dtype.kind == "c"
    except (ValueError, TypeError):
        return False  # rows of unequal length: refused below


def _short(value: object, limit: int = 60) -> str:
    """A value's repr, cut short for an error message (an image's row may hold thousands)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_image_shape(name: ColumnName, shape: object) -> tuple[int, ...]:
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
    if not out or len(out) > 8 or math.prod(out) > 2**30:  # a network's rows' bound (nn.graph)
        raise ValueError(
            f"column {name!r}: shape must hold one to eight positive whole numbers, such as "
            f"(1, 8, 8), not {shape!r}"
        )
    return tuple(out)


def check_image_scale(name: ColumnName, scale: object) -> ImageScale:
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
    value = finite_real(scale)
    if value is None or not FLOAT32_TINY <= value <= FLOAT32_MAX:
        raise ValueError(
            f"column {name!r}: scale must be a positive finite number, not {brief(scale)}"
        )
    return value


class Image(ColumnKind):
    """A column whose field holds a whole image (or any fixed-shape block of numbers).

    Each row's field is a list, tuple or NumPy array (of any nesting) of ``prod(shape)`` numbers,
    or a text of numbers separated by spaces or commas; it is flattened in C order (channels,
    then rows, then columns) into ``prod(shape)`` features named ``name[0]``, ``name[1]``, ...
    Every value is divided by one number: ``scale`` when it is given, the largest absolute value
    of the training rows when it is ``"max"`` (1 where they are all 0), and 1 when it is None.
    A missing field or value, a wrong count, a value that is no number, infinite or beyond
    float32's range is a DataError.
    """

    kind = "image"

    def __init__(
        self,
        name: object,
        shape: int | Sequence[int],
        scale: ImageScale = None,
        input: str | None = None,
    ) -> None:
        super().__init__(name, input)
        self.shape = check_image_shape(self.name, shape)
        self.scale = check_image_scale(self.name, scale)
        self.divisor: float | None = None

    def width(self) -> int:
        return math.prod(self.shape)

    def names(self) -> list[str]:
        return [f"{self.name}[{i}]" for i in range(self.width())]

    def _expected(self) -> str:
        return f"{self.width()} numbers (an image of shape {self.shape})"

    def _values(self, column: Column) -> npt.NDArray[Any]:
        """The column as one matrix of numbers (rows, width), checked: stacked by NumPy in one
        go where it can (keeping the arrays' own type: float32 images are not widened to
        float64 here), row by row (to name the bad row) where it cannot."""
        count = len(column)
        width = self.width()
        stacked: npt.NDArray[Any] | None
        try:  # the usual case: equal arrays or lists, stacked by NumPy at once
            stacked = np.asarray(column)
            refuse_times(stacked, self.name)
            if stacked.dtype.kind in "cO":
                # each row is read below, naming the first complex one, or one that is no
                # array of numbers (NumPy 1.26 makes an array of NaT dates objects of None)
                stacked = None
            elif stacked.dtype.kind not in "fiu":
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
            self._check_layout(0, stacked.shape[1:])  # every row has the first one's shape
            values = stacked.reshape(count, width)
            if values.dtype.kind in "iu" or _plain(values):
                return values  # integers are never missing nor beyond float32's range
            values = values.astype(np.float64)  # something to refuse: named below
        else:
            values = np.empty((count, width), dtype=np.float64)
            for i, value in enumerate(column):
                values[i] = self._row(i, value)
        missing = np.isnan(values)
        if missing.any():
            i, k = (int(v) for v in np.argwhere(missing)[0])
            raise DataError(
                f"{row_text(i)}, column {self.name!r}: expected {self._expected()}, but value {k} "
                f"(counting from 0) is missing (nan): an image takes no missing values"
            )
        refuse_beyond_float32(
            values,
            column,
            self.name,
            f" (expected {self._expected()})",
            "scale the images' values, or drop the row",
        )  # (an image takes no missing value: not "leave the field empty")
        return values

    def _row(self, i: int, value: object) -> npt.NDArray[np.float64]:
        where = f"{row_text(i)}, column {self.name!r}"
        if (
            value is None
            or pandas_missing(value)
            or (isinstance(value, (float, np.floating)) and math.isnan(value))
        ):
            raise DataError(f"{where}: the image is missing; expected {self._expected()}")
        if isinstance(value, str):
            tokens = value.replace(",", " ").split()
            if not tokens:
                raise DataError(
                    f"{where}: the image is missing (empty text); expected {self._expected()}"
                )
            try:  # Python's float for speed, where it reads as the one rule for numbers does
                if "_" in value or not value.isascii():  # "1_000", full-width digits: no number
                    raise ValueError(value)
                parsed = np.array([float(t) for t in tokens], dtype=np.float64)
            except ValueError:
                numbers = [parse_number(t) for t in tokens]
                bad = next((t for t, n in zip(tokens, numbers) if n is None), None)
                if bad is not None:
                    raise DataError(
                        f"{where}: expected {self._expected()}, found {bad!r}, which is no number"
                    ) from None
                parsed = np.array(numbers, dtype=np.float64)  # "NA": missing, named as such
        elif (
            self.width() == 1
            and isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_))
        ):
            parsed = np.array([float(value)])  # as the column of such rows stacked reads it
        elif isinstance(value, (bytes, Mapping, bool, int, float, np.generic)):
            raise DataError(
                f"{where}: expected {self._expected()} as a list, tuple, NumPy array or text, "
                f"found {type(value).__name__} {_short(value)}"
            )
        else:
            if _complex(value):
                raise DataError(
                    f"{where}: expected {self._expected()}, found complex numbers; an image "
                    f"takes real ones: give their magnitudes (np.abs) or their real parts (.real)"
                )
            try:
                given = np.asarray(value)
                if given.dtype == object:  # pd.NA is missing, as None is (was "no number")
                    given = np.asarray(
                        [math.nan if pandas_missing(v) else v for v in given.reshape(-1)],
                        dtype=object,
                    ).reshape(given.shape)
                parsed = given.astype(np.float64)
            except (ValueError, TypeError, OverflowError):
                raise DataError(
                    f"{where}: expected {self._expected()}, found {_short(value)}, which holds "
                    f"something that is no number (or rows of unequal length)"
                ) from None
            refuse_times(given.reshape(1, -1), self.name, i)
            if parsed.ndim == 0:
                raise DataError(
                    f"{where}: expected {self._expected()}, found the single value {_short(value)}"
                )
        if parsed.size != self.width():
            raise DataError(f"{where}: expected {self._expected()}, found {parsed.size} numbers")
        self._check_layout(i, parsed.shape)
        return parsed.reshape(-1)

    def _check_layout(self, i: int, shape: tuple[int, ...]) -> None:
        """Refuse a row of the right count of numbers laid out in another shape than the image's:
        its values read in order would mix the axes (an (H, W, C) picture read as (C, H, W)
        interleaves its channels). The image's shape and its numbers flat are taken, and any
        shape that is one of those but for axes of length 1 ((8, 8) for (1, 8, 8))."""
        kept = tuple(n for n in shape if n != 1)
        if kept in (tuple(n for n in self.shape if n != 1), (self.width(),)) or len(kept) <= 1:
            return
        said = (
            f"{row_text(i)}, column {self.name!r}: expected an image of shape {self.shape} (or "
            f"its {self.width()} numbers flat), found an array of shape {tuple(shape)}, whose "
            "values in order would not be the image's"
        )
        if len(shape) == 3 == len(self.shape) and shape == (*self.shape[1:], self.shape[0]):
            said += (
                ": it looks channels-last (height, width, channels); the column takes "
                "(channels, height, width): give np.transpose(image, (2, 0, 1))"
            )
        raise DataError(said)

    def learner(self) -> Learner:
        return ImageLearner(self)

    def _settle(self, largest: float) -> None:
        if self.scale == "max":
            self.divisor = largest if largest >= FLOAT32_TINY else 1.0
        else:
            self.divisor = 1.0 if self.scale is None else float(self.scale)

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        assert self.divisor is not None
        checked = self._values(values)
        target = out[:, at : at + self.width()]
        if self.divisor == 1.0 and (checked.dtype.kind == "f" or checked.dtype.itemsize <= 4):
            np.copyto(target, checked, casting="unsafe")  # as exact as by way of float64
            return
        # each value divided in float64 and rounded once to the features' float32, whatever
        # type the rows came in
        np.divide(
            checked,
            np.float64(self.divisor),
            out=target,
            dtype=np.float64,
            casting="unsafe",
        )

    def forget(self) -> None:
        self.divisor = None

    def settings(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "scale": self.scale}

    def statistics(self) -> dict[str, Any]:
        return {"divisor": self.divisor}

    @classmethod
    def from_settings(cls, name: ColumnName, recipe: Recipe) -> Image:
        scale = recipe.get("scale", str, int, float, type(None))
        if isinstance(scale, str) and scale != "max":
            raise recipe.fail(
                "scale", f"expected a positive number, 'max' or null, found {scale!r}"
            )
        return cls(name, recipe.get("shape", list), scale=scale)

    def read_statistics(self, recipe: Recipe) -> None:
        divisor = recipe.number("divisor", FLOAT32_TINY)
        if isinstance(self.scale, float) and divisor != self.scale:
            raise recipe.fail(
                "divisor", f"the column's scale is {self.scale!r}, but its divisor is {divisor!r}"
            )
        if self.scale is None and divisor != 1.0:
            raise recipe.fail("divisor", f"a column without scale divides by 1, not {divisor!r}")
        self.divisor = divisor

    def __repr__(self) -> str:
        return f"image({self.name!r}, {self.shape})"


class ImageLearner(Learner):
    """Every training row checked; the largest absolute value kept (for scale="max")."""

    def __init__(self, column: Image) -> None:
        self.column = column
        self.largest = 0.0

    def add(self, values: Column) -> None:
        checked = self.column._values(values)  # checks every row, as the other columns do
        if checked.size:  # not np.abs: an int8 image's -128 has no int8 absolute value
            largest = max(-float(checked.min()), float(checked.max()))
            self.largest = max(self.largest, largest)

    def finish(self) -> None:
        self.column._settle(self.largest)

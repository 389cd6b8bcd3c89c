"""Numbers read from files and settings: a real number that a float holds finitely, or not.

JSON's whole numbers have no bound, so a file can hold 10**400 where a float belongs; Python's
`float` and `math.isfinite` then raise OverflowError. Every reader of such a number asks here.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard

import numpy as np

from deepsharp.core.errors import DataError

__all__ = ["brief", "finite_real", "is_real", "is_whole", "refuse_masked"]


def is_whole(value: object) -> TypeGuard[int]:
    """Whether `value` is a whole number: a Python int or a NumPy integer, not a bool (a NumPy
    scalar from `np.arange` is as good as an int)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_real(value: object) -> TypeGuard[float]:
    """Whether `value` is a real number: an int, a float or a NumPy number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def finite_real(value: object) -> float | None:
    """`value` as a float where it is a real number (not a bool) that a float holds finitely;
    None for anything else (text, None, NaN, infinity, a whole number beyond a float's range)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return number if math.isfinite(number) else None


def brief(value: object, width: int = 40) -> str:
    """`repr(value)` for a message, cut to `width` characters (a 400-digit number is not read)."""
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 3]}..."


def refuse_masked(values: object, where: str) -> None:
    """Refuse (DataError) a NumPy masked array that masks a value: the data under its mask were
    read as values (trial H), where a NaN there is missing."""
    if isinstance(values, np.ma.MaskedArray) and np.ma.is_masked(values):
        raise DataError(
            f"{where}: a masked array, {int(np.ma.getmaskarray(values).sum()):,} of its values masked: "
            "its values under the mask would be read as they are; fill them with numbers of "
            "your choosing (values.filled(...)): features hold no missing values"
        )

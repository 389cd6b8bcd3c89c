"""Numbers read from files and settings: a real number that a float holds finitely, or not.

JSON's whole numbers have no bound, so a file can hold 10**400 where a float belongs; Python's
`float` and `math.isfinite` then raise OverflowError. Every reader of such a number asks here.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard

import numpy as np

__all__ = ["brief", "finite_real", "is_real", "is_whole"]


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

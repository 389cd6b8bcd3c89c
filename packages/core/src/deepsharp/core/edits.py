"""Objects whose settings a compiled step reads: every change of an attribute counted.

A compiled step (`deepsharp.core.training.compiled`) replays a traced pass, with the settings
of its layers and its loss baked in; it keys its plans by how often they were changed, so that a
setting changed between steps (`Dropout.rate = 0`, `loss.label_smoothing = 0.2`) is read by
the next step, traced again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Edited"]


class Edited:
    """Counts, in `_edits`, each change of an attribute (its value set again is no change)."""

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute, counted where it changes (`_edits`: a compiled step's plan is
        traced again after one, so that `Dropout.rate` set to 0 between steps is read at the
        next; the value it holds set again is no change)."""
        held = self.__dict__.get(name, _UNSET)
        object.__setattr__(self, name, value)
        if held is value or (type(held) is type(value) and _equal(held, value)):
            return
        self.__dict__["_edits"] = self.__dict__.get("_edits", 0) + 1


_UNSET = object()


def _equal(held: Any, value: Any) -> bool:
    """Whether a setting set again is the one it held: plain values, NumPy's scalars, lists,
    tuples and dicts of them by equality (an array, or what gives no one bool, is a change)."""
    if isinstance(value, (bool, int, float, str, type(None), np.generic)):
        same = held == value
        return bool(same) if isinstance(same, (bool, np.bool_)) else False
    if isinstance(value, (list, tuple)):
        return len(held) == len(value) and all(
            type(a) is type(b) and _equal(a, b) for a, b in zip(held, value)
        )
    if isinstance(value, dict):
        return held.keys() == value.keys() and all(
            type(held[k]) is type(value[k]) and _equal(held[k], value[k]) for k in value
        )
    return False

"""Objects whose settings a compiled step reads: every change of an attribute counted.

A compiled step (`deepsharp.core.training.compiled`) replays a traced pass, with the settings
of its layers and its loss baked in; it keys its plans by how often they were changed, so that a
setting changed between steps (`Dropout.rate = 0`, `loss.label_smoothing = 0.2`) is read by
the next step, traced again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Checked", "Edited", "Settled"]


class Settled:
    """Checks each setting its class declares `Checked` as it is assigned (read as any
    attribute is: the check costs an assignment, never a read)."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, _checked(self, name, value))


class Edited(Settled):
    """Counts, in `_edits`, each change of an attribute (its value set again is no change)."""

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute, counted where it changes (`_edits`: a compiled step's plan is
        traced again after one, so that `Dropout.rate` set to 0 between steps is read at the
        next; the value it holds set again is no change)."""
        value = _checked(self, name, value)
        held = self.__dict__.get(name, _UNSET)
        object.__setattr__(self, name, value)
        if held is value:  # the same object: a change where it may have been changed in place
            if isinstance(value, _IMMUTABLE):  # (`opts["k"] = 3`, then `self.opts = opts`:
                return  # assigned again to say so; trial C; an object of one's own, trial C2)
        elif type(held) is type(value) and _equal(held, value):
            return
        self.__dict__["_edits"] = self.__dict__.get("_edits", 0) + 1

    def __delattr__(self, name: str) -> None:
        """Delete an attribute, counted as a change (a setting removed, its class's default
        read in its place: a review found it unseen by a compiled step)."""
        object.__delattr__(self, name)
        self.__dict__["_edits"] = self.__dict__.get("_edits", 0) + 1


_UNSET = object()
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, tuple, frozenset, np.generic)


def _equal(held: Any, value: Any) -> bool:
    """Whether a setting set again is the one it held: plain values, NumPy's scalars, lists,
    tuples and dicts of them by equality, each of the same type (an array, or what gives no one
    bool, is a change); a dict's items in their order."""
    if isinstance(value, (bool, int, float, str, type(None), np.generic)):
        same = held == value
        if isinstance(value, (float, np.floating)) and value == 0:  # -0.0 is another setting
            same = same and math.copysign(1.0, held) == math.copysign(1.0, value)  # (trial C2)
        return bool(same) if isinstance(same, (bool, np.bool_)) else False
    if isinstance(value, (list, tuple)):
        return len(held) == len(value) and all(
            type(a) is type(b) and _equal(a, b) for a, b in zip(held, value)
        )
    if isinstance(value, dict):  # in their order, keys of one type: a layer may work through
        return _equal(list(held.items()), list(value.items()))  # them in turn (trial C)
    return False


class Checked:
    """A setting checked whenever it is assigned, by its constructor and after it: `check(owner,
    value)` gives the value to hold, or raises saying what the setting takes (trial NB: an
    optimizer's `learning_rate = -1` assigned between runs was taken, and climbed the loss;
    `Dropout.rate = -0.5`, `label_smoothing = 3.0` too). `default`: what an owner that never
    assigned it reads (an optimizer of one's own that sets no learning rate)."""

    def __init__(self, check: Callable[[Any, Any], Any], default: Any = _UNSET) -> None:
        self.check = check
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        # Read only where the instance holds none (a value assigned lives in its __dict__,
        # read as any attribute is: this is no data descriptor).
        if instance is None:
            return self if self.default is _UNSET else self.default
        if self.default is _UNSET:
            raise AttributeError(f"{type(instance).__name__} has no {self.name} set yet")
        return self.default


_DECLARED: dict[tuple[type, str], Checked | None] = {}
"""Each class's `Checked` setting of a name, or None: found once along its MRO."""


def _checked(owner: Any, name: str, value: Any) -> Any:
    """`value` as the setting `name` of `owner`'s class takes it, where the class declares it
    `Checked` (`Settled` owners); as it is otherwise."""
    key = (type(owner), name)
    try:
        declared = _DECLARED[key]
    except KeyError:
        found = next((k.__dict__[name] for k in key[0].__mro__ if name in k.__dict__), None)
        declared = _DECLARED[key] = found if isinstance(found, Checked) else None
    return value if declared is None else declared.check(owner, value)

"""The classes a file may name (layers, losses, column kinds), found by key when it is read.

A file never brings code: it names a class that is already imported. deepsharp's own classes
are keyed by their plain name ("Dense"); a class of the user's by its module and name
("mymodel.Dense"), so that a user's class named like one of deepsharp's never stands in for it
when a file is read, and two users' classes of one name do not replace each other.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from deepsharp.core.errors import DeepSharpWarning

__all__ = ["Kinds", "warn_unrecorded"]

T = TypeVar("T")

_OWN = "deepsharp.core."


class Kinds(Generic[T]):
    """A registry of one family of classes (what a file calls them -> the class)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._classes: dict[str, type[T]] = {}

    @staticmethod
    def key_of(cls: type, name: str | None = None) -> str:
        """deepsharp's own classes by name (or the `name` given); others by module and name."""
        if cls.__module__.startswith(_OWN):
            return name or cls.__name__
        return f"{cls.__module__}.{cls.__qualname__}"

    def add(self, cls: type[T], name: str | None = None) -> str:
        key = self.key_of(cls, name)
        self._classes[key] = cls
        return key

    def get(self, key: object) -> type[T] | None:
        return self._classes.get(key) if isinstance(key, str) else None

    def unknown(self, key: object) -> str:
        """The message for a key no imported class has."""
        known = ", ".join(sorted(self._classes))
        module = key.rpartition(".")[0] if isinstance(key, str) else ""
        where = (
            f" (import {module} first; on the command line, --import {module})"
            if module and module != "__main__"
            else ""
        )
        return (
            f"unknown {self.what} {key!r} (known: {known}); a {self.what} written as code must be "
            f"imported (from the module it was defined in) before the file is read{where}"
        )

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._classes

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)


_WARNED: set[type] = set()


def warn_unrecorded(made: object, base: type, what: str, config: dict[str, Any]) -> None:
    """Warn, once a kind, where a class of one's own (a layer, a loss) takes settings its
    constructor is given and records none (it has the base's config(), {}): a file loaded
    makes it with its defaults, and a setting given is silently lost (its predictions too)."""
    kind = type(made)
    if config or kind.config is not base.config or kind in _WARNED:  # type: ignore[attr-defined]
        return
    try:
        taken = [
            name
            for name, parameter in inspect.signature(kind).parameters.items()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
            and name != "name"
        ]
    except (TypeError, ValueError):
        return
    if taken:
        _WARNED.add(kind)
        warnings.warn(
            f"the {what} {kind.__name__} takes {', '.join(taken)} and records none of them (it "
            "has no config() of its own): a file saved with it loads it with its defaults. "
            f"Write config(self) returning them ({{{taken[0]!r}: self.{taken[0]}, ...}})",
            DeepSharpWarning,
            stacklevel=3,
        )

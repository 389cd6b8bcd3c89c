"""The target: the one column a network is trained to predict, and how its classes are learned
from training rows that come in parts."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import Recipe, check_name
from deepsharp.core.data.values import (
    Column,
    column_labels,
    is_missing,
    label,
    label_lookup,
    labels,
    numbers,
    parse_number,
    row_text,
    shown,
    shown_value,
    sorted_labels,
)
from deepsharp.core.errors import DataError

__all__ = ["TARGET_KINDS", "Target", "TargetKind", "TargetLearner"]

TargetKind = Literal["binary", "classes", "number"]
TARGET_KINDS = ("binary", "classes", "number")


class Target:
    """The one column the network is trained to predict: binary (0/1), classes (indices) or a number."""

    def __init__(self, name: object, kind: TargetKind) -> None:
        self.name = check_name(name)
        if kind not in TARGET_KINDS:
            raise ValueError(
                f"target {self.name!r}: kind must be 'binary', 'classes' or 'number', not {kind!r}"
            )
        self.kind: TargetKind = kind
        self.classes: list[str] | None = None
        self.lookup: dict[str | None, int] = {}

    def set_classes(self, classes: list[str] | None) -> None:
        self.classes = classes
        self.lookup = label_lookup(classes or [])

    def learn(self, values: Column) -> None:
        learner = self.learner()
        learner.add(values)
        learner.finish()

    def learner(self) -> TargetLearner:
        """What learns the target's classes from training rows that come in parts."""
        return TargetLearner(self)

    def targets(self, values: Column) -> npt.NDArray[Any]:
        """binary: float32 (N, 1) of 0/1; number: float32 (N, 1); classes: int64 (N,) indices."""
        if self.kind == "number":
            # (a target is never missing: "leave the field empty" was advice refused next)
            parsed = numbers(
                values, self.name, "scale the target (divide it, or take its log), or drop the row"
            )
            missing = np.isnan(parsed)
            if missing.any():
                i = int(np.argmax(missing))
                raise DataError(
                    f"{row_text(i)}, column {self.name!r}: the target is missing"
                    f"{_how_many(int(missing.sum()), len(parsed))}; every row needs one"
                )
            return np.ascontiguousarray(parsed.astype(np.float32).reshape(-1, 1))
        index = labels(values, self.name, self.lookup)
        bad = index < 0
        if bad.any():
            i = int(np.argmax(bad))
            value = values[i]
            if label(value) is None:
                count = sum(label(v) is None for v in values)
                raise DataError(
                    f"{row_text(i)}, column {self.name!r}: the target is missing"
                    f"{_how_many(count, len(values))}; every row needs one"
                )
            alike = sum(label(v) == label(value) for v in values)
            text = str(label(value))
            cased = [known for known in self.classes or [] if known.casefold() == text.casefold()]
            raise DataError(
                f"{row_text(i)}, column {self.name!r}: the target value {shown_value(value)} was not in "
                f"the training rows; the known values are: {shown(self.classes or [])}. It is on "
                f"{alike} of these {len(values)} rows and on none the pipeline learned from (a "
                "value on few rows may fall outside a split's training rows): give it training "
                "rows, or leave its rows out"
                + (  # (trial P3: 'Yes', 'yes' and 'YES' three classes, not a word why)
                    f". Labels are read as written: {shown(cased)} differ from it in case alone; "
                    "write each class one way (column.str.lower() in pandas) if they are one"
                    if cased
                    else ""
                )
            )
        if self.kind == "binary":
            return index.astype(np.float32).reshape(-1, 1)
        return index.astype(np.int64)

    def entry(self, learned: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if learned:
            out["classes"] = None if self.classes is None else list(self.classes)
        return out

    @classmethod
    def read(cls, data: object, learned: bool) -> Target:
        recipe = Recipe(data, ".target")
        kind = recipe.text("kind")
        if kind not in TARGET_KINDS:
            raise recipe.fail(
                "kind", f"unknown target kind {kind!r} (expected one of {', '.join(TARGET_KINDS)})"
            )
        target = cls(recipe.name(), kind)  # type: ignore[arg-type]
        if not learned:
            return target
        classes = recipe.data.get("classes")
        if kind == "number":
            if classes is not None:
                raise recipe.fail("classes", "a number target has no classes; expected null")
            return target
        if classes is None:
            raise recipe.fail("", "missing the learned classes of the target")
        found = recipe.texts("classes")
        if kind == "binary" and len(found) != 2:
            raise recipe.fail(
                "classes", f"a binary target has exactly two classes, found {len(found)}"
            )
        if kind == "classes" and not found:
            raise recipe.fail("classes", "a classes target needs at least one class")
        target.set_classes(found)
        return target


class TargetLearner:
    """The target's labels over every part of the training rows, in order of first appearance
    (a missing one, or a third of a binary target, refused at its row); sorted at the end."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.known: list[str] = []

    def add(self, values: Column) -> None:
        target = self.target
        if target.kind == "number":
            target.targets(values)  # checks every value is a number
            return
        found, first_rows = column_labels(values, target.name)
        for found_label, i in zip(found, first_rows, strict=False):
            if found_label is None:
                count = sum(label(v) is None for v in values)
                raise DataError(
                    f"{row_text(i)}, column {target.name!r}: the target is missing"
                    f"{_how_many(count, len(values))}; every training row needs one"
                )
        _refuse_missing_texts(target.name, found, first_rows, self.known)
        for found_label, i in zip(found, first_rows, strict=False):
            if found_label is None or found_label in self.known:
                continue
            if target.kind == "binary" and len(self.known) == 2:
                first, second = self.known
                numbers = all(parse_number(text) is not None for text in (*self.known, found_label))
                declare = (
                    f"declare .target({target.name!r}, kind='number') for a number to predict, "
                    f"or kind='classes' for more than two classes"
                    if numbers
                    else f"declare .target({target.name!r}, kind='classes') for more than two"
                )
                raise DataError(
                    f"{row_text(i)}, column {target.name!r}: a binary target holds two values, "
                    f"but this row holds a third, {shown_value(values[i])}, after {first!r} and "
                    f"{second!r} ({declare})"
                )
            self.known.append(found_label)

    def finish(self) -> None:
        target, known = self.target, self.known
        if target.kind == "number":
            target.set_classes(None)
            return
        if target.kind == "binary" and len(known) == 1:
            if known[0] not in ("0", "1"):
                raise DataError(
                    f"column {target.name!r}: a binary target needs two values in the "
                    f"training rows, but they all hold {known[0]!r}"
                )
            known = ["0", "1"]
        target.set_classes(sorted_labels(known))


def _refuse_missing_texts(
    name: object, found: list[str | None], rows: list[int], known: list[str]
) -> None:
    """A label that is a text read as missing ('NA', 'NULL') among labels that are numbers (0
    and 1; grades): a missing target, refused as one (it would be learned as a class of its
    own, and a binary target's third value) — beside text labels it is a label ('NA' and 'EU')."""
    missing = [(text, i) for text, i in zip(found, rows) if text is not None and is_missing(text)]
    others = [text for text in [*found, *known] if text is not None and not is_missing(text)]
    if missing and others and all(parse_number(text) is not None for text in others):
        text, i = missing[0]
        raise DataError(
            f"{row_text(i)}, column {name!r}: the target is missing ({text!r}, read as missing "
            f"beside the numbers {', '.join(map(repr, sorted_labels(set(others))[:3]))}); every "
            "training row needs one: drop the rows without a target first"
        )


def _how_many(count: int, rows: int) -> str:
    """How many of the rows miss their target (where more than one does), and what to do."""
    if count < 2:
        return f" (the one of these {rows} rows without one: drop it first, or give its target)"
    return f" (on {count} of these {rows} rows: drop the rows without a target first)"

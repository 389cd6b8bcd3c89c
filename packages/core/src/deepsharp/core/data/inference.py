"""The pipeline a table's columns suggest, each choice with its reason (`deepsharp train`).

`infer_pipeline(rows, target)` looks at every column of rows held in memory (what `read_csv`
gives, a list of mappings, a DataFrame) once: how many fields are missing, how many distinct
values there are, whether every value is a number, whole, in what range and how skewed. That
is a column's `Profile`. Each column kind is a `ColumnRule`: it looks at a profile and claims
the column (a `Choice`: the declaration and why, in words) or passes. `RULES` are tried in order
and the first that claims a column decides; the last claims every column it is handed (leaves
it out). A new kind is one more rule, put in the list before the rules it must come before.

Text of several words a value becomes a text column (word ids for an embedding). Such ids feed
an input of their own: where there is text, each text column feeds the network input named
after it and the other columns feed one input, "features" (`Inferred.inputs`).

The target's kind is chosen the same way: two values are binary; whole numbers with few values
or text are classes; other numbers are a number.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.data.sources import (
    column_names,
    columns,
    near,
    same_text,
    separated_otherwise,
)
from deepsharp.core.data.target import TargetKind
from deepsharp.core.data.text import words
from deepsharp.core.data.values import Column, ColumnName, label, parse_number, sorted_labels
from deepsharp.core.errors import DataError, described, names_shown

__all__ = [
    "RULES",
    "Choice",
    "ColumnRule",
    "Inferred",
    "Profile",
    "infer_pipeline",
    "profile",
]

FEW_WHOLE_NUMBERS = 5
"""Whole numbers with at most this many distinct values are categories (a class, a grade)."""
ROWS_A_VALUE = 10
"""How many rows a value of those whole numbers needs on average for them to be categories:
fewer, and the column is numbers (too few rows to tell a class from a count)."""
FEW_STRAYS = 3
"""How many distinct texts that are no number a column of numbers may hold and still be told
as numbers with a few stray texts ('?', '-': a missing value written otherwise)."""
FEW_CATEGORIES = 50
"""Text with at most this many distinct values is one-hot over all of them; with more (but at
most one value for every two rows) over the most frequent this many."""
SKEWED = 2.0
"""Numbers of 0 or more, of many distinct values, whose skewness is over this take log1p."""
MANY_VALUES = 20
"""How many distinct values make numbers an amount (log1p when skewed) or a target a number."""
MANY_WORDS = 5.0
"""Text of more than FEW_CATEGORIES distinct values holding this many words a value on average
is text (word ids); fewer (names, codes) is left to the other rules."""
TEXT_VOCABULARY = 20000
"""The most ids a text column's vocabulary takes (padding and unknown among them)."""
TEXT_LENGTH = 256
"""The most words a text column keeps of a value."""
FEATURES = "features"
"""The input the columns that are not text feed, where there is text."""


@dataclass(frozen=True)
class Profile:
    """What one look at a column found: its rows, missing fields, distinct values (their
    labels, sorted) and, where every present value is a number, the numbers (NaN where missing);
    where they are not, how many words each present value holds and how many distinct words
    they hold in all."""

    name: ColumnName
    rows: int
    missing: int
    values: list[str]
    numbers: npt.NDArray[np.float64] | None
    words: npt.NDArray[np.int64] | None = None
    vocabulary: int = 0
    strays: dict[str, int] = field(default_factory=dict)
    """Where most present values are numbers and a few texts are not: those texts (at most
    `FEW_STRAYS`) and on how many rows each stands."""

    @property
    def present(self) -> int:
        return self.rows - self.missing

    @property
    def distinct(self) -> int:
        return len(self.values)

    @property
    def whole(self) -> bool:
        """Every present value is a whole number."""
        if self.numbers is None:
            return False
        present = self.numbers[~np.isnan(self.numbers)]
        return bool(np.all(np.isfinite(present)) and np.all(present == np.round(present)))

    def some(self, count: int = 3) -> str:
        """A few of the distinct values, for a reason: `0, 1` or `C, Q, S, ...` (a value holding
        a comma, a quote or spaces around it quoted as CSV quotes it: trial CL4)."""
        shown = ", ".join(map(_listed, self.values[:count]))
        return shown + (", ..." if self.distinct > count else "")


def _listed(value: str) -> str:
    if any(mark in value for mark in ',"\n') or value != value.strip():
        return '"' + value.replace('"', '""') + '"'
    return value


@dataclass(frozen=True)
class Choice:
    """What a column becomes: its kind ("number", "category", "flag", or "left out"), why, and
    the declaration that adds it to a pipeline (None: left out)."""

    column: ColumnName
    kind: str
    why: str
    declare: Callable[[Pipeline], Pipeline] | None = field(default=None, repr=False)


ColumnRule = Callable[[Profile], "Choice | None"]
"""A column kind's rule: the choice for a column it claims, or None to let the next rule look."""


def _empty(column: Profile) -> Choice | None:
    if column.present == 0:
        return Choice(column.name, "left out", "every field is empty")
    return None


def _constant(column: Profile) -> Choice | None:
    if column.distinct == 1 and column.missing == 0:
        return Choice(column.name, "left out", f"the same value on every row ({column.values[0]})")
    return None


def _row_number(column: Profile) -> Choice | None:
    """Whole numbers, a different one on every row, without gaps (in any order), or rising row
    by row in a column named as an id: a row's number. (Distinct whole numbers rising row by
    row are also a measure the file is sorted by: the name tells them apart.)"""
    numbers = column.numbers
    if numbers is None or column.missing or not column.whole or column.distinct != column.rows:
        return None
    gapless = float(numbers.max() - numbers.min()) + 1 == column.rows
    rising = bool(np.all(np.diff(numbers) > 0)) and _named_as_an_id(column.name)
    if rising or gapless:
        return Choice(
            column.name,
            "left out",
            "a different whole number on every row, "
            + ("without gaps" if gapless else "rising row by row, named as an id")
            + ": a row's number, which says nothing of the target",
        )
    return None


def _named_as_an_id(name: ColumnName) -> bool:
    """Whether a column's name says it numbers rows: id, index, row, no, ... or ends in id."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", str(name))  # row_id, RowId, ID, userID
    last = words[-1].lower() if words else ""
    return last in ("id", "ids", "index", "idx", "row", "no", "number", "num", "key", "pk")


def _few_whole_numbers(column: Profile) -> Choice | None:
    # Each value held by several rows: on a few rows a count (SibSp's 0, 1, 3 of ten rows) looks
    # like a class, and the values its training rows lacked were all zeros at serving (trial P).
    present = column.rows - column.missing
    if (
        column.whole
        and column.distinct <= FEW_WHOLE_NUMBERS
        and present >= ROWS_A_VALUE * max(column.distinct, 1)
    ):
        return Choice(
            column.name,
            "category",
            f"{column.distinct} whole numbers ({column.some(FEW_WHOLE_NUMBERS)}): read as "
            "categories (a class, a grade), one-hot" + _missing_category(column),
            lambda pipeline: pipeline.category(column.name),
        )
    return None


def _numbers(column: Profile) -> Choice | None:
    numbers = column.numbers
    if numbers is None:
        return None
    present = numbers[~np.isnan(numbers)]
    low, high = float(present.min()), float(present.max())
    skew = _skewness(present)
    log = low >= 0 and column.distinct > MANY_VALUES and skew > SKEWED
    flagged = column.missing > 0
    why = f"numbers from {low:.15g} to {high:.15g}"  # (:g said 1e+06 to 1e+06: trial D)
    if flagged:
        why += f"; {column.missing} missing, filled with the median and flagged"
    if log:
        why += f"; skewed (skewness {skew:.1f}) and never negative: log1p taken"
    return Choice(
        column.name,
        "number",
        why + "; standardised",
        lambda pipeline: pipeline.number(column.name, missing_flag=flagged, log=log),
    )


def _mostly_missing(column: Profile) -> Choice | None:
    if column.missing * 2 > column.rows:
        return Choice(
            column.name,
            "flag",
            f"a value on {column.present} of {column.rows} rows only: a flag, 1 where there is one",
            lambda pipeline: pipeline.flag(column.name),
        )
    return None


def _text(column: Profile) -> Choice | None:
    counts = column.words
    if counts is None or not counts.size or column.distinct <= FEW_CATEGORIES:
        return None
    if all(_DATE.fullmatch(v.strip()) or _DURATION.fullmatch(v.strip()) for v in column.values):
        return None  # dates and times, durations: no words (trial P3: '2024-11-14 13:04:00'
        # was a text of 6 words fed to an LSTM), left out by `_written_numbers`, saying so
    mean = float(counts.mean())
    if mean < MANY_WORDS:
        return None
    length = min(TEXT_LENGTH, max(8, 8 * math.ceil(float(np.percentile(counts, 95)) / 8)))
    vocabulary = min(TEXT_VOCABULARY, column.vocabulary + 2)
    held = float(np.mean(counts <= length))  # as measured: the length is capped (trial CL:
    return Choice(  # "19 texts in 20 hold no more" where a third held more)
        column.name,
        "text",
        f"{column.distinct} texts of {mean:.1f} words on average: word ids, the first {length} "
        f"words of each ({_share(held)} of the texts hold no more), over its "
        f"{vocabulary - 2:,} most frequent words",
        lambda pipeline: pipeline.text(
            column.name, length=length, vocabulary=vocabulary, padding="start"
        ),
    )


def _share(fraction: float) -> str:
    """A share as a percentage, never rounded to 100% where it is not all."""
    return "all" if fraction == 1.0 else f"{min(fraction * 100, 99.9):.3g}%"


def _numbers_but_strays(column: Profile) -> Choice | None:
    """Numbers but for a few texts that are no number ('?', '-'): left out, saying which texts
    and how to make them missing — unless the numbers are a few whole ones (grades 1 to 5 and
    a '?'), which are categories with or without the texts."""
    if not column.strays:
        return None
    parsed = [parse_number(value) for value in column.values if value not in column.strays]
    numbers = [number for number in parsed if number is not None and not math.isnan(number)]
    if len(numbers) <= FEW_WHOLE_NUMBERS and all(number.is_integer() for number in numbers):
        return None
    said = ", ".join(f"{text!r} on {count} row{'s' * (count != 1)}" for text, count in
                     column.strays.items())  # fmt: skip
    return Choice(
        column.name,
        "left out",
        f"numbers but for the text {said}: give those fields empty (or NA) to read them as "
        "missing numbers, filled and flagged",
    )


_GROUPED = re.compile(r"[-+]?\d{1,3}(?:[,\u00a0\u202f' ]\d{3})+(?:\.\d+)?")
"""A number written with its thousands grouped ('25,011', '1 234 567.5')."""

_DECIMAL_COMMA = re.compile(r"[-+]?\d*,\d+")
"""A number written with a decimal comma ('0,37', '-12,5'), as European spreadsheets write it."""

_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
"""A date (and time) written as ISO 8601 writes it ('2024-03-01', '2024-03-01 12:30', with its
zone: '2024-03-01T12:30:00+01:00')."""

_DURATION = re.compile(
    r"-?\d+ days?(?:,? \+?\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)?|\d{1,2}:\d{2}:\d{2}(?:\.\d+)?"
)
"""A duration as pandas or Python writes it ('0 days 00:05:00', '1 day, 2:00:00', '0:05:00')."""

_PLAIN = re.compile(r"[-+]?\d+(?:\.\d+)?")
"""A number as written where it needs no group (812 beside 4,781)."""

_WHOLE = re.compile(r"[-+]?\d+")
"""A whole number as written where it needs no decimal comma (1 beside 0,5)."""


def _written_numbers(column: Profile) -> Choice | None:
    """Text that is numbers with their thousands grouped or a decimal comma, or dates (of
    many values: a few dates may be categories): left out, saying what they are and how to
    give them (every row's value is checked: a column of names is not)."""
    if column.numbers is not None or column.present == 0:
        return None
    for pattern, plain, what, how, fewest in (
        (
            _GROUPED,
            _PLAIN,
            "numbers written with their thousands grouped",
            "write them without the separators (25011), or read the file with "
            "pandas.read_csv(path, thousands=',') and train on the DataFrame",
            0,
        ),
        (
            _DECIMAL_COMMA,
            _WHOLE,
            "numbers written with a decimal comma",
            "write them with a decimal point (0.37), or read the file with "
            "pandas.read_csv(path, decimal=',') (sep=';' where ';' separates the fields) and "
            "train on the DataFrame",
            0,
        ),
        (
            _DATE,
            None,
            "dates",
            "give what matters of them as numbers (the year, the month, the day of the week, "
            "days since a date) in columns of their own",
            FEW_CATEGORIES,
        ),
        (
            _DURATION,
            None,
            "durations",
            "give them as numbers of one unit (seconds, minutes, days) in a column of their own",
            FEW_CATEGORIES,
        ),
    ):
        values = [value.strip() for value in column.values]
        # The values that need no separator may be written without one (812 beside 4,781, 1
        # beside 0,5: such a column was "a name, an id", trial CL); at least one has it.
        written = [bool(pattern.fullmatch(value)) for value in values]
        plainly = all(
            w or (plain is not None and plain.fullmatch(v)) for w, v in zip(written, values)
        )
        if column.distinct > fewest and any(written) and plainly:
            shown = [value for value, w in zip(values, written) if w]  # those that show it
            some = ", ".join(shown[:2]) + (", ..." if column.distinct > 2 else "")
            return Choice(column.name, "left out", f"{what} ({some}), not read as such: {how}")
    return None


def _one_value_a_row(column: Profile) -> Choice | None:
    """Text of a different value on every row (of ten rows or more): a name, an id."""
    if column.numbers is None and column.missing == 0 and column.distinct == column.rows >= 10:
        return Choice(
            column.name,
            "left out",
            f"a different value on every one of the {column.rows} rows (a name, an id): "
            "nothing shared between rows to learn from",
        )
    return None


def _categories(column: Profile) -> Choice | None:
    if column.distinct <= FEW_CATEGORIES:
        return Choice(
            column.name,
            "category",
            f"{column.distinct} values ({column.some()}), one-hot" + _missing_category(column),
            lambda pipeline: pipeline.category(column.name),
        )
    if column.distinct * 2 <= column.rows:
        return Choice(
            column.name,
            "category",
            f"{column.distinct} values: one-hot over the {FEW_CATEGORIES} most frequent (the "
            "others all zeros)" + _missing_category(column),
            lambda pipeline: pipeline.category(column.name, max_values=FEW_CATEGORIES),
        )
    return None


def _identifier(column: Profile) -> Choice:
    return Choice(
        column.name,
        "left out",
        f"{column.distinct} distinct values over {column.rows} rows: nearly one a row (a name, "
        "a ticket number), too many to one-hot",
    )


RULES: list[ColumnRule] = [
    _empty,
    _constant,
    _row_number,
    _few_whole_numbers,
    _numbers,
    _mostly_missing,
    _text,
    _numbers_but_strays,
    _written_numbers,
    _one_value_a_row,
    _categories,
    _identifier,
]
"""The column kinds' rules, tried in this order; the first that claims a column decides."""


@dataclass
class Inferred:
    """The pipeline, each feature column's choice, the target's kind and why, and (where there
    is text) the network inputs the columns feed, each with its columns."""

    pipeline: Pipeline
    choices: list[Choice]
    target: ColumnName
    target_kind: TargetKind
    target_why: str
    classes: list[str]
    inputs: dict[str, list[ColumnName]] = field(default_factory=dict)

    def __str__(self) -> str:
        width = max(len(str(choice.column)) for choice in self.choices) if self.choices else 0
        width = max(width, len(str(self.target)))
        lines = [f"  {self.target!s:<{width}}  target ({self.target_kind}): {self.target_why}"]
        for choice in self.choices:
            lines.append(f"  {choice.column!s:<{width}}  {choice.kind}: {choice.why}")
        if self.inputs:
            fed = "; ".join(
                f"{name!r} ({', '.join(map(str, columns))})"
                for name, columns in self.inputs.items()
            )
            lines.append(f"  the network's inputs: {fed}")
        return "\n".join(lines)


def profile(name: ColumnName, values: Column) -> Profile:
    """One look at a column: its missing fields, distinct values and, where all are numbers,
    the numbers."""
    parsed = [parse_number(value) for value in values]
    if all(number is not None for number in parsed):
        numbers = np.array(parsed, np.float64)
        present = [label(v) for v, n in zip(values, numbers) if not math.isnan(n)]
        missing = len(parsed) - len(present)  # empty fields and the texts read as missing
        held = sorted_labels({text for text in present if text is not None})
        return Profile(name, len(parsed), missing, held, numbers)
    found = [label(value) for value in values]
    missing = sum(text is None for text in found)
    distinct = sorted_labels({text for text in found if text is not None})
    said = [words(text) for text in found if text is not None]
    counts = np.array([len(w) for w in said], np.int64)
    vocabulary = len({word for w in said for word in w})
    strays = Counter(text for text, n in zip(found, parsed) if n is None and text is not None)
    counted = sum(1 for n in parsed if n is not None and not math.isnan(n))
    if len(strays) > FEW_STRAYS or sum(strays.values()) >= counted:
        strays.clear()  # text, not numbers with a few texts among them ('NA' beside 'EU': none)
    return Profile(
        name, len(found), missing, distinct, None, counts, vocabulary, dict(strays.most_common())
    )


def infer_pipeline(
    rows: object, target: ColumnName, rules: Sequence[ColumnRule] = RULES
) -> Inferred:
    """The pipeline the rows' columns suggest for predicting `target`: every other column
    declared as the first rule that claims it says (or left out), and the target's kind."""
    names = column_names(rows)
    if target not in names:  # the rows' own spelling of a name typed in another Unicode form
        target = next((name for name in names if same_text(name, target)), target)
    if target not in names:
        separated = separated_otherwise(names)
        if separated:  # said as a scan of the file says it
            raise DataError(f"there is no column {target!r}: the header is one column, {separated}")
        raise DataError(
            f"there is no column {described(target, 60)}; the columns are: {names_shown(names)}"
            + near(target, names)
        )
    _, taken = columns(rows, names)
    choices = [_choose(profile(name, taken[name]), rules) for name in names if name != target]
    aim = profile(target, taken[target])
    kind, why = _target_kind(aim)
    if kind == "classes":
        _not_one_a_row(target, taken[target])
    inputs = _inputs(choices)
    pipeline = Pipeline()
    for choice in choices:
        if choice.declare is None:
            continue
        if not inputs:
            pipeline = choice.declare(pipeline)
            continue
        for column in choice.declare(Pipeline()).declared:  # each made to feed its input
            column.input = next(n for n, named in inputs.items() if choice.column in named)
            pipeline.column(column)
    if not choices:
        raise DataError(
            f"the rows hold no column but the target {target!r}, so there is nothing to predict "
            "it from: give rows with the columns it depends on"
        )
    if not any(choice.declare is not None for choice in choices):
        raise DataError(
            f"no column is left to predict {target!r} from: "
            + "; ".join(f"{choice.column!r} {choice.why}" for choice in choices)
        )
    pipeline.target(target, kind=kind)
    return Inferred(pipeline, choices, target, kind, why, aim.values, inputs)


def _inputs(choices: Sequence[Choice]) -> dict[str, list[ColumnName]]:
    """Where there is text, the network inputs and the columns each feeds: each text column its
    own (named after it: letters, digits, '_' and '-'), the others together, "features"; none
    where there is no text (the one input)."""
    texts = [c.column for c in choices if c.kind == "text" and c.declare is not None]
    if not texts:
        return {}
    inputs: dict[str, list[ColumnName]] = {}
    for column in texts:
        base = re.sub(r"[^A-Za-z0-9_-]+", "_", str(column)).strip("_") or "text"
        name, count = base, 0
        while name in inputs or name == FEATURES:
            count += 1
            name = f"{base}_{count}"
        inputs[name] = [column]
    others = [c.column for c in choices if c.kind != "text" and c.declare is not None]
    if others:
        inputs[FEATURES] = others
    return inputs


def _choose(column: Profile, rules: Sequence[ColumnRule]) -> Choice:
    if column.name == "":  # no column kind takes it (a traceback from train: trial CL)
        return Choice(
            column.name,
            "left out",
            "a column of no name in the header (DataFrame.to_csv writes its index so): give "
            "it a name in the header to use it",
        )
    for rule in rules:
        choice = rule(column)
        if choice is not None:
            return choice
    return _identifier(column)


def _target_kind(column: Profile) -> tuple[TargetKind, str]:
    if column.distinct == 1 and column.missing:
        value = column.values[0]
        raise DataError(
            f"the target {column.name!r} is missing on {column.missing} of the {column.rows} "
            f"rows and holds {value!r} on the other {column.present}: every training row needs "
            f"a target, and {value!r} alone is nothing to learn to predict; where a missing "
            "field stands for a value of its own (an empty flag for 'no'), write that value "
            "into those rows; otherwise drop them and give rows of other values"
        )
    if column.distinct < 2:
        held = f"the value {column.values[0]!r} on every row" if column.values else "no value"
        raise DataError(
            f"the target {column.name!r} holds {held}: there is nothing to learn to predict; "
            "check the column (or the rows: each class needs rows of its own)"
        )
    if column.strays and _numbers_but_strays(column) is not None:
        said = ", ".join(f"{text!r} on {count} row{'s' * (count != 1)}" for text, count in
                         column.strays.items())  # fmt: skip
        raise DataError(
            f"the target {column.name!r} holds numbers but for the text {said}: a target needs "
            "a number on every row, so drop the rows without one (or give their numbers)"
        )
    written = _written_numbers(column)
    if written is not None:
        raise DataError(f"the target {column.name!r} holds {written.why}")
    if column.distinct <= 2:
        return "binary", f"two values ({column.some(2)}): the chance of the second"
    if column.numbers is not None and not (column.whole and column.distinct <= MANY_VALUES):
        present = column.numbers[~np.isnan(column.numbers)]
        low, high = present.min(), present.max()
        return "number", f"numbers from {low:.15g} to {high:.15g}"
    return "classes", f"{column.distinct} values ({column.some()}): a chance for each"


ALONE = 20
"""The fewest values on one row alone that make a class target an identifier's (with more
than half its rows): a table of a few rows is no identifier (trial FP: 5 rows of colours)."""


def _not_one_a_row(name: ColumnName, values: Column) -> None:
    """Refuse, before any run, a class target of nearly one value a row (a name, a ticket
    number): more than half its rows, and at least ALONE, hold a value no other row holds.
    Such a value is learned from its row alone, and cannot be both among a split's training
    rows and checked."""
    counts = Counter(text for text in map(label, values) if text is not None)
    once = sum(1 for count in counts.values() if count == 1)
    present = sum(counts.values())
    if once * 2 > present and once >= ALONE:
        raise DataError(
            f"the target {name!r} holds {len(counts)} distinct values over {present} rows, "
            f"{once} of them on one row alone: nearly one a row (a name, an identifier), not "
            "classes to learn (a class is learned from its rows, and a value on one row cannot "
            "be both trained on and checked); choose another column as the target, or group its "
            "values into fewer classes"
        )


def _missing_category(column: Profile) -> str:
    return f"; {column.missing} missing, a category of their own" if column.missing else ""


def _skewness(values: npt.NDArray[np.float64]) -> float:
    if not np.all(np.isfinite(values)):
        return 0.0  # an infinite value: the run refuses it, naming its row
    with np.errstate(over="ignore", invalid="ignore"):  # 1e300's square: the run names it
        spread = float(values.std())  # beyond float32 (NumPy's warning came first: trial CL)
        if spread == 0 or not math.isfinite(spread):
            return 0.0
        return float(np.mean(((values - values.mean()) / spread) ** 3))

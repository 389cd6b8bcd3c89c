"""Parsing a column's values: numbers, labels, and the rule for what is missing.

A column arrives as a list of Python values (from mappings or a DataFrame of objects) or as a
NumPy array (a DataFrame's column of numbers). Each distinct value is parsed once: a column is
read in one pass in C, each value looked up in a dict of the values met so far, a value met for
the first time parsed then (`each_distinct`). Rows in error messages are counted
from 1, in the rows as handed to that call; rows read in parts from a file are named by the
file and their place in it (`rows_named`).

The rule for numbers, the same in number, image and target columns: a value is *missing* when
it is None, empty or blank text, a float NaN or the text "nan" (any case); a number column fills
it, an image or a target refuses it. A value that is infinite ("inf", "-inf", "1e309", a float
inf) or beyond float32's range (|x| > 3.4028235e38) is refused everywhere, with a DataError
naming its row and column: the network computes in float32, where it would become inf. A truth
value is 1 or 0: a bool, or the text pandas writes of one ("True", "False").
"""

from __future__ import annotations

import datetime
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.times import time_plain
from deepsharp.core.errors import DataError

__all__ = [
    "FLOAT32_MAX",
    "FLOAT32_TINY",
    "a_time",
    "Column",
    "ColumnName",
    "bools_apart",
    "column_labels",
    "distinct",
    "each_distinct",
    "MISSING_TEXTS",
    "is_missing",
    "label",
    "label_counts",
    "label_index",
    "labels",
    "listed",
    "numbers",
    "parse_number",
    "refuse_beyond_float32",
    "row_text",
    "naming_rows",
    "rows_named",
    "shown",
    "shown_value",
    "sorted_labels",
]

FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
_NAN = float("nan")
_SHOWN_VALUES = 20  # how many known values an error message lists before it says "and N more"

ColumnName = str | int
"""A column's name: text, or a whole number (a DataFrame made from an array names them 0, 1, ...)."""

Column = list[object] | npt.NDArray[Any]
"""A column as taken from the rows: Python values, or (from a DataFrame) a NumPy array."""


_NAMING: ContextVar[Callable[[int], str] | None] = ContextVar("deepsharp_row_naming", default=None)


def row_text(index: int) -> str:
    """How an error message names the row at `index` of the rows handed in (see `rows_named`)."""
    naming = _NAMING.get()
    return f"row {index + 1} (counting from 1)" if naming is None else naming(index)


def naming_rows() -> bool:
    """Whether a caller has said how messages name rows (`rows_named`)."""
    return _NAMING.get() is not None


@contextmanager
def rows_named(naming: Callable[[int], str] | None) -> Iterator[None]:
    """Within the block, messages name row `index` as `naming(index)` says: rows read in parts
    from a file are named by the file and their place in it, not by their place in the part."""
    token = _NAMING.set(naming)
    try:
        yield
    finally:
        _NAMING.reset(token)


SHOWN_LENGTH = 80
"""The most of a value a message shows (a 5,000-character field was shown whole: trial P)."""


def shown_value(value: object) -> str:
    """A value as a message shows it: as Python writes it (9, not np.int64(9)), its first
    `SHOWN_LENGTH` characters and how many it has where it has more."""
    text = repr(value.item() if isinstance(value, np.generic) else value)
    if len(text) <= SHOWN_LENGTH:
        return text
    length = len(value) if isinstance(value, str) else len(text)  # (a text's, not its quotes')
    return f"{text[: SHOWN_LENGTH - 3]}... ({length:,} characters)"


def shown(values: Sequence[object]) -> str:
    head = ", ".join(shown_value(v) for v in values[:_SHOWN_VALUES])
    if len(values) > _SHOWN_VALUES:
        head += f", and {len(values) - _SHOWN_VALUES} more"
    return head


MISSING_TEXTS = frozenset(
    ["NA", "N/A", "n/a", "#N/A", "#N/A N/A", "#NA", "<NA>", "NULL", "null", "None", "NaN", "-NaN",
     "nan", "-nan", "1.#IND", "-1.#IND", "1.#QNAN", "-1.#QNAN"]
)  # fmt: skip
"""The texts a number (or a flag) reads as missing beside empty fields: those pandas reads as
missing (`read_csv`'s default `na_values`), so a file reads as a DataFrame of it does."""


def is_missing(value: object) -> bool:
    """None, an empty (or blank) text, one of `MISSING_TEXTS`, a float NaN, or pandas' own
    markers (pd.NA, pd.NaT)."""
    if value is None:
        return True
    if isinstance(value, str):
        text = value.strip()
        return text == "" or text in MISSING_TEXTS
    if isinstance(value, (float, np.floating)):
        return bool(math.isnan(value))
    if isinstance(value, Decimal):
        return value.is_nan()
    return pandas_missing(value)


def pandas_missing(value: object) -> bool:
    """pandas' missing markers, pd.NA and pd.NaT (a nullable column's missing value), told by
    their types without importing pandas."""
    return _pandas_marker(type(value))


def _pandas_marker(kind: type) -> bool:
    return kind.__name__ in ("NAType", "NaTType") and kind.__module__.startswith("pandas")


def a_time(kind: type) -> bool:
    """A type of dates or times (but pd.NaT's, which is missing)."""
    return issubclass(kind, _TIMES) and not _pandas_marker(kind)


_TIMES = (np.datetime64, np.timedelta64, datetime.date, datetime.timedelta)
"""Dates and times: no numbers, though NumPy turns them into counts since 1970 (np.timedelta64
is even an np.integer; an array of NumPy dates made an array of objects holds datetime.date)."""


def parse_number(value: object) -> float | None:
    """A float (NaN for a missing value, possibly infinite), or None for what is no number."""
    if value is None:
        return _NAN
    if isinstance(value, _TIMES):  # pd.NaT is a datetime too
        return _NAN if pandas_missing(value) else None
    if isinstance(value, (bytes, bytearray)):  # as text, as NumPy reads a column of them
        try:
            value = bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    if isinstance(value, (Decimal, Fraction)):  # SQL's NUMERIC (pandas.read_sql), exact ratios
        try:
            return float(value)
        except OverflowError:  # a Fraction beyond float64 (a Decimal's float is infinite)
            return math.inf if value > 0 else -math.inf
        except ValueError:  # a signalling NaN
            return _NAN
    if isinstance(value, str):
        text = value.strip()
        if text == "" or text in MISSING_TEXTS:
            return _NAN
        if "_" in text or not text.isascii():  # Python's float reads "1_5" as 15, and digits
            return None  # of other scripts (full-width ones) as ASCII's: no file's number
        try:
            return float(text)
        except ValueError:
            return None
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        try:
            return float(value)
        except OverflowError:  # an int beyond float64: an infinity of its sign
            return math.inf if value > 0 else -math.inf
    return _NAN if pandas_missing(value) else None


_INTEGRAL_TEXT = re.compile(r"([+-]?\d+)\.0*")
"""Text of an integral number with a point, "3.0": what pandas writes of a column of numbers
that has a gap (a float column), its integer text "3" as a label."""


def label(value: object) -> str | None:
    """A value's text as a category or a target label; None when it is missing.

    Text is stripped; an integral number gives its integer text (3, 3.0, "3" and "3.0" are one
    label), so a pandas column of numbers, a CSV column of text and the CSV pandas writes of
    that column (floats, where it has a gap) give the same labels; a float32 (float16) value
    gives its shortest text at its own precision (NumPy's: `np.float32(0.1)` is "0.1", not its
    widening's "0.10000000149011612"; a widened one is looked for so too, `label_index`).
    Bytes are read as UTF-8, and a Decimal as its text; text is composed (Unicode NFC).
    """
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        given = bytes(value)
        try:
            value = given.decode("utf-8")
        except UnicodeDecodeError:
            return repr(given)
    if isinstance(value, Decimal):  # its digits, as a CSV's text gives them ("0.50")
        if value.is_nan():  # missing, as a float NaN is
            return None
        value = str(value)
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii():  # composed, as a text column's are: "café" typed as "e" and a
            text = unicodedata.normalize("NFC", text)  # combining accent is "café" (trial P)
        if "." in text:
            integral = _INTEGRAL_TEXT.fullmatch(text)
            if integral:
                return str(int(integral.group(1)))
        return text if text else None
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            return None
        if number.is_integer():
            return str(int(number))
        if isinstance(value, np.floating) and value.dtype.itemsize < 8:
            return str(value)  # its shortest text at its own precision
        return repr(number)
    return None if pandas_missing(value) else str(value)


def sorted_labels(labels: Iterable[str]) -> list[str]:
    """Numerically when every label parses as a number (a NaN's text, as Python's csv module
    writes a missing float, after the numbers: it is no number to sort by), otherwise as text."""
    items = list(labels)
    keyed: list[tuple[bool, float, str]] = []
    for item in items:
        try:
            number = float(item)
        except ValueError:
            return sorted(items)
        keyed.append((number != number, 0.0 if number != number else number, item))
    return [item for *_, item in sorted(keyed)]


def distinct(column: Sequence[object]) -> dict[Any, Any] | None:
    """The column's distinct values as the keys of a dict (None when a value is not hashable)."""
    try:
        return dict.fromkeys(column)
    except TypeError:
        return None


class _TooMany(Exception):
    """More distinct values than a caller would parse one by one."""


class _Made(dict):  # type: ignore[type-arg]
    """Each value's result, made when the value is first looked up (a hit stays in C)."""

    def __init__(
        self, make: Callable[[Any], Any], most: int | None, kept: dict[Any, Any] | None = None
    ) -> None:
        super().__init__()
        self.make = make
        self.most = most
        self.kept = kept

    def __missing__(self, key: Any) -> Any:
        if self.most is not None and len(self) >= self.most:
            raise _TooMany
        made = self[key] = self.make(key)
        if self.kept is not None:
            self.kept[key] = made
        return made


def bools_apart(values: list[Any], keys: Container[Any]) -> list[Any]:
    """The values with each bool as its label's text ("True", "False") where a bool would share
    a dict key with a number (True == 1 == 1.0, False == 0): a label column's True and 1 are two
    values, and as one key each was read as the other, whichever came first. `keys`: the
    column's distinct values as dict keys; a bool is looked for only where 0 or 1 is one."""
    if (0 in keys or 1 in keys) and any(value.__class__ is bool for value in values):
        return ["True" if v is True else "False" if v is False else v for v in values]
    return values


def each_distinct(
    column: Sequence[object],
    make: Callable[[Any], Any],
    dtype: npt.DTypeLike,
    most: int | None = None,
    made: dict[Any, Any] | None = None,
) -> npt.NDArray[Any] | None:
    """``make(value)`` for every value of the column, as an array, in one pass.

    `make` is called once for each distinct value (values equal as dict keys, like 1, 1.0 and
    True, are one value: the first met is made), in the order met; what it raises propagates.
    None when a value is not hashable, or when the column holds more than `most` distinct values.
    `made`: a dict the distinct values and what they made are kept in (to look at after).
    """
    made = _Made(make, most, made)
    try:
        return np.fromiter(map(made.__getitem__, column), dtype=dtype, count=len(column))
    except _TooMany:
        return None
    except TypeError:
        if distinct(column) is None:
            return None
        raise


def _first_row(column: Sequence[object], bad: object) -> int:
    for i, value in enumerate(column):
        if value is bad or value == bad:
            return i
    return 0  # pragma: no cover - the value came from this column


def _first_unhashable(column: Sequence[object]) -> int:
    for i, value in enumerate(column):
        try:
            hash(value)
        except TypeError:
            return i
    return 0  # pragma: no cover


MISSING_ADVICE = "scale the column, or leave the field empty to mark it missing"


def refuse_beyond_float32(
    values: npt.NDArray[np.float64],
    column: Column,
    name: ColumnName,
    what: str = "",
    advice: str = MISSING_ADVICE,
) -> None:
    """A DataError naming the first row whose value is infinite or beyond float32's range, and
    what to do (`advice`: a column that takes no missing value says other than a number's)."""
    with np.errstate(invalid="ignore"):
        beyond = np.abs(values) > FLOAT32_MAX  # NaN compares False; inf is beyond
    if beyond.any():
        place = np.argwhere(beyond)[0]
        i = int(place[0])
        found = column[i] if values.ndim == 1 else values[tuple(place)]
        if isinstance(found, np.generic):
            found = found.item()  # shown as 1e+300, not np.float64(1e+300)
        subject = (
            f"value {int(place[1])} (counting from 0), {shown_value(found)},"
            if values.ndim > 1
            else shown_value(found)
        )
        raise DataError(
            f"{row_text(i)}, column {name!r}: {subject} is "
            f"{_too_big(values[tuple(place)], found)}{what}; deepsharp computes in float32 "
            f"(largest {FLOAT32_MAX:.8g}): {advice}"
        )


def _too_big(value: float, given: object) -> str:
    """What a value beyond float32 is: a whole number beyond float64 (read as an infinity of
    its sign) is no infinity (trial P)."""
    whole = (isinstance(given, (int, np.integer)) and not isinstance(given, bool)) or (
        isinstance(given, str) and _DECIMAL_TEXT.fullmatch(given.strip()) is not None
    )  # a number written past float64 ("1e400", 400 digits) is no infinity
    return "infinite" if math.isinf(value) and not whole else "beyond float32's range"


def numbers(
    column: Column, name: ColumnName, advice: str = MISSING_ADVICE
) -> npt.NDArray[np.float64]:
    """Parse a column to float64; NaN marks a missing value (see the module's rule).

    Text that is no number, an infinite value or one beyond float32's range, a date or a time
    is a DataError naming the row and the column.
    """
    if isinstance(column, np.ndarray):
        refuse_times(column, name)
        values = column.astype(np.float64)
    else:
        values = _parsed(column, name)
    refuse_beyond_float32(values, column, name, advice=advice)
    return values


def refuse_times(values: npt.NDArray[Any], name: ColumnName, first: int = 0) -> None:
    """Refuse NumPy dates and times among `values` (an array, of them or of objects, a row a
    place of its first axis, row `first` first): NumPy turns them into numbers, as counts of
    their unit since 1970, and NaT into -2**63."""
    if values.dtype.kind in "Mm":
        found: Any = values.reshape(-1)[0] if values.size else None
        i = 0
    elif values.dtype.kind == "O" and any(a_time(t) for t in set(map(type, values.flat))):
        at = next(k for k, v in enumerate(values.reshape(-1)) if a_time(type(v)))
        found = values.reshape(-1)[at]
        i = int(np.unravel_index(at, values.shape)[0]) if values.ndim else 0
    else:
        return
    if found is None:
        return
    raise DataError(
        f"{row_text(first + i)}, column {name!r}: expected a number, found {found!r}, a date "
        "or time: give numbers (a count of days, say, or the date's parts in columns of their "
        "own)"
    )


_LEAD = 1024  # the rows that tell whether a column's values repeat


class _NoNumber(Exception):
    def __init__(self, value: object) -> None:
        self.value = value


_TRUTHS = {"True": 1.0, "False": 0.0}
"""A truth value's text as pandas writes a bool (`to_csv`), a number as the bool is: 1 or 0 (a
Parquet file's bool column was taken, the same rows as CSV refused: trial D)."""


def _number(value: object) -> float:
    number = parse_number(value)
    if number is None:
        number = _TRUTHS.get(value) if isinstance(value, str) else None
        if number is None:
            raise _NoNumber(value)
    return number


def _parsed(column: list[object], name: ColumnName) -> npt.NDArray[np.float64]:
    count = len(column)
    # Each distinct value parsed once, while the column is read (the first rows tell whether
    # the values repeat); where over half are distinct, NumPy parses them all in one go.
    lead = distinct(column[:_LEAD])
    if lead is None:
        i = _first_unhashable(column)
        raise DataError(f"{row_text(i)}, column {name!r}: expected a number, found {column[i]!r}")
    if len(lead) * 2 <= min(count, _LEAD):
        try:
            parsed = each_distinct(column, _number, np.float64, most=count // 2)
        except _NoNumber as refused:
            i = _first_row(column, refused.value)
            raise DataError(
                f"{row_text(i)}, column {name!r}: expected a number, found "
                f"{shown_value(refused.value)}"
            ) from None
        if parsed is not None:
            return parsed
    found = distinct(column)
    if found is None:
        i = _first_unhashable(column)
        raise DataError(f"{row_text(i)}, column {name!r}: expected a number, found {column[i]!r}")
    # Mostly distinct values: let NumPy parse them in one go (None becomes NaN), but dates and
    # times, which it would take as counts since 1970.
    if any(a_time(kind) for kind in set(map(type, found))):
        refuse_times(np.array([*column, None], dtype=object)[:-1], name)
    texts = "".join(value for value in found if isinstance(value, str))  # np.str_ too
    try:
        if "_" in texts or not texts.isascii():  # NumPy reads them as float() does: one by one
            raise ValueError("a text parse_number refuses")
        if any(isinstance(value, (bytes, bytearray)) for value in found):  # as text, one by one
            raise ValueError("bytes, whose text parse_number reads")
        values = np.array(column, dtype=np.float64)
        if values.shape == (count,):
            return values
    except (ValueError, TypeError, OverflowError):
        pass
    parsed = np.empty(count, dtype=np.float64)
    for i, value in enumerate(column):
        try:
            parsed[i] = _number(value)
        except _NoNumber:
            raise DataError(
                f"{row_text(i)}, column {name!r}: expected a number, found {shown_value(value)}"
            ) from None
    return parsed


def label_lookup(learned: Sequence[str]) -> dict[str | None, int]:
    """Each learned label's index, under the label it is now read as too: a file written before
    "3.0" was read as "3" holds "3.0", which rows now give as "3"; one that learned a float32
    column's values widened ("0.10000000149011612") is found by their own text ("0.1") too; and
    under its plain form (`plain_label`), where no other learned label has it: "02" as "2",
    "true" as "True"."""
    lookup: dict[str | None, int] = {v: i for i, v in enumerate(learned)}
    for value, index in list(lookup.items()):
        lookup.setdefault(label(value), index)
        number = parse_number(value) if isinstance(value, str) and "." in value else None
        for text in _narrow_texts(number):
            lookup.setdefault(text, index)
    for text, index in plain_labels(learned).items():
        lookup.setdefault(text, index)
    return lookup


_WHOLE_TEXT = re.compile(r"[+-]?[0-9]+")


_DECIMAL_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def plain_label(text: str | None) -> str | None:
    """A label's plain form, where it has another: a whole number's digits without leading
    zeros ("02" -> "2": pandas reads a CSV's "02" as 2), another number's shortest text as a
    float64 ("0.50" -> "0.5", "1e3" -> "1000": pandas reads a CSV's 0.50 as 0.5), a truth
    value as Python writes it ("true" -> "True": pandas reads a CSV's true as True); None
    otherwise."""
    if text is None:
        return None
    if _WHOLE_TEXT.fullmatch(text):  # by text, not int(): a label may have 5,000 digits
        digits = text.lstrip("+-").lstrip("0") or "0"
        plain = f"-{digits}" if text[0] == "-" and digits != "0" else digits
        return plain if plain != text else None
    if _DECIMAL_TEXT.fullmatch(text):
        # Only a number float64 holds as written: of 15 significant digits at most (two texts
        # of another number each never share a plain form: "...678.91" is not "...678.92"),
        # neither beyond its range nor below it ("1e-400" is not 0).
        digits = text.lstrip("+-").split("e")[0].split("E")[0].replace(".", "")
        number = float(text)
        if len(digits.strip("0")) > 15 or not math.isfinite(number):
            return None
        if (number == 0 and digits.strip("0")) or 0 < abs(number) < 2.2250738585072014e-308:
            return None
        try:
            exact = number.is_integer() and int(number) == int(Decimal(text))
        except ArithmeticError:  # an exponent Decimal will not take ("0e99999999999999999999")
            return None
        if number.is_integer() and not exact:  # "1e23" is no float64 as written ("1e16" is)
            return None
        plain = str(int(number)) if number.is_integer() else repr(number)
        return plain if plain != text else None
    lowered = text.lower()
    if lowered in ("true", "false") and text not in ("True", "False"):
        return lowered.capitalize()
    return time_plain(text)  # a date, a time or a duration as one reading or another writes it


def plain_labels(learned: Sequence[str]) -> dict[str, int]:
    """The plain forms of the learned labels that name one of them alone: plain form -> its
    index (two labels of one plain form, "02" and "002", give it to neither)."""
    found: dict[str, list[int]] = {}
    for index, value in enumerate(learned):
        plain = plain_label(value)
        if plain is not None:
            found.setdefault(plain, []).append(index)
    return {plain: held[0] for plain, held in found.items() if len(held) == 1}


def label_index(lookup: Mapping[str | None, int], value: object) -> int:
    """The index of a value's label in `lookup`, -1 where it has none; a number that is a
    float32 value widened to float64 (a float32 DataFrame's rows as records: 0.1 as
    0.10000000149011612), or the text of one (that frame written to a CSV as float64), and is
    no label as it stands is looked for by its text at float32's precision ("0.1"), as the
    column it came from was learned (a float64 value within float32's rounding of a learned one
    is so read as it)."""
    text = label(value)
    index = lookup.get(text, -1)
    if index < 0 and (plain := plain_label(text)) is not None:  # "02" where "2" was learned,
        index = lookup.get(plain, -1)  # "true" where True was
    if index < 0 and not isinstance(value, bool):
        if isinstance(value, (float, np.floating)):
            number: float | None = float(value)
        else:  # the text of one ("0.10000000149011612": a float32 column written as float64)
            number = parse_number(text) if isinstance(text, str) and "." in text else None
        for narrow in _narrow_texts(number):
            index = lookup.get(narrow, -1)
            if index >= 0:
                break
    return index


def _narrow_texts(number: float | None) -> list[str]:
    """The text of a number at float32's precision, where it is exactly a float32 value whose
    own text that is not (a float32 widened: 0.10000000149011612, whose text is "0.1"; no
    whole number, whose text is its own at any width). Not float16's: a float64 that is exactly
    a float16 value (1.0009765625) is as often a number of its own, and 1.001's label found by
    it would serve one number as another (trial AO); a float16 frame's rows as records are
    looked for as the numbers they are."""
    if number is None or not math.isfinite(number) or number.is_integer():
        return []
    if abs(number) > FLOAT32_MAX or float(np.float32(number)) != number:
        return []
    text = str(np.float32(number))
    return [] if text == repr(number) else [text]


def widened_texts(text: str) -> list[str]:
    """The text of a float32 value widened to float64 ("0.10000000149011612"), where `text` is
    such a value's own text ("0.1") and the widening's differs: the label a float32 column's
    value, given as a Python float, is found by (`label_index`)."""
    number = parse_number(text) if _DECIMAL_TEXT.fullmatch(text) else None  # "1e-05" too
    if number is None or not math.isfinite(number) or abs(number) > FLOAT32_MAX:
        return []
    wide = float(np.float32(number))
    return [repr(wide)] if str(np.float32(wide)) == text and repr(wide) != text else []


def listed(column: Column) -> list[Any]:
    """A column's values as a list, as labels read them: a float32 (float16) array's as NumPy's
    scalars of it (each labelled at its own precision), any other's as Python's values."""
    if not isinstance(column, np.ndarray):
        return column
    if column.dtype.kind == "f" and column.dtype.itemsize < 8:
        return list(column)
    values: list[Any] = column.tolist()
    return values


def labels(
    column: Column, name: ColumnName, lookup: Mapping[str | None, int]
) -> npt.NDArray[np.intp]:
    """Map a column to indices through ``lookup`` (label -> index); -1 for an unknown label."""
    values = listed(column)
    seen: dict[Any, Any] = {}
    index = each_distinct(values, lambda key: label_index(lookup, key), np.intp, made=seen)
    apart = values if index is None else bools_apart(values, seen)
    if apart is not values:
        index = each_distinct(apart, lambda key: label_index(lookup, key), np.intp)
    if index is None:
        i = _first_unhashable(values)
        raise DataError(
            f"{row_text(i)}, column {name!r}: expected text or a number, found {values[i]!r}"
        )
    return index


def column_labels(column: Column, name: ColumnName) -> tuple[list[str | None], list[int]]:
    """The distinct labels of a column in order of first appearance, with the row of each."""
    values = _hashable(column, name)
    keys_of = {key: label(key) for key in dict.fromkeys(values)}
    pending = set(keys_of.values())
    by_label: dict[str | None, int] = {}
    for i, value in enumerate(values):  # stops once every label's first row is found
        text = keys_of[value]
        if text in pending:
            by_label[text] = i
            pending.discard(text)
            if not pending:
                break
    return list(by_label), list(by_label.values())


def label_counts(column: Column, name: ColumnName) -> dict[str | None, int]:
    """How many rows hold each label (None: missing)."""
    counts: dict[str | None, int] = {}
    for key, count in Counter(_hashable(column, name)).items():
        text = label(key)
        counts[text] = counts.get(text, 0) + count
    return counts


def _hashable(column: Column, name: ColumnName) -> list[object]:
    """The column's values as labels are keyed: hashable (else a DataError naming the row), a
    bool apart from the number it equals (`bools_apart`)."""
    values: list[object] = listed(column)
    keys = distinct(values)
    if keys is None:
        i = _first_unhashable(values)
        raise DataError(
            f"{row_text(i)}, column {name!r}: expected text or a number, found {values[i]!r}"
        )
    return bools_apart(values, keys)

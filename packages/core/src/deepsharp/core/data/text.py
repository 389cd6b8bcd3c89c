"""The text column kind: each row's field holds a text, cut into tokens (words or characters) and
given as int64 ids of a fixed length, for an `Embedding`.

The vocabulary is learned from the training rows, in parts when they come in parts (a scanned
file): the most frequent tokens first, each tie in the tokens' text order, id 2 the most
frequent; id 0 is padding and id 1 any token the vocabulary lacks. It is recorded in the
recipe, so serving gives the ids training gave.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import re
import sys
import unicodedata
import warnings
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from deepsharp.core.data.columns import ColumnKind, Learner, Recipe
from deepsharp.core.data.summaries import TokenCounts
from deepsharp.core.data.values import (
    Column,
    ColumnName,
    label,
    pandas_missing,
    row_text,
)
from deepsharp.core.errors import DataError, DeepSharpWarning, outside

__all__ = [
    "PADDING",
    "TEXT_TOKENS",
    "UNKNOWN",
    "Padding",
    "Text",
    "TextLearner",
    "TokenKind",
    "characters",
    "words",
]

TokenKind = Literal["words", "characters"]
Padding = Literal["end", "start"]

PADDING = 0
"""The id of a place no token fills."""
UNKNOWN = 1
"""The id of a token the vocabulary lacks."""
TEXT_TOKENS = 1 << 17
"""Distinct tokens a text column counts exactly while it learns (about 10 MiB of table), or four
times its vocabulary if that is more; past that its counts are Misra-Gries' (`TokenCounts`)."""

_SHOWN = 60  # how much of a value an error message shows


@functools.cache
def _word() -> re.Pattern[str]:
    """A word: letters, digits and '_' in any script, and the marks that belong to them (every
    character of Unicode's categories Mn, Mc and Me: accents written apart from their letter,
    and the vowel signs and viramas inside Devanagari's, Tamil's and other scripts' words, which
    Python's \\w leaves out). Made once, on the first text read (0.2 s: every code point's
    category)."""
    marks: list[str] = []
    start = None
    for point in range(sys.maxunicode + 2):
        mark = point <= sys.maxunicode and unicodedata.category(chr(point))[0] == "M"
        if mark and start is None:
            start = point
        elif not mark and start is not None:
            first, last = re.escape(chr(start)), re.escape(chr(point - 1))
            marks.append(first if start == point - 1 else f"{first}-{last}")
            start = None
    return re.compile(rf"(?:\w|[{''.join(marks)}])+")


def words(text: str) -> list[str]:
    """A text's words: runs of letters, digits and '_' (in any script, with their combining
    marks), lower case; the rest (spaces, punctuation, symbols and emoji, invisible characters
    such as a soft hyphen) separates them and is dropped. The text is composed (Unicode NFC)
    before and after lowering, so that an accent typed apart from its letter ('café' as 'cafe'
    and U+0301) is the same word as the one letter ('café'), and a capital lowers to the word
    its small letter makes."""
    # Each word lowered alone (the text whole would take a sigma before punctuation for a
    # word's last: a review), composed again where lowering took a letter apart (a capital of
    # no composed form, J̌, lowers to ǰ apart: trial TX4).
    found = (word.lower() for word in _word().findall(unicodedata.normalize("NFC", text)))
    return [
        w if unicodedata.is_normalized("NFC", w) else unicodedata.normalize("NFC", w) for w in found
    ]


def characters(text: str) -> list[str]:
    """A text's characters, each a token, case kept."""
    return list(text)


_TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"words": words, "characters": characters}


def _whole(name: ColumnName, what: str, value: object, least: int, most: int) -> int:
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or not least <= value <= most
    ):
        raise ValueError(
            f"column {name!r}: {what} must be a whole number of {least} to {most:,}, not {value!r}"
        )
    return int(value)


class Text(ColumnKind):
    """A column of texts as int64 ids of a fixed `length`, one a token.

    `tokens="words"` cuts a text into its words (`words`: runs of letters, digits and '_' with
    their combining marks, of the text composed, then lower case; spaces and punctuation
    separate them), `"characters"` into its characters (case kept). The
    vocabulary holds the `vocabulary - 2` tokens the training rows hold most often (ties in text
    order), ids 2 onwards; 0 is padding, 1 a token it lacks, so ids lie in 0 .. vocabulary - 1
    and `Embedding(vocabulary, dim)` takes them. A text of more tokens keeps its first `length`;
    one of fewer is padded with 0 after its ids (`padding="end"`) or before them
    (`padding="start"`: the last place holds the last token, as a recurrent layer that reads
    to the end wants). An empty or missing field is all padding; a value that is not text (a
    number, a list) is a DataError naming its row and column.
    """

    kind = "text"
    dtype = "int64"

    def __init__(
        self,
        name: object,
        tokens: TokenKind = "words",
        length: int = 64,
        vocabulary: int = 20000,
        padding: Padding = "end",
        input: str | None = None,
    ) -> None:
        super().__init__(name, input)
        if tokens not in _TOKENIZERS:
            raise ValueError(
                f"column {self.name!r}: tokens is 'words' or 'characters', not {tokens!r}"
            )
        if padding not in ("end", "start"):
            raise ValueError(f"column {self.name!r}: padding is 'end' or 'start', not {padding!r}")
        self.tokens_of: TokenKind = tokens
        self.length = _whole(self.name, "length", length, 1, 1 << 20)
        self.vocabulary = _whole(self.name, "vocabulary", vocabulary, 3, 1 << 24)
        self.padding: Padding = padding
        self.tokens: list[str] | None = None  # the learned vocabulary, id 2 onwards
        self.lookup: dict[str, int] = {}

    def width(self) -> int:
        return self.length

    def names(self) -> list[str]:
        return [f"{self.name}[{i}]" for i in range(self.length)]

    def split(self, text: str) -> list[str]:
        """A text's tokens, as this column cuts it."""
        return _TOKENIZERS[self.tokens_of](text)

    def texts(self, column: Column) -> list[str]:
        """The column's values as texts (an empty or missing field as ""), checked."""
        values = column.tolist() if isinstance(column, np.ndarray) else column
        texts: list[str] = []
        for i, value in enumerate(values):
            if isinstance(value, str):  # ("NA" is words: a pipeline saved, and the words
                texts.append(value)  # it learned, keep their meaning; pandas reads it as NaN)
            elif (
                value is None
                or (isinstance(value, (float, np.floating)) and math.isnan(value))
                or pandas_missing(value)
            ):  # missing, as in every other kind of column
                texts.append("")
            elif isinstance(value, (*_NUMBERS, numbers.Number, bytes, bytearray)):
                # A number where pandas read the column (or a field) as numbers, a message
                # "42": its text, as a CSV's field gives it (was refused: trial P); a Decimal
                # or a Fraction its text, bytes as UTF-8, as a category reads them (trial TX4).
                texts.append(label(value) or "")
            else:
                self._refuse(i, value)
        return texts

    def _refuse(self, row: int, value: object) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= _SHOWN else shown[: _SHOWN - 3] + "..."
        numbers = isinstance(value, _NUMBERS)
        raise DataError(
            f"{row_text(row)}, column {self.name!r}: expected text, found {shown} "
            f"({type(value).__name__})"
            + (
                "; the training rows of a text column held numbers alone: numbers go to "
                ".number(), labels to .category() (a number among texts is read as its text)"
                if numbers
                else "; a text column takes strings (and numbers, read as their text)"
            )
        )

    def learner(self) -> Learner:
        return TextLearner(self)

    def set_learned(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.lookup = {token: index for index, token in enumerate(tokens, start=2)}

    def write(self, values: Column, out: npt.NDArray[Any], at: int) -> None:
        assert self.tokens is not None
        if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
            if values.dtype.kind != "f" or not np.isnan(values).all():  # (all missing: padding)
                self._warn_of_numbers(values.dtype)
        find, split, length = self.lookup.get, self.split, self.length
        start = self.padding == "start"
        for row, text in enumerate(self.texts(values)):
            ids = [find(token, UNKNOWN) for token in split(text)[:length]]
            if ids:
                place = at + length - len(ids) if start else at
                out[row, place : place + len(ids)] = ids

    def _warn_of_numbers(self, dtype: np.dtype[Any]) -> None:
        """Warn of a column of numbers alone (pandas read every field as a number): each is
        read as its shortest text, which is not always the field the tokens were learned from
        (trial T: '42.0' is the tokens '42' and '0', the number 42.0 is '42'; '007' is 7)."""
        warnings.warn(
            f"text column {self.name!r} came as numbers ({dtype}), not as text: each is read as "
            "its shortest text (42.0 as '42', a field '007' read as 7 as '7'), which is not the "
            "field as the file wrote it where it was written otherwise, and gives other tokens "
            "than those learned from it: read the column as text (pandas: "
            f"dtype={{{self.name!r}: str}})",
            DeepSharpWarning,
            stacklevel=outside(),
        )

    def forget(self) -> None:
        self.tokens = None
        self.lookup = {}

    def settings(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens_of,
            "length": self.length,
            "vocabulary": self.vocabulary,
            "padding": self.padding,
        }

    def statistics(self) -> dict[str, Any]:
        return {"vocabulary": list(self.tokens or [])}

    @classmethod
    def from_settings(cls, name: ColumnName, recipe: Recipe) -> Text:
        return cls(
            name,
            tokens=recipe.get("tokens", str),
            length=recipe.get("length", int),
            vocabulary=recipe.get("vocabulary", int),
            padding=recipe.get("padding", str),
        )

    def read_statistics(self, recipe: Recipe) -> None:
        tokens = recipe.texts("vocabulary")
        if len(tokens) > self.vocabulary - 2:
            raise recipe.fail(
                "vocabulary",
                f"{len(tokens)} tokens, over the column's vocabulary of {self.vocabulary} ids "
                "(padding and unknown among them)",
            )
        if "" in tokens:
            raise recipe.fail("vocabulary", "an empty token")
        self.set_learned(tokens)

    def __repr__(self) -> str:
        return f"text({self.name!r}, {self.tokens_of}, length={self.length})"


_NUMBERS = (bool, int, float, np.bool_, np.integer, np.floating)


class TextLearner(Learner):
    """Every training row checked and cut into tokens; the tokens counted in bounded memory."""

    def __init__(self, column: Text) -> None:
        self.column = column
        self.counts = TokenCounts(max(TEXT_TOKENS, 4 * column.vocabulary))
        self.worded = False  # a training value was text
        self.number: tuple[int, object] | None = None  # the first that was a number, its row
        self.rows = 0

    def add(self, values: Column) -> None:
        texts = self.column.texts(values)
        if not self.worded:
            listed = values.tolist() if isinstance(values, np.ndarray) else values
            self.worded = any(isinstance(value, str) for value in listed)
            if not self.worded and self.number is None:
                for row, value in enumerate(listed):
                    if isinstance(value, _NUMBERS) and not (
                        isinstance(value, (float, np.floating)) and math.isnan(value)
                    ):
                        self.number = (self.rows + row, value)
                        break
        self.rows += len(texts)
        self.counts.add(itertools.chain.from_iterable(map(self.column.split, texts)))

    def finish(self) -> None:
        if not self.worded and self.number is not None:  # numbers alone: meant for .number()
            self.column._refuse(*self.number)
        self.column.set_learned(self.counts.most_frequent(self.column.vocabulary - 2))

"""Sources of rows: reading a CSV file, and taking named columns out of rows.

Rows are a sequence of mappings (what :func:`read_csv` returns, or dicts written by hand; any
iterable of mappings is read once into a list), a pandas ``DataFrame`` (pandas is optional and
imported only when one is handed in), or a :class:`Part`: rows read at once from a scanned file,
held as columns. A column's name is text or a whole number (a DataFrame
made from an array names its columns 0, 1, ...), and error messages show it as what it is.
"""

from __future__ import annotations

import csv
import difflib
import itertools
import operator
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.paths import Opened, csv_rows, not_utf8, open_rows
from deepsharp.core.data.values import (
    Column,
    ColumnName,
    naming_rows,
    row_text,
    rows_named,
    shown_value,
)
from deepsharp.core.errors import DataError

__all__ = [
    "Part",
    "blank",
    "column_names",
    "csv_refusal",
    "columns",
    "is_frame",
    "named_in_messages",
    "read_csv",
    "empty_message",
    "read_csv_header",
    "row_count",
    "row_naming",
    "rows_of",
    "same_text",
    "separated_otherwise",
    "take",
    "wrong_width",
]


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, str | None]]:
    """Read a CSV file with a header row into a list of dicts from column name to the field's text.

    An empty field is ``None``. Blank lines are skipped, and so are lines of only spaces and
    tabs where the header names more than one column. A row with more or fewer fields than the
    header is a :class:`DataError` naming the file and the line. A pipe (``/dev/stdin``, a named
    pipe) is read as it comes; a line longer than ``MAX_LINE`` characters is a DataError.
    """
    opened = open_rows(path, "CSV")
    name = os.fspath(path)
    with opened.handle as handle:
        reader = csv_rows(handle, name)
        out: list[dict[str, str | None]] = []
        try:
            header = read_csv_header(name, reader, empty_message(name, opened))
            start = last = reader.line_num + 1
            record: list[str] = []
            for record in reader:
                skipped = blank(record, header)
                if not skipped and len(record) != len(header):
                    raise wrong_width(name, start, reader.line_num, record, header)
                last, start = start, reader.line_num + 1
                if skipped:
                    continue
                out.append(
                    {k: (v if v != "" else None) for k, v in zip(header, record, strict=False)}
                )
            if record and quote_open_to_the_end(name, record):
                raise open_to_the_end(name, last, reader.line_num, len(record))
        except csv.Error as exc:
            raise csv_refusal(name, reader.line_num, exc) from None
        except UnicodeDecodeError:
            raise not_utf8(name) from None
    return out


def csv_refusal(name: str, line: int, error: csv.Error) -> DataError:
    """The error for what Python's csv refuses, read up to `line`: a field past the longest a
    field may hold said as such (trial ST5: csv's own words, 'field larger than field limit',
    at the line it gave up on)."""
    if "field larger than field limit" in str(error):
        return DataError(
            f"{name}, line {line}: a field runs past {csv.field_size_limit():,} characters, the "
            'most a field may hold here; where no field is meant to be that long, a quote (") '
            "opened and never closed takes the lines after it as its field: close it where the "
            "field ends (a quote inside a field is written twice)"
        )
    return DataError(f"{name}, line {line}: not valid CSV: {error}")


def wrong_width(
    name: str, start: int, end: int, record: list[str], header: Sequence[str]
) -> DataError:
    """The error for a row (on lines `start` to `end`) of other than the header's count of
    fields. A row over several lines names the line it begins on: most often a quote opened
    there and never closed, whose field swallowed the lines after it. A header of one field
    holding ';' or a tab is a file separated by it (a European spreadsheet's export, its
    decimal commas splitting each row's numbers), said so."""
    said = f"this row has {len(record)} fields but the header has {len(header)}"
    spanning = [i for i, text in enumerate(record) if "\n" in text]
    if end <= start or not spanning:
        separated = separated_otherwise(header)
        if separated:
            return DataError(f"{name}, line {end}: {said}, {separated}")
        return DataError(f"{name}, line {end}: {said}; every row must have one field per column")
    return DataError(
        f'{name}, line {start}: {said}: its field {spanning[0] + 1} opens a quote (") that '
        f"is not closed on the line, so the row runs on to line {end}; close the quote where "
        'the field ends (a quote inside a field is written twice: "")'
    )


def separated_otherwise(header: Sequence[object]) -> str:
    """Where a header is one field holding ';' or a tab, what to say of it: the file is
    separated by that (a European spreadsheet's export, its decimal commas splitting each row's
    numbers), not by commas, and what to do; "" for any other header."""
    for mark, what in ((";", "';'"), ("\t", "tabs")):
        if len(header) == 1 and mark in str(header[0]):
            return (
                f"which holds {what}: the file is separated by {what}, and this reads CSV, "
                "separated by commas; write it with commas (and decimal points), or in Python "
                f"read it with pandas.read_csv(path, sep={mark!r}, decimal=',') and give the "
                "DataFrame"
            )
    return ""


def blank(record: Sequence[str], header: Sequence[object]) -> bool:
    """Whether a CSV record is no row: a blank line, or (where the header names more than one
    column, so that it cannot be a row of one field) a line of only spaces and tabs, as a
    trailing line an editor left often is."""
    return not record or (len(record) == 1 < len(header) and not record[0].strip(" \t\r\n\f\v"))


def quote_open_to_the_end(path: str, record: list[str]) -> bool:
    """Whether the last record of a file ends in a field whose quote was never closed: it runs
    over lines (csv took the file's rest as that field) and the file does not end with the
    quote that would close it. A field of the last column swallows the rows after it without
    changing the row's width, so no other check sees it. (A regular file only: a stream's end
    cannot be read again.)"""
    if "\n" not in record[-1] or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as raw:
            raw.seek(max(0, os.fstat(raw.fileno()).st_size - 64))
            tail = raw.read()
    except OSError:
        return False
    return not tail.rstrip(b"\r\n").endswith(b'"')


def open_to_the_end(name: str, start: int, end: int, field: int) -> DataError:
    """The error for a last row whose field `field` opened a quote never closed."""
    return DataError(
        f'{name}, line {start}: field {field} of this row opens a quote (") that is never '
        f"closed, so the row runs on to the end of the file (line {end}), taking every line "
        "after it as that field; close the quote where the field ends (a quote inside a field "
        'is written twice: "")'
    )


def read_csv_header(name: str, reader: Iterator[list[str]], empty: str | None = None) -> list[str]:
    """The header of a CSV file: its first row that is not blank, naming distinct columns
    (a DataError saying `empty`, or that the file is empty, where there is none)."""
    for record in reader:
        line = getattr(reader, "line_num", 0)
        if record in (["sep=", ""], ["sep=,"]) and line == 1:
            continue  # Excel's line naming the file's separator, the comma (trial CL4)
        if len(record) == 1 and re.fullmatch(r"sep=.", record[0]) and line == 1:
            mark = record[0][4:]
            raise DataError(
                f"{name}, line 1: Excel's line 'sep={mark}' says the file is separated by "
                f"{mark!r}, and this reads CSV, separated by commas; save it with commas (and "
                f"decimal points), or in Python read it with pandas.read_csv(path, sep={mark!r}, "
                "skiprows=1) and give the DataFrame"
            )
        if record:
            return _header(name, line, record)
    raise DataError(empty or f"{name}: the file is empty; expected a header row naming the columns")


def empty_message(name: str, opened: Opened) -> str | None:
    """What to say of a stream that gave nothing (None for a file: it is empty)."""
    if opened.regular:
        return None
    if os.path.realpath(name) == os.path.realpath(os.devnull):  # nothing is ever in it
        return f"{name} holds nothing, ever; expected rows under a header naming the columns"
    return (
        f"{name} is {opened.kind} that nothing was written into; expected a header row naming "
        "the columns (is the program that writes into it running?)"
    )


class Part:
    """Rows read at once from a scanned file, held as columns: `count` rows, the first of them
    the file's row `first` (counting from 0), or (a part's selection, such as its training rows)
    the file's rows `places`. `naming(row)` says where a row of the file lies, for messages."""

    __slots__ = ("columns", "count", "first", "naming", "places")

    def __init__(
        self,
        columns: dict[ColumnName, Column],
        count: int,
        first: int = 0,
        naming: Callable[[int], str] | None = None,
        places: NDArray[np.int64] | None = None,
    ) -> None:
        self.columns = columns
        self.count = count
        self.first = first
        self.naming = naming
        self.places = places

    def __len__(self) -> int:
        return self.count

    def place(self, index: int) -> int:
        """The file's row (counting from 0) of the part's row `index`."""
        return self.first + index if self.places is None else int(self.places[index])

    def row_text(self, index: int) -> str:
        """How a message names the part's row `index`: by its place in the file."""
        place = self.place(index)
        return (
            self.naming(place) if self.naming is not None else f"row {place + 1} (counting from 1)"
        )

    def take(self, indices: NDArray[np.intp]) -> Part:
        """The part's rows at `indices` (in that order), as a part of their own."""
        picked = indices.tolist()
        chosen = {
            name: column[indices]
            if isinstance(column, np.ndarray)
            else list(map(column.__getitem__, picked))
            for name, column in self.columns.items()
        }
        places = self.first + indices if self.places is None else self.places[indices]
        return Part(chosen, len(picked), self.first, self.naming, places.astype(np.int64))

    def __repr__(self) -> str:
        return f"Part({self.count} rows from row {self.place(0) + 1 if self.count else 0}, columns {list(self.columns)})"


def _header(name: str, line: int, record: list[str]) -> list[str]:
    """A CSV header's names, as the file spells them (a pipeline that learned them so reads
    them so; one in another Unicode form is said so: `near`)."""
    seen: set[str] = set()
    for column in record:
        if column in seen:
            raise DataError(
                f"{name}, line {line}: the header names column {column!r} twice; give each "
                f"column its own name"
            )
        seen.add(column)
    return record


def is_frame(rows: object) -> bool:
    """Whether the rows are a pandas DataFrame (without importing pandas)."""
    return type(rows).__module__.startswith("pandas") and hasattr(rows, "columns")


def rows_of(rows: object) -> Any:
    """The rows as a DataFrame, a part or a sequence of mappings, checked; an iterator is read
    once."""
    if is_frame(rows) or isinstance(rows, Part):
        return rows
    if _a_series_of_values(rows):
        raise DataError(
            "rows must be a list of mappings or a pandas DataFrame, not a pandas Series: for "
            "one row of a DataFrame give a DataFrame of it, df.iloc[[i]] (or [series.to_dict()])"
        )
    if isinstance(rows, (str, bytes, Mapping, np.ndarray)) or not isinstance(rows, Iterable):
        raise DataError(
            f"rows must be a list of mappings (dicts from column name to value) or a pandas "
            f"DataFrame, not {type(rows).__name__}"
            + (
                "; arrays of features go to fit as (x, y), with a pipeline of no columns"
                if isinstance(rows, np.ndarray)
                else _SCANNED
                if hasattr(rows, "parts") and hasattr(rows, "buffer_rows")
                else ""
            )
        )
    return rows if isinstance(rows, Sequence) else list(rows)


_SCANNED = (
    ": a scanned file is read a part at a time — fit(pipeline, scan, ...) learns the pipeline "
    "on its training rows and TrainedNetwork.predict_parts(scan) serves it; by hand, "
    "learning = pipeline.learning(scan.names), learning.add(part) for each part in "
    "scan.parts(), learning.finish(), then pipeline.features(part) a part at a time"
)


def _a_series_of_values(rows: object) -> bool:
    """A pandas Series of values, not of mappings: one row of a DataFrame (`df.iloc[0]`)."""
    if not (type(rows).__module__.startswith("pandas") and type(rows).__name__ == "Series"):
        return False
    series: Any = rows
    return len(series) > 0 and not isinstance(series.iloc[0], Mapping)


def row_naming(
    rows: object, places: Sequence[int] | NDArray[np.int64] | None = None, of: str = ""
) -> Callable[[int], str]:
    """How messages name row `index` of the rows at `places` of `rows` (all of them when None):
    by the row's place among the rows the user handed in, and a DataFrame's row by its index
    label too, never by its place in a shuffled selection. `of` names the rows ("the test rows")."""
    labels = rows.index if is_frame(rows) else None  # type: ignore[attr-defined]
    suffix = f" of {of}" if of else ""

    def naming(index: int) -> str:
        place = index if places is None else int(places[index])
        text = f"row {place + 1}{suffix} (counting from 1"
        if labels is not None and not _same(labels[place], place):
            text += f"; DataFrame index {shown_value(labels[place])}"
        return text + ")"

    return naming


def _same(label: object, place: int) -> bool:
    """Whether an index label is the row's place (pandas' NA is no place: its == gives NA,
    which no bool can be made of)."""
    try:
        return bool(label == place)
    except TypeError:
        return False


def named_in_messages(rows: object) -> AbstractContextManager[None]:
    """Rows of a part are named in messages by their place in the file they were read from; a
    DataFrame's by their index labels too (unless the caller names them already)."""
    if isinstance(rows, Part):
        return rows_named(rows.row_text)
    if is_frame(rows) and not naming_rows():
        return rows_named(row_naming(rows))
    return nullcontext()


def row_count(rows: object) -> int:
    return len(rows_of(rows))


def take(rows: Any, indices: Sequence[int] | np.ndarray) -> Any:
    """The rows at `indices`, of the same kind as `rows`."""
    if isinstance(rows, Part):
        return rows.take(np.asarray(indices, dtype=np.intp))
    if is_frame(rows):
        return rows.iloc[np.asarray(indices)]
    return [rows[int(i)] for i in indices]


def column_names(rows: object, every: bool = False) -> list[ColumnName]:
    """The columns the rows hold: a DataFrame's, or the first row's keys (in their order);
    `every`: every row's, in the order they first come (a column a later row alone holds is
    one too: `numbers()` learns every column, whatever the rows' order)."""
    held = rows_of(rows)
    if is_frame(held) or isinstance(held, Part):
        return list(held.columns)
    if not held:
        return []
    for i, row in enumerate(held if every else held[:1]):
        if not isinstance(row, Mapping):
            raise DataError(f"{row_text(i)} is of type {type(row).__name__}, not a mapping")
    if every:
        return list(dict.fromkeys(itertools.chain.from_iterable(held)))
    return list(held[0])


def columns(rows: object, names: Sequence[ColumnName]) -> tuple[int, dict[ColumnName, Column]]:
    """Take the named columns out of the rows once. Returns the row count and the columns."""
    held = rows_of(rows)
    if is_frame(held):
        return _frame_columns(held, names)
    if isinstance(held, Part):
        return _part_columns(held, names)
    count = len(held)
    if count == 0:
        raise DataError("no rows: the rows handed in are empty; give at least one row")
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return count, {}
    # One pass over the rows, in C: each row's values in one tuple, the tuples laid end to
    # end, each column a stride through them (rows are visited once, not once a column).
    try:
        if len(wanted) == 1:
            return count, {wanted[0]: list(map(operator.itemgetter(wanted[0]), held))}
        flat = list(itertools.chain.from_iterable(map(operator.itemgetter(*wanted), held)))
    except (KeyError, TypeError, IndexError):
        raise _missing_column(held, wanted) from None
    width = len(wanted)
    return count, {name: flat[i::width] for i, name in enumerate(wanted)}


def _names(present: Iterable[object]) -> str:
    return ", ".join(repr(c) for c in present) or "(none)"


def _hint(name: ColumnName, present: Sequence[object]) -> str:
    """What to write instead when the name is the text of a column named by a number (or back),
    or the column the rows may mean by it (another case or spaces: `near`)."""
    for column in present:
        if str(column) == str(name) and column != name:
            return (
                f" (the rows name that column {column!r}, not {name!r}: the pipeline and the "
                "rows must name it alike, the same text or the same number)"
            )
    return near(name, present)


def near(name: ColumnName, present: Sequence[object]) -> str:
    """ " (did you mean 'pclass'?)" where a column present is the name in another case or with
    spaces around it, or close to it as text; "" where none is."""
    folded = _folded(name)
    for column in present:
        if _folded(column) == folded:
            if same_text(str(column), str(name)):
                return (
                    f" (the rows name it {column!r}: the same letters, in another Unicode form; "
                    "compose both, unicodedata.normalize('NFC', name))"
                )
            return f" (did you mean {column!r}?)"
    texts = {str(column): column for column in present}
    close = difflib.get_close_matches(str(name), list(texts), n=1)
    return f" (did you mean {texts[close[0]]!r}?)" if close else ""


def _folded(name: object) -> str:
    return unicodedata.normalize("NFC", str(name)).strip().casefold()


def same_text(one: object, other: object) -> bool:
    """Whether two column names are the same text in two Unicode forms (accents composed in
    one, written apart in the other, as a macOS tool may write a header: trial CL4)."""
    if not isinstance(one, str) or not isinstance(other, str):
        return False
    return unicodedata.normalize("NFC", one) == unicodedata.normalize("NFC", other)


def lacking(names: Sequence[ColumnName], present: Sequence[object]) -> str:
    """ "no column 'A' (did you mean 'a'?)", or "no columns 'A' (...), 'B'": every name of
    `names` the columns `present` lack (the first alone was named: trial P), each with what it
    may mean."""
    missing = list(dict.fromkeys(name for name in names if name not in present))
    said = [f"{name!r}{_hint(name, present)}" for name in missing[:LACKING_SHOWN]]
    if len(missing) > LACKING_SHOWN:  # (2,000 names, each looked for, took 8 s: a review)
        said.append(f"and {len(missing) - LACKING_SHOWN:,} more")
    return f"no column {said[0]}" if len(said) == 1 else f"no columns {', '.join(said)}"


LACKING_SHOWN = 10
"""The most missing columns a message names (each with what it may mean)."""


def _missing_column(rows: Sequence[Any], names: Sequence[ColumnName]) -> DataError:
    """The error for the first row that is not a mapping or lacks one of `names`."""
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            return DataError(
                f"{row_text(i)} is of type {type(row).__name__}, not a mapping "
                f"from column name to value"
            )
        keys = list(row)
        if any(name not in row for name in names):
            return DataError(
                f"{row_text(i)} has {lacking(names, keys)}; that row has the columns: "
                f"{_names(keys)}"
            )
    shown = ", ".join(repr(name) for name in names)  # pragma: no cover - a lookup failed
    return DataError(f"the columns {shown} could not be read from the rows")  # pragma: no cover


def _part_columns(part: Part, names: Sequence[ColumnName]) -> tuple[int, dict[ColumnName, Column]]:
    missing = [name for name in names if name not in part.columns]
    if missing:
        present = list(part.columns)
        raise DataError(
            f"the rows read hold {lacking(missing, present)}; they hold the columns: "
            f"{_names(present)}"
        )
    return part.count, {name: part.columns[name] for name in names}


def _frame_columns(frame: Any, names: Sequence[ColumnName]) -> tuple[int, dict[ColumnName, Column]]:
    count = len(frame)
    if count == 0:
        raise DataError("no rows: the DataFrame handed in has no rows; give at least one row")
    present = list(frame.columns)
    out: dict[ColumnName, Column] = {}
    for name in names:
        if name in out:
            continue
        if name not in frame.columns:
            raise DataError(
                f"the DataFrame has {lacking(names, present)}; its columns: {_names(present)}"
            )
        series = frame[name]
        if getattr(series, "ndim", 1) != 1:
            raise DataError(f"the DataFrame has more than one column named {name!r}")
        if type(series.dtype).__name__ == "SparseDtype":  # read as the dense column it stands for
            series = series.sparse.to_dense()
        kind = getattr(getattr(series, "dtype", None), "kind", "O")
        if isinstance(series.dtype, np.dtype) and kind in "biuf":
            out[name] = series.to_numpy()
        elif kind == "f" and hasattr(series.dtype, "numpy_dtype"):
            # pandas' Float32, pyarrow's float: their width kept, NA as NaN
            out[name] = series.to_numpy(dtype=series.dtype.numpy_dtype, na_value=np.nan)
        else:
            try:
                out[name] = series.to_numpy(dtype=object, na_value=None).tolist()
            except ArithmeticError:  # pandas' NA test of a Decimal('sNaN') (trial PD): the
                out[name] = series.tolist()  # values as they are, refused by their column kind
    return count, out

"""Files too large for memory, read in parts: `scan_csv(path)` and `scan_parquet(path)`.

Making a scan reads only the file's header (CSV) or schema (Parquet). Each pass over it
(`scan.parts(names)`) reads the file from its start, at most `read_rows` rows at a time and only
the columns named, as `Part`s: columns of values, the rows named in messages by the file and
their place in it. Memory is bounded by a part, whatever the file's size. `fit` takes a scan as
its data, `TrainedNetwork.predict` and `predict_parts` take one to predict.

A CSV file is read by read_csv's rules: a header row naming distinct columns; an empty field
is missing (None); blank lines are skipped (and lines of only spaces and tabs, where the header
names more than one column); a row with more or fewer fields than the header, or
text that is not CSV or not UTF-8, or a line longer than `MAX_LINE`, is a DataError naming the
file and the line. A pipe (`/dev/stdin`, `<(...)`, a named pipe) is scanned in one pass, as it
comes: enough to predict its rows; a second pass is a FileFormatError saying so. A file names
its columns by text: a pipeline's column named by a whole number (learned from
`pd.DataFrame(x)`, columns 0, 1, ...) reads the file's column of that text ('0', '1', ...).

A Parquet file needs pyarrow (`pip install 'deepsharp[parquet]'`), imported only when a Parquet
file is scanned. Its columns of numbers come as NumPy arrays (a missing value as NaN), other
columns as Python values (None where missing), as a DataFrame's would. Only a regular file is
read (Parquet is read by seeking); a file pyarrow cannot read, or whose damage it finds (its
structure, its pages' headers), is a FileFormatError naming it. pyarrow does not check every
value: a byte changed inside a page of numbers may read as another number (trial HC).
"""

from __future__ import annotations

import collections
import contextlib
import csv
import functools
import importlib
import itertools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, BinaryIO

from deepsharp.core.data.paths import (
    check_path,
    csv_rows,
    not_utf8,
    open_rows,
    refuse_irregular,
)
from deepsharp.core.data.sources import (
    Part,
    blank,
    csv_refusal,
    empty_message,
    lacking,
    open_to_the_end,
    quote_open_to_the_end,
    read_csv_header,
    separated_otherwise,
    wrong_width,
)
from deepsharp.core.data.values import Column, ColumnName
from deepsharp.core.errors import DataError, FileFormatError, names_shown
from deepsharp.core.reals import is_whole

__all__ = ["BUFFER_ROWS", "READ_ROWS", "CsvScan", "ParquetScan", "Scan", "scan_csv", "scan_parquet"]

READ_ROWS = 16_384
"""Rows read at once by default: a part of Titanic's 12 columns holds about 8 MiB of text."""

BUFFER_ROWS = 65_536
"""Training rows shuffled together by default (their features: 4 MiB at 16 features a row)."""


def _whole(what: str, value: object) -> int:
    if not is_whole(value) or value < 1:
        raise ValueError(f"{what} is a whole number of rows, 1 or more, not {value!r}")
    return int(value)


class Scan:
    """A file read in parts (`scan_csv`, `scan_parquet`).

    `read_rows`: rows read at once. `buffer_rows`: training rows a run shuffles together (its
    epoch order, see `fit`). `spill_dir`: where a run keeps its rows' features between passes
    (a temporary file, deleted as the run ends; the system's temporary folder by default).
    """

    kind = ""

    def __init__(
        self,
        path: str | os.PathLike[str],
        read_rows: int = READ_ROWS,
        buffer_rows: int = BUFFER_ROWS,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.read_rows = _whole("read_rows", read_rows)
        self.buffer_rows = _whole("buffer_rows", buffer_rows)
        self.spill_dir = None if spill_dir is None else os.fspath(spill_dir)
        check_path(self.path, self.kind)
        self.names: list[ColumnName] = self._header()
        self._stamp = _stamp(os.stat(self.path)) if self._regular() else None

    def _regular(self) -> bool:
        """Whether the file can be read again (each pass from its start): not a pipe."""
        return True

    def _unchanged(self, handle: IO[Any], when: str) -> None:
        """Refuse a file changed since it was scanned (`handle` open on it, `when` a pass
        opens or ends): a run reads it on every pass, and a recipe learned from other rows
        than the features were made of, or a split of other rows, would be taken silently."""
        if self._stamp is None:
            return
        now = _stamp(os.fstat(handle.fileno()))
        if now == self._stamp and when == "as a pass ends":  # the file read is the one
            try:  # scanned; is the one at its path (rotated, replaced: trial SV)?
                at_path = _stamp(os.stat(self.path))
            except OSError:
                at_path = None
            if at_path != self._stamp:
                raise _changed(
                    f"{self.path}: another file is at its path than the one scanned "
                    f"({'none' if at_path is None else f'{at_path[0]:,} bytes'}) {when}: it "
                    "was replaced or removed, and every pass over a scan reads the same rows: "
                    "scan it again once nothing writes to it, or copy it and scan the copy"
                )
        if now != self._stamp:
            raise self._changed_since(now, when)

    def _changed_since(self, now: tuple[int, int, int, int], when: str) -> DataError:
        assert self._stamp is not None
        return _changed(
            f"{self.path}: the file changed since it was scanned: {self._stamp[0]:,} bytes "
            f"written {_when(self._stamp[1])} then, {now[0]:,} bytes written "
            f"{_when(now[1])} {when}; every pass over a scan reads the same rows: scan it "
            "again once nothing writes to it, or copy it and scan the copy"
        )

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Around a pass whose parts are used (learned, made features of, predicted): a row
        refused there in a file changed under the pass (a number cut to '1e') is said as the
        change, as the pass's own refusals are (it was the row's: a review)."""
        try:
            yield
        except DataError as error:
            if self._stamp is not None and not getattr(error, "file_changed", False):
                try:
                    now = _stamp(os.stat(self.path))
                except OSError:
                    now = (-1, -1, -1, -1)
                if now != self._stamp:
                    raise self._changed_since(now, "while a pass read it") from error
            raise

    def _header(self) -> list[ColumnName]:
        """The file's column names, from its header (CSV) or schema (Parquet)."""
        raise NotImplementedError

    def parts(self, names: Sequence[ColumnName] | None = None) -> Iterator[Part]:
        """The file's rows from the start, in parts of at most `read_rows` rows, holding the
        columns `names` (every column when None)."""
        raise NotImplementedError

    def _wanted(self, names: Sequence[ColumnName] | None) -> dict[ColumnName, ColumnName]:
        """The columns `names` (every column when None), each with the file's name for it.
        A file names its columns by text, so a whole-number name (a pipeline learned from
        pd.DataFrame(x): columns 0, 1, ...) is the column its text names, where that is
        unambiguous: the text is a column's name and not asked for too."""
        if names is None:
            return {name: name for name in self.names}
        wanted: dict[ColumnName, ColumnName] = {}
        for name in names:
            if name in self.names:
                wanted[name] = name
            elif _whole_name(name) and str(name) in self.names and str(name) not in names:
                wanted[name] = str(name)
        missing = [name for name in names if name not in wanted]
        if missing:
            separated = separated_otherwise(self.names)
            if separated:
                raise DataError(
                    f"{self.path}: the file has no column {missing[0]!r}: its header is one "
                    f"column, {separated}"
                )
            raise DataError(
                f"{self.path}: the file has {lacking(missing, self.names)}; its columns are: "
                f"{names_shown(self.names)}"
            )
        return wanted

    def _row_text(self, place: int) -> str:
        return f"{self.path}, row {place + 1} (counting from 1)"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, read_rows={self.read_rows})"


class CsvScan(Scan):
    """A CSV file read in parts, by read_csv's rules. A pipe (`/dev/stdin`, a named pipe) is
    read as it comes, in one pass: enough to predict its rows, not to train on them."""

    kind = "CSV"

    def _header(self) -> list[ColumnName]:
        opened = open_rows(self.path, self.kind)
        self.regular, self.what = opened.regular, opened.kind
        reader = csv_rows(opened.handle, self.path)
        empty = empty_message(self.path, opened)
        try:
            names = self._guarded(lambda: read_csv_header(self.path, reader, empty), reader)
        except BaseException:
            opened.handle.close()
            raise
        if opened.regular:
            opened.handle.close()
            self._stream: tuple[IO[str], Any] | None = None
        else:
            self._stream = (opened.handle, reader)  # the one pass a stream gives goes on from here
        return list(names)

    def _open(self) -> IO[str]:
        return open_rows(self.path, self.kind).handle

    def _regular(self) -> bool:
        return self.regular

    def _guarded(self, read: Callable[[], Any], reader: Any) -> Any:
        """`read()`, its CSV and decoding errors said as read_csv says them."""
        try:
            return read()
        except csv.Error as exc:
            raise csv_refusal(self.path, reader.line_num, exc) from None
        except UnicodeDecodeError:
            raise not_utf8(self.path) from None

    def _pass(self) -> tuple[IO[str], Any]:
        """The file opened for a pass and its reader past the header (a stream: its one pass)."""
        if not self.regular:
            if self._stream is None:
                raise FileFormatError(
                    f"{self.path!r} is {self.what}, read once already: its rows cannot be read "
                    "again (a run reads its rows on every pass): save them to a file first"
                )
            stream, self._stream = self._stream, None
            return stream
        handle = self._open()
        reader = csv_rows(handle, self.path)
        try:
            self._unchanged(handle, "as a pass opens it")
            self._guarded(lambda: read_csv_header(self.path, reader), reader)
        except BaseException:
            handle.close()
            raise
        return handle, reader

    def parts(self, names: Sequence[ColumnName] | None = None) -> Iterator[Part]:
        handle, reader = self._pass()
        with handle:
            try:
                yield from self._parts(handle, reader, names)
            except DataError as error:
                # A row refused in a file changed under the pass (cut short, rewritten) is the
                # change to say: its line may be no line the file now has (trial SD).
                if not getattr(error, "file_changed", False):
                    self._unchanged(handle, "while a pass read it")
                raise

    def _parts(
        self, handle: IO[str], reader: Any, names: Sequence[ColumnName] | None
    ) -> Iterator[Part]:
        wanted = self._wanted(names)
        places = [self.names.index(name) for name in wanted.values()]
        width = len(self.names)
        first = 0
        last: Callable[[], None] = lambda: None  # noqa: E731 - the last record's check, at the end
        while True:
            # Where the part starts (a position to seek to, and its first line): enough to
            # name any of its rows again, without keeping a line number a row. A stream
            # cannot be read again: it keeps the line each of its records ends on.
            offset, line = handle.tell() if self.regular else -1, reader.line_num + 1
            if self.regular:
                chunk = self._guarded(
                    lambda: list(itertools.islice(reader, self.read_rows)), reader
                )
                ends = None
            else:
                read = self._guarded(
                    lambda: [
                        (r, reader.line_num) for r in itertools.islice(reader, self.read_rows)
                    ],
                    reader,
                )
                chunk = [record for record, _ in read]
                ends = [end for record, end in read if not blank(record, self.names)]
            if not chunk:
                last()
                self._unchanged(handle, "as a pass ends")
                return
            records = [record for record in chunk if not blank(record, self.names)]
            plain = len(records) == len(chunk) == reader.line_num - line + 1
            naming = self._naming(first, offset, line, plain, ends)
            if records:
                last = functools.partial(
                    self._open_to_the_end, records[-1], first + len(records) - 1, first,
                    offset, line, plain, ends,
                )  # fmt: skip
            if len(set(map(len, records))) > 1 or (records and len(records[0]) != width):
                bad = next(i for i, r in enumerate(records) if len(r) != width)
                record = records[bad]
                end = self._line_of(first + bad, first, offset, line, plain, ends)
                # The lines a record spans are the line breaks inside its fields, but for
                # a quote left open to the end of the file: its field holds the last break.
                extra = sum(field.count("\n") for field in record)
                if extra and record[-1].endswith("\n") and bad == len(records) - 1:
                    extra -= self._guarded(lambda: next(reader, None), reader) is None
                raise wrong_width(self.path, end - extra, end, record, list(map(str, self.names)))
            if len(chunk) < self.read_rows:  # the file's end: refused before its rows
                last()
            if not records:
                continue
            columns: dict[ColumnName, Column] = {
                name: [record[at] or None for record in records]
                for name, at in zip(wanted, places, strict=True)
            }
            yield Part(columns, len(records), first, naming)
            first += len(records)

    def _open_to_the_end(
        self,
        record: list[str],
        place: int,
        first: int,
        offset: int,
        line: int,
        plain: bool,
        ends: list[int] | None,
    ) -> None:
        """Refuse the file's last record where a quote it opened was never closed (its field
        took the rest of the file: `quote_open_to_the_end`), naming the line it opens on."""
        if not quote_open_to_the_end(self.path, record):
            return
        end = self._line_of(place, first, offset, line, plain, ends)
        extra = sum(field.count("\n") for field in record) - record[-1].endswith("\n")
        raise open_to_the_end(self.path, end - extra, end, len(record))

    def _naming(
        self, first: int, offset: int, line: int, plain: bool, ends: list[int] | None = None
    ) -> Callable[[int], str]:
        """How a row of the part that starts at row `first` (at `offset`, line `line`) is named;
        `ends`: the line each of its records ends on, where it was kept (a stream's)."""

        def name(place: int) -> str:
            return f"{self.path}, line {self._line_of(place, first, offset, line, plain, ends)}"

        return name

    def _line_of(
        self, place: int, first: int, offset: int, line: int, plain: bool, ends: list[int] | None
    ) -> int:
        """The line the row `place` ends on, of the part `_naming` names."""
        index = place - first
        if plain:
            return line + index
        if ends is not None:
            return ends[index]
        return self._line(offset, line, index)

    def _line(self, offset: int, line: int, index: int) -> int:
        """The line on which the part's record `index` ends, read again from the part's start
        (only for a part with blank lines or records over several lines, and only for a message)."""
        with self._open() as handle:
            handle.seek(offset)
            reader = csv_rows(handle, self.path)
            seen = -1
            for record in reader:
                seen += 0 if blank(record, self.names) else 1
                if seen == index:
                    break
            return line - 1 + reader.line_num


class ParquetScan(Scan):
    """A Parquet file read in parts, with pyarrow."""

    kind = "Parquet"

    def _header(self) -> list[ColumnName]:
        self._arrow, self._parquet = _pyarrow()
        with self._open() as stream:
            file = self._file(stream)
            try:
                self.rows = _whole_count(file.metadata.num_rows)
                names = list(file.schema_arrow.names)
                index = _pandas_index(file.schema_arrow)
            except _unreadable(self._arrow) as error:
                raise self._corrupt(error) from None
        names = [name for name in names if name not in index]
        if not all(isinstance(name, str) for name in names):
            raise FileFormatError(f"{self.path}: its schema names columns by other than text")
        twice = [name for name, count in collections.Counter(names).items() if count > 1]
        if twice:  # pyarrow would read both for the name, and every column after it shift
            raise DataError(
                f"{self.path}: its schema names column {twice[0]!r} twice; give each column "
                "its own name"
            )
        return names

    def _open(self) -> BinaryIO:
        """The file, opened without blocking (a pipe or a device is refused: Parquet is read by
        seeking in it)."""
        name, info = check_path(self.path, self.kind)
        why = "a Parquet file is read by seeking in it: save it to a file first"
        refuse_irregular(name, info, why)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        descriptor = os.open(name, flags)
        try:
            refuse_irregular(name, os.fstat(descriptor), why)
        except BaseException:
            os.close(descriptor)
            raise
        return os.fdopen(descriptor, "rb")

    def _file(self, stream: BinaryIO) -> Any:
        try:
            return self._parquet.ParquetFile(stream, buffer_size=1 << 20, pre_buffer=False)
        except _unreadable(self._arrow) as error:
            raise FileFormatError(
                f"{self.path}: not a Parquet file pyarrow can read ({error})"
            ) from None

    def _corrupt(self, error: BaseException, first: int | None = None) -> FileFormatError:
        where = "" if first is None else f": rows from {first + 1} on cannot be read"
        return FileFormatError(
            f"{self.path}{where}: the Parquet file is damaged ({type(error).__name__}: "
            f"{str(error)[:300]})"
        )

    def parts(self, names: Sequence[ColumnName] | None = None) -> Iterator[Part]:
        wanted = self._wanted(names)
        first = 0
        with self._open() as stream:
            self._unchanged(stream, "as a pass opens it")
            file = self._file(stream)
            try:
                # One thread: as fast here (Python's conversion dominates), and 10-15 MiB less.
                batches = file.iter_batches(
                    batch_size=self.read_rows, columns=list(wanted.values()), use_threads=False
                )
            except _unreadable(self._arrow) as error:
                raise self._corrupt(error, first) from None
            while True:
                try:
                    batch = next(batches, None)
                    if batch is None:
                        self._unchanged(stream, "as a pass ends")
                        return
                    columns = {name: self._column(batch.column(i)) for i, name in enumerate(wanted)}
                except _unreadable(self._arrow) as error:
                    raise self._corrupt(error, first) from None
                yield Part(columns, batch.num_rows, first, self._row_text)
                first += batch.num_rows

    def _column(self, array: Any) -> Column:
        """Numbers as a NumPy array (NaN where missing); anything else as Python values: the
        decimals (`Decimal`, their digits as a CSV's text gives them), and whole numbers with a
        null that float64 would round (beyond 2^53: IDs), as ints and None."""
        types = self._arrow.types
        if types.is_dictionary(array.type):
            array = array.dictionary_decode()
        kind = array.type
        exact = types.is_integer(kind) and not (array.null_count and _beyond_float(array))
        if exact or types.is_floating(kind):
            values: Column = array.to_numpy(zero_copy_only=False)
            return values
        listed: list[object] = array.to_pylist()
        return listed


def _whole_name(name: object) -> bool:
    return isinstance(name, int) and not isinstance(name, bool)


def _beyond_float(array: Any) -> bool:
    """Whether a column of whole numbers holds one that float64 cannot hold exactly."""
    compute = importlib.import_module("pyarrow.compute")
    least, most = (v.as_py() for v in compute.min_max(array).values())
    return bool(max(abs(least or 0), abs(most or 0)) > 2**53)


def _pandas_index(schema: Any) -> set[str]:
    """The columns a file pandas wrote holds its DataFrame's index in (`__index_level_0__`
    where the index was not a plain range): pandas reads them back as the index, not as
    columns, and so does a scan (they would be learned as features the DataFrame lacks)."""
    try:
        metadata = schema.pandas_metadata or {}
    except ValueError:  # metadata that is not JSON: a file of another tool
        return set()
    index = metadata.get("index_columns", []) if isinstance(metadata, dict) else []
    return {name for name in index if isinstance(name, str)}


def _unreadable(arrow: Any) -> tuple[type[BaseException], ...]:
    """What pyarrow raises on a damaged file: its own errors, and Python's (its IO errors are
    plain OSErrors; text that is not UTF-8 a UnicodeDecodeError; lengths that lie, others)."""
    return (arrow.ArrowException, OSError, ValueError, LookupError, TypeError, ArithmeticError)


def _whole_count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"its row count is {value!r}")
    return value


def _pyarrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.parquet, or an ImportError saying how to install them."""
    try:
        return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ImportError(
            "reading Parquet files needs pyarrow, which is not installed: pip install "
            "'deepsharp[parquet]' (or pip install pyarrow)"
        ) from None


def scan_csv(
    path: str | os.PathLike[str],
    read_rows: int = READ_ROWS,
    buffer_rows: int = BUFFER_ROWS,
    spill_dir: str | os.PathLike[str] | None = None,
) -> CsvScan:
    """A CSV file read in parts of at most `read_rows` rows, by read_csv's rules; `fit` takes
    it as its data, `TrainedNetwork.predict` and `predict_parts` as rows to predict.
    `buffer_rows` and `spill_dir` are how a run trains from it (see `Scan`)."""
    return CsvScan(path, read_rows, buffer_rows, spill_dir)


def scan_parquet(
    path: str | os.PathLike[str],
    read_rows: int = READ_ROWS,
    buffer_rows: int = BUFFER_ROWS,
    spill_dir: str | os.PathLike[str] | None = None,
) -> ParquetScan:
    """A Parquet file read in parts of at most `read_rows` rows (needs pyarrow: pip install
    'deepsharp[parquet]'); otherwise as `scan_csv`."""
    return ParquetScan(path, read_rows, buffer_rows, spill_dir)


def _changed(message: str) -> DataError:
    """The error of a file changed since it was scanned (marked: a row refused after it is
    this error, not the row's)."""
    error = DataError(message)
    error.file_changed = True  # type: ignore[attr-defined]
    return error


def _stamp(info: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file changed: its size, when it was last written, and which file it is."""
    return info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev


def _when(nanoseconds: int) -> str:
    seconds, rest = divmod(nanoseconds, 10**9)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f".{rest // 10**6:03d}"

"""Where rows are read from: a path checked before it is opened, and opened so that no read
blocks for ever or grows without bound.

A regular file is read as a file (a scan reads it again on each pass). A pipe (`/dev/stdin`,
`<(...)`, a named pipe) or a character device is read as a stream, once: opening it never
waits for a writer, and a named pipe that nothing was written into reads as nothing at once.
Every line is read with a limit (`MAX_LINE` characters), so a file without line ends
(`/dev/zero`, gigabytes of nothing) is a DataError on its first line, not a process that grows
until the machine stops it. Folders, sockets and block devices are refused by name.
"""

from __future__ import annotations

import csv
import errno
import os
import stat
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from deepsharp.core.errors import DataError, FileFormatError

if TYPE_CHECKING:
    from _csv import Reader

__all__ = [
    "MAX_LINE",
    "csv_rows",
    "Opened",
    "check_path",
    "is_parquet",
    "lines",
    "open_rows",
    "refuse_irregular",
]

MAX_LINE = 16 << 20
"""The longest line a CSV reader takes, in characters: room for 4 million numbers a row (a
field is at most 131,072 characters, Python's csv limit)."""

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
_STREAMS = (stat.S_IFIFO, stat.S_IFCHR)  # read once, as they come


def kind_of(info: os.stat_result) -> str:
    """What a path is, in words ("a named pipe"); "a file" for a regular file."""
    if stat.S_ISREG(info.st_mode):
        return "a file"
    return _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")


def check_path(path: str | os.PathLike[str], kind: str) -> tuple[str, os.stat_result]:
    """The path's name and what it is (following links), or the error that says why there is
    nothing to read there: FileNotFoundError (no such file, or a name no file can have),
    IsADirectoryError, or an OSError naming a loop of links."""
    name = os.fspath(path)
    if "\0" in name:
        raise FileNotFoundError(
            f"no such {kind} file: {name!r} holds a NUL character, which no file name can"
        )
    try:
        info = os.stat(name)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"no such {kind} file: {name!r}") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise OSError(
                errno.ELOOP,
                f"{name!r} is a loop of symbolic links (each names another, none a file)",
                name,
            ) from None
        raise
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"{name!r} is a directory, not a {kind} file: name a file in it")
    return name, info


def refuse_irregular(name: str, info: os.stat_result, why: str) -> None:
    """A FileFormatError for what is not a regular file, saying `why` one is needed."""
    if not stat.S_ISREG(info.st_mode):
        raise FileFormatError(f"{name!r} is {kind_of(info)}, not a file: {why}")


class Opened:
    """A text file opened for reading rows: `handle`, whether it is a regular file (`regular`;
    else a stream, read once), and what it is in words (`kind`)."""

    def __init__(self, handle: IO[str], info: os.stat_result) -> None:
        self.handle = handle
        self.regular = stat.S_ISREG(info.st_mode)
        self.kind = kind_of(info)


def open_rows(path: str | os.PathLike[str], kind: str) -> Opened:
    """The file at `path` opened for reading text (UTF-8, a byte-order mark skipped), without
    waiting on a pipe that has no writer. A socket or a block device is refused."""
    name, info = check_path(path, kind)
    if not (stat.S_ISREG(info.st_mode) or stat.S_IFMT(info.st_mode) in _STREAMS):
        refuse_irregular(name, info, f"deepsharp reads {kind} rows from a file or a pipe")
    # O_NONBLOCK: opening a named pipe waits for a writer otherwise; reads then wait as usual.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(name, flags)
    try:
        info = os.fstat(descriptor)  # what was opened, should the path have changed since
        if not (stat.S_ISREG(info.st_mode) or stat.S_IFMT(info.st_mode) in _STREAMS):
            refuse_irregular(name, info, f"deepsharp reads {kind} rows from a file or a pipe")
        os.set_blocking(descriptor, True)
        handle = open(descriptor, newline="", encoding="utf-8-sig", closefd=True)
    except BaseException:
        os.close(descriptor)
        raise
    return Opened(handle, info)


def lines(handle: IO[str], name: str) -> Iterator[str]:
    """The handle's lines, each at most MAX_LINE characters with its line end (a DataError
    naming the first line past that)."""
    number = 1
    while True:
        line = handle.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE:
            raise DataError(
                f"{name}, line {number}: longer than {MAX_LINE:,} characters, the most a CSV "
                "line may hold here; is it a CSV file (it may lack line ends)?"
            )
        number += 1
        yield line


def csv_rows(handle: IO[str], name: str) -> Reader:
    """The handle's CSV records, read from `lines`. A field may be as long as a line: csv's own
    limit of 131,072 characters refused valid files (an image of 3 x 128 x 128 pixels as text,
    175 KB a field). The limit is the process's; it is only ever raised, to MAX_LINE."""
    if csv.field_size_limit() < MAX_LINE:
        csv.field_size_limit(MAX_LINE)
    return csv.reader(lines(handle, name))


_PARQUET = b"PAR1"
"""The bytes a Parquet file begins (and ends) with."""


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a regular file that begins as a Parquet file does (a pipe is not
    looked into: its bytes, once read, are gone)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as raw:
            return raw.read(len(_PARQUET)) == _PARQUET
    except (OSError, ValueError):  # no such file, or a name no file can have: said as read
        return False


_SIGNATURES = (
    (b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip), or read it with "
     "pandas.read_csv(path) and give the DataFrame"),
    (_PARQUET, "a Parquet file: scan it with scan_parquet(path) (deepsharp predict and evaluate "
     "read it as it is; deepsharp train and compare read CSV: in Python, fit(pipeline, "
     "scan_parquet(path), ...))"),
    (b"PK\x03\x04", "a zip archive (an Excel workbook is one): save the sheet as CSV (UTF-8), "
     "or read it with pandas and give the DataFrame"),
    (b"\xff\xfe", "UTF-16 text: save it as UTF-8, or read it with pandas.read_csv(path, "
     "encoding='utf-16') and give the DataFrame"),
    (b"\xfe\xff", "UTF-16 text: save it as UTF-8, or read it with pandas.read_csv(path, "
     "encoding='utf-16') and give the DataFrame"),
)  # fmt: skip
"""What a file that is no UTF-8 text is, told by its first bytes, and what to do with it."""


def not_utf8(name: str) -> DataError:
    """The error for a CSV file whose bytes are not UTF-8: what it is where its first bytes
    say (gzip, Parquet, zip, UTF-16), else the line and place of its first byte that is no
    UTF-8 (one pass over its lines: a character's bytes never span a line break), and what to
    do. A file that cannot be read again (a pipe) is named without its line."""
    advice = (
        f"save it as UTF-8 (iconv -f latin1 -t utf-8 {name} > utf8.csv, naming the encoding it "
        "was written in), or in Python read it with pandas.read_csv(path, encoding='latin-1') "
        "and give the DataFrame"
        if not name.startswith("/dev/")
        else "pipe it through iconv -f latin1 -t utf-8 (naming the encoding it was written in)"
    )
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):  # a pipe: through iconv as it comes
            # Its first bytes are read and gone: what it may be, each (trial SV5: gzip and
            # UTF-16 were told to iconv from latin1).
            return DataError(
                f"{name}: not UTF-8 text: compressed, pipe it through gunzip (or zcat); UTF-16 "
                "or another encoding, through iconv -f utf-16 (or latin1, naming the one it was "
                "written in) -t utf-8; a Parquet file or a workbook is read from a file, not a "
                "pipe"
            )
        with open(name, "rb") as raw:
            first = raw.read(4)
            for signature, what in _SIGNATURES:
                if first.startswith(signature):
                    return DataError(f"{name}: not UTF-8 text but {what}")
            raw.seek(0)
            length = int.from_bytes(raw.read(8), "little")
            size = os.fstat(raw.fileno()).st_size
            if 2 <= length <= size - 8 and raw.read(2) == b'{"':  # a header's length that fits,
                # then its JSON: a safetensors file (not a CSV whose 9th byte opens JSON)
                return DataError(
                    f"{name}: not UTF-8 text but a safetensors file (a network, a trained "
                    "network or a checkpoint): give the rows to read here, CSV or Parquet"
                )
            raw.seek(0)
            for number, line in enumerate(raw, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as error:
                    byte = line[error.start]
                    place = len(line[: error.start].decode("utf-8")) + 1
                    return DataError(
                        f"{name}, line {number}: not UTF-8 text (the byte 0x{byte:02x} at its "
                        f"character {place}): {advice}"
                    )
    except OSError:
        pass
    return DataError(f"{name}: not UTF-8 text: {advice}")

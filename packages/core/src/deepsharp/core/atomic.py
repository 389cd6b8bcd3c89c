"""Writing a file atomically: a temporary file beside the target, flushed to disk, then renamed
into place, so a crash, a kill or a full disk leaves either the old file or the new one; the
temporary files killed writers left behind are removed by the next writer on the same host.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["descriptor_of", "write_atomically"]


def write_atomically(path: str | os.PathLike[str], data: bytes | Iterable[Any]) -> None:
    """Write `data` (bytes, or bytes-like parts, written as they come: a stream's memory stays
    flat) to a temporary file beside `path`,
    flush it to disk, then rename it into place: a crash, a kill or a full disk leaves either the
    old file or the new one, never half of one. The new file keeps the old one's mode, or takes
    the umask's. A device or a pipe (`/dev/stdout`) is written straight into; a path naming
    one of this process's descriptors (`/dev/stdout`, `/dev/fd/3`) is written through that
    descriptor, where the shell's other writes go (a file it appends to is not replaced); a
    symbolic link is written through (the file it names is replaced; the link stays)."""
    parts = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
    path = os.fsdecode(path)  # a bytes path too, as open() takes it
    descriptor = descriptor_of(path)
    if descriptor is not None:
        if descriptor in (1, 2):  # what Python holds for it goes first
            (sys.stdout if descriptor == 1 else sys.stderr).flush()
        with os.fdopen(os.dup(descriptor), "wb") as stream:  # its offset shared
            _write_parts(stream, parts)
        return
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    try:
        before: os.stat_result | None = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        before = None
    if before is not None and stat.S_ISDIR(before.st_mode):
        raise IsADirectoryError(errno.EISDIR, "it is a folder, not a file", os.fspath(target))
    if before is not None and not stat.S_ISREG(before.st_mode):
        with open(target, "wb") as stream:  # a device or a pipe cannot be renamed over
            _write_parts(stream, parts)
        return
    folder = target.parent
    if not folder.is_dir():  # said of the folder asked for, not of the temporary file beside
        raise FileNotFoundError(
            errno.ENOENT,
            f"cannot write {os.fspath(target)!r}: there is no folder {os.fspath(folder)!r} "
            "(make it first, e.g. os.makedirs(folder, exist_ok=True))",
        )
    _remove_stale_temporaries(folder, target.name)
    temporary = folder / f".{_stem(target.name)}.{_TAG}-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    # A new file's mode is 0o666 less the umask (the kernel applies it); a replaced one keeps its own.
    mode = 0o666 if before is None else 0o600
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, mode)
    except OSError as error:  # said of the folder asked for, not of the temporary file's name
        raise type(error)(
            error.errno,
            f"cannot write into {os.fspath(folder)!r}: {error.strerror}",
            os.fspath(path),
        ) from None
    try:
        if before is not None and os.chmod in os.supports_fd:
            os.chmod(descriptor, stat.S_IMODE(before.st_mode))
        with os.fdopen(descriptor, "wb") as stream:
            _write_parts(stream, parts)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(folder)


_DESCRIPTOR = re.compile(r"/dev/(stdin|stdout|stderr)|/dev/fd/(\d+)|/proc/(?:self|(\d+))/fd/(\d+)")
_NAMED = {"stdin": 0, "stdout": 1, "stderr": 2}


def descriptor_of(path: str | os.PathLike[str]) -> int | None:
    """The descriptor of this process a path names (`/dev/stdin`, `/dev/stdout`,
    `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`), where it names one that is open; else,
    where the path is the very file or pipe standard output or error is (a link to
    `/dev/stdout`, the file the shell sends output to), that one; else None."""
    found = _DESCRIPTOR.fullmatch(os.fsdecode(path))  # a bytes path too, as open() takes it
    if found is None or (found.group(3) is not None and int(found.group(3)) != os.getpid()):
        return _same_as_standard(path)
    named = found.group(1)
    number = _NAMED[named] if named else int(found.group(2) or found.group(4))
    try:
        os.fstat(number)
    except OSError:
        return None
    return number


def _same_as_standard(path: str | os.PathLike[str]) -> int | None:
    """The standard descriptor (output or error: 1, 2) whose file or pipe `path` is, where
    one is (standard input's file is a file like another where the command does not read
    it)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        return None  # a device (/dev/null) is no one's own
    for number in (1, 2):
        try:
            held = os.fstat(number)
        except OSError:
            continue
        if (held.st_dev, held.st_ino) == (info.st_dev, info.st_ino):
            return number
    return None


def _write_parts(stream: BinaryIO, parts: Iterable[Any]) -> None:
    for part in parts:
        stream.write(part)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (where folders can be synced at all)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


_O_BINARY = getattr(os, "O_BINARY", 0)
# Temporary files are named `.<target>.<host>-<pid>-<random>.tmp`: a killed writer's can be told apart.
_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
_STEM_BYTES = 200
"""The longest target name a temporary file's name holds whole: 255 bytes (a file name's limit
on most file systems) less the 31 to 39 bytes of the dots, host tag, process id, random part
and `.tmp` around it, with room to spare."""


def _stem(name: str) -> str:
    """The target's name as its temporary file's name holds it: whole where that fits
    (`_STEM_BYTES`); else its first 100 bytes, `~` and 16 digits of its digest (a legal
    230-byte name's temporary sibling was too long: `File name too long`)."""
    encoded = os.fsencode(name)
    if len(encoded) <= _STEM_BYTES:
        return name
    kept, size = [], 0
    for char in name:  # whole characters, each as the file system takes it
        size += len(os.fsencode(char))
        if size > 100:
            break
        kept.append(char)
    return "".join(kept) + "~" + hashlib.sha256(encoded).hexdigest()[:16]


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Remove temporary files beside `name` left by writers on this host that were killed."""
    if os.name != "posix":
        return
    pattern = re.compile(re.escape(f".{_stem(name)}.{_TAG}-") + r"(\d+)-[0-9a-f]{8}\.tmp")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        found = pattern.fullmatch(entry.name)
        if found is not None and not _alive(int(found.group(1))):
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True

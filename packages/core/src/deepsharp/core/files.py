"""safetensors files, read and written by hand so that every way a file can be wrong has its message.

The layout (https://github.com/huggingface/safetensors): 8 bytes little-endian header length,
a JSON header mapping each tensor's name to its dtype, shape and byte range (plus
`__metadata__`, a mapping from text to text), then the bytes. Nothing in a file is ever run:
the header is JSON and the values are raw little-endian numbers.

Reading trusts nothing in the file (docs/reliability.md holds the figures):
- only a regular file is read (a pipe, a device or a folder is refused before a byte is read,
  and opening never blocks), and never more bytes than its size says;
- the header is at most `MAX_HEADER` bytes, a JSON object nested at most `MAX_DEPTH` deep,
  its numbers short; every tensor's bytes lie inside the file, the tensors tile the body;
- deepsharp's own files carry a SHA-256 digest of their header and body in the metadata
  (`digest`), checked on every load; a file without one is refused before its body is read
  (an older deepsharp's: `deepsharp seal FILE` records it), unless the caller asks to read
  other tools' files (`foreign=True`).

Writing is atomic (a temporary file beside the target, flushed, renamed into place); the file
keeps the mode of the one it replaces, or takes the umask's.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import secrets
import socket
import stat
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import FileFormatError

__all__ = [
    "MAX_HEADER",
    "Declared",
    "Expectation",
    "encode_safetensors",
    "read_metadata",
    "read_safetensors",
    "seal_safetensors",
    "write_atomically",
    "write_safetensors",
]

_DTYPES: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
# deepsharp's own headers are 1-5 KB (a checkpoint's grows ~70 bytes an epoch of history);
# JSON made of empty containers costs Python ~26x its size, so 1 MiB caps a header's cost
# near 30 MiB while leaving 200x room (about 14,000 epochs of history in a checkpoint).
MAX_HEADER = 1 << 20
MAX_DEPTH = 64  # deepsharp nests 3 deep in a header and 5 in its metadata's JSON
MAX_DIMENSIONS = 32  # NumPy 1.x's limit
# A whole number in deepsharp's metadata (a seed may be long; Python refuses over 4,300 digits).
_MAX_DIGITS = 1000
_MAX_ELEMENTS_BYTES = 1 << 48  # no dimension may promise more bytes than any file holds
_TWO_PASSES = 64 << 20  # bodies above this are checked against their digest before they are kept
_CHUNK = 1 << 20
_DIGEST = "digest"
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


# --- writing -------------------------------------------------------------------------------


def write_atomically(path: str | os.PathLike[str], data: bytes | Iterable[Any]) -> None:
    """Write `data` (bytes, or bytes-like parts, written as they come: a stream's memory stays
    flat) to a temporary file beside `path`,
    flush it to disk, then rename it into place: a crash, a kill or a full disk leaves either the
    old file or the new one, never half of one. The new file keeps the old one's mode, or takes
    the umask's. A device or a pipe (`/dev/stdout`) is written straight into; a symbolic link
    is written through (the file it names is replaced; the link stays)."""
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    parts = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
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
    temporary = folder / f".{target.name}.{_TAG}-{os.getpid()}-{secrets.token_hex(4)}.tmp"
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


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Remove temporary files beside `name` left by writers on this host that were killed."""
    if os.name != "posix":
        return
    pattern = re.compile(re.escape(f".{name}.{_TAG}-") + r"(\d+)-[0-9a-f]{8}\.tmp")
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


def encode_safetensors(tensors: Mapping[str, NDArray[Any]], metadata: Mapping[str, str]) -> bytes:
    """The whole file as bytes (tests craft files with it; saving streams the parts instead)."""
    return b"".join(bytes(part) for part in _encode(tensors, metadata))


def write_safetensors(
    path: str | os.PathLike[str], tensors: Mapping[str, NDArray[Any]], metadata: Mapping[str, str]
) -> None:
    """Save `tensors` and `metadata` atomically, with the digest of both in the metadata."""
    write_atomically(path, _encode(tensors, metadata))


def _encode(tensors: Mapping[str, NDArray[Any]], metadata: Mapping[str, str]) -> list[Any]:
    """The file's parts: the length and header, then each tensor's bytes (not copied)."""
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("safetensors metadata maps text to text")
    header: dict[str, Any] = {"__metadata__": {k: v for k, v in metadata.items() if k != _DIGEST}}
    arrays, offset = [], 0
    for name, array in tensors.items():
        if name == "__metadata__":
            raise ValueError("'__metadata__' cannot name a tensor")
        dtype = np.asarray(array).dtype.newbyteorder("<")
        if dtype not in _NAMES:
            raise TypeError(f"slot {name!r}: cannot store values of type {np.asarray(array).dtype}")
        array = np.ascontiguousarray(array, dtype=dtype)
        header[name] = {
            "dtype": _NAMES[dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        arrays.append(array)
        offset += array.nbytes
    digest = _canonical_digest(header)
    for array in arrays:
        digest.update(_bytes_of(array))
    header["__metadata__"][_DIGEST] = f"sha256:{digest.hexdigest()}"
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    if len(text) > MAX_HEADER:
        raise ValueError(
            f"the header would be {len(text):,} bytes, over the {MAX_HEADER:,} deepsharp reads back"
        )
    return [struct.pack("<Q", len(text)) + text, *(_bytes_of(array) for array in arrays)]


def _bytes_of(array: NDArray[Any]) -> memoryview:
    flat: Any = array.reshape(-1)
    return memoryview(flat).cast("B") if array.size else memoryview(b"")


def _canonical_digest(header: Mapping[str, Any]) -> Any:
    """SHA-256 over the header re-encoded canonically (keys sorted, no spaces, no digest);
    the body's bytes follow."""
    bare = dict(header)
    bare["__metadata__"] = {
        k: v for k, v in dict(header.get("__metadata__", {})).items() if k != _DIGEST
    }
    text = json.dumps(bare, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii") + b"\n")


def seal_safetensors(path: str | os.PathLike[str], what: str = "file") -> None:
    """Record the digest in a file written before deepsharp recorded them (checked otherwise
    as any file is); a file that already carries one must match it."""
    tensors, metadata = _read(path, what, require_digest=False)
    write_safetensors(path, tensors, metadata)


# --- reading -------------------------------------------------------------------------------


class Declared(NamedTuple):
    """What a file's header says of one tensor, before a byte of its values is read."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]


Expectation = Callable[[Mapping[str, str], Mapping[str, Declared]], None]
"""A loader's check of a file's metadata and declared tensors (a FileFormatError if they are not
what its architecture needs), run before any tensor's values are read."""


def read_safetensors(
    path: str | os.PathLike[str],
    what: str = "file",
    *,
    foreign: bool = False,
    expect: Expectation | None = None,
) -> tuple[dict[str, NDArray[Any]], dict[str, str]]:
    """The tensors and metadata (without the digest) of a safetensors file, or a
    FileFormatError saying what is wrong (FileNotFoundError where there is no file).

    deepsharp's files carry a digest, checked here. A file without one is refused before its
    body is read, unless `foreign` asks to read other tools' files (a digest is then checked
    where there is one). `expect` checks the metadata and each tensor's declared dtype and
    shape before any values are read or hashed, so a header that promises gigabytes its
    architecture does not need costs nothing; where it refuses a file whose digest does not
    match either, the file is said to be damaged."""
    return _read(path, what, require_digest=not foreign, expect=expect)


def read_metadata(path: str | os.PathLike[str], what: str = "file") -> dict[str, str]:
    """The metadata of a safetensors file from its header alone, checked as any header is but
    not against its digest (which covers the body too): for looking, not for loading."""
    where = f"{what} {os.fspath(path)!r}"
    with _open_regular(path, what, where) as stream:
        size = os.fstat(stream.fileno()).st_size
        length = _header_length(stream, size, where)
        header = _parse_header(_read_exactly(stream, length, where), where)
    metadata = _metadata(header.pop("__metadata__", {}), where)
    metadata.pop(_DIGEST, None)
    if metadata.get("format", "").startswith("deepsharp."):
        for key, value in metadata.items():
            _check_json_text(value, f"{where}: its metadata entry {key!r}")
    return metadata


def _read(
    path: str | os.PathLike[str],
    what: str,
    require_digest: bool,
    expect: Expectation | None = None,
) -> tuple[dict[str, NDArray[Any]], dict[str, str]]:
    where = f"{what} {os.fspath(path)!r}"
    with _open_regular(path, what, where) as stream:
        size = os.fstat(stream.fileno()).st_size
        length = _header_length(stream, size, where)
        header = _parse_header(_read_exactly(stream, length, where), where)
        metadata = _metadata(header.pop("__metadata__", {}), where)
        recorded = metadata.pop(_DIGEST, None)
        if metadata.get("format", "").startswith("deepsharp."):
            for key, value in metadata.items():
                _check_json_text(value, f"{where}: its metadata entry {key!r}")
        entries = _layout(header, size - 8 - length, where)
        if recorded is None and require_digest:
            _refuse_undigested(path, where, metadata)
        digest = None
        if recorded is not None:
            digest = _canonical_digest({**header, "__metadata__": metadata})
            if not re.fullmatch(r"sha256:[0-9a-f]{64}", recorded):
                raise FileFormatError(f"{where}: its digest {recorded[:80]!r} is not sha256:<hex>")
        body = 8 + length
        if expect is not None:
            _expected(expect, metadata, entries, stream, (body, size), digest, recorded, where)
        _check_memory(size - body, where)
        if digest is not None and size - body > _TWO_PASSES:  # a big file is checked before kept
            _check_digest(_hash_body(stream, body, size, digest.copy(), where), recorded, where)
            stream.seek(body)
        tensors = {name: _read_tensor(stream, entry, digest, where) for name, entry in entries}
        if digest is not None:
            _check_digest(digest, recorded, where)
    return tensors, metadata


def _expected(
    expect: Expectation,
    metadata: Mapping[str, str],
    entries: list[tuple[str, _Entry]],
    stream: BinaryIO,
    body: tuple[int, int],
    digest: Any,
    recorded: str | None,
    where: str,
) -> None:
    """The loader's expectation of the declared tensors; a refusal of a file whose digest does
    not match is said as damage (checked where the body is small enough to hash at once)."""
    try:
        expect(metadata, {name: Declared(e.dtype, tuple(e.shape)) for name, e in entries})
    except FileFormatError:
        start, stop = body
        if digest is not None and stop - start <= _TWO_PASSES:
            _check_digest(_hash_body(stream, start, stop, digest.copy(), where), recorded, where)
        raise
    stream.seek(body[0])


def _check_memory(count: int, where: str) -> None:
    """Refuse, before reading it, a body larger than this process may ever hold."""
    ceiling = _memory_ceiling()
    if ceiling is not None and count > ceiling:
        raise FileFormatError(
            f"{where}: its tensors hold {count:,} bytes, more than this process can hold "
            f"({ceiling:,} bytes of memory): deepsharp's networks are far smaller; if this one "
            "is not, load it on a machine with more memory"
        )


def _memory_ceiling() -> int | None:
    """The most memory this process can ever have: the machine's, or less where limited."""
    found: list[int] = []
    try:
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            found.append(limit)
    except (ImportError, AttributeError, ValueError, OSError):
        pass
    return min(found) if found else None


def _refuse_undigested(path: str | os.PathLike[str], where: str, metadata: dict[str, str]) -> None:
    found = metadata.get("format")
    if found is not None and found.startswith("deepsharp."):
        raise FileFormatError(
            f"{where} carries no digest (an older deepsharp saved it), so deepsharp cannot "
            "tell whether it was damaged: if you trust this copy, "
            f"`deepsharp seal {os.fspath(path)}` records one"
        )
    raise FileFormatError(
        f"{where} is a safetensors file that deepsharp did not save (its metadata names "
        f"{'no format' if found is None else f'the format {found[:80]!r}'} and carries no "
        "digest): deepsharp loads the networks, trained networks and checkpoints it saves"
    )


class _Regular:
    """A regular file opened for reading without blocking, closed on exit."""

    def __init__(self, descriptor: int) -> None:
        self.stream: BinaryIO = os.fdopen(descriptor, "rb", buffering=0)

    def __enter__(self) -> BinaryIO:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        self.stream.close()


def _open_regular(path: str | os.PathLike[str], what: str, where: str) -> _Regular:
    if "\0" in os.fspath(path):
        raise FileNotFoundError(
            f"no {what} at {os.fspath(path)!r}: a path cannot hold a NUL character"
        )
    try:
        _refuse_irregular(os.stat(path), where)
        # O_NONBLOCK: should the path become a pipe between stat and open, open cannot hang.
        flags = os.O_RDONLY | _O_BINARY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        descriptor = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"no {what} at {os.fspath(path)!r}") from None
    except IsADirectoryError:
        raise FileFormatError(f"{where} is a folder, not a file") from None
    try:
        _refuse_irregular(os.fstat(descriptor), where)
    except BaseException:
        os.close(descriptor)
        raise
    return _Regular(descriptor)


def _refuse_irregular(info: os.stat_result, where: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise FileFormatError(f"{where} is {kind}, not a file: deepsharp reads only regular files")


def _read_exactly(stream: BinaryIO, count: int, where: str) -> bytes:
    data = bytearray(count)
    if _fill(stream, memoryview(data)) < count:
        raise FileFormatError(
            f"{where} is truncated: it ended while being read (is it being written?)"
        )
    return bytes(data)


def _fill(stream: BinaryIO, view: memoryview) -> int:
    """Read into `view` until it is full or the file ends; how many bytes came."""
    done = 0
    while done < len(view):
        got = stream.readinto(view[done:])  # type: ignore[attr-defined]
        if not got:
            break
        done += got
    return done


def _header_length(stream: BinaryIO, size: int, where: str) -> int:
    start = _read_exactly(stream, min(size, 8), where)
    # A header of 640, 896, 1152 or 1408 bytes begins like a pickle: only a length that
    # cannot be a header's says "pickle".
    pickle = start[:2] in _PICKLE_MAGIC or start[:4] in _PICKLE_MAGIC
    if size < 8:
        if pickle:
            _refuse_pickle(where)
        raise FileFormatError(f"{where} is truncated: {size} bytes, too short for a header")
    (length,) = struct.unpack("<Q", start)
    if pickle and (length > size - 8 or length > MAX_HEADER):
        _refuse_pickle(where)
    if length > size - 8:
        if length > max(MAX_HEADER, size):
            raise FileFormatError(
                f"{where} is not a safetensors file (its first bytes are garbage)"
            )
        raise FileFormatError(
            f"{where} is truncated: its header says {length:,} bytes, the file holds {size - 8:,}"
        )
    if length > MAX_HEADER:
        raise FileFormatError(
            f"{where}: its header is {length:,} bytes, over the {MAX_HEADER:,} deepsharp reads "
            "(its own are a few kilobytes)"
        )
    return int(length)


def _refuse_pickle(where: str) -> None:
    raise FileFormatError(
        f"{where} is a pickle (or a zip of pickles, as torch.save writes), not a safetensors "
        "file; deepsharp never loads pickles, since loading one can run any code"
    )


class _Refused(ValueError):
    """A header that is JSON but not the JSON a safetensors header may be."""


def _parse_header(raw: bytes, where: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileFormatError(
            f"{where} is not a safetensors file: its header is not JSON ({error})"
        ) from None
    if not text.lstrip(" \t\r\n").startswith("{"):
        raise FileFormatError(f"{where}: its header must be a JSON object")
    _check_depth(text, f"{where}: its header")
    try:
        header = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_whole,
            parse_constant=_constant,
        )
    except _Refused as error:
        raise FileFormatError(f"{where}: its header {error}") from None
    except (ValueError, RecursionError) as error:
        raise FileFormatError(
            f"{where} is not a safetensors file: its header is not JSON ({error})"
        ) from None
    if not isinstance(header, dict):
        raise FileFormatError(f"{where}: its header must be a JSON object")
    return header


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made: dict[str, Any] = {}
    for key, value in pairs:
        if key in made:
            raise _Refused(f"names {key[:80]!r} twice")
        made[key] = value
    return made


def _whole(text: str) -> int:
    if len(text.lstrip("-")) > 20:
        raise _Refused(f"holds a number of {len(text)} digits ({text[:20]}...)")
    return int(text)


def _constant(text: str) -> Any:
    raise _Refused(f"holds {text}, which JSON does not allow")


def _check_depth(text: str, where: str) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH, or with whole numbers too long to be ours,
    before anything parses it (the parser's memory and stack grow with both). One pass over
    the text, whatever its strings hold."""
    marks = np.frombuffer(text.encode("utf-8", "replace"), np.uint8)
    outside = ~_in_strings(marks)
    steps = np.zeros(marks.shape, np.int8)
    steps[outside & ((marks == _OPEN_LIST) | (marks == _OPEN_OBJECT))] = 1
    steps[outside & ((marks == _CLOSE_LIST) | (marks == _CLOSE_OBJECT))] = -1
    depth = int(np.cumsum(steps, dtype=np.int32).max(initial=0))
    if depth > MAX_DEPTH:
        raise FileFormatError(
            f"{where} is nested {depth} deep; deepsharp reads at most {MAX_DEPTH}"
        )
    digits = _longest_run(outside & (marks >= _ZERO) & (marks <= _NINE))
    if digits > _MAX_DIGITS:
        raise FileFormatError(
            f"{where} holds a number of {digits} digits; deepsharp's have at most {_MAX_DIGITS}"
        )


_QUOTE, _BACKSLASH, _ZERO, _NINE = (ord(c) for c in '"\\09')
_OPEN_LIST, _CLOSE_LIST, _OPEN_OBJECT, _CLOSE_OBJECT = (ord(c) for c in "[]{}")


def _in_strings(marks: NDArray[np.uint8]) -> NDArray[np.bool_]:
    """Which bytes of JSON text lie in a string, its quotes included (a string left open runs
    to the end). A quote closes or opens one unless an odd run of backslashes comes before it;
    worked out for all quotes at once (a pattern that backtracks takes quadratic time here), in
    arrays of 4 bytes a byte of text at most (a header of 1 MiB: a few MiB)."""
    index = np.arange(marks.size, dtype=np.int32)
    # Where each run of backslashes began: the last byte up to here that is no backslash.
    last_other = np.where(marks != _BACKSLASH, index, np.int32(-1))
    del index
    np.maximum.accumulate(last_other, out=last_other)
    quotes = np.flatnonzero(marks == _QUOTE).astype(np.int32)
    before = np.maximum(quotes - 1, 0)
    escaped = (quotes > 0) & ((before - last_other[before]) % 2 == 1)
    del last_other
    turns = np.zeros(marks.size, np.uint8)
    turns[quotes[~escaped]] = 1
    inside: NDArray[np.bool_] = np.bitwise_xor.accumulate(turns).astype(bool)
    inside |= turns.astype(bool)
    return inside


def _longest_run(flags: NDArray[np.bool_]) -> int:
    """The length of the longest run of True in `flags`."""
    ends = np.zeros(1, np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate((ends, flags.view(np.int8), ends))))
    return int((edges[1::2] - edges[::2]).max(initial=0))


def _check_json_text(value: str, where: str) -> None:
    """deepsharp's metadata entries (JSON, or plain text) are held to the header's bounds."""
    _check_depth(value, where)


def _metadata(found: Any, where: str) -> dict[str, str]:
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in found.items()
    ):
        raise FileFormatError(f"{where}: its metadata must map text to text")
    return found


class _Entry:
    """Where one tensor's bytes lie and how to read them."""

    def __init__(self, dtype: np.dtype[Any], shape: list[int], start: int, stop: int) -> None:
        self.dtype, self.shape, self.start, self.stop = dtype, shape, start, stop


def _layout(header: dict[str, Any], body: int, where: str) -> list[tuple[str, _Entry]]:
    """Each tensor's entry, in the order of its bytes; they must tile the body exactly."""
    entries = sorted(
        ((name, _entry(where, name, value)) for name, value in header.items()),
        key=lambda item: (item[1].start, item[1].stop),
    )
    end = 0
    for name, entry in entries:
        if entry.start != end:
            problem = "overlaps the one before" if entry.start < end else "leaves a gap before it"
            raise FileFormatError(
                f"{where}: tensor {name!r} at bytes {[entry.start, entry.stop]} {problem} "
                "(a safetensors file's tensors follow one another)"
            )
        end = entry.stop
    if end > body:
        raise FileFormatError(
            f"{where} is truncated: its tensors need {end:,} bytes, the file holds {body:,}"
        )
    if end < body:
        raise FileFormatError(
            f"{where} holds {body - end:,} bytes after its last tensor (was it appended to?)"
        )
    return entries


def _entry(where: str, name: str, entry: Any) -> _Entry:
    if not isinstance(entry, dict) or {"dtype", "shape", "data_offsets"} - entry.keys():
        raise FileFormatError(f"{where}: tensor {name[:80]!r} lacks dtype, shape or data_offsets")
    found = entry["dtype"]
    dtype = _DTYPES.get(found) if isinstance(found, str) else None
    if dtype is None:
        raise FileFormatError(
            f"{where}: tensor {name[:80]!r} has dtype {str(found)[:40]!r}; "
            "deepsharp reads F32, F64 and I64"
        )
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not (
        isinstance(shape, list)
        and all(type(s) is int and s >= 0 for s in shape)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int for o in offsets)
    ):
        raise FileFormatError(
            f"{where}: tensor {name[:80]!r} has a malformed shape or byte range "
            "(whole numbers, not negative, and two offsets)"
        )
    if len(shape) > MAX_DIMENSIONS:
        raise FileFormatError(
            f"{where}: tensor {name[:80]!r} has {len(shape)} dimensions; "
            f"deepsharp reads at most {MAX_DIMENSIONS}"
        )
    if math.prod(max(s, 1) for s in shape) * dtype.itemsize > _MAX_ELEMENTS_BYTES:
        raise FileFormatError(
            f"{where}: tensor {name[:80]!r} has shape {shape[:8]}, larger than any file holds"
        )
    start, stop = offsets
    if not 0 <= start <= stop or stop - start != math.prod(shape) * dtype.itemsize:
        raise FileFormatError(
            f"{where}: tensor {name[:80]!r} of shape {shape} does not fit its byte range {offsets}"
        )
    return _Entry(dtype, shape, start, stop)


def _read_tensor(stream: BinaryIO, entry: _Entry, digest: Any, where: str) -> NDArray[Any]:
    array: NDArray[Any] = np.empty(math.prod(entry.shape), entry.dtype)
    view = _bytes_of(array)
    if _fill(stream, view) < len(view):
        raise FileFormatError(
            f"{where} is truncated: it ended while being read (is it being written?)"
        )
    if digest is not None:
        digest.update(view)
    return array.reshape(entry.shape).astype(entry.dtype.newbyteorder("="), copy=False)


def _hash_body(stream: BinaryIO, start: int, stop: int, digest: Any, where: str) -> Any:
    stream.seek(start)
    chunk = memoryview(bytearray(_CHUNK))
    left = stop - start
    while left:
        got = _fill(stream, chunk[: min(left, _CHUNK)])
        if not got:
            raise FileFormatError(f"{where} is truncated: it ended while being read")
        digest.update(chunk[:got])
        left -= got
    return digest


def _check_digest(digest: Any, recorded: str | None, where: str) -> None:
    if f"sha256:{digest.hexdigest()}" != recorded:
        raise FileFormatError(
            f"{where} is damaged: its contents do not match the SHA-256 digest recorded when it "
            "was saved (a changed byte, a cut or a bad copy): use another copy, or save it again"
        )

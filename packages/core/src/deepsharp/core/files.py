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
keeps the mode of the one it replaces, or takes the umask's (`deepsharp.core.atomic`). The
header's JSON is parsed within its bounds by `deepsharp.core.header_json`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, NamedTuple

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.atomic import write_atomically
from deepsharp.core.errors import FileFormatError
from deepsharp.core.header_json import (
    check_json_text,
    metadata_of,
    parse_header,
    refuse_pickle,
)

__all__ = [
    "MAX_HEADER",
    "Declared",
    "Expectation",
    "encode_safetensors",
    "read_metadata",
    "read_safetensors",
    "seal_safetensors",
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
MAX_DIMENSIONS = 32  # NumPy 1.x's limit
_MAX_ELEMENTS_BYTES = 1 << 48  # no dimension may promise more bytes than any file holds
_TWO_PASSES = 64 << 20  # bodies above this are checked against their digest before they are kept
_CHUNK = 1 << 20
_DIGEST = "digest"
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")
_O_BINARY = getattr(os, "O_BINARY", 0)
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


# --- writing -------------------------------------------------------------------------------


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
        array = np.asarray(array, dtype=dtype, order="C")  # (0-d kept: trial EX4)
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


def seal_safetensors(
    path: str | os.PathLike[str],
    what: str = "file",
    check: Callable[[str, Mapping[str, str]], None] | None = None,
) -> bool:
    """Record the digest in a file written before deepsharp recorded them (checked otherwise
    as any file is); a file that already carries one must match it, and is left as it is
    (not written again: a hard link to it stays one, a read-only file is no error). Whether
    the digest was written. `check(sealed, metadata)`: its loader's checks, run on a sealed
    copy (a temporary file) before the file is written: a file its loader refuses is not
    sealed. A file changed while it was read (written meanwhile) is refused: its digest would
    be of bytes it never held whole (trial HG)."""
    before = _stamp_of(path)
    tensors, metadata = _read(path, what, require_digest=False)
    if not str(metadata.get("format", "")).startswith("deepsharp."):
        raise FileFormatError(
            f"{os.fspath(path)}: a safetensors file deepsharp did not save (its metadata names "
            "no deepsharp format): its digest is recorded only in a network, trained-network or "
            "checkpoint file; the file is left as it is"
        )
    if _carries_digest(path, what):  # checked as it was read: it matches
        return False
    if _stamp_of(path) != before:
        raise FileFormatError(
            f"{os.fspath(path)} changed while it was read (is something writing it?): its "
            "digest would be of bytes it never held whole; seal it once nothing writes to it "
            "(nothing was written)"
        )
    if check is not None:
        with tempfile.TemporaryDirectory(prefix="deepsharp-seal-") as folder:
            sealed = os.path.join(folder, os.path.basename(os.fspath(path)))
            write_safetensors(sealed, tensors, metadata)
            try:
                check(sealed, metadata)
            except FileFormatError as error:
                said = str(error).replace(sealed, os.fspath(path))
                raise FileFormatError(f"{said} (nothing was written)") from None
    write_safetensors(path, tensors, metadata)
    return True


def _stamp_of(path: str | os.PathLike[str]) -> tuple[int, int, int, int]:
    """What tells a file's contents changed: its inode, size and times of change."""
    info = os.stat(path)
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _carries_digest(path: str | os.PathLike[str], what: str) -> bool:
    where = f"{what} {os.fspath(path)!r}"
    with _open_regular(path, what, where) as stream:
        length = _header_length(stream, os.fstat(stream.fileno()).st_size, where)
        header = parse_header(_read_exactly(stream, length, where), where)
        return _DIGEST in metadata_of(header.get("__metadata__", {}), where)


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
        header = parse_header(_read_exactly(stream, length, where), where)
    metadata = metadata_of(header.pop("__metadata__", {}), where)
    metadata.pop(_DIGEST, None)
    if metadata.get("format", "").startswith("deepsharp."):
        for key, value in metadata.items():
            check_json_text(value, f"{where}: its metadata entry {key!r}")
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
        header = parse_header(_read_exactly(stream, length, where), where)
        metadata = metadata_of(header.pop("__metadata__", {}), where)
        recorded = metadata.pop(_DIGEST, None)
        if metadata.get("format", "").startswith("deepsharp."):
            for key, value in metadata.items():
                check_json_text(value, f"{where}: its metadata entry {key!r}")
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
    path = os.fsdecode(path)  # a bytes path too, as open() takes it
    if "\0" in path:
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
            refuse_pickle(where, zipped=start[:2] == b"PK")
        raise FileFormatError(f"{where} is truncated: {size} bytes, too short for a header")
    (length,) = struct.unpack("<Q", start)
    if pickle and (length > size - 8 or length > MAX_HEADER):
        refuse_pickle(where, zipped=start[:2] == b"PK")
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

"""safetensors files, read and written by hand so that every way a file can be wrong has its message.

The layout (https://github.com/huggingface/safetensors): 8 bytes little-endian header length,
a JSON header mapping each tensor's name to its dtype, shape and byte range (plus
`__metadata__`, a mapping from text to text), then the bytes. Nothing in a file is ever run:
the header is JSON and the values are raw little-endian numbers.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import FileFormatError

__all__ = ["read_safetensors", "write_atomically", "write_safetensors"]

_DTYPES: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04")


def write_atomically(path: str | os.PathLike[str], data: bytes | Iterable[bytes]) -> None:
    """Write `data` (bytes, or parts of it written as they come: a stream's memory stays
    flat) to a temporary file beside `path`, flush it to disk, then rename it into place: a
    crash leaves either the old file or the new one, never half of one."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            for part in [data] if isinstance(data, (bytes, bytearray)) else data:
                file.write(part)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def encode_safetensors(tensors: Mapping[str, NDArray[Any]], metadata: Mapping[str, str]) -> bytes:
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    blobs, offset = [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        dtype = array.dtype.newbyteorder("<")
        if dtype not in _NAMES:
            raise TypeError(f"slot {name!r}: cannot store values of type {array.dtype}")
        blob = array.astype(dtype, copy=False).tobytes()
        header[name] = {
            "dtype": _NAMES[dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(
    path: str | os.PathLike[str], tensors: Mapping[str, NDArray[Any]], metadata: Mapping[str, str]
) -> None:
    write_atomically(path, encode_safetensors(tensors, metadata))


def read_safetensors(
    path: str | os.PathLike[str], what: str = "file"
) -> tuple[dict[str, NDArray[Any]], dict[str, str]]:
    """The tensors and metadata of a safetensors file, or a FileFormatError saying what is wrong."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no {what} at {os.fspath(path)!r}") from None
    where = f"{what} {os.fspath(path)!r}"
    if data[:2] in _PICKLE_MAGIC or data[:4] in _PICKLE_MAGIC:
        raise FileFormatError(
            f"{where} is a pickle (or a zip of pickles, as torch.save writes), not a safetensors "
            "file; deepsharp never loads pickles, since loading one can run any code"
        )
    if len(data) < 8:
        raise FileFormatError(f"{where} is truncated: {len(data)} bytes, too short for a header")
    (length,) = struct.unpack("<Q", data[:8])
    if length > _MAX_HEADER or 8 + length > len(data):
        if length > _MAX_HEADER:
            raise FileFormatError(
                f"{where} is not a safetensors file (its first bytes are garbage)"
            )
        raise FileFormatError(
            f"{where} is truncated: its header says {length} bytes, the file holds {len(data) - 8}"
        )
    try:
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FileFormatError(
            f"{where} is not a safetensors file: its header is not JSON ({error})"
        ) from None
    if not isinstance(header, dict):
        raise FileFormatError(f"{where}: its header must be a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise FileFormatError(f"{where}: its metadata must map text to text")
    body = data[8 + length :]
    tensors: dict[str, NDArray[Any]] = {}
    for name, entry in header.items():
        tensors[name] = _tensor(where, name, entry, body)
    return tensors, metadata


def _tensor(where: str, name: str, entry: Any, body: bytes) -> NDArray[Any]:
    if not isinstance(entry, dict) or {"dtype", "shape", "data_offsets"} - entry.keys():
        raise FileFormatError(f"{where}: tensor {name!r} lacks dtype, shape or data_offsets")
    dtype = _DTYPES.get(entry["dtype"])
    if dtype is None:
        raise FileFormatError(
            f"{where}: tensor {name!r} has dtype {entry['dtype']!r}; deepsharp reads F32, F64 and I64"
        )
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not (
        isinstance(shape, list)
        and all(isinstance(s, int) and s >= 0 for s in shape)
        and isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) for o in offsets)
    ):
        raise FileFormatError(f"{where}: tensor {name!r} has a malformed shape or byte range")
    start, stop = offsets
    if not 0 <= start <= stop or stop - start != math.prod(shape) * dtype.itemsize:
        raise FileFormatError(
            f"{where}: tensor {name!r} of shape {shape} does not fit its byte range {offsets}"
        )
    if stop > len(body):
        raise FileFormatError(
            f"{where} is truncated: tensor {name!r} ends at byte {stop}, the file holds {len(body)}"
        )
    array: NDArray[Any] = np.frombuffer(body, dtype=dtype, count=math.prod(shape), offset=start)
    return array.reshape(shape).astype(dtype.newbyteorder("="))

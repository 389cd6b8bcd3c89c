"""A streamed run's rows between passes: their features and targets spilled to temporary files,
and the order in which an epoch visits them.

A run on a scanned file reads the file twice before its first step: once to learn the pipeline,
once to turn every row into features and targets, written row after row (fixed-width records)
into a `Spill` for each part of the rows (training, validation, test). Every later pass reads
the spills, so no text is parsed twice and any row is found by its number. A spill's files are
temporary files (without a name where the system allows, else unlinked on close), gone when the
run is.

An epoch visits the training rows' blocks (`BLOCKS_PER_BUFFER` blocks fill a buffer) in an
order drawn from its key (`deepsharp.core.random.KeyedOrder`: a keyed permutation that needs no
table, so the order's memory does not grow with the file); the rows of each buffer are shuffled
together.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import weakref
from collections.abc import Sequence
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BLOCKS_PER_BUFFER", "Spill", "block_rows", "buffers", "spill_folder"]

BLOCKS_PER_BUFFER = 64


def _temporary(folder: str | None) -> IO[bytes]:
    handle: IO[bytes] = tempfile.TemporaryFile(dir=folder, prefix="deepsharp-spill-", buffering=0)
    return handle


def _write_all(handle: IO[bytes], data: bytes) -> None:
    """Every byte of `data` at the file's end (an unbuffered write may take fewer)."""
    view = memoryview(data)
    while view:
        done = handle.write(view)
        if not done:
            raise OSError(f"the system took none of {len(view)} bytes")
        view = view[done:]


def _fill(handle: IO[bytes], into: NDArray[Any], offset: int) -> None:
    """Read `into`'s bytes from `offset` of the file."""
    view = into.data.cast("B")
    handle.seek(offset)
    done = 0
    while done < len(view):
        got = handle.readinto(view[done:])  # type: ignore[attr-defined]
        if not got:
            raise OSError(f"a spill file ended early: {done} of {len(view)} bytes at {offset}")
        done += got


class Spill:
    """Rows' arrays (each input's features, then the targets) written one after another, each
    kind to a file of its own, read back by row number. Each kind's dtype and row shape are those
    of its first write."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self.rows = 0
        self._files: list[IO[bytes]] = []
        self._kinds: list[tuple[np.dtype[Any], tuple[int, ...]]] = []
        self._digests: list[Any] = []  # each kind's bytes, as written one after another

    def __len__(self) -> int:
        return self.rows

    def write(self, arrays: Sequence[NDArray[Any]]) -> None:
        """Add these rows (one array a kind, each of the same rows) at the end."""
        if not self._files:
            for array in arrays:
                handle = _temporary(self.folder)
                weakref.finalize(self, handle.close)
                self._files.append(handle)
                self._kinds.append((array.dtype, tuple(array.shape[1:])))
                self._digests.append(hashlib.sha256())
        if len(arrays[0]) == 0:
            return
        for handle, array, (dtype, _), digest in zip(
            self._files, arrays, self._kinds, self._digests, strict=True
        ):
            written = np.ascontiguousarray(array, dtype).tobytes()
            try:
                _write_all(handle, written)
            except OSError as error:  # a full disk was a bare "No space left" (trial SD)
                raise OSError(
                    error.errno,
                    f"could not spill the rows' features and targets into "
                    f"{self.folder or tempfile.gettempdir()} ({error.strerror or error}): a "
                    f"spill takes {self._row_bytes():,} bytes a row, each part of the split "
                    "its own: give scan_csv(..., spill_dir=FOLDER) a folder with room",
                ) from None
            digest.update(written)
        self.rows += len(arrays[0])

    def _row_bytes(self) -> int:
        return sum(dtype.itemsize * math.prod(shape) for dtype, shape in self._kinds)

    @property
    def digest(self) -> Any:
        """A SHA-256 digest of every kind's bytes (each kind's rows in their order, however
        they were cut into writes), with each kind's dtype and row shape: what a process of a
        data-parallel run compares with the others' before its first step, and what a resumed
        run compares with its checkpoint's."""
        made = hashlib.sha256()
        for (dtype, shape), digest in zip(self._kinds, self._digests, strict=True):
            made.update(f"{dtype.str}{shape}".encode())
            made.update(digest.digest())
        return made

    def read(self, start: int, stop: int) -> list[NDArray[Any]]:
        """Rows start .. stop - 1, one array a kind."""
        return self._ranges(np.array([start]), np.array([min(stop, self.rows)]))

    def blocks(self, numbers: NDArray[np.int64], block: int) -> list[NDArray[Any]]:
        """The rows of the blocks `numbers` (block b: rows b * block .. b * block + block - 1,
        those there are), one after another in that order: one read a block into place."""
        starts = numbers * block
        return self._ranges(starts, np.minimum(starts + block, self.rows))

    def _ranges(self, starts: NDArray[np.int64], stops: NDArray[np.int64]) -> list[NDArray[Any]]:
        count = int(np.maximum(stops - starts, 0).sum())
        arrays = [np.empty((count, *shape), dtype) for dtype, shape in self._kinds]
        if count == 0:
            return arrays
        at = 0
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            if stop > start:
                for handle, array in zip(self._files, arrays):
                    width = array[0].nbytes
                    _fill(handle, array[at : at + stop - start], start * width)
                at += stop - start
        return arrays

    def close(self) -> None:
        for handle in self._files:
            handle.close()


def block_rows(buffer_rows: int) -> int:
    """Rows a block holds: a buffer's worth over BLOCKS_PER_BUFFER (at least 1)."""
    return max(1, buffer_rows // BLOCKS_PER_BUFFER)


def buffers(count: int, block: int, buffer_rows: int) -> tuple[int, int]:
    """How many blocks `count` rows make, and how many of them fill a buffer."""
    return math.ceil(count / block), max(1, buffer_rows // block)


def spill_folder(folder: str | None) -> str | None:
    """The folder spills go to (checked to exist), or None for the system's temporary one."""
    if folder is not None and not os.path.isdir(folder):
        raise FileNotFoundError(f"spill_dir {folder!r} is not a folder: name one that exists")
    return folder

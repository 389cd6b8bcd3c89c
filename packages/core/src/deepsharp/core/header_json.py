"""A safetensors header's JSON, parsed within bounds: nested at most `MAX_DEPTH` deep and its
whole numbers short (checked in one pass over the text before anything parses it), no name given
twice, no NaN or Infinity, the metadata a mapping of text to text; and the refusal of a pickle,
which deepsharp never loads (`deepsharp.core.files` reads the file around it).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import FileFormatError

__all__ = ["MAX_DEPTH", "check_json_text", "metadata_of", "parse_header", "refuse_pickle"]

MAX_DEPTH = 64  # deepsharp nests 3 deep in a header and 5 in its metadata's JSON
# A whole number in deepsharp's metadata (a seed may be long; Python refuses over 4,300 digits).
_MAX_DIGITS = 1000


def refuse_pickle(where: str, zipped: bool = False) -> None:
    if zipped:
        raise FileFormatError(
            f"{where} is a zip archive (torch.save writes its pickles in one), not a "
            "safetensors file; deepsharp never loads pickles, since loading one can run any code"
        )
    raise FileFormatError(
        f"{where} is a pickle, not a safetensors file; deepsharp never loads pickles, since "
        "loading one can run any code"
    )


class _Refused(ValueError):
    """A header that is JSON but not the JSON a safetensors header may be."""


def parse_header(raw: bytes, where: str) -> dict[str, Any]:
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


def check_json_text(value: str, where: str) -> None:
    """deepsharp's metadata entries (JSON, or plain text) are held to the header's bounds."""
    _check_depth(value, where)


def metadata_of(found: Any, where: str) -> dict[str, str]:
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in found.items()
    ):
        raise FileFormatError(f"{where}: its metadata must map text to text")
    return found

"""Dates, times and durations as labels: each reading of one value gives one plain form.

A category or a target learned from one reading of a column and served from another would
otherwise find no label (all zeros, silently: trial P3): pandas gives a date as a `Timestamp`,
"2024-01-01 00:00:00", where a CSV holds "2024-01-01", NumPy as "2024-01-01T00:00:00.000000000";
pandas gives a duration as "0 days 00:05:00", where Python's `timedelta` (a Parquet file read by
pyarrow) says "0:05:00" and a CSV pandas wrote may hold "1 days". `time_plain` gives each its
plain form: a date alone where its time is midnight (and it names no zone), else the date, a
space and the time, its fraction without trailing zeros, its zone as written ("Z" as
"+00:00"); a duration as pandas writes it, "D days HH:MM:SS" and a fraction.
"""

from __future__ import annotations

import re

__all__ = ["time_plain"]

_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?(Z|[+-]\d{2}:\d{2})?"
)
_PANDAS_DURATION = re.compile(r"(-?\d+) days?(?: \+?(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?)?")
_PYTHON_DURATION = re.compile(r"(?:(-?\d+) days?, )?(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?")


def time_plain(text: str) -> str | None:
    """The plain form of a date, a date and time or a duration's text (module docstring), where
    it is one and has another; None otherwise."""
    if not text or not (text[0].isdigit() or text[0] == "-"):
        return None
    found = _DATE_TIME.fullmatch(text)
    if found:
        date, hours, minutes, seconds, fraction, zone = found.groups()
        fraction = (fraction or "").rstrip("0")
        zone = "+00:00" if zone == "Z" else (zone or "")
        clock = (hours or "00", minutes or "00", seconds or "00")
        if clock == ("00", "00", "00") and not fraction and not zone:
            plain = date
        else:
            plain = f"{date} {':'.join(clock)}{'.' + fraction if fraction else ''}{zone}"
        return plain if plain != text else None
    found = _PANDAS_DURATION.fullmatch(text) or _PYTHON_DURATION.fullmatch(text)
    if found:
        days, hours, minutes, seconds, fraction = found.groups()
        fraction = (fraction or "").rstrip("0")
        plain = (
            f"{int(days or 0)} days {int(hours or 0):02d}:{minutes or '00'}:{seconds or '00'}"
            + (f".{fraction}" if fraction else "")
        )
        return plain if plain != text else None
    return None

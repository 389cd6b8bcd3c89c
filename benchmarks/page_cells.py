"""How docs/performance.md writes a time and a ratio (performance_doc, performance_profiles)."""

from __future__ import annotations


def duration(microseconds: float) -> str:
    if microseconds < 1_000:
        return f"{microseconds:.0f} µs"
    if microseconds < 1_000_000:
        return f"{microseconds / 1_000:.3g} ms"
    return f"{microseconds / 1_000_000:.3g} s"


def times(ratio: float) -> str:
    return f"{ratio:.2f}×"

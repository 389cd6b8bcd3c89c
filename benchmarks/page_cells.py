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


def against(ratio: float, goal: float | None) -> str:
    """A ratio beside its goal: to three places where two would hide which side of the goal it
    falls (1.001x reads 1.00x against a goal of 1.0)."""
    if goal is not None and (round(ratio, 2) <= goal) != (ratio <= goal):
        return f"{ratio:.3f}×"
    return times(ratio)

"""Choosing an engine's totals by swapping methods (to be replaced by a precision strategy)."""

from __future__ import annotations

from typing import Any

__all__ = ["TOTALS", "TOTALS_OPERATIONS", "use_totals"]

TOTALS = ("float64", "float32")
"""How an engine that offers a choice adds its totals: in float64, each rounded once to float32
(precision `strict`), or in its library's own float32 kernels (precision `float32`)."""

TOTALS_OPERATIONS = ("matmul", "sum", "mean", "conv2d", "conv2d_weight_grad", "conv2d_fold")
"""The operations whose totals `totals` chooses; every other operation is the same either way."""


def use_totals(engine: Any, name: str, totals: str) -> str:
    """Check `totals` for the engine called `name`; for "float32", put the engine's
    `_<operation>_float32` methods in place of the six totals. Gives the identity's precision."""
    if totals not in TOTALS:
        raise ValueError(
            f"the {name} engine adds its totals in {' or '.join(map(repr, TOTALS))}, not {totals!r}"
        )
    if totals == "float64":
        return "strict"
    for operation in TOTALS_OPERATIONS:
        setattr(engine, operation, getattr(engine, f"_{operation}_float32"))
    return "float32"

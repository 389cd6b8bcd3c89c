"""Helpers for engine authors who widen their totals: how to split a large product or
convolution so that the wide copies stay in the processor's caches."""

from __future__ import annotations

__all__ = ["images_a_block", "product_blocks"]


def product_blocks(
    rows: int, inner: int, columns: int, transposed_a: bool, budget: int
) -> tuple[str, int]:
    """How an engine that widens its totals may work a product (rows x inner) @ (inner x
    columns) so that the wide copies stay within `budget` values (and so in cache):

    - ``("whole", 0)``: small enough to widen both sides at once;
    - ``("turned", 0)``: a is stored transposed and a block of its rows would be strided: form
      (b.T @ a.T).T instead, which reads a by its rows;
    - ``("rows", step)``: widen b once, a `step` rows at a time;
    - ``("columns", step)``: widen a once, b `step` columns at a time;
    - ``("whole", 0)`` too when neither side is small enough to widen once.
    The light and torch engines use it; each element stays one wide total rounded once.
    """
    if (rows + columns) * inner + rows * columns <= budget:
        return "whole", 0
    if transposed_a and rows > columns and inner * columns <= budget:
        return "turned", 0
    if inner * columns <= budget:
        return "rows", max(1, budget // (inner + columns))
    if rows * inner <= budget:
        return "columns", max(1, budget // (inner + rows))
    return "whole", 0


def images_a_block(filters: int, window: int, places: int, budget: int) -> int:
    """How many images a convolution that widens its totals may take at a time so that its
    wide outputs (`filters` values a place) and windows (`window` = C*kh*kw values a place),
    over `places` places an image, stay within `budget` values: at least one."""
    return max(1, budget // ((filters + window) * places))

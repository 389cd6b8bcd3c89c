"""`product_blocks`: how an engine that widens its totals splits a large product."""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core.engine import product_blocks
from deepsharp.engines.light import LightEngine

BUDGET = 1 << 18


@pytest.mark.parametrize(
    ("rows", "inner", "columns", "transposed", "expected"),
    [
        (32, 15, 16, False, ("whole", 0)),  # small: widened at once
        (256, 21632, 10, False, ("rows", BUDGET // 21642)),  # Dense forward over 21,632 features
        (256, 10, 21632, False, ("rows", BUDGET // 21642)),  # its input gradient
        (21632, 256, 10, True, ("turned", 0)),  # its weight gradient: x stored as (256, 21632)
        (10, 256, 21632, False, ("columns", BUDGET // 266)),  # ... which is formed this way
        (4096, 4096, 4096, False, ("whole", 0)),  # no side small enough to widen once
    ],
)
def test_a_large_product_is_split_where_the_wide_copies_stay_within_budget(
    rows: int, inner: int, columns: int, transposed: bool, expected: tuple[str, int]
) -> None:
    assert product_blocks(rows, inner, columns, transposed, BUDGET) == expected


@pytest.mark.parametrize(
    ("shape_a", "shape_b", "ta", "tb"),
    [
        ((256, 2000), (2000, 10), False, False),
        ((256, 10), (2000, 10), False, True),
        ((256, 2000), (256, 10), True, False),
        ((3, 300), (300, 2000), False, False),
    ],
)
def test_every_way_of_splitting_stays_within_a_unit_of_the_whole_product(
    shape_a: tuple[int, int], shape_b: tuple[int, int], ta: bool, tb: bool
) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    whole = np.matmul(a.T if ta else a, b.T if tb else b, dtype=np.float64).astype(np.float32)
    got = LightEngine().matmul(a, b, ta, tb)
    assert got.shape == whole.shape
    # One float64 total an element, rounded once: at most a unit of float32 apart, where the
    # float64 totals' own last bits differ by the order BLAS adds them in.
    assert np.all(np.abs(got - whole) <= np.spacing(np.abs(whole)))

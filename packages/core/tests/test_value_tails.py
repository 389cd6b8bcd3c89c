"""The light engine's value-by-value functions are accurate relative to their values in their
tails, where the value tolerance (1e-5 absolute) would let a result of 0 pass for 3e-8: a
sigmoid of -20 is 2.1e-9, not 0 (0.5·(1 + tanh(x/2)) gave 0 below -17.3)."""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import TAILS, tail_values, worst_relative_error

from deepsharp.engines.light import LightEngine


@pytest.mark.parametrize("precision", ["strict", "float32"])
@pytest.mark.parametrize("op", sorted(TAILS))
def test_each_tail_is_accurate_relative_to_its_value(op: str, precision: str) -> None:
    engine = LightEngine(precision)
    for low, high in TAILS[op][1]:
        x = tail_values(low, high)
        got = engine.get(getattr(engine, op)(engine.put(x))).astype(np.float64)
        assert worst_relative_error(op, got, x) <= 4.0, (op, low, high)


def test_a_value_gets_the_same_bits_in_any_company() -> None:
    engine = LightEngine()
    x = np.clip(np.random.default_rng(5).standard_normal(40_000) * 30, -80, 80).astype(np.float32)
    for op in TAILS:
        every = engine.get(getattr(engine, op)(engine.put(np.abs(x) if op == "log1p" else x)))
        for start, count in ((0, 1), (3, 5), (17, 33), (1000, 7)):
            part = x[start : start + count]
            alone = engine.get(
                getattr(engine, op)(engine.put(np.abs(part) if op == "log1p" else part))
            )
            assert alone.tobytes() == every[start : start + count].tobytes(), op

"""The torch engine's value-by-value functions: accurate relative to their values in their
tails, and one formula at every size, so a value's bits do not depend on its company (a row's
answer did: `torch.sigmoid` finishes each chunk on a scalar path an ulp away from its vector
one, and above 32,768 values the engine took another formula that gave 0 below -17.3)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "tests"))

from engine_helpers import TAILS, tail_values, worst_relative_error  # noqa: E402

from deepsharp.core import Dense, MeanSquaredError, Network, Sigmoid  # noqa: E402
from deepsharp.core.random import Streams  # noqa: E402
from deepsharp.engines.torch import TorchEngine  # noqa: E402


@pytest.fixture(scope="module", params=["float32", "strict"])
def engine(request: pytest.FixtureRequest) -> TorchEngine:
    return TorchEngine.on_cpu(request.param)


@pytest.mark.parametrize("copies", [1, 25])  # 4,000 values, and 100,000 (many threads' work)
@pytest.mark.parametrize("op", sorted(TAILS))
def test_each_tail_is_accurate_relative_to_its_value(
    engine: TorchEngine, op: str, copies: int
) -> None:
    for low, high in TAILS[op][1]:
        x = np.tile(tail_values(low, high), copies)
        got = engine.get(getattr(engine, op)(engine.put(x))).astype(np.float64)
        assert worst_relative_error(op, got, x) <= 4.0, (op, low, high, copies)


@pytest.mark.parametrize("op", ["sigmoid", "softplus", "exp", "log1p", "tanh", "erf"])
def test_a_value_gets_the_same_bits_in_any_company(engine: TorchEngine, op: str) -> None:
    x = np.random.default_rng(5).standard_normal(100_003).astype(np.float32) * 8
    if op == "log1p":
        x = np.abs(x)
    every = engine.get(getattr(engine, op)(engine.put(x)))
    for start, count in ((0, 1), (3, 5), (17, 33), (100, 1000), (5, 40_000)):
        alone = engine.get(getattr(engine, op)(engine.put(x[start : start + count])))
        assert alone.tobytes() == every[start : start + count].tobytes(), (op, start, count)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gelu_gives_a_value_the_same_bits_in_any_company_at_any_thread_count(
    engine: TorchEngine, threads: int
) -> None:
    """libtorch's GELU kernels take a value alone on a scalar formula an ulp from their vector
    one (unpadded, 54 of the first 200 values below, each alone, and 126 of their way back
    differed): the engine pads every thread's share to whole vector passes."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal(100_003).astype(np.float32) * 4
    grad = rng.standard_normal(100_003).astype(np.float32)
    was = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        every = engine.get(engine.gelu(engine.put(x)))
        back = engine.get(engine.gelu_back(engine.put(x), engine.put(grad)))
        for start, count in ((0, 1), (3, 5), (17, 33), (100, 1000), (7, 16_390), (5, 70_001)):
            part = slice(start, start + count)
            alone = engine.get(engine.gelu(engine.put(x[part])))
            assert alone.tobytes() == every[part].tobytes(), (start, count)
            alone = engine.get(engine.gelu_back(engine.put(x[part]), engine.put(grad[part])))
            assert alone.tobytes() == back[part].tobytes(), (start, count)
        for i in range(200):
            one = slice(i, i + 1)
            alone = engine.get(engine.gelu(engine.put(x[one])))
            assert alone.tobytes() == every[one].tobytes(), i
            alone = engine.get(engine.gelu_back(engine.put(x[one]), engine.put(grad[one])))
            assert alone.tobytes() == back[one].tobytes(), i
    finally:
        torch.set_num_threads(was)
    torch.set_num_threads(1)
    try:
        assert engine.get(engine.gelu(engine.put(x))).tobytes() == every.tobytes()
    finally:
        torch.set_num_threads(was)


def test_on_strict_a_row_through_a_sigmoid_is_answered_the_same_alone_and_together() -> None:
    # The case: 202 of these 600 rows were answered differently alone.
    network = Network([Dense(64), Sigmoid(), Dense(1)], inputs=4)
    network.initialize(Streams(0).slots)
    rows = (np.random.default_rng(0).standard_normal((600, 4)) * 2).astype(np.float32)
    engine = TorchEngine.on_cpu("strict")
    together = network.predict(rows, MeanSquaredError(), engine=engine)
    alone = [
        network.predict(rows[i : i + 1], MeanSquaredError(), engine=engine) for i in range(600)
    ]
    assert np.concatenate(alone).tobytes() == together.tobytes()

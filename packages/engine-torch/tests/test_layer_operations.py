"""The torch engine's own layer operations (products of stacks, rows added into places, erf,
max-pooling over a pair) at each precision: within their families' bounds, the same bits run
to run, and what a mixed precision does with half handles."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deepsharp.core.engine import PRECISIONS, fused  # noqa: E402
from deepsharp.engines.light import LightEngine  # noqa: E402
from deepsharp.engines.torch import TorchEngine  # noqa: E402

U = 2.0**-24
BF16 = torch.bfloat16


@pytest.fixture(scope="module", params=["float32", "strict", "mixed_bfloat16"])
def engine(request: pytest.FixtureRequest) -> TorchEngine:
    return TorchEngine.on_cpu(request.param)


def _within(engine: TorchEngine, got: Any, exact: Any, terms: Any, count: Any) -> None:
    precision = PRECISIONS[engine.precision]
    got = engine.get(got).astype(np.float64)
    assert got.shape == exact.shape
    assert (np.abs(got - exact) <= precision.totals_factor(count) * U * terms).all()


@pytest.mark.parametrize("lead", [(3,), (2, 4)])
@pytest.mark.parametrize(("ta", "tb"), [(False, False), (False, True), (True, False)])
@pytest.mark.parametrize("size", [5, 64])  # a small product, and one a mixed engine runs in bf16
def test_batch_matmul_within_the_precisions_bound(
    engine: TorchEngine, lead: tuple[int, ...], ta: bool, tb: bool, size: int
) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((*lead, size, 7 * size)).astype(np.float32)
    b = rng.standard_normal((*lead, 7 * size, size)).astype(np.float32)
    stored_a = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a
    stored_b = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b
    got = engine.batch_matmul(engine.put(stored_a), engine.put(stored_b), ta, tb)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    terms = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    _within(engine, got, exact, terms, 7 * size)
    mixed = engine.precision == "mixed_bfloat16"
    assert got.dtype == (BF16 if mixed and size == 64 else torch.float32)


def _added(values: Any, ids: Any, rows: int) -> tuple[Any, Any, Any]:
    flat = values.reshape(ids.size, -1).astype(np.float64)
    exact, terms = np.zeros((rows, flat.shape[1])), np.zeros((rows, flat.shape[1]))
    np.add.at(exact, ids.reshape(-1), flat)
    np.add.at(terms, ids.reshape(-1), np.abs(flat))
    count = np.bincount(ids.reshape(-1), minlength=rows)[:, None] * np.ones_like(exact)
    shape = (rows, *values.shape[ids.ndim :])
    return exact.reshape(shape), terms.reshape(shape), count.reshape(shape)


@pytest.mark.parametrize(("ids_shape", "row_shape"), [((50,), (3,)), ((6, 9), (2, 2)), ((7,), ())])
def test_add_rows_within_the_precisions_bound_and_the_same_bits_every_time(
    engine: TorchEngine, ids_shape: tuple[int, ...], row_shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 11, ids_shape).astype(np.int64)
    values = rng.standard_normal((*ids_shape, *row_shape)).astype(np.float32)
    got = engine.add_rows(engine.put(values), engine.put(ids), 13)
    assert got.dtype == torch.float32 and tuple(got.shape) == (13, *row_shape)
    _within(engine, got, *_added(values, ids, 13))
    again = engine.add_rows(engine.put(values), engine.put(ids), 13)
    assert engine.get(again).tobytes() == engine.get(got).tobytes()


def test_add_rows_on_strict_rounds_a_long_one_sign_total_once() -> None:
    engine = TorchEngine.on_cpu("strict")
    values = np.full((4096, 2), np.float32(2.0**-24 * (1.0 + 2.0**-10)), np.float32)
    values[0] = 1.0
    ids = np.zeros(4096, np.int64)
    got = engine.get(engine.add_rows(engine.put(values), engine.put(ids), 2)).astype(np.float64)
    exact, terms, _ = _added(values, ids, 2)
    assert (np.abs(got - exact) <= U * terms).all()


def test_erf_within_the_value_tolerance(engine: TorchEngine) -> None:
    x = np.concatenate([np.linspace(-7, 7, 20_001), [0.0, -0.0, 1e-30, np.inf, -np.inf]])
    x = x.astype(np.float32).reshape(-1, 2)
    got = engine.get(engine.erf(engine.put(x))).astype(np.float64)
    exact = np.vectorize(math.erf)(x.astype(np.float64))
    assert (np.abs(got - exact) <= 1e-5 + 1.3e-6 * np.abs(exact)).all()


@pytest.mark.parametrize("pool", [(2, 3), (3, 1), (2, 2)])
def test_maxpool2d_pair_and_back_move_what_light_moves(engine: TorchEngine, pool: Any) -> None:
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((2, 3, 7, 8)) * 2).astype(np.float32)  # ties
    light = LightEngine()
    maxima, selection = engine.maxpool2d_pair(engine.put(x), pool)
    want_maxima, want_selection = light.maxpool2d_pair(x, pool)
    assert engine.get(maxima).tobytes() == want_maxima.tobytes()
    assert engine.get(selection).tobytes() == want_selection.astype(np.int64).tobytes()
    gy = rng.standard_normal(want_maxima.shape).astype(np.float32)
    back = engine.maxpool2d_pair_back(engine.put(gy), selection, (7, 8), pool)
    want = light.maxpool2d_pair_back(gy, want_selection, (7, 8), pool)
    assert engine.get(back).tobytes() == want.tobytes()


def test_a_mixed_engine_reads_half_handles_into_the_layer_operations() -> None:
    """erf and rows added widen a half handle exactly and give float32; stacks of half handles
    multiply in bfloat16 and stay so; max-pooling keeps the half format."""
    engine = TorchEngine.on_cpu("mixed_bfloat16")
    values = np.random.default_rng(4).standard_normal((256, 256)).astype(np.float32)
    half = torch.from_numpy(values).to(BF16)
    wide = half.float()
    erf = engine.erf(half)
    assert erf.dtype == torch.float32 and erf.equal(torch.erf(wide))
    ids = torch.from_numpy(np.arange(256) % 5)
    rows = engine.add_rows(half, ids, 5)
    assert rows.dtype == torch.float32 and rows.equal(engine.add_rows(wide, ids, 5))
    stacks = half.reshape(4, 64, 256)  # 4 x 64 x 256 x 64 multiply-adds: libtorch's bf16 kernel
    assert engine.batch_matmul(stacks, stacks, False, True).dtype == BF16
    maxima, _ = engine.maxpool2d_pair(half.reshape(1, 4, 128, 128), (2, 4))
    assert maxima.dtype == BF16


def test_it_offers_each_with_the_references_signature() -> None:
    import inspect

    engine = TorchEngine.on_cpu()
    for name in ("batch_matmul", "add_rows", "erf", "maxpool2d_pair", "maxpool2d_pair_back"):
        wanted = list(inspect.signature(fused.FAST_PATHS[name]).parameters.values())[1:]
        own = list(inspect.signature(getattr(engine, name)).parameters.values())
        assert [(p.name, p.kind) for p in own] == [(p.name, p.kind) for p in wanted], name

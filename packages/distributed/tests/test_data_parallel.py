"""Jobs of 2 and 3 processes (gloo): the ordered sum is the rank-order float32 sum, bit for bit,
on every engine and every rank; the fast sum lies within a float32 sum's bound; gradients cross
without a transfer; slots start identical (and a rank that differs is named); and a
data-parallel step's summed gradients are held to the engine precision's bound of the
one-process step's gradient on the same batch, the reduction's extra roundings counted.

The bound (u = 2**-24, S each gradient element's float64 magnitude, as the contract suite's
Titanic step takes it). One process: |g1 - g*| <= k·u·S, k the precision's factor for the
batch's n = 32 rows (3 for strict; n + 1 for float32). W processes: each rank's partial total
strays by at most k·u·S_r (S_r its rows' share of S, Σ S_r = S); weighting it by share/B
costs 2 roundings (the weight's, the product's: 2u·S); adding the W partials in float32 costs
W - 1 more (gamma_(W-1)·S). So |gW - g*| <= (k + W + 1)·u·S, and |gW - g1| <= (2k + W + 1)·u·S.
"""

from __future__ import annotations

from typing import Any

import distributed_workers as workers
import numpy as np
import pytest
from numpy.typing import NDArray

from deepsharp.core.engine import make_engine, precision_named
from deepsharp.distributed import launch

pytest.importorskip("torch")

U = 2.0**-24
ENGINES = ["light", "testbuffer", "torch:cpu"]
TITANIC_ENGINES = ["light", "torch:cpu"]
WORLDS = [2, 3]


@pytest.fixture(scope="module", params=WORLDS, ids=lambda w: f"{w} processes")
def job(request: pytest.FixtureRequest) -> dict[str, Any]:
    """One job a world size, every check's figures from rank 0."""
    world: int = request.param
    found = launch(
        workers.data_parallel_checks, world, ENGINES, TITANIC_ENGINES, start_method=workers.START
    )
    found["world"] = world
    return found


def _weighted(rank: int, size: str) -> list[NDArray[np.float32]]:
    return [g * np.float32(workers.weight_of(rank)) for g in workers.gradients_of(rank, size)]


@pytest.mark.parametrize("size", workers.SIZES)
@pytest.mark.parametrize("spec", ENGINES)
def test_the_ordered_sum_is_the_rank_order_float32_sum_bit_for_bit(
    job: dict[str, Any], spec: str, size: str
) -> None:
    # every rank's gradients, weighted as the rank weighted them, added 0 + 1 (+ 2) in float32;
    # small gradients are gathered whole, large ones go by shards: the same sums either way
    expected = _weighted(0, size)
    for rank in range(1, job["world"]):
        expected = [total + part for total, part in zip(expected, _weighted(rank, size))]
    got = job["reductions"][f"{spec} {size} ordered"]["gradients"]
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == np.float32 and g.shape == e.shape
        assert np.array_equal(g.view(np.uint32), e.view(np.uint32))


@pytest.mark.parametrize("size", workers.SIZES)
@pytest.mark.parametrize("spec", ENGINES)
def test_the_fast_sum_lies_within_a_float32_sum_s_bound(
    job: dict[str, Any], spec: str, size: str
) -> None:
    world = job["world"]
    terms = [[t.astype(np.float64) for t in _weighted(rank, size)] for rank in range(world)]
    got = job["reductions"][f"{spec} {size} fast"]["gradients"]
    for index, g in enumerate(got):
        exact = sum(terms[rank][index] for rank in range(world))
        size = sum(np.abs(terms[rank][index]) for rank in range(world))
        assert np.all(np.abs(g - exact) <= world * U * size)  # (W - 1)u·Σ|terms|, and a hair


@pytest.mark.parametrize("size", workers.SIZES)
@pytest.mark.parametrize("spec", ENGINES)
@pytest.mark.parametrize("reduction", ["ordered", "fast"])
def test_the_gradients_cross_without_a_transfer(
    job: dict[str, Any], spec: str, reduction: str, size: str
) -> None:
    assert job["reductions"][f"{spec} {size} {reduction}"]["transfers"] == (0, 0)


@pytest.mark.parametrize("spec", TITANIC_ENGINES)
def test_slots_that_differ_between_ranks_are_caught_and_named(
    job: dict[str, Any], spec: str
) -> None:
    caught = job["titanic"][f"{spec} mismatch"]
    assert caught is not None, "ranks drawn from different seeds passed the check"
    for rank in range(1, job["world"]):
        assert f"rank {rank}:" in caught
    assert "'dense.weights'" in caught and "the same seed" in caught
    assert "bias" not in caught  # zeros on every seed: the same bits, so not named


@pytest.mark.parametrize("spec", TITANIC_ENGINES)
def test_ranks_that_built_different_networks_are_refused_naming_them(
    job: dict[str, Any], spec: str
) -> None:
    caught = job["titanic"][f"{spec} other network"]
    assert caught is not None, "ranks holding different networks passed"
    others = ", ".join(str(rank) for rank in range(1, job["world"]))
    assert f"rank{'s' if job['world'] > 2 else ''} {others} hold" in caught
    assert "slots of other names or shapes than rank 0's" in caught


@pytest.mark.parametrize("spec", TITANIC_ENGINES)
def test_start_identical_gives_every_rank_rank_0_s_slots_without_a_transfer(
    job: dict[str, Any], spec: str
) -> None:
    # rank 0's stray slots were drawn from the seed itself; every rank now holds them
    expected = workers.titanic_trainer("light").network.slots
    for got, want in zip(job["titanic"][f"{spec} stray slots now"], expected.values(), strict=True):
        assert np.array_equal(got, want)
    assert job["titanic"][f"{spec} start transfers"] == (0, 0)


@pytest.mark.parametrize("reduction", ["ordered", "fast"])
@pytest.mark.parametrize("spec", TITANIC_ENGINES)
def test_a_data_parallel_step_s_gradients_are_held_to_the_one_process_bound(
    job: dict[str, Any], spec: str, reduction: str
) -> None:
    world = job["world"]
    engine = make_engine(spec)
    trainer = workers.titanic_trainer(engine)
    slots = list(trainer.network.slots.values())
    one = [engine.get(g) for g in workers.share_gradients(trainer, slice(None))]
    many = job["titanic"][f"{spec} {reduction}"]
    exact, scale = workers.reference_gradients(slots, *workers.titanic_batch())
    k = float(precision_named(engine.identity.precision).totals_factor(workers.TITANIC_ROWS))
    for g1, gw, ref, s in zip(one, many, exact, scale, strict=True):
        assert np.all(np.abs(g1 - ref) <= k * U * s), "the one-process step broke its own bound"
        assert np.all(np.abs(gw - ref) <= (k + world + 1) * U * s)
        assert np.all(np.abs(gw - g1) <= (2 * k + world + 1) * U * s)

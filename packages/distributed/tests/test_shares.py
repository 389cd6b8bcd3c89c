"""The shares of the work, the share weights, randomness keyed by the global row, and the
world-size check of a checkpoint: pure rules, no processes."""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core import DeepSharpError
from deepsharp.core.random import Generator
from deepsharp.distributed import (
    Share,
    WorldSizeMismatchError,
    check_world_size,
    share_of,
    uniform_for_share,
)


def test_a_batch_of_32_over_3_processes_is_11_11_10_rows_in_order() -> None:
    shares = [share_of(32, rank, 3) for rank in range(3)]
    assert [(s.start, s.stop) for s in shares] == [(0, 11), (11, 22), (22, 32)]
    assert [s.count for s in shares] == [11, 11, 10]


@pytest.mark.parametrize("total", [0, 1, 2, 5, 31, 32, 33, 623])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
def test_the_shares_in_rank_order_are_the_batch(total: int, world: int) -> None:
    shares = [share_of(total, rank, world) for rank in range(world)]
    rows = np.concatenate([np.arange(total)[s.rows] for s in shares])
    assert np.array_equal(rows, np.arange(total))
    counts = [s.count for s in shares]
    assert max(counts) - min(counts) <= 1 and counts == sorted(counts, reverse=True)


def test_the_share_weights_add_up_to_one_so_the_gradients_sum_to_the_batch_mean() -> None:
    weights = [share_of(32, rank, 3).weight for rank in range(3)]
    assert weights == [11 / 32, 11 / 32, 10 / 32]
    assert sum(share_of(623, rank, 7).weight for rank in range(7)) == pytest.approx(1.0)


def test_a_batch_smaller_than_the_world_leaves_the_last_processes_nothing() -> None:
    shares = [share_of(2, rank, 3) for rank in range(3)]
    assert [s.count for s in shares] == [1, 1, 0]
    assert shares[2].weight == 0.0 and Share(0, 0, 0).weight == 0.0


@pytest.mark.parametrize(("rank", "world"), [(-1, 2), (2, 2), (0, 0)])
def test_a_rank_outside_the_world_is_refused(rank: int, world: int) -> None:
    with pytest.raises(ValueError, match="not one of a world"):
        share_of(8, rank, world)


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_each_share_draws_what_the_whole_batch_draw_gives_its_rows(world: int) -> None:
    # dropout keyed by the global row: the concatenated shares' draws are the one-process draw
    per_row, batch = 16, 13
    whole = Generator(7, counter=40, stream=3)
    expected = whole.uniform(batch * per_row).reshape(batch, per_row)
    pieces = []
    for rank in range(world):
        generator = Generator(7, counter=40, stream=3)
        share = share_of(batch, rank, world)
        pieces.append(uniform_for_share(generator, share, per_row).reshape(share.count, per_row))
        assert generator.counter == whole.counter  # every process stands where one would
    assert np.array_equal(np.concatenate(pieces), expected)


def test_a_checkpoint_at_another_world_size_is_refused_naming_both() -> None:
    check_world_size(3, 3)
    check_world_size(None, 1)  # a checkpoint without the field was taken by one process
    with pytest.raises(WorldSizeMismatchError) as caught:
        check_world_size(2, 3, "runs/checkpoint-7.safetensors")
    message = str(caught.value)
    assert "world size 2" in message and "3 processes" in message
    assert "runs/checkpoint-7.safetensors" in message and "resume with 2 processes" in message
    assert isinstance(caught.value, DeepSharpError)
    with pytest.raises(WorldSizeMismatchError, match="world size 1; this run has 2"):
        check_world_size(None, 2)

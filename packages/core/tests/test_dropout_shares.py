"""Dropout under a shared batch: every process of a data-parallel run draws, for its own rows,
the masks one process draws for those rows of the whole batch — step after step, also after a
batch that left some processes no rows (they take no forward pass, so draw nothing).

The processes are simulated here by trainers in one process, each stepping on its share of
every batch (no reduction: the masks do not depend on the slots)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core import Adam, Dense, Dropout, MeanSquaredError, Network, Tensor, Trainer
from deepsharp.core.nn.layers import Pass

FEATURES = 6
BATCHES = [5, 1, 5, 2, 5]
"""Rows of each batch: of 1 and 2 rows, 3 processes leave the last one or two without rows."""


class SeenDropout(Dropout):
    """Dropout that records, for each training pass, which of its rows' values it dropped."""

    def __init__(self, rate: float) -> None:
        super().__init__(rate)
        self.seen: list[tuple[tuple[int, int, int] | None, NDArray[np.bool_]]] = []

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        out = super().forward(x, slots, context)
        if context.training:
            self.seen.append((context.share, context.engine.get(out.handle) == 0.0))
        return out


def _batches() -> list[tuple[NDArray[np.float32], NDArray[np.float32]]]:
    generator = np.random.default_rng(4)
    return [  # features in [1, 2): a zero after dropout is a dropped value
        (
            generator.uniform(1.0, 2.0, (rows, FEATURES)).astype(np.float32),
            generator.standard_normal((rows, 1)).astype(np.float32),
        )
        for rows in BATCHES
    ]


def _trainer() -> tuple[Trainer, SeenDropout]:
    dropout = SeenDropout(0.5)
    network = Network([dropout, Dense(1)], inputs=FEATURES)
    return Trainer(network, MeanSquaredError(), Adam(0.01), seed=11), dropout


def _masks_of_processes(world: int) -> list[NDArray[np.bool_]]:
    """Each batch's mask, put together from every process's rows in rank order."""
    places = [_trainer() for _ in range(world)]
    masks: list[list[Any]] = []
    for features, targets in _batches():
        total = len(features)
        base, extra = divmod(total, world)
        parts = []
        for rank, (trainer, dropout) in enumerate(places):
            start = rank * base + min(rank, extra)
            stop = start + base + (1 if rank < extra else 0)
            before = len(dropout.seen)
            trainer.step(features[start:stop], targets[start:stop], (start, stop, total))
            if stop > start:
                share, mask = dropout.seen[before]
                assert share == (start, stop, total)
                parts.append(mask)
        masks.append(parts)
    return [np.concatenate(parts) for parts in masks]


def test_every_process_draws_one_process_s_masks_for_its_rows_also_after_an_empty_share() -> None:
    """Failed before: a process left no rows drew nothing, its generator fell behind, and from
    the next batch on its rows' masks were drawn at other places than the whole batch's."""
    one = _masks_of_processes(1)
    assert [m.shape for m in one] == [(rows, FEATURES) for rows in BATCHES]
    assert 0.3 < float(np.mean(np.concatenate(one))) < 0.7
    for world in (2, 3):
        got = _masks_of_processes(world)
        for step, (mine, theirs) in enumerate(zip(got, one, strict=True), start=1):
            assert np.array_equal(mine, theirs), f"{world} processes, step {step}: other masks"


def test_each_step_draws_masks_of_its_own() -> None:
    trainer, dropout = _trainer()
    features = np.ones((5, FEATURES), np.float32)
    targets = np.zeros((5, 1), np.float32)
    trainer.step(features, targets)
    trainer.step(features, targets)
    (_, first), (_, second) = dropout.seen
    assert not np.array_equal(first, second)

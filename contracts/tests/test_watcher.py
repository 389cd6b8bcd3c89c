"""The watched engine of every check (`deepsharp.contracts.inputs.InputsKept`): what an
operation handed out, or was handed, keeps its bits over its next calls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from example_engine import ExampleEngine

from deepsharp.contracts.inputs import KEPT, InputsKept
from deepsharp.contracts.measure import Contract, Measurements


class CyclingBuffers(ExampleEngine):
    """exp writes into `count` buffers a shape in turn."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count, self.turn = count, 0
        self.buffers: dict[tuple[int, ...], list[Any]] = {}

    def exp(self, x: Any) -> Any:
        ring = self.buffers.setdefault(
            np.shape(x), [np.empty(np.shape(x), np.float32) for _ in range(self.count)]
        )
        self.turn = (self.turn + 1) % self.count
        return np.exp(x, out=ring[self.turn])


def _watched(engine: Any) -> Any:
    return InputsKept(engine, Contract("cycling", Measurements(), "strict"))


@pytest.mark.parametrize("count", [1, 2, 3, 4])  # KEPT is 4
def test_an_engine_cycling_through_up_to_kept_buffers_is_caught(count: int) -> None:
    """Failed with this round's first watcher (trial BC): it read the last two calls again, so
    three buffers in turn passed every check."""
    watched = _watched(CyclingBuffers(count))
    with pytest.raises(AssertionError, match="exp on cycling: a later call changed what an"):
        for value in range(KEPT + 2):
            watched.exp(watched.put(np.full((2, 3), float(value), np.float32)))


def test_an_engine_that_keeps_the_contract_is_not_flagged_and_updates_in_place_reset_it() -> None:
    watched = _watched(ExampleEngine())
    flat = watched.put(np.ones(6, np.float32))
    for value in range(KEPT + 2):
        watched.exp(watched.put(np.full((2, 3), float(value), np.float32)))
        watched.reshape(flat, (2, 3))  # a view of what the update below changes in place
        watched.decay_update([flat], factor=0.5)

"""An engine's own LSTM over a whole sequence is held by the contract's check of it: an engine
that keeps the contract passes, planted faults are caught, each saying where.

The check (`deepsharp.contracts.test_recurrent.check_sequence`) runs here in this process, on
the example engine given the pair of its own: the broken-engines harness runs each of its
checks on every broken engine, and this check's products would fail every engine whose
products are broken, for that fault rather than this one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from example_engine import ExampleEngine

from deepsharp.contracts.measure import Contract, Measurements
from deepsharp.contracts.test_recurrent import check_sequence
from deepsharp.core.engine.fused_recurrent import (
    lstm_sequence_back_reference,
    lstm_sequence_reference,
)


class OwnSequence(ExampleEngine):
    """The example engine offering the whole sequence each way: the core's references."""

    def lstm_sequence(self, x: Any, weight_ih: Any, weight_hh: Any, bias: Any) -> Any:
        return lstm_sequence_reference(self, x, weight_ih, weight_hh, bias)

    def lstm_sequence_back(self, *args: Any) -> tuple[Any, Any, Any, Any]:
        return lstm_sequence_back_reference(self, *args)


class HalvesTheBiasGradient(OwnSequence):
    """Its way back sends the bias half its gradient (right where that gradient is zero)."""

    def lstm_sequence_back(self, *args: Any) -> tuple[Any, Any, Any, Any]:
        to_x, to_weight_ih, to_weight_hh, to_bias = super().lstm_sequence_back(*args)
        return to_x, to_weight_ih, to_weight_hh, to_bias * np.float32(0.5)


class ForgetsTheFirstState(OwnSequence):
    """Its forward gives the first position's state as zeros (right for a sequence of one
    position only where that state is zero)."""

    def lstm_sequence(self, x: Any, weight_ih: Any, weight_hh: Any, bias: Any) -> Any:
        states = np.array(super().lstm_sequence(x, weight_ih, weight_hh, bias), copy=True)
        states[:, 0] = 0.0
        return states


def _check(engine: ExampleEngine, towards: str = "both") -> None:
    rng = np.random.default_rng(7)
    rows, length, features, units = 3, 4, 2, 3

    def values(*shape: int) -> np.ndarray:
        return rng.uniform(-0.9, 0.9, shape).astype(np.float32)

    arrays = [
        values(rows, length, features),
        values(4 * units, features),
        values(4 * units, units),
        values(4 * units),
    ]
    contract = Contract("planted", Measurements(), engine.identity.precision or "strict")
    grad_states, grad_last = values(rows, length, units), values(rows, units)
    check_sequence(
        engine,
        contract,
        arrays,
        None if towards == "last" else grad_states,
        None if towards == "states" else grad_last,
    )


@pytest.mark.parametrize("towards", ["states", "last", "both"])
def test_an_own_sequence_that_keeps_the_contract_passes(towards: str) -> None:
    _check(OwnSequence(), towards)
    _check(ExampleEngine(), towards)  # none of its own: the reference in its primitives


@pytest.mark.parametrize(
    ("engine", "says"),
    [
        (HalvesTheBiasGradient(), "fast lstm_sequence (the gradient towards bias)"),
        (ForgetsTheFirstState(), "fast lstm_sequence (states)"),
    ],
    ids=["halves-the-bias-gradient", "forgets-the-first-state"],
)
def test_a_planted_fault_in_an_own_sequence_is_caught(engine: ExampleEngine, says: str) -> None:
    with pytest.raises(AssertionError, match=r"breaks the values contract") as caught:
        _check(engine)
    assert says in str(caught.value)

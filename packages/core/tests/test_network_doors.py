"""A network's own doors: its slots set (only once it is built) and its outputs predicted with
or without a loss's link (trial RN)."""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core import CrossEntropy, Dense, MeanSquaredError, Network, Relu, ShapeError
from deepsharp.core.random import Generator


def test_slots_set_on_a_network_not_yet_built_say_to_give_its_inputs() -> None:
    """Before (trial RN): 'slots [...] are not the network's; its slots are []'."""
    built = Network([Dense(4), Relu(), Dense(1)], inputs=3)
    built.initialize(Generator(0))
    later = Network([Dense(4), Relu(), Dense(1)])
    with pytest.raises(ShapeError, match=r"not built yet.*Network\(\.\.\., inputs=shape\)"):
        later.set_slots(built.slots)
    later.build((3,))
    later.set_slots(built.slots)
    rows = np.ones((2, 3), np.float32)
    # a network's own outputs without naming a loss (asked for one before: trial RN)
    np.testing.assert_array_equal(later.predict(rows), built.predict(rows, MeanSquaredError()))
    logits = Network([Dense(3)], inputs=3)
    logits.initialize(Generator(1))
    raw, chances = logits.predict(rows), logits.predict(rows, CrossEntropy())
    np.testing.assert_allclose(chances, np.exp(raw) / np.exp(raw).sum(1, keepdims=True), rtol=1e-6)

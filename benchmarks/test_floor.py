"""The hand-written floor is the step it stands beside: the Titanic step written in NumPy by
hand (`workloads.numpy_titanic_step`) trains the same network from the same slots as
deepsharp's at float32, to float32's rounding."""

from __future__ import annotations

import numpy as np

from workloads import SEED, numpy_titanic_step, titanic_batch, titanic_trainer

NAMES = ("dense.weights", "dense.bias", "dense_1.weights", "dense_1.bias")


def test_the_hand_written_titanic_step_is_the_step_deepsharp_takes() -> None:
    hand = numpy_titanic_step()
    trainer = titanic_trainer("light:float32")
    features, targets = titanic_batch()
    for _ in range(5):
        theirs, ours = hand(), trainer.step(features.copy(), targets.copy())
        assert abs(theirs - ours) <= 1e-6
    slots, _ = trainer.network.values()
    for name, mine in zip(NAMES, hand.slots):  # type: ignore[attr-defined]
        assert np.abs(slots[name] - mine).max() <= 1e-6, name
    moved = np.abs(slots["dense.weights"] - titanic_trainer_first_weights()).max()
    assert moved > 1e-3  # five steps of Adam at 0.001 moved them: the comparison is not idle


def titanic_trainer_first_weights() -> np.ndarray:
    trainer = titanic_trainer("light:float32")
    trainer.start((14,))
    return trainer.network.values()[0]["dense.weights"]


def test_the_titanic_workload_is_profiled_beside_its_floor() -> None:
    (titanic,) = [workload for workload in SEED if workload.name == "titanic"]
    assert titanic.floor is not None
    assert isinstance(titanic.floor()(), float)

"""Training step by step: learning, reproducibility, the way back, and memory."""

from __future__ import annotations

import gc
import subprocess
import sys
import tracemalloc
from collections.abc import Mapping
from typing import Any

import numpy as np
from core_helpers import XOR_ANSWERS, XOR_ROWS, titanic_shaped, titanic_trainer, xor_trainer

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Dense,
    Layer,
    Network,
    Relu,
    Tensor,
    Trainer,
)
from deepsharp.core.autodiff.tensor import Node
from deepsharp.core.nn.layers import Pass
from deepsharp.engines.light import LightEngine


def test_a_dense_network_learns_xor_within_500_steps() -> None:
    trainer = xor_trainer(seed=0)
    losses = [trainer.step(XOR_ROWS, XOR_ANSWERS) for _ in range(500)]
    assert min(losses[-10:]) < 0.05
    trainer.close()
    answers = trainer.network.predict(XOR_ROWS, BinaryCrossEntropy())
    assert np.array_equal(answers.ravel() > 0.5, XOR_ANSWERS.ravel() > 0.5)


def _slots_after_100_steps(seed: int) -> dict[str, np.ndarray]:
    trainer = titanic_trainer(seed=seed)
    rows, answers = titanic_shaped()
    for _ in range(100):
        trainer.step(rows, answers)
    return trainer.network.slots


def test_the_same_seed_gives_the_same_slots_bit_for_bit_in_one_process() -> None:
    first, second = _slots_after_100_steps(3), _slots_after_100_steps(3)
    assert first.keys() == second.keys()
    for name in first:
        assert first[name].tobytes() == second[name].tobytes(), name
    other = _slots_after_100_steps(4)
    assert any(first[n].tobytes() != other[n].tobytes() for n in first)


SCRIPT = """
import sys, hashlib
sys.path.insert(0, {tests!r})
from test_training import _slots_after_100_steps
slots = _slots_after_100_steps(3)
print(hashlib.sha256(b"".join(slots[n].tobytes() for n in sorted(slots))).hexdigest())
"""


def test_the_same_seed_gives_the_same_slots_bit_for_bit_in_two_processes() -> None:
    import hashlib
    from pathlib import Path

    script = SCRIPT.format(tests=str(Path(__file__).parent))
    digests = {
        subprocess.run(
            [sys.executable, "-c", script], check=True, capture_output=True, text=True
        ).stdout.strip()
        for _ in range(2)
    }
    here = _slots_after_100_steps(3)
    local = hashlib.sha256(b"".join(here[n].tobytes() for n in sorted(here))).hexdigest()
    assert digests == {local}


class CountingEngine(LightEngine):
    """The light engine, counting its matrix products."""

    def __init__(self) -> None:
        super().__init__()
        self.products = 0

    def matmul(self, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
        self.products += 1
        return super().matmul(a, b, transpose_a, transpose_b)


def test_a_step_computes_no_gradient_for_its_rows() -> None:
    engine = CountingEngine()
    trainer = titanic_trainer(engine=engine)
    rows, answers = titanic_shaped()
    trainer.step(rows, answers)
    # forward: 2 products; back: the second layer's weights and input (2), the first layer's
    # weights (1). A gradient towards the rows would be a sixth product.
    assert engine.products == 5
    assert trainer.rules_applied == 4  # affine, relu, affine, cross entropy: nothing more


def test_the_recording_is_dropped_after_the_way_back() -> None:
    trainer = titanic_trainer()
    rows, answers = titanic_shaped()
    trainer.step(rows, answers)
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, Node) and o.inputs]


def _live() -> int:
    return sum(isinstance(o, (Tensor, Node, np.ndarray)) for o in gc.get_objects())


def test_with_the_collector_off_1000_steps_leave_live_objects_where_10_did() -> None:
    trainer = titanic_trainer()
    rows, answers = titanic_shaped()
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for _ in range(10):
            trainer.step(rows, answers)
        objects_after_10 = _live()
        memory_after_10 = tracemalloc.get_traced_memory()[0]
        for _ in range(990):
            trainer.step(rows, answers)
        assert _live() == objects_after_10
        assert tracemalloc.get_traced_memory()[0] - memory_after_10 < 64 * 1024
    finally:
        tracemalloc.stop()
        gc.enable()


class Keeper(Layer):
    """A layer written as code that keeps a tensor of its pass for later."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: Tensor | None = None

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        self.kept = x * 2.0
        return x


def test_a_tensor_a_layer_kept_can_still_be_read_after_the_step() -> None:
    keeper = Keeper()
    network = Network([Dense(4), keeper, Relu(), Dense(1)], inputs=14)
    trainer = Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=1)
    rows, answers = titanic_shaped()
    trainer.step(rows, answers)
    assert keeper.kept is not None
    kept = keeper.kept.numpy()
    trainer.step(rows, answers)  # the next step must not write into what was kept
    assert kept.shape == (32, 4)
    assert np.all(np.isfinite(kept))
    assert not np.array_equal(kept, keeper.kept.numpy())  # slots moved, a new tensor was kept


def test_a_step_crosses_2_transfers_in_and_1_out() -> None:
    trainer = titanic_trainer()
    rows, answers = titanic_shaped()
    trainer.step(rows, answers)
    before = (trainer.engine.counters.transfers_in, trainer.engine.counters.transfers_out)
    trainer.step(rows, answers)
    after = (trainer.engine.counters.transfers_in, trainer.engine.counters.transfers_out)
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)


def test_sgd_with_momentum_learns_too() -> None:
    from deepsharp.core import SGD, MeanSquaredError, Tanh

    network = Network([Dense(8), Tanh(), Dense(1)])
    trainer = Trainer(network, MeanSquaredError(), SGD(0.1, momentum=0.9), seed=2)
    losses = [trainer.step(XOR_ROWS, XOR_ANSWERS) for _ in range(400)]
    assert losses[-1] < 0.05 < losses[0]


def test_dropout_masks_come_from_the_run_seed() -> None:
    from deepsharp.core import Dropout

    def run(seed: int) -> bytes:
        network = Network([Dense(8), Dropout(0.5), Relu(), Dense(1)], inputs=14)
        trainer = Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=seed)
        rows, answers = titanic_shaped()
        for _ in range(5):
            trainer.step(rows, answers)
        return b"".join(v.tobytes() for v in trainer.network.slots.values())

    assert run(1) == run(1)
    assert run(1) != run(2)

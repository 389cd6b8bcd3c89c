"""Training step by step: learning, reproducibility, the way back, and memory."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import XOR_ROWS, XOR_TARGETS, titanic_shaped, titanic_trainer, xor_trainer

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    ConfigurationError,
    DataError,
    Dense,
    Layer,
    Network,
    Relu,
    ShapeError,
    StateError,
    Tensor,
    Trainer,
)
from deepsharp.core.autodiff.tensor import Node
from deepsharp.core.nn.layers import Pass
from deepsharp.core.random import Generator
from deepsharp.core.training.hooks import StepHook
from deepsharp.engines.light import LightEngine


def test_a_dense_network_learns_xor_within_500_steps() -> None:
    trainer = xor_trainer(seed=0)
    losses = [trainer.step(XOR_ROWS, XOR_TARGETS) for _ in range(500)]
    assert min(losses[-10:]) < 0.05
    trainer.close()
    predictions = trainer.network.predict(XOR_ROWS, BinaryCrossEntropy())
    assert np.array_equal(predictions.ravel() > 0.5, XOR_TARGETS.ravel() > 0.5)


def _slots_after_100_steps(seed: int) -> dict[str, np.ndarray]:
    trainer = titanic_trainer(seed=seed)
    rows, targets = titanic_shaped()
    for _ in range(100):
        trainer.step(rows, targets)
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
    rows, targets = titanic_shaped()
    trainer.step(rows, targets)
    # forward: 2 products; back: the second layer's weights and input (2), the first layer's
    # weights (1). A gradient towards the rows would be a sixth product.
    assert engine.products == 5
    assert trainer.rules_applied == 4  # affine, relu, affine, cross entropy: nothing more


def test_the_recording_is_dropped_after_the_way_back() -> None:
    trainer = titanic_trainer()
    rows, targets = titanic_shaped()
    trainer.step(rows, targets)
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, Node) and o.inputs]


def _live() -> int:
    return sum(isinstance(o, (Tensor, Node, np.ndarray)) for o in gc.get_objects())


def test_with_the_collector_off_1000_steps_leave_live_objects_where_10_did() -> None:
    trainer = titanic_trainer()
    rows, targets = titanic_shaped()
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for _ in range(10):
            trainer.step(rows, targets)
        objects_after_10 = _live()
        memory_after_10 = tracemalloc.get_traced_memory()[0]
        for _ in range(990):
            trainer.step(rows, targets)
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
    rows, targets = titanic_shaped()
    trainer.step(rows, targets)
    assert keeper.kept is not None
    kept = keeper.kept.numpy()
    trainer.step(rows, targets)  # the next step must not write into what was kept
    assert kept.shape == (32, 4)
    assert np.all(np.isfinite(kept))
    assert not np.array_equal(kept, keeper.kept.numpy())  # slots moved, a new tensor was kept


def test_a_step_crosses_2_transfers_in_and_1_out() -> None:
    trainer = titanic_trainer()
    rows, targets = titanic_shaped()
    trainer.step(rows, targets)
    before = (trainer.engine.counters.transfers_in, trainer.engine.counters.transfers_out)
    trainer.step(rows, targets)
    after = (trainer.engine.counters.transfers_in, trainer.engine.counters.transfers_out)
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)


def test_sgd_with_momentum_learns_too() -> None:
    from deepsharp.core import SGD, MeanSquaredError, Tanh

    network = Network([Dense(8), Tanh(), Dense(1)])
    trainer = Trainer(network, MeanSquaredError(), SGD(0.1, momentum=0.9), seed=2)
    losses = [trainer.step(XOR_ROWS, XOR_TARGETS) for _ in range(400)]
    assert losses[-1] < 0.05 < losses[0]


def test_dropout_masks_come_from_the_run_seed() -> None:
    from deepsharp.core import Dropout

    def run(seed: int) -> bytes:
        network = Network([Dense(8), Dropout(0.5), Relu(), Dense(1)], inputs=14)
        trainer = Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=seed)
        rows, targets = titanic_shaped()
        for _ in range(5):
            trainer.step(rows, targets)
        return b"".join(v.tobytes() for v in trainer.network.slots.values())

    assert run(1) == run(1)
    assert run(1) != run(2)


# --- the trainer owns its state; what a step refuses ------------------------------------------


def test_predict_between_steps_predicts_with_the_current_slots() -> None:
    """Before: network.predict used the slots from before training (0.62 off after 50 steps)."""
    trainer = titanic_trainer(seed=5)
    rows, targets = titanic_shaped()
    for _ in range(50):
        trainer.step(rows, targets)
    during = trainer.network.predict(rows, BinaryCrossEntropy())  # on a light engine of its own
    on_its_engine = trainer.network.predict(rows, BinaryCrossEntropy(), trainer.engine)
    trainer.close()
    after = trainer.network.predict(rows, BinaryCrossEntropy())
    assert during.tobytes() == after.tobytes() == on_its_engine.tobytes()


@pytest.mark.parametrize(
    ("row", "target", "says"),
    [
        (
            [np.nan] * 14,
            [1.0],
            r"row 2, feature \[1\] \(each counting from 1\) of the batch is nan",
        ),
        ([0.0] * 13 + [np.inf], [1.0], r"row 2, feature \[14\] .* is inf"),
        ([0.0] * 13 + [1e300], [1.0], r"row 2, feature \[14\] .* is 1e\+300"),
        ([0.0] * 14, [np.nan], r"row 2, output 1 \(each counting from 1\): the target is nan"),
    ],
)
def test_a_step_refuses_a_batch_with_values_that_are_not_finite(
    row: list[float], target: list[float], says: str
) -> None:
    """Before: the step returned nan and poisoned every slot."""
    trainer = titanic_trainer()
    rows, targets = titanic_shaped()
    before = trainer.network.slots
    bad_rows = np.vstack([rows[:1], np.array([row])])
    with pytest.raises(DataError, match=says):
        trainer.step(bad_rows, np.vstack([targets[:1], [target]]))
    after = trainer.network.slots
    assert all(before[name].tobytes() == after[name].tobytes() for name in before)


def test_an_empty_batch_is_refused() -> None:
    """Before: it returned nan."""
    with pytest.raises(DataError, match="at least one row"):
        titanic_trainer().step(np.zeros((0, 14), np.float32), np.zeros((0, 1), np.float32))


def test_a_network_without_slots_is_refused_by_a_trainer() -> None:
    """Before: a raw ValueError from inside the engine."""
    with pytest.raises(ConfigurationError, match="has no slots: there is nothing to train"):
        Trainer(Network([Relu()], inputs=3), BinaryCrossEntropy(), Adam())


def test_a_trainer_in_a_with_block_hands_the_slots_back_at_its_end() -> None:
    network = Network([Dense(4), Relu(), Dense(1)], inputs=14)
    rows, targets = titanic_shaped()
    with Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=1) as trainer:
        trainer.step(rows, targets)
        inside = network.slots
    assert network.slots.keys() == inside.keys()
    assert all(network.slots[name].tobytes() == inside[name].tobytes() for name in inside)
    with Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=1):  # bound once more: free
        pass


def test_a_trainer_whose_start_fails_leaves_the_network_free_for_the_next() -> None:
    """Failed before (trial TX): the optimizer's memory out of memory left the network bound
    and its slots on the engine, and every later trainer was refused "close the other trainer
    first", of a trainer that never was."""

    class Short(Adam):
        def start(self, engine: Any, shapes: Any) -> Any:
            raise MemoryError("no room for the optimizer's memory")

    network = Network([Dense(4), Relu(), Dense(1)], inputs=14)
    with pytest.raises(MemoryError, match="no room"):
        Trainer(network, BinaryCrossEntropy(), Short(0.01), seed=1)
    assert network.bound is None
    with Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=1) as trainer:
        trainer.step(*titanic_shaped())


def test_a_snapshot_puts_the_slots_back_as_they_were() -> None:
    trainer = titanic_trainer()
    rows, targets = titanic_shaped()
    kept = trainer.snapshot()
    at_first = trainer.network.slots
    trainer.step(rows, targets)
    trainer.restore(kept)
    assert all(at_first[n].tobytes() == v.tobytes() for n, v in trainer.network.slots.items())


class Skip(StepHook):
    """Skips every update."""

    def gradients(self, trainer: Trainer, grads: list[Any]) -> list[Any] | None:
        return None


class Doubles(StepHook):
    """Doubles the loss the way back differentiates (a loss scale of 2, never unscaled)."""

    def objective(self, trainer: Trainer, value: Tensor, share: Any) -> Tensor:
        return value * 2.0


def test_a_step_hook_sees_the_gradients_between_the_way_back_and_the_update() -> None:
    rows, targets = titanic_shaped()
    skipping = titanic_trainer()
    skipping.hooks.append(Skip())
    before = skipping.network.slots
    skipping.step(rows, targets)
    assert skipping.skipped_steps == 1
    assert all(before[n].tobytes() == v.tobytes() for n, v in skipping.network.slots.items())

    def after_one_sgd_step(hooks: list[StepHook]) -> dict[str, np.ndarray]:
        network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
        with Trainer(network, BinaryCrossEntropy(), SGD(0.1), seed=0, hooks=hooks) as trainer:
            start = network.slots
            trainer.step(rows, targets)
            return {n: v - start[n] for n, v in network.slots.items()}

    plain, doubled = after_one_sgd_step([]), after_one_sgd_step([Doubles()])
    for name in plain:
        np.testing.assert_allclose(doubled[name], 2 * plain[name], rtol=1e-5, atol=1e-7)


def test_binding_a_network_twice_at_once_lets_exactly_one_run_have_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the "already bound" check raced (3 of 60 trials bound twice); a slow put makes
    the race certain."""
    network = Network([Dense(2)], inputs=2)
    network.initialize(Generator(0))
    put = Network.put

    def slow_put(self: Network, engine: Any, values: Any = None) -> Any:
        time.sleep(0.05)
        return put(self, engine, values)

    monkeypatch.setattr(Network, "put", slow_put)
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def bind() -> None:
        start.wait()
        try:
            network.bind(LightEngine())
            outcomes.append("bound")
        except StateError:
            outcomes.append("refused")

    threads = [threading.Thread(target=bind) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["bound", "refused"]


def test_save_refuses_a_network_without_slots_or_with_slots_that_are_not_finite(
    tmp_path: Path,
) -> None:
    """Before: both wrote a file that load then refused."""
    with pytest.raises(StateError, match="no slot values yet"):
        Network([Dense(2)], inputs=2).save(tmp_path / "empty.safetensors")
    network = Network([Dense(2)], inputs=2)
    network.initialize(Generator(0))
    with pytest.raises(DataError, match=r"slot 'dense\.bias' holds NaN"):  # refused when set
        network.set_slots({**network.slots, "dense.bias": np.array([np.nan, 0.0], np.float32)})
    network._values["dense.bias"][0] = np.nan  # as a run's divergence could leave them
    with pytest.raises(StateError, match=r"slot 'dense\.bias' holds NaN"):
        network.save(tmp_path / "nan.safetensors")
    assert not list(tmp_path.iterdir())


def test_a_row_s_dropout_draws_depend_on_its_place_in_the_whole_batch_not_on_who_draws_it() -> None:
    whole = Generator(9, stream=3).uniform_rows(4, 5)
    first, second = Generator(9, stream=3), Generator(9, stream=3)
    parts = [first.uniform_rows(2, 5, 0, 4), second.uniform_rows(2, 5, 2, 4)]
    assert np.concatenate(parts).tobytes() == whole.tobytes()
    assert first.counter == second.counter == 20
    assert Generator(9).uniform_rows(4, 5).tobytes() == Generator(9).uniform(20).tobytes()


def test_put_slots_replaces_the_slots_on_the_engine_checked_first() -> None:
    trainer = titanic_trainer(seed=1)
    other = titanic_trainer(seed=2).network.slots
    trainer.put_slots(other)
    assert all(other[n].tobytes() == v.tobytes() for n, v in trainer.network.slots.items())
    with pytest.raises(ShapeError, match=r"slot 'dense\.bias': missing"):
        trainer.put_slots({k: v for k, v in other.items() if k != "dense.bias"})


class Seen(StepHook):
    def __init__(self) -> None:
        self.grads: list[np.ndarray] = []

    def gradients(self, trainer: Trainer, grads: list[Any]) -> list[Any] | None:
        self.grads = [trainer.engine.get(g) for g in grads]
        return grads


def test_an_empty_share_of_a_batch_takes_no_forward_pass_and_hands_zeros_to_the_hooks() -> None:
    """A process of a distributed run left no rows of a small batch still takes part."""
    seen = Seen()
    trainer = titanic_trainer()
    trainer.hooks.append(seen)
    assert trainer.state is not None
    value = trainer.step(np.zeros((0, 14), np.float32), np.zeros((0, 1), np.float32), (3, 3, 3))
    assert value == 0.0 and trainer.state.steps == 1
    assert [g.shape for g in seen.grads] == [(14, 16), (16,), (16, 1), (1,)]
    assert all(not g.any() for g in seen.grads)


def test_rows_whose_float32_total_overflows_are_still_taken_when_finite() -> None:
    # The check for NaN and infinite features adds the batch in float32 first, and asks
    # float64 only where that overflowed: 3e38 + 3e38 is no infinite feature.
    trainer = Trainer(Network([Dense(1)], inputs=2), BinaryCrossEntropy(), SGD(0.01), seed=0)
    rows = np.array([[3e38, 0.0], [3e38, 0.0]], np.float32)
    with np.errstate(all="ignore"):  # its loss may well be infinite: the rows are taken
        trainer.step(rows, np.array([[0.0], [1.0]], np.float32))
    with pytest.raises(DataError, match="row 2"):
        trainer.step(np.array([[1.0, 0.0], [np.inf, 0.0]], np.float32), np.zeros((2, 1)))


@pytest.mark.parametrize("engine", ["light", "torch:cpu"])
def test_a_step_refused_for_its_rows_changes_nothing(engine: str) -> None:
    # Trial K: a step refused before any arithmetic (targets of another count) had taken the
    # step's dropout key, so every later mask moved and a caught error parted the run from the
    # one without it, silently.
    if engine.startswith("torch"):
        pytest.importorskip("deepsharp.engines.torch")
    from deepsharp.core import BatchNorm, Dropout, MeanSquaredError

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 10)).astype(np.float32)
    y = rng.normal(size=(64, 1)).astype(np.float32)
    broken = x.copy()
    broken[5, 3] = np.nan
    refused = [
        (x, y[:10], None),  # targets of another count
        (broken, y, None),  # a feature that is not finite
        (x, y, np.full(64, -1.0)),  # negative weights
        (x, y, np.ones(63)),  # weights of another count
    ]

    def run(refusing: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        network = Network([Dense(16), BatchNorm(), Relu(), Dropout(0.5), Dense(1)], inputs=10)
        trainer = Trainer(network, MeanSquaredError(), Adam(0.01), engine=engine, seed=0)
        for i in range(4):
            if refusing and i == 2:
                for features, targets, weights in refused:
                    with pytest.raises((DataError, ShapeError, ValueError)):
                        trainer.step(features, targets, weights=weights)
            trainer.step(x, y)
        values = network.values()
        trainer.close()
        return values

    slots, buffers = run(False)
    theirs_slots, theirs_buffers = run(True)
    assert all(np.array_equal(slots[name], theirs_slots[name]) for name in slots)
    assert all(np.array_equal(buffers[name], theirs_buffers[name]) for name in buffers)

"""Networks and trained networks copy and pickle (copy.deepcopy, pickle, scikit-learn's clone,
joblib's workers): the architecture and the slots' values, never an engine or a run's lock."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    CrossEntropy,
    Dense,
    Dropout,
    FitOptions,
    Network,
    Relu,
    Trainer,
    fit,
)


def _rows() -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((60, 3)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64)


def test_a_network_not_yet_built_copies_and_pickles_as_its_layers() -> None:
    network = Network([Dense(4), Relu(), Dropout(0.1), Dense(2)])
    for again in (copy.deepcopy(network), pickle.loads(pickle.dumps(network))):
        assert repr(again) == repr(network) and again is not network
        assert not again.initialized and again.slots == {}


def test_a_trained_network_pickles_to_the_same_predictions_bit_for_bit() -> None:
    x, y = _rows()
    options = FitOptions(seed=0, epochs=3, progress=False)
    trained = fit(
        None, (x, y), Network([Dense(4), Relu(), Dense(2)]), CrossEntropy(), Adam(), options
    )
    again = pickle.loads(pickle.dumps(trained.trained))
    assert again.predict(x).tobytes() == trained.trained.predict(x).tobytes()


def test_a_copy_taken_during_a_run_holds_the_run_s_slots_and_no_engine() -> None:
    x, y = _rows()
    network = Network([Dense(4), Relu(), Dense(2)])
    with Trainer(network, CrossEntropy(), Adam(0.1), seed=0) as trainer:
        trainer.step(x, y)
        now = network.slots
        copied = copy.deepcopy(network)
        trainer.step(x, y)  # the copy keeps the values it was taken with
    assert copied.slots.keys() == now.keys()
    assert all(np.array_equal(copied.slots[name], now[name]) for name in now)
    with Trainer(copied, CrossEntropy(), Adam(0.1), seed=0) as trainer:  # free to train again
        trainer.step(x, y)


def test_a_second_fit_of_one_network_leaves_the_first_run_s_predictions() -> None:
    """Failed before (trial PK): run.trained held the network given, and a second fit of it
    changed the first run's predictions (its pipeline was its own, its slots were not)."""
    x, y = _rows()
    network = Network([Dense(16), Relu(), Dense(2)])
    options = FitOptions(seed=0, epochs=2, progress=False)
    first = fit(None, (x, y), network, CrossEntropy(), Adam(0.01), options)
    kept = first.trained.predict(x).tobytes()
    assert network.predict(x, CrossEntropy()).tobytes() == kept  # trained in place, as before
    fit(None, (x, y), network, CrossEntropy(), Adam(0.01), options)
    assert first.trained.predict(x).tobytes() == kept


def test_settings_assigned_after_a_run_change_nothing_of_it(tmp_path: Path) -> None:
    """Failed before (trial NB): run.trained held the layers and the loss given, so a setting
    assigned for the next run (an activation, from_logits, label smoothing) changed the
    finished run's predictions, its evaluate and the file it saved, silently."""
    from deepsharp.core import TrainedNetwork

    x, y = _rows()
    first, loss = Dense(16), CrossEntropy()
    run = fit(None, (x, y), Network([first, Relu(), Dense(2)]), loss, Adam(0.01),
              FitOptions(seed=0, epochs=2, progress=False))  # fmt: skip
    kept = run.trained.predict(x).tobytes()
    measured = run.trained.evaluate((x, y))
    first.activation = "tanh"
    loss.from_logits = False
    loss.label_smoothing = 0.2
    assert run.trained.predict(x).tobytes() == kept
    assert run.trained.evaluate((x, y)) == measured
    run.trained.save(tmp_path / "kept.safetensors")
    assert TrainedNetwork.load(tmp_path / "kept.safetensors").predict(x).tobytes() == kept


def test_a_setting_that_shapes_a_slot_assigned_after_the_build_is_refused(tmp_path: Path) -> None:
    """Failed before (trial NB): Dense.units assigned after a run was not taken — the next run
    trained the built 8 units while repr said 4 — and the network's file, saved without a word,
    did not load."""
    from deepsharp.core import ConfigurationError

    x, y = _rows()
    first = Dense(16)
    network = Network([first, Relu(), Dense(2)])
    options = FitOptions(seed=0, epochs=1, progress=False)
    run = fit(None, (x, y), network, CrossEntropy(), Adam(0.01), options)
    first.units = 4
    said = r"built with 'dense.bias' of shape \(16,\).* of shape \(4,\): a setting that shapes"
    with pytest.raises(ConfigurationError, match=said):
        network.save(tmp_path / "network.safetensors")
    with pytest.raises(ConfigurationError, match=said):
        fit(None, (x, y), network, CrossEntropy(), Adam(0.01), options)
    assert not (tmp_path / "network.safetensors").exists()
    run.trained.save(tmp_path / "kept.safetensors")  # the finished run's layers are its own
    first.units = 16  # assigned back: the trained network is whole again
    network.save(tmp_path / "network.safetensors")


def test_a_copy_of_a_pipeline_is_its_own() -> None:
    """Failed before (trial PK): copy.copy shared the columns, so learning the copy (or
    declaring a column on it) changed the original."""
    from deepsharp.core import Pipeline

    rows = [{"a": float(i), "c": "pq"[i % 2], "y": i % 2} for i in range(20)]
    learned = Pipeline().number("a").category("c").target("y").learn(rows)
    before = learned.features(rows).tobytes()
    copied = copy.copy(learned)
    copied.learn([{**row, "a": row["a"] * 10} for row in rows])
    copied.number("z")
    assert learned.features(rows).tobytes() == before
    assert "z" not in repr(learned)


def test_a_copy_of_an_engine_counts_its_own_transfers() -> None:
    """Failed before (trial PK): copy.copy of the light engine shared its counters."""
    from deepsharp.core import make_engine

    engine = make_engine("light")
    copy.copy(engine).put(np.ones((2, 2), np.float32))
    copy.deepcopy(engine).put(np.ones(2, np.float32))
    assert engine.counters.transfers_in == 0


def test_a_built_network_of_causal_attention_and_rescaling_pickles() -> None:
    """Failed with this round's first form of the lazy buffers (a review): the causal mask's
    values were a function local to build, which pickle cannot name."""
    from deepsharp.core import Flatten, MultiHeadAttention, Rescaling

    network = Network(
        [MultiHeadAttention(1, causal=True), Rescaling(2.0), Flatten(), Dense(2)], inputs=(4, 8)
    )
    x = np.random.default_rng(0).standard_normal((20, 4, 8)).astype(np.float32)
    run = fit(None, (x, np.arange(20) % 2), network, CrossEntropy(), Adam(),
              FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    for made in (network, run.trained):
        again = pickle.loads(pickle.dumps(made))
        assert again is not made
    again = pickle.loads(pickle.dumps(run.trained))
    assert again.predict(x).tobytes() == run.trained.predict(x).tobytes()


def test_a_run_whose_loss_or_layer_cannot_be_copied_keeps_it_as_it_is() -> None:
    """Failed before (trial RV): the finished run's copies of its loss and layers failed for
    one of one's own holding a lock (or a file), and the run, trained, raised at its end."""
    import threading

    class Logged(CrossEntropy):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()

    x, y = _rows()
    run = fit(None, (x, y), Network([Dense(8), Relu(), Dense(2)]), Logged(), Adam(0.01),
              FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    assert run.trained.predict(x).shape == (len(x), 2)


def test_a_layer_of_one_s_own_recording_less_than_makes_it_still_trains() -> None:
    """Failed before (trial RV): the check of settings assigned after the build rebuilt the
    network from what its layers record, and refused at every run one of one's own whose
    config() leaves out a setting that shapes its slot."""
    import warnings

    from deepsharp.core import Layer
    from deepsharp.core.autodiff import functions as ops

    class Wide(Layer):
        def __init__(self, units: int = 8, name: str | None = None) -> None:
            super().__init__(name)
            self.units = units

        def build(self, shape: Any) -> Any:
            self.slot("w", (shape[0], self.units))
            return (self.units,)

        def forward(self, x: Any, slots: Any, context: Any) -> Any:
            return ops.matmul(x, slots["w"])

    x, y = _rows()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = fit(None, (x, y), Network([Wide(4), Relu(), Dense(2)]), CrossEntropy(),
                  Adam(0.01), FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    assert run.report.epochs_run == 1

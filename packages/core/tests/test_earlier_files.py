"""Files written before format 3 (network and trained files of format 1, checkpoints of format 2:
slots named by their layer's position) still load, their slots named as today, and give what
they gave: the same predictions, and a run resumed from the checkpoint ends where it did."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    Checkpoint,
    Conv2D,
    CrossEntropy,
    Dense,
    Dropout,
    FitOptions,
    Flatten,
    MaxPool2D,
    Network,
    Relu,
    Tanh,
    TrainedNetwork,
    fit,
)
from deepsharp.core.engine import make_engine
from deepsharp.core.errors import EngineMismatchError
from deepsharp.core.samples import titanic

EARLIER = Path(__file__).parent / "earlier_files"
EXPECTED = json.loads((EARLIER / "expected.json").read_text())
NAMES = {
    "conv2d.weights",
    "conv2d.bias",
    "dense.weights",
    "dense.bias",
    "dense_1.weights",
    "dense_1.bias",
}


def _network() -> Network:
    return Network(
        [
            Conv2D(4, 3, padding="same"),
            Relu(),
            MaxPool2D(2),
            Flatten(),
            Dense(8),
            Tanh(),
            Dropout(0.1),
            Dense(2),
        ]
    )


def test_a_network_file_of_format_1_loads_its_slots_named_as_today() -> None:
    network = Network.load(EARLIER / "images.network.safetensors")
    assert set(network.slots) == NAMES
    assert [layer.name for layer in network.layers][:5] == [
        "conv2d",
        "relu",
        "maxpool2d",
        "flatten",
        "dense",
    ]


def test_a_trained_file_of_format_1_predicts_what_it_predicted() -> None:
    rows = np.load(EARLIER / "images_rows.npy")
    got = TrainedNetwork.load(EARLIER / "images.trained.safetensors").predict(rows)
    assert got.tobytes() == np.asarray(EXPECTED["images"], np.float32).tobytes()
    titanic_file = TrainedNetwork.load(EARLIER / "titanic.trained.safetensors")
    got = titanic_file.predict(titanic.rows()[:5])
    assert got.tobytes() == np.asarray(EXPECTED["titanic"], np.float32).tobytes()


def test_a_checkpoint_of_format_2_loads_and_a_run_resumed_from_it_ends_where_it_did() -> None:
    checkpoint = Checkpoint.load(EARLIER / "run")
    assert checkpoint.epoch == 3 and set(checkpoint.trainer.slots) == NAMES
    assert set(checkpoint.best_slots) == NAMES and checkpoint.trainer.buffers == {}
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 1, 8, 8)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) > 0).astype(np.int64)
    options = FitOptions(seed=3, epochs=5, progress=False, patience=50)
    here = make_engine("light").identity
    if checkpoint.engine != here:  # another NumPy (tests-3.10's, 1.26): refused, as it must be
        with pytest.raises(EngineMismatchError, match="resume there, or start the run afresh"):
            fit(
                None,
                (x, y),
                _network(),
                CrossEntropy(),
                Adam(0.01),
                options,
                resume_from=checkpoint,
            )
        pytest.skip(f"the checkpoint was taken on {checkpoint.engine}, this is {here}")
    run = fit(None, (x, y), _network(), CrossEntropy(), Adam(0.01), options, resume_from=checkpoint)
    assert run.report.best_epoch == EXPECTED["resumed_best_epoch"]
    got = run.trained.predict(x[:5])
    assert got.tobytes() == np.asarray(EXPECTED["resumed"], np.float32).tobytes()


def test_a_file_loaded_from_format_1_is_saved_in_format_3_and_loads_again(tmp_path: Path) -> None:
    trained = TrainedNetwork.load(EARLIER / "images.trained.safetensors")
    trained.save(tmp_path / "again.safetensors")
    again = TrainedNetwork.load(tmp_path / "again.safetensors")
    rows = np.load(EARLIER / "images_rows.npy")
    assert again.predict(rows).tobytes() == trained.predict(rows).tobytes()
    assert again.network.to_json() == trained.network.to_json()

"""Network files: one safetensors file, no engine named, nothing from it ever run."""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from core_helpers import XOR_ANSWERS, XOR_ROWS, xor_trainer

from deepsharp.core import BinaryCrossEntropy, FileFormatError, Network
from deepsharp.core.files import encode_safetensors, read_safetensors


@pytest.fixture
def trained() -> Network:
    trainer = xor_trainer(seed=0)
    for _ in range(50):
        trainer.step(XOR_ROWS, XOR_ANSWERS)
    trainer.close()
    return trainer.network


def test_save_load_predict_gives_the_same_bits(tmp_path: Path, trained: Network) -> None:
    trained.save(tmp_path / "xor.safetensors")
    loaded = Network.load(tmp_path / "xor.safetensors")
    loss = BinaryCrossEntropy()
    assert loaded.predict(XOR_ROWS, loss).tobytes() == trained.predict(XOR_ROWS, loss).tobytes()
    for name, value in trained.slots.items():
        assert loaded.slots[name].tobytes() == value.tobytes()


def test_the_file_names_no_engine(tmp_path: Path, trained: Network) -> None:
    trained.save(tmp_path / "xor.safetensors")
    _, metadata = read_safetensors(tmp_path / "xor.safetensors")
    text = json.dumps(metadata).lower()
    for word in ("light", "numpy", "torch", "testbuffer", "engine", "cpu"):
        assert word not in text


def test_other_readers_of_safetensors_can_read_it(tmp_path: Path, trained: Network) -> None:
    numpy_reader = pytest.importorskip("safetensors.numpy")
    trained.save(tmp_path / "xor.safetensors")
    values = numpy_reader.load_file(str(tmp_path / "xor.safetensors"))
    assert values.keys() == trained.slots.keys()


def _write(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> Path:
    path.write_bytes(encode_safetensors(tensors, metadata))
    return path


def _parts(trained: Network) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    return trained.slots, trained.metadata()


def test_a_truncated_file_is_refused(tmp_path: Path, trained: Network) -> None:
    trained.save(tmp_path / "whole.safetensors")
    data = (tmp_path / "whole.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) - 10])
    with pytest.raises(FileFormatError, match="truncated"):
        Network.load(tmp_path / "cut.safetensors")
    (tmp_path / "tiny.safetensors").write_bytes(data[:5])
    with pytest.raises(FileFormatError, match="truncated"):
        Network.load(tmp_path / "tiny.safetensors")


def test_garbage_is_refused(tmp_path: Path) -> None:
    (tmp_path / "garbage.safetensors").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(FileFormatError, match="not a safetensors file"):
        Network.load(tmp_path / "garbage.safetensors")
    header = b"{not json"
    (tmp_path / "badjson.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(FileFormatError, match="not JSON"):
        Network.load(tmp_path / "badjson.safetensors")


def test_another_format_version_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    path = _write(tmp_path / "v2.safetensors", tensors, {**metadata, "format_version": "2"})
    with pytest.raises(FileFormatError, match="format version '2'"):
        Network.load(path)


def test_an_unknown_layer_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    network = json.loads(metadata["network"])
    network["layers"][1]["kind"] = "os.system"
    path = _write(
        tmp_path / "odd.safetensors", tensors, {**metadata, "network": json.dumps(network)}
    )
    with pytest.raises(FileFormatError, match=r"unknown layer kind 'os\.system'"):
        Network.load(path)


def test_a_missing_slot_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    del tensors["2.dense.bias"]
    with pytest.raises(FileFormatError, match=r"slot '2\.dense\.bias' is missing"):
        Network.load(_write(tmp_path / "missing.safetensors", tensors, metadata))


def test_a_mis_shaped_slot_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    tensors["0.dense.weights"] = np.zeros((3, 8), np.float32)
    with pytest.raises(FileFormatError, match=r"shape \(3, 8\).*shape \(2, 8\)"):
        Network.load(_write(tmp_path / "shape.safetensors", tensors, metadata))


def test_a_nan_slot_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    tensors["0.dense.bias"][3] = np.nan
    with pytest.raises(FileFormatError, match="NaN"):
        Network.load(_write(tmp_path / "nan.safetensors", tensors, metadata))


class Planted:
    """Loading this pickle would write a file: proof that something was run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (Path.write_text, (str(self.marker), "ran"))  # type: ignore[return-value]


def test_a_pickle_payload_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    (tmp_path / "model.pt").write_bytes(pickle.dumps(Planted(marker), protocol=4))
    with pytest.raises(FileFormatError, match="pickle"):
        Network.load(tmp_path / "model.pt")
    assert not marker.exists()


def test_a_missing_file_says_where_it_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere\.safetensors"):
        Network.load(tmp_path / "nowhere.safetensors")

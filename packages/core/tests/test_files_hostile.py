"""Files made to hurt (trials HF, HG): an architecture that asks for gigabytes through a layer's
buffer or an input, axes NumPy cannot hold, a config of 300 KB, names no UTF-8 text holds, and
files seal must not record a digest for."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_files import load_in_child, make_originals, split

from deepsharp.core import Adam, BinaryCrossEntropy, Dense, FileFormatError, Network


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A network file and a checkpoint, as deepsharp saves them."""
    return make_originals(tmp_path_factory.mktemp("originals"))


def _architecture_file(path: Path, inputs: list[int], layers: list[dict[str, Any]],
                       tensors: dict[str, np.ndarray]) -> Path:  # fmt: skip
    """A network file of a chain of `layers` over one input of shape `inputs`, written as a
    file's architecture is (what an attacker writes: any sizes, few slots' bytes)."""
    from deepsharp.core.files import write_safetensors

    architecture = {"inputs": [{"name": "input", "shape": inputs, "dtype": "float32"}],
                    "layers": layers, "nodes": [[i, [i]] for i in range(len(layers))],
                    "chain": True}  # fmt: skip
    metadata = {"format": "deepsharp.network", "format_version": "3",
                "network": json.dumps(architecture), "deepsharp_version": "0.1.0"}  # fmt: skip
    write_safetensors(path, tensors, metadata)
    return path


ATTENTION_SLOTS = {
    "mha.in_weights": np.zeros((3, 1), np.float32),
    "mha.in_bias": np.zeros(3, np.float32),
    "mha.out_weights": np.zeros((1, 1), np.float32),
    "mha.out_bias": np.zeros(1, np.float32),
}


@pytest.mark.parametrize(
    ("inputs", "layer", "tensors", "said"),
    [
        ([12_000, 1], {"kind": "MultiHeadAttention", "name": "mha",
                       "config": {"heads": 1, "causal": True}},
         ATTENTION_SLOTS, "an attention's scores) would take 144,000,000 values a row"),
        ([65_536, 1], {"kind": "MultiHeadAttention", "name": "mha",
                       "config": {"heads": 1, "causal": True}},
         ATTENTION_SLOTS, "buffer 'causal' of shape (65536, 65536) would hold 4,294,967,296 "
         "values, beyond the 1,073,741,824 a layer may keep"),
        ([2**28], {"kind": "Rescaling", "name": "l0", "config": {"scale": 2.0}}, {},
         "would take 268,435,456 values a row (32 GiB for the 32 rows predict serves"),
        ([32_768, 1], {"kind": "MultiHeadAttention", "name": "mha", "config": {"heads": 1}},
         ATTENTION_SLOTS, "would take 1,073,741,824 values a row (128 GiB for the 32 rows"),
        ([1, 32_768, 65_536], {"kind": "Flatten", "name": "f", "config": {}}, {},
         "a shape of one to eight positive sizes (at most 2**30 values)"),
    ],
    ids=["causal-12000", "causal-65536", "rescaling-2^28", "scores-2^30", "input-2^31"],
)  # fmt: skip
def test_a_layer_s_buffer_or_an_input_made_to_exhaust_memory_is_refused_before_it_is_made(
    tmp_path: Path, inputs: list[int], layer: dict[str, Any], tensors: Any, said: str
) -> None:
    """Failed before (trial HF): a 744-byte file's causal attention over 12,000 positions made
    its mask (1.1 GiB of float64) before the file was found to lack it, over 65,536 asked 32
    GiB (a raw MemoryError); a Rescaling 2^28 wide made 2 GB; an input of 2^31 values a row
    loaded, and each prediction asked 8 GiB a row before the rows were looked at. Trial H: an
    attention's scores over 32,768 positions (2^30 values a row, 128 GiB for the 32 rows
    predict serves) were counted nowhere; 2^30 values a row was the bound, 32 times that
    asked."""
    path = _architecture_file(tmp_path / "hostile.safetensors", inputs, [layer], tensors)
    found = load_in_child("network", path)
    assert found["outcome"] == "FileFormatError", found
    assert said in found["message"], found["message"]
    assert found["growth_mib"] < 32, found


def test_a_file_s_reshape_of_too_many_axes_and_a_huge_config_are_refused_briefly(
    tmp_path: Path,
) -> None:
    """Failed before (trial HF): a Reshape to 72 axes loaded, then failed inside NumPy at
    predict; a Dense config of 150,000 units was a 900,000-character "one line"."""
    reshaped = _architecture_file(
        tmp_path / "axes.safetensors",
        [15],
        [{"kind": "Reshape", "name": "r", "config": {"shape": [15] + [1] * 70}}],
        {},
    )
    with pytest.raises(FileFormatError, match=r"Reshape: shape is a sequence of one to eight"):
        Network.load(reshaped)
    huge = _architecture_file(
        tmp_path / "huge.safetensors",
        [3],
        [{"kind": "Dense", "name": "d", "config": {"units": [0] * 150_000}}],
        {},
    )
    with pytest.raises(FileFormatError, match=r"bad config \{'units': \[0, 0, ") as raised:
        Network.load(huge)
    assert len(str(raised.value)) < 1_000


def test_a_lone_surrogate_in_a_file_s_target_name_is_written_escaped_by_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial HF): a UnicodeEncodeError traceback writing the CSV header."""
    from deepsharp.core import FitOptions, Pipeline, TrainedNetwork, fit
    from deepsharp.core.cli import main

    rows = [{"x": i % 5, "t\udcff": i % 2} for i in range(40)]
    run = fit(Pipeline().number("x").target("t\udcff"), rows, Network([Dense(1)]),
              BinaryCrossEntropy(), Adam(0.01), FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    path = tmp_path / "surrogate.safetensors"
    run.trained.save(path)
    assert TrainedNetwork.load(path).pipeline.target_name == "t\udcff"
    (tmp_path / "rows.csv").write_text("x\n1\n2\n")
    assert main(["predict", str(path), str(tmp_path / "rows.csv")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "t\\udcff"


def test_seal_refuses_a_file_its_loader_refuses_or_one_changed_while_read(
    tmp_path: Path, originals: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before (trial HG): seal recorded a digest for a checkpoint whose state was [] (every
    loader then refused it), and for a file rewritten while seal read it (a mix of old and new
    bytes that then loaded as valid)."""
    from deepsharp.core import files
    from deepsharp.core.cli import main

    header, body = split(originals["checkpoint"])
    del header["__metadata__"]["digest"]
    header["__metadata__"]["state"] = "[]"
    text = json.dumps(header).encode()
    path = tmp_path / "checkpoint.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    unsealed = path.read_bytes()
    assert main(["seal", str(path)]) == 1
    assert path.read_bytes() == unsealed  # nothing written
    header, body = split(originals["network"])
    del header["__metadata__"]["digest"]
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    read = files._read

    def rewritten_meanwhile(*args: Any, **kwargs: Any) -> Any:
        made = read(*args, **kwargs)
        os.utime(path, ns=(0, 10**18))  # as a writer's next chunk lands
        return made

    monkeypatch.setattr(files, "_read", rewritten_meanwhile)
    with pytest.raises(FileFormatError, match=r"changed while it was read .*nothing was written"):
        files.seal_safetensors(path)


def test_a_file_s_causal_mask_of_other_values_than_0_and_1_is_refused(tmp_path: Path) -> None:
    """A causal mask holding 0.5 loaded, and its blocked scores (each its own times the mask,
    plus float32's lowest times one less the mask) were then infinite: predictions of NaN,
    said as features too large (trial NU's fix, found through the export test's random
    buffers). Its 0s and 1s are all it may hold."""
    mask = np.tril(np.ones((3, 3), np.float32))
    mask[2, 0] = 0.5
    layer = {"kind": "MultiHeadAttention", "name": "mha", "config": {"heads": 1, "causal": True}}
    path = _architecture_file(
        tmp_path / "mask.safetensors", [3, 1], [layer], {**ATTENTION_SLOTS, "mha.causal": mask}
    )
    with pytest.raises(
        FileFormatError, match=r"buffer 'mha\.causal' holds 0\.5, where it may hold only 0, 1"
    ):
        Network.load(path)


def test_a_trained_file_whose_target_s_classes_its_network_cannot_give_is_refused(
    tmp_path: Path,
) -> None:
    """Failed before (trial H): a file whose target held 3 classes beside a network of one
    output under BCE (or of two under CrossEntropy) loaded, and served one column as the chance
    of class 'c' (two unlabelled columns), evaluate scoring it accuracy 1.0."""
    from core_helpers import fit_titanic, quick

    from deepsharp.core import CrossEntropy, Pipeline, TrainedNetwork

    trained = fit_titanic(quick(epochs=1)).trained
    three = Pipeline.from_json(
        json.loads(
            json.dumps(trained.pipeline.to_json()).replace(
                '"binary", "classes": ["0", "1"]', '"classes", "classes": ["a", "b", "c"]'
            )
        )
    )
    assert three.classes == ["a", "b", "c"]
    for loss, said in (
        (BinaryCrossEntropy(), "a binary loss"),
        (CrossEntropy(), "one output each"),
    ):
        TrainedNetwork(trained.network, loss, three).save(tmp_path / "t.safetensors")
        with pytest.raises(FileFormatError, match=f"target has 3 classes.*{said}"):
            TrainedNetwork.load(tmp_path / "t.safetensors")
    TrainedNetwork(trained.network, trained.loss, trained.pipeline).save(tmp_path / "t.safetensors")
    assert TrainedNetwork.load(tmp_path / "t.safetensors").pipeline.classes == ["0", "1"]


def test_a_format_1_file_is_held_to_the_values_a_row_a_later_format_is(tmp_path: Path) -> None:
    """Failed before (trial H): a 4.5 KB file of format 1 (an Embedding of 1,024 wide over
    4,194,304 ids) loaded, its architecture never counted, and predicting one row asked 512
    GiB (a raw MemoryError), where the same network in format 4 was refused as it loaded."""
    from deepsharp.core.files import write_safetensors
    from deepsharp.core.nn.predicting import CHUNK
    from deepsharp.core.nn.saving import SERVED_ROWS

    assert SERVED_ROWS == CHUNK  # the bound holds what predict serves at a time
    layer = {"kind": "Embedding", "config": {"vocabulary": 1, "dim": 1024, "mask_zero": False}}
    metadata = {"format": "deepsharp.network", "format_version": "1",
                "deepsharp_version": "0.1.0",
                "network": json.dumps({"inputs": [2**22], "layers": [layer]})}  # fmt: skip
    path = tmp_path / "format-1.safetensors"
    write_safetensors(path, {"0.embedding.table": np.zeros((1, 1024), np.float32)}, metadata)
    found = load_in_child("network", path)
    assert found["outcome"] == "FileFormatError", found
    assert "would take 4,294,967,296 values a row (512 GiB for the 32 rows" in found["message"]
    assert found["growth_mib"] < 32, found

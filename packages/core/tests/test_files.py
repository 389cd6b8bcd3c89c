"""Network files: one safetensors file, no engine named, nothing from it ever run."""

from __future__ import annotations

import json
import os
import pickle
import re
import stat
import struct
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import XOR_ROWS, XOR_TARGETS, xor_trainer
from fuzz_files import load_in_child, make_originals, seal, split

from deepsharp.core import BinaryCrossEntropy, Dense, FileFormatError, Network, Relu
from deepsharp.core.atomic import write_atomically
from deepsharp.core.files import _canonical_digest, encode_safetensors, read_safetensors


@pytest.fixture
def trained() -> Network:
    trainer = xor_trainer(seed=0)
    for _ in range(50):
        trainer.step(XOR_ROWS, XOR_TARGETS)
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
    del tensors["dense_1.bias"]
    with pytest.raises(FileFormatError, match=r"slot 'dense_1\.bias' is missing"):
        Network.load(_write(tmp_path / "missing.safetensors", tensors, metadata))


def test_a_mis_shaped_slot_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    tensors["dense.weights"] = np.zeros((3, 8), np.float32)
    with pytest.raises(FileFormatError, match=r"shape \(3, 8\).*shape \(2, 8\)"):
        Network.load(_write(tmp_path / "shape.safetensors", tensors, metadata))


def test_a_nan_slot_is_refused(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    tensors["dense.bias"][3] = np.nan
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


# --- what is not a regular file is refused before a byte is read ----------------------------


def test_a_named_pipe_without_a_writer_is_refused_at_once(tmp_path: Path) -> None:
    pipe = tmp_path / "model.safetensors"
    os.mkfifo(pipe)
    said = load_in_child("trained", pipe, timeout=60)  # before: waited for a writer forever
    assert said["outcome"] == "FileFormatError", said
    assert "named pipe" in said["message"]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused_in_bounded_memory(device: str) -> None:
    said = load_in_child("network", device)  # before: /dev/zero grew until MemoryError
    assert said["outcome"] == "FileFormatError", said
    assert "character device" in said["message"]
    assert said["growth_mib"] < 100


def test_a_folder_is_refused_as_a_folder(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="is a folder, not a file"):
        Network.load(tmp_path)  # before: IsADirectoryError


def _sparse(path: Path, size: int, start: bytes = b"") -> Path:
    with open(path, "wb") as file:
        file.write(start)
        file.truncate(size)
    return path


GIB = 1 << 30


@pytest.mark.parametrize(
    "case",
    ["zeros", "a network file, then 4 GiB of nothing", "a header that claims 4 GiB, undigested"],
)
def test_a_sparse_4_gib_file_is_refused_in_bounded_memory(
    tmp_path: Path, trained: Network, case: str
) -> None:
    path = tmp_path / "sparse.safetensors"
    if case == "zeros":
        _sparse(path, 4 * GIB)
    elif case.startswith("a network file"):
        trained.save(path)
        _sparse(path, 4 * GIB, path.read_bytes())
    else:
        header = {
            "__metadata__": {},
            "w": {"dtype": "F32", "shape": [GIB], "data_offsets": [0, 4 * GIB]},
        }
        text = json.dumps(header).encode()
        _sparse(path, 8 + len(text) + 4 * GIB, struct.pack("<Q", len(text)) + text)
    said = load_in_child("network", path)  # before: read all 4 GiB, 33 s and MemoryError
    assert said["outcome"] == "FileFormatError", said
    assert said["growth_mib"] < 100


def test_a_big_deepsharp_file_whose_digest_is_wrong_is_refused_in_bounded_memory(
    tmp_path: Path,
) -> None:
    size = 96 << 20  # over the 64 MiB from which a body is hashed before it is kept
    big = Network([Dense(4)], inputs=size // 16)  # its weights: the 96 MiB the file declares
    text = json.dumps(
        {
            "__metadata__": {**big.metadata(), "digest": "sha256:" + "0" * 64},
            "dense.weights": {
                "dtype": "F32",
                "shape": [size // 16, 4],
                "data_offsets": [0, size],
            },
            "dense.bias": {"dtype": "F32", "shape": [4], "data_offsets": [size, size + 16]},
        }
    )
    start = struct.pack("<Q", len(text)) + text.encode()
    path = _sparse(tmp_path / "big.safetensors", len(start) + size + 16, start)
    said = load_in_child("network", path)  # with a 2-pass check, no 96 MiB array is made
    assert said["outcome"] == "FileFormatError", said
    assert "damaged" in said["message"]
    assert said["growth_mib"] < 32  # hashed before it is kept: no 96 MiB array was made


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A network file, a trained-network file and a checkpoint, as deepsharp saves them."""
    return make_originals(tmp_path_factory.mktemp("originals"))


def _claiming(path: Path, data: bytes, size: int) -> Path:
    """`data`'s file with its last tensor claiming `size` bytes of zeros (sparse on disk), and
    sealed: its digest is correct, as anyone can compute one."""
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    name = max((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])
    start = header[name]["data_offsets"][0]
    header[name] = {"dtype": "F32", "shape": [size // 4], "data_offsets": [start, start + size]}
    body = data[8 + length :][:start]
    digest = _canonical_digest(header)
    digest.update(body)
    zeros = bytes(1 << 24)
    for _ in range(size // len(zeros)):
        digest.update(zeros)
    header["__metadata__"]["digest"] = f"sha256:{digest.hexdigest()}"
    text = json.dumps(header, separators=(",", ":")).encode()
    return _sparse(path, 8 + len(text) + start + size, struct.pack("<Q", len(text)) + text + body)


@pytest.mark.parametrize("kind", ["network", "trained", "checkpoint"])
def test_a_sealed_file_whose_tensor_claims_a_gib_is_refused_before_its_values_are_read(
    tmp_path: Path, originals: dict[str, bytes], kind: str
) -> None:
    path = _claiming(tmp_path / "claims.safetensors", originals[kind], GIB)
    said = load_in_child(kind, path)  # before: hashed, then 1 GiB made (or a MemoryError)
    assert said["outcome"] == "FileFormatError", said
    assert (  # a checkpoint's last tensor is its history's table
        "its history is float32 of shape (268435456,), not a table of float64"
        if kind == "checkpoint"
        else "the architecture needs float32 of shape"
    ) in said["message"]
    assert said["growth_mib"] < 32


@pytest.mark.parametrize("kind", ["network", "trained", "checkpoint"])
def test_an_architecture_whose_outputs_would_exhaust_memory_is_refused_as_it_loads(
    tmp_path: Path, originals: dict[str, bytes], kind: str
) -> None:
    """Failed before: the file loaded (its slots are those the architecture needs), and
    predict then asked 2 GiB under a cap (a raw MemoryError), 64 GiB a row without one."""
    header, body = split(originals[kind])
    architecture = json.loads(header["__metadata__"]["network"])
    layers, nodes = architecture["layers"], architecture["nodes"]
    first = nodes[0]
    layers.append({"kind": "Reshape", "name": "rs", "config": {"shape": [6, 1]}})
    grown = [first, [len(layers) - 1, [1]]]
    for i in range(30):  # each Concatenate of the last output with itself doubles it
        layers.append({"kind": "Concatenate", "name": f"c{i}", "config": {"axis": -1}})
        grown.append([len(layers) - 1, [len(grown), len(grown)]])
    layers.append({"kind": "GlobalAvgPool", "name": "gap", "config": {}})
    grown.append([len(layers) - 1, [len(grown)]])
    for layer, _ in nodes[1:]:  # the rest of the network after it
        grown.append([layer, [len(grown)]])
    architecture.update(nodes=grown, chain=False)
    header["__metadata__"]["network"] = json.dumps(architecture)
    path = tmp_path / "grown.safetensors"
    path.write_bytes(seal(header, body))
    said = load_in_child(kind, path)
    assert said["outcome"] == "FileFormatError", said
    assert "would take 6,442,450,944 values a row (768 GiB for the 32 rows" in said["message"]
    assert said["growth_mib"] < 32


def test_a_deep_network_of_large_images_loads_and_a_bytes_path_is_read(tmp_path: Path) -> None:
    """Failed before: the outputs' values a row were added up over every layer, so 22 blocks
    of 64 channels on 512 x 512 images were refused as made to exhaust memory; and a bytes
    path, written, was a raw TypeError when read."""
    from deepsharp.core import BatchNorm, Conv2D, GlobalAvgPool
    from deepsharp.core.random import Generator

    layers: list[Any] = []
    for _ in range(22):
        layers += [Conv2D(64, 3, padding="same"), BatchNorm(), Relu()]
    network = Network([*layers, GlobalAvgPool(), Dense(10)], inputs=(3, 512, 512))
    network.initialize(Generator(0))
    path = tmp_path / "deep.safetensors"
    network.save(os.fsencode(path))
    assert Network.load(os.fsencode(path)).specs.keys() == network.specs.keys()


def test_a_file_lacking_an_entry_or_a_zip_is_said_so_naming_the_file(
    tmp_path: Path, originals: dict[str, bytes]
) -> None:
    """Failed before: "its architecture cannot be read: 'inputs'" (a KeyError's repr), a
    pipeline's missing key named no file, and a zip of text was 'a pickle'."""
    from deepsharp.core import TrainedNetwork

    header, body = split(originals["trained"])
    architecture = json.loads(header["__metadata__"]["network"])
    del architecture["inputs"]
    header["__metadata__"]["network"] = json.dumps(architecture)
    (tmp_path / "a.safetensors").write_bytes(seal(header, body))
    with pytest.raises(FileFormatError, match=r"cannot be read: it lacks the entry 'inputs'"):
        TrainedNetwork.load(tmp_path / "a.safetensors")
    header, body = split(originals["trained"])
    pipeline = json.loads(header["__metadata__"]["pipeline"])
    del pipeline["columns"]
    header["__metadata__"]["pipeline"] = json.dumps(pipeline)
    (tmp_path / "p.safetensors").write_bytes(seal(header, body))
    with pytest.raises(
        FileFormatError, match=r"^trained-network file .*p\.safetensors.*: pipeline"
    ):
        TrainedNetwork.load(tmp_path / "p.safetensors")
    with zipfile.ZipFile(tmp_path / "z.safetensors", "w") as archive:
        archive.writestr("notes.txt", "plain text " * 100)
    with pytest.raises(FileFormatError, match=r"is a zip archive \(torch\.save writes"):
        TrainedNetwork.load(tmp_path / "z.safetensors")


def test_tensors_larger_than_the_process_can_hold_are_refused_unread(tmp_path: Path) -> None:
    size = 2 * GIB  # the child may grow 1 GiB
    text = json.dumps({"w": {"dtype": "F32", "shape": [size // 4], "data_offsets": [0, size]}})
    path = _sparse(tmp_path / "big.safetensors", 8 + len(text) + size, _header(text))
    done = subprocess.run(
        [sys.executable, "-c", _READ_FOREIGN, str(path)], capture_output=True, text=True
    )
    assert "FileFormatError" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "more than this process can hold" in done.stdout


_READ_FOREIGN = """
import resource, sys
from deepsharp.core.files import read_safetensors
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.RLIM_INFINITY))
try:
    read_safetensors(sys.argv[1], foreign=True)
except BaseException as error:
    print(type(error).__name__, error)
"""


def _header(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


# --- the header: small, an object, shallow, its numbers short --------------------------------


def _raw(path: Path, header: str, body: bytes = b"") -> Path:
    text = header.encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    return path


def test_a_header_over_1_mib_is_refused_unread(tmp_path: Path) -> None:
    path = _raw(tmp_path / "big.safetensors", '{"a":"' + "x" * (1 << 20) + '"}')
    with pytest.raises(FileFormatError, match=r"header is 1,048,584 bytes, over the 1,048,576"):
        Network.load(path)
    path = _raw(tmp_path / "bigger.safetensors", '{"a":[' + ",".join(["{}"] * 7_000_000) + "]}")
    said = load_in_child("network", path)  # before: 20 MiB of header parsed into ~500 MiB
    assert said["outcome"] == "FileFormatError", said
    assert said["growth_mib"] < 100


def test_a_header_that_is_not_an_object_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = _raw(tmp_path / "list.safetensors", "[" + ",".join(["{}"] * 300_000) + "]")
    said = load_in_child("network", path)  # before: parsed whole (26x its size), then refused
    assert said["outcome"] == "FileFormatError", said
    assert "must be a JSON object" in said["message"]
    assert said["growth_mib"] < 10


def test_a_header_of_many_small_objects_stays_in_bounded_memory(tmp_path: Path) -> None:
    path = _raw(tmp_path / "many.safetensors", '{"a":[' + ",".join(["{}"] * 340_000) + "]}")
    assert path.stat().st_size < 1 << 20
    said = load_in_child("network", path)
    assert said["outcome"] == "FileFormatError", said
    assert said["growth_mib"] < 100


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ('{"a":' + "[" * 100_000 + "]" * 100_000 + "}", "nested 100001 deep"),  # RecursionError
        ('{"a":' + "9" * 5000 + "}", "a number of 5000 digits"),  # ValueError
        ('{"a":' + "9" * 30 + "}", "a number of 30 digits"),
        ('{"a":{"dtype":["F32"],"shape":[1],"data_offsets":[0,4]}}', "has dtype"),  # TypeError
        (
            '{"a":{"dtype":"F32","shape":[0,9223372036854775808],"data_offsets":[0,0]}}',
            "larger than",
        ),
        (
            '{"a":{"dtype":"F32","shape":[' + ",".join(["1"] * 65) + '],"data_offsets":[0,4]}}',
            "65 dimensions",
        ),
        ('{"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}}', "malformed shape"),
        ('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{}}', "names 'a' twice"),
        ('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,NaN]}}', "holds NaN"),
        (
            '{"__metadata__":{"format":"deepsharp.network","network":"'
            + "[" * 70
            + "]" * 70
            + '"}}',
            "nested 70 deep",
        ),
        (
            '{"__metadata__":{"format":"deepsharp.network","network":"' + "1" * 5000 + '"}}',
            "5000 digits",
        ),
    ],
)
def test_a_hostile_header_is_refused_with_file_format_error(
    tmp_path: Path, header: str, said: str
) -> None:
    with pytest.raises(FileFormatError, match=re.escape(said)):
        Network.load(_raw(tmp_path / "hostile.safetensors", header, bytes(4)))


# Headers as long as deepsharp reads (1 MiB) whose JSON strings a backtracking scan walks once
# from every quote: before, 32 KB of them took 3-4 s, 128 KB 67 s, 1 MiB over 300 s.
_SCANNED = {
    "escaped quotes, the string never closed": '{"a":"' + '\\"' * 500_000,
    "quotes after backslashes": '{"a":"' + '"\\' * 500_000 + '"}',
    "escaped quotes in a metadata entry": '{"__metadata__":{"format":"deepsharp.network",'
    '"network":"[\\"' + '\\\\\\"' * 200_000 + '"}}',
    "numbers of 1,000 digits": '{"a":[' + ",".join(["9" * 1000] * 1000) + "]}",
}


@pytest.mark.parametrize("case", list(_SCANNED))
def test_a_1_mib_header_of_hostile_strings_is_scanned_in_one_pass(
    tmp_path: Path, case: str
) -> None:
    path = _raw(tmp_path / "strings.safetensors", _SCANNED[case])
    assert (1 << 19) < path.stat().st_size <= 8 + (1 << 20)
    said = load_in_child("network", path, timeout=30)  # hang detection; it takes milliseconds
    assert said["outcome"] == "FileFormatError", said


def test_a_header_of_896_bytes_is_not_taken_for_a_pickle(tmp_path: Path, trained: Network) -> None:
    tensors, metadata = _parts(trained)
    for pad in range(0, 1200):
        data = encode_safetensors(tensors, {**metadata, "pad": "x" * pad})
        if data[:2] == b"\x80\x03":  # 896 bytes, written little-endian: the pickle protocol 3 magic
            break
    else:
        pytest.fail("no padding gave a header of 896 bytes")
    (tmp_path / "896.safetensors").write_bytes(data)
    assert Network.load(tmp_path / "896.safetensors").slots.keys() == trained.slots.keys()


# --- the tensors tile the body ----------------------------------------------------------------


def _two(offsets_a: list[int], offsets_b: list[int]) -> str:
    return json.dumps(
        {
            "a": {"dtype": "F32", "shape": [1], "data_offsets": offsets_a},
            "b": {"dtype": "F32", "shape": [1], "data_offsets": offsets_b},
        }
    )


@pytest.mark.parametrize(
    ("a", "b", "body", "said"),
    [
        ([0, 4], [0, 4], 4, "overlaps"),
        ([0, 4], [8, 12], 12, "gap"),
        ([0, 4], [4, 8], 12, "4 bytes after its last tensor"),
        ([0, 4], [4, 8], 6, "truncated"),
    ],
)
def test_tensors_must_follow_one_another_and_fill_the_body(
    tmp_path: Path, a: list[int], b: list[int], body: int, said: str
) -> None:
    path = _raw(tmp_path / "tiles.safetensors", _two(a, b), bytes(body))
    with pytest.raises(FileFormatError, match=said):
        read_safetensors(path, foreign=True)


# --- the digest -------------------------------------------------------------------------------


def test_a_changed_byte_anywhere_is_refused_as_damaged(tmp_path: Path, trained: Network) -> None:
    trained.save(tmp_path / "xor.safetensors")
    data = (tmp_path / "xor.safetensors").read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    text = data[8 : 8 + length]
    slot = len(data) - 5  # a byte of the last slot's values
    unit = text.index(b'units\\": 8') + len(b'units\\": ')  # the first layer's 8 units
    for at, value in ((slot, data[slot] ^ 0x01), (8 + unit, ord("9"))):
        changed = bytearray(data)
        changed[at] = value
        (tmp_path / "changed.safetensors").write_bytes(bytes(changed))
        with pytest.raises(FileFormatError, match="damaged"):  # before: loaded, other predictions
            Network.load(tmp_path / "changed.safetensors")


def test_a_file_without_a_digest_is_refused_saying_how_to_seal_it(
    tmp_path: Path, trained: Network
) -> None:
    from deepsharp.core.files import seal_safetensors

    header: dict[str, object] = {"__metadata__": trained.metadata()}
    body, offset = b"", 0
    for name, value in trained.slots.items():
        header[name] = {
            "dtype": "F32",
            "shape": list(value.shape),
            "data_offsets": [offset, offset + value.nbytes],
        }
        body += value.tobytes()
        offset += value.nbytes
    path = _raw(tmp_path / "old.safetensors", json.dumps(header), body)
    with pytest.raises(FileFormatError, match=r"no digest.*deepsharp seal .*old\.safetensors"):
        Network.load(path)
    seal_safetensors(path)
    assert (
        Network.load(path).slots["dense.weights"].tobytes()
        == trained.slots["dense.weights"].tobytes()
    )


def test_another_tools_file_is_read_only_when_asked(tmp_path: Path) -> None:
    numpy_writer = pytest.importorskip("safetensors.numpy")
    values = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    numpy_writer.save_file(values, str(tmp_path / "theirs.safetensors"))
    with pytest.raises(FileFormatError, match="deepsharp did not save"):
        Network.load(tmp_path / "theirs.safetensors")
    tensors, _ = read_safetensors(tmp_path / "theirs.safetensors", foreign=True)
    assert tensors["w"].tobytes() == values["w"].tobytes()


# --- writing: the mode, the temporaries, what is not a regular file ---------------------------


def test_a_new_file_takes_the_umask_and_a_replaced_one_keeps_its_mode(
    tmp_path: Path, trained: Network
) -> None:
    old = os.umask(0o022)
    try:
        trained.save(tmp_path / "new.safetensors")
        assert stat.S_IMODE((tmp_path / "new.safetensors").stat().st_mode) == 0o644  # before: 0600
        os.umask(0o077)
        trained.save(tmp_path / "new.safetensors")
        assert stat.S_IMODE((tmp_path / "new.safetensors").stat().st_mode) == 0o644
        trained.save(tmp_path / "private.safetensors")
        assert stat.S_IMODE((tmp_path / "private.safetensors").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_killed_writers_temporary_file_is_removed_by_the_next_save(
    tmp_path: Path, trained: Network
) -> None:
    from deepsharp.core.atomic import _TAG

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(gone.stdout)
    stale = tmp_path / f".xor.safetensors.{_TAG}-{dead}-0123abcd.tmp"
    alive = tmp_path / f".xor.safetensors.{_TAG}-{os.getpid()}-0123abcd.tmp"
    other = tmp_path / ".other.safetensors.abc.tmp"
    for path in (stale, alive, other):
        path.write_bytes(b"half a file")
    trained.save(tmp_path / "xor.safetensors")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, other.name, "xor.safetensors"]
    )


def test_a_long_legal_file_name_is_written_its_temporary_name_shortened(tmp_path: Path) -> None:
    """Failed before (trial CB): a 230-byte name (legal: 255 is the limit) was refused, 'File
    name too long', since its temporary sibling `.<name>.<host>-<pid>-<random>.tmp` was
    longer; a killed writer's temporary file of such a name is still removed by the next."""
    names = ["a" * (length - len(".safetensors")) + ".safetensors" for length in (230, 255)]
    accented = "é" * 120  # 240 bytes: shortened at a character's edge
    for name in [*names, accented]:
        write_atomically(tmp_path / name, b"whole")
        assert (tmp_path / name).read_bytes() == b"whole"
    assert sorted(len(os.fsencode(p.name)) for p in tmp_path.iterdir()) == [230, 240, 255]
    from deepsharp.core.atomic import _TAG, _stem

    assert len(os.fsencode(_stem(accented))) <= 117 and _stem("short") == "short"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".{_stem(names[0])}.{_TAG}-{int(gone.stdout)}-0123abcd.tmp"
    stale.write_bytes(b"half a file")
    write_atomically(tmp_path / names[0], b"again")
    assert not stale.exists() and (tmp_path / names[0]).read_bytes() == b"again"


def test_a_named_pipe_is_written_into_not_replaced(tmp_path: Path) -> None:
    pipe = tmp_path / "predictions.csv"
    os.mkfifo(pipe)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()))
    reader.start()
    write_atomically(pipe, b"a,b\n1,2\n")
    reader.join(timeout=30)
    assert got == [b"a,b\n1,2\n"]
    assert stat.S_ISFIFO(pipe.stat().st_mode)  # before: renamed over with a regular file


def test_a_folder_is_not_written_over(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path / "out", b"data")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("kind", ["network", "trained", "checkpoint"])
def test_a_path_holding_a_nul_is_said_to_name_no_file(tmp_path: Path, kind: str) -> None:
    from fuzz_files import LOADERS

    with pytest.raises(FileNotFoundError, match="a path cannot hold a NUL character"):
        LOADERS[kind](tmp_path / "a\0b.safetensors")  # before: ValueError: embedded null byte

"""A fuzzer of deepsharp's three loaders: Network.load, TrainedNetwork.load, Checkpoint.load.

It saves one file of each kind, then loads mutated copies of them: cut short, bytes and bits
flipped, header lengths that lie, bytes appended, and headers rewritten with hostile dtypes,
shapes, byte ranges, names, metadata and JSON (nested, huge, numbers out of range), either
left with their old digest or sealed with a new one so that the checks after the digest are
reached too. Every load must end in FileFormatError or in a file that loads; a mutated copy
that was not sealed again must load to exactly the original's tensors and metadata.

    python packages/core/tests/fuzz_files.py --files 100000 --seed 1 --json fuzz.json

test_fuzz_files.py runs a CI-sized share; `nox -s fuzz` the long run (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    DeepSharpError,
    DeepSharpWarning,
    Dense,
    FileFormatError,
    Network,
    Relu,
)
from deepsharp.core.files import _canonical_digest, read_safetensors
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.core.training.loop import FitOptions, fit

LOADERS: dict[str, Callable[[Path], object]] = {
    "network": Network.load,
    "trained": TrainedNetwork.load,
    "checkpoint": Checkpoint.load,
}
HUGE_NUMBER = "9" * 5000
# Placeholders replaced in the JSON text after dumping: json.dumps cannot write these itself.
RAW = {
    "@huge@": HUGE_NUMBER,
    "@deep70@": "[" * 70 + "]" * 70,
    "@deep5000@": "[" * 5000 + "]" * 5000,
    "@big_exponent@": "1e999999",
}
HOSTILE_VALUES: list[Any] = [
    None,
    True,
    False,
    -1,
    0,
    1,
    2.5,
    2**31,
    2**63,
    2**64,
    -(2**63),
    10**400,  # no float holds it: float() raises OverflowError
    -(10**400),
    1e308,
    -1e308,
    5e-324,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "x" * 1000,
    "__import__('os').system('true')",
    [],
    {},
    [0] * 65,
    {"kind": "dense", "config": {"units": -1}},
    *RAW,
]
HOSTILE_DTYPES: list[Any] = ["F16", "BF16", "U8", "BOOL", "f32", "F32 ", ["F32"], 32, None, {}]
HOSTILE_SHAPES: list[Any] = [
    [True],
    [0, 2**63],
    [2**62, 2**62],
    [-1],
    [1] * 65,
    [1] * 33,
    [2**64],
    "8",
    [1.5],
    [],
    [None],
    {"0": 1},
]


# --- the originals -------------------------------------------------------------------------


def make_originals(folder: Path) -> dict[str, bytes]:
    """A network file, a trained-network file and a checkpoint, saved by deepsharp."""
    from deepsharp.core.samples import titanic

    network = Network([Dense(6), Relu(), Dense(1)])
    run = fit(
        titanic.pipeline(),
        titanic.rows()[:120],
        network,
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=3, epochs=2, progress=False, checkpoint_dir=folder, checkpoint_every=1),
    )
    run.trained.network.save(folder / "network.safetensors")
    run.trained.save(folder / "trained.safetensors")
    return {
        "network": (folder / "network.safetensors").read_bytes(),
        "trained": (folder / "trained.safetensors").read_bytes(),
        "checkpoint": Checkpoint.path_in(folder).read_bytes(),
    }


# --- mutations -----------------------------------------------------------------------------


def split(data: bytes) -> tuple[dict[str, Any], bytes]:
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def seal(header: dict[str, Any], body: bytes, text: str | None = None) -> bytes:
    """A file of `header` and `body` with a digest that matches them, as deepsharp writes."""
    metadata = header.get("__metadata__")
    if isinstance(metadata, dict):
        metadata.pop("digest", None)
        try:
            digest = _canonical_digest(header)
        except (TypeError, ValueError):  # a header the reader refuses before its digest anyway
            digest = None
        if digest is not None:
            digest.update(body)
            metadata["digest"] = f"sha256:{digest.hexdigest()}"
    dumped = text if text is not None else json.dumps(header, separators=(",", ":"))
    for mark, raw in RAW.items():
        dumped = dumped.replace(json.dumps(mark), raw)
    encoded = dumped.encode("utf-8")
    return len(encoded).to_bytes(8, "little") + encoded + body


def _tensor_names(header: dict[str, Any]) -> list[str]:
    return [name for name in header if name != "__metadata__"]


def _hostile(rng: random.Random) -> Any:
    """A hostile value of its own (the list's dicts and lists are never shared)."""
    return copy.deepcopy(rng.choice(HOSTILE_VALUES))


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _nodes(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _nodes(inner, (*path, index))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return value


def _mutate_json(rng: random.Random, value: Any) -> tuple[Any, str]:
    """One hostile change to a parsed JSON document: a node replaced, removed or doubled."""
    paths = list(_nodes(value))
    path = rng.choice(paths)
    move = rng.random()
    if path and move < 0.15:
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        del parent[path[-1]]
        return value, f"removed {list(path)}"
    if path and move < 0.25 and isinstance(path[-1], int):
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        parent.append(parent[path[-1]])
        return value, f"doubled {list(path)}"
    new = _hostile(rng)
    return _replace(value, path, new), f"{list(path)} = {str(new)[:40]}"


def mutate(rng: random.Random, data: bytes) -> tuple[str, str, bytes, bool]:
    """One mutated copy of `data`: (its family, what was done, the bytes, whether it was sealed
    again with a digest that matches)."""
    kind = _family(rng)
    what, mutated, sealed = _mutate(rng, data, kind)
    return kind, what, mutated, sealed


FAMILIES = {
    "truncate": 6,
    "flip byte": 10,
    "flip bit": 8,
    "lying length": 4,
    "append": 2,
    "delete byte": 3,
    "dtype": 4,
    "shape": 4,
    "offsets": 5,
    "entry": 3,
    "metadata": 5,
    "json value": 30,
    "body sealed": 3,
    "header": 3,
}


def _family(rng: random.Random) -> str:
    return rng.choices(list(FAMILIES), weights=list(FAMILIES.values()))[0]


def _mutate(rng: random.Random, data: bytes, kind: str) -> tuple[str, bytes, bool]:
    header, body = split(data)
    start = 8 + int.from_bytes(data[:8], "little")
    if kind == "truncate":
        at = rng.choice([rng.randrange(len(data)), rng.randrange(min(start + 16, len(data)))])
        return f"truncate at {at}", data[:at], False
    if kind == "flip byte":
        at = rng.randrange(len(data))
        value = (data[at] + rng.randrange(1, 256)) % 256
        return f"byte {at} = {value}", data[:at] + bytes([value]) + data[at + 1 :], False
    if kind == "flip bit":
        at, bit = rng.randrange(len(data)), rng.randrange(8)
        return (
            f"bit {bit} of byte {at}",
            data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :],
            False,
        )
    if kind == "lying length":
        length = start - 8
        value = (
            rng.choice(
                [
                    0,
                    1,
                    7,
                    length - 1,
                    length + 1,
                    length + 8,
                    len(data) - 8,
                    len(data),
                    1 << 20,
                    (1 << 20) + 8,
                    2**63,
                    2**64 - 1,
                    rng.randrange(2**64),
                ]
            )
            % 2**64
        )
        return f"length = {value}", value.to_bytes(8, "little") + data[8:], False
    if kind == "append":
        extra = rng.randbytes(rng.randrange(1, 65))
        return f"append {len(extra)} bytes", data + extra, False
    if kind == "delete byte":
        at = rng.randrange(8, start)
        return f"delete header byte {at}", data[:at] + data[at + 1 :], False
    names = _tensor_names(header)
    if kind in ("dtype", "shape", "offsets", "entry") and names:
        name = rng.choice(names)
        entry = header[name]
        if kind == "dtype":
            entry["dtype"] = rng.choice([*HOSTILE_DTYPES, "F64", "I64"])
            what = f"{name}.dtype = {entry['dtype']}"
        elif kind == "shape":
            entry["shape"] = rng.choice([*HOSTILE_SHAPES, list(reversed(entry["shape"]))])
            what = f"{name}.shape = {str(entry['shape'])[:40]}"
        elif kind == "offsets":
            a, b = entry["data_offsets"]
            entry["data_offsets"] = rng.choice(
                [
                    [a, b + 4],
                    [a - 4, b],
                    [b, a],
                    [a],
                    [a, b, b],
                    [-4, b],
                    [a, 2**70],
                    [0, b - a],
                    [a + 4, b + 4],
                    [str(a), b],
                    [a, 2**63],
                ]
            )
            what = f"{name}.data_offsets = {entry['data_offsets']}"
        else:
            move = rng.randrange(4)
            if move == 0:
                header[name] = _hostile(rng)
            elif move == 1:
                del entry[rng.choice(list(entry))]
            elif move == 2:
                header[name + "/extra"] = dict(entry)
            else:
                header[rng.choice(["", "__metadata__ ", "slots/" + name, "x" * 300])] = entry
                del header[name]
            what = f"entry {name} move {move}"
        return what, seal(header, body), True
    metadata = header.get("__metadata__", {})
    if kind == "metadata":
        key = rng.choice([*metadata, "format", "format_version", "digest", "network"])
        move = rng.randrange(5)
        if move == 0:
            metadata.pop(key, None)
        elif move == 1:
            metadata[key] = _hostile(rng)
        elif move == 2:
            metadata[key] = rng.choice(["", "deepsharp.network", "deepsharp.trained", "2", "1"])
        elif move == 3:
            header["__metadata__"] = _hostile(rng)
            return f"__metadata__ = {str(header['__metadata__'])[:40]}", seal(header, body), True
        else:
            metadata[key] = "x" * rng.choice([10, 100_000, 900_000])
        what = f"metadata {key} move {move}"
        if key == "digest" or move == 1:
            return what, seal_keeping(header, body), True
        return what, seal(header, body), True
    if kind == "json value":
        keys = [k for k, v in metadata.items() if isinstance(v, str) and v[:1] in "[{"]
        key = rng.choice(keys)
        value, what = _mutate_json(rng, json.loads(metadata[key]))
        text = json.dumps(value, separators=(",", ":"))
        for mark, raw in RAW.items():
            text = text.replace(json.dumps(mark), raw)
        metadata[key] = text
        return f"{key}: {what}", seal(header, body), True
    if kind == "body sealed":
        changed = bytearray(body)
        for _ in range(rng.randrange(1, 4)):
            if changed:
                changed[rng.randrange(len(changed))] = rng.randrange(256)
        return "body changed and sealed", seal(header, bytes(changed)), True
    text = rng.choice(
        [
            "[]",
            '"text"',
            "1",
            "null",
            "[" + ",".join(["{}"] * 200_000) + "]",
            '{"a":[' + ",".join(["{}"] * 200_000) + "]}",
            "{" * 3000 + "}" * 3000,
            '{"a":' + "[" * 100 + "]" * 100 + "}",
            '{"a":' + HUGE_NUMBER + "}",
            '{"a":1,"a":2}',
            '{"a":NaN}',
            '{"__metadata__":{"format":"deepsharp.network"},"a":' + "1" * 30 + "}",
            '{"x":"' + "\\u0000" * 1000 + '"}',
        ]
    )
    return f"header = {text[:40]}", seal({}, body, text=text), True


def seal_keeping(header: dict[str, Any], body: bytes) -> bytes:
    """The header as it stands (a hostile digest entry included), no digest recomputed."""
    return seal({}, body, text=json.dumps(header, separators=(",", ":")))


# --- one load in a child process: its outcome, its peak memory, and no hang -----------------

CHILD = """
import json, resource, sys
kind, path = sys.argv[1], sys.argv[2]
from deepsharp.core import Network
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.checkpoint import Checkpoint
loader = {"network": Network.load, "trained": TrainedNetwork.load, "checkpoint": Checkpoint.load}[kind]
def status(field):
    with open("/proc/self/status") as lines:
        return next(int(l.split()[1]) / 1024 for l in lines if l.startswith(field + ":"))
# A safety net: code that reads without bounds meets MemoryError, not the machine's swap.
with open("/proc/self/statm") as statm:
    virtual = int(statm.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (virtual + (1 << 30), resource.RLIM_INFINITY))
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")  # the peak (VmHWM) starts again from here: the imports' peak is forgotten
before = status("VmRSS")
try:
    loader(path)
    outcome, message = "loaded", ""
except BaseException as error:
    outcome, message = type(error).__name__, str(error)
print(json.dumps({"outcome": outcome, "message": message, "growth_mib": status("VmHWM") - before}))
"""


def load_in_child(kind: str, path: str | Path, timeout: float = 60) -> dict[str, Any]:
    """Load `path` with the loader of `kind` in a fresh process: its outcome (the exception's
    class name, or "loaded"), its message, and how far its peak memory grew (MiB). A load that
    hangs raises subprocess.TimeoutExpired after `timeout` seconds."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0 or not done.stdout.strip():
        return {
            "outcome": f"exit {done.returncode}",
            "message": done.stderr[-2000:],
            "growth_mib": 0,
        }
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return said


# --- every number of the metadata, made hostile -------------------------------------------

# Numbers in JSON have no bound: 10**400 is a whole number no float holds (float() raises
# OverflowError); the rest are edges of float32, float64 and the counters.
HOSTILE_NUMBERS: dict[str, Any] = {
    "10**400": 10**400,
    "-10**400": -(10**400),
    "10**308": 10**308,
    "1e308": 1e308,
    "-1e308": -1e308,
    "3.5e38": 3.5e38,
    "5e-324": 5e-324,
    "2**63": 2**63,
    "-1": -1,
    "0": 0,
    "-0.0": -0.0,
    "0.5": 0.5,
    "1.5": 1.5,
    "true": True,
    "null": None,
    "'1'": "1",
}


class Original:
    """A file deepsharp saved, its loader, and how it is used once loaded: a trained network
    predicts `rows`; a checkpoint resumes its run (`resume(path)`) for one more epoch."""

    def __init__(
        self,
        kind: str,
        data: bytes,
        rows: Any = None,
        resume: Callable[[Path], object] | None = None,
    ) -> None:
        self.kind, self.data, self.rows, self.resume = kind, data, rows, resume


def make_number_originals(folder: Path) -> dict[str, Original]:
    """Files whose metadata holds every kind of number deepsharp records: the three kinds, a
    pipeline of every column and target kind, a loss scale, SGD with momentum, AdamW, dropout,
    a convolution; each with what uses it once loaded."""
    from deepsharp.core import (
        SGD,
        AdamW,
        Conv2D,
        CrossEntropy,
        Dropout,
        Flatten,
        MaxPool2D,
        MeanSquaredError,
        Pipeline,
    )
    from deepsharp.core.samples import titanic

    made = make_originals(folder / "titanic")
    generator = np.random.default_rng(0)
    rows = [
        {
            "a": str(generator.normal()) if i % 7 else None,
            "b": str(abs(generator.normal()) * 10),
            "c": "xyz"[i % 3],
            "f": "1" if i % 2 else None,
            "image": generator.random(4).astype(np.float32),
            "t": str(i % 3),
            "y": str(generator.normal()),
        }
        for i in range(60)
    ]

    def classes() -> tuple[Any, ...]:
        pipeline = (
            Pipeline()
            .number("a", fill=1.5, missing_flag=True)
            .number("b", log=True, fill="mean")
            .category("c", max_values=2)
            .flag("f")
            .image("image", (1, 2, 2), scale="max")
            .target("t", "classes")
        )
        network = Network([Dense(5), Dropout(0.25), Relu(), Dense(3)])
        return pipeline, rows, network, CrossEntropy(), SGD(0.05, momentum=0.9)

    def numbers() -> tuple[Any, ...]:
        pipeline = (
            Pipeline().number("a", fill="mean").image("image", 4, scale=2.0).target("y", "number")
        )
        network = Network([Dense(3), Relu(), Dense(1)])
        return pipeline, rows, network, MeanSquaredError(), AdamW(0.01)

    def passengers() -> tuple[Any, ...]:
        network = Network([Dense(6), Relu(), Dense(1)])
        return titanic.pipeline(), titanic.rows()[:120], network, BinaryCrossEntropy(), Adam(0.01)

    settings = {
        "classes": (classes, {"seed": 5, "engine": "light:mixed_float16"}),
        "numbers": (numbers, {"seed": 6, "loss_scale": 128.0}),
        "titanic": (passengers, {"seed": 3}),
    }

    def resumer(name: str) -> Callable[[Path], object]:
        parts, options = settings[name]

        def resume(path: Path) -> object:
            more = FitOptions(epochs=3, progress=False, **options)
            return fit(*parts(), more, resume_from=path)

        return resume

    originals = {
        kind: Original(kind, data, _rows(), resumer("titanic") if kind == "checkpoint" else None)
        for kind, data in made.items()
    }
    for name in ("classes", "numbers"):
        parts, options = settings[name]
        sub = folder / name
        run = fit(
            *parts(),
            FitOptions(epochs=2, progress=False, checkpoint_dir=sub, checkpoint_every=1, **options),
        )
        run.trained.save(sub / "trained.safetensors")
        originals[f"trained ({name})"] = Original(
            "trained", (sub / "trained.safetensors").read_bytes(), rows
        )
        originals[f"checkpoint ({name})"] = Original(
            "checkpoint", Checkpoint.path_in(sub).read_bytes(), resume=resumer(name)
        )
    x = generator.random((40, 1, 4, 4)).astype(np.float32)
    y = (generator.random((40, 1)) > 0.5).astype(np.float32)
    network = Network([Conv2D(2, 3, padding="same"), MaxPool2D(2), Flatten(), Dense(1)])
    run = fit(
        None,
        (x, y),
        network,
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=7, epochs=2, progress=False),
    )
    run.trained.save(folder / "arrays.safetensors")
    originals["trained (arrays)"] = Original(
        "trained", (folder / "arrays.safetensors").read_bytes(), x
    )
    return originals


def _numbers_in(value: Any) -> list[tuple[Any, ...]]:
    """The places of every number (not a bool) in a JSON document."""
    found = []
    for path in _nodes(value):
        node = value
        for step in path:
            node = node[step]
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            found.append(path)
    return found


def run_numbers(folder: Path) -> dict[str, Any]:
    """Each number in each JSON entry of each original's metadata, set to each hostile number
    in turn (the file sealed again): refused with FileFormatError, or loaded and then used
    (served, or resumed) with finite predictions, a DeepSharpError or a DeepSharpWarning (what
    the run warns of: every step skipped under a hostile loss scale); any other exception
    (an OverflowError, a NumPy warning) is a failure."""
    originals = make_number_originals(folder)
    target = folder / "numbers.safetensors"
    outcomes: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    places = 0
    for name, original in originals.items():
        header, body = split(original.data)
        for key, text in header["__metadata__"].items():
            if not text.startswith(("{", "[")):
                continue
            document = json.loads(text)
            for path in _numbers_in(document):
                places += 1
                for shown, number in HOSTILE_NUMBERS.items():
                    changed = copy.deepcopy(header)
                    value = _replace(copy.deepcopy(document), path, number)
                    changed["__metadata__"][key] = json.dumps(value)
                    target.write_bytes(seal(changed, body))
                    record = {"file": name, "entry": key, "place": list(path), "number": shown}
                    outcome = bounded(_load_and_use, original, target)
                    if isinstance(outcome, dict):
                        failures.append({**record, **outcome})
                    else:
                        outcomes[outcome] += 1
    outcomes["failed"] = len(failures)
    return {
        "files": len(originals),
        "places": places,
        "loads": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "failures": failures,
    }


def _load_and_use(original: Original, path: Path) -> str | dict[str, Any]:
    phase = "load"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a NumPy warning is a failure here too
            loaded = LOADERS[original.kind](path)
            phase = "serve" if original.kind == "trained" else "resume"
            if isinstance(loaded, TrainedNetwork):
                predictions = loaded.predict(original.rows)
                if not np.all(np.isfinite(predictions)):
                    return {"phase": phase, "error": "predictions not finite", "where": "(served)"}
                return "loaded and served finite predictions"
            if original.resume is not None:
                original.resume(path)
                return "loaded and resumed"
            return "loaded"
    except FileFormatError:
        return "refused (FileFormatError)" if phase == "load" else f"{phase}: FileFormatError"
    except DeepSharpError as error:
        return f"{phase}: {type(error).__name__}"
    except DeepSharpWarning:  # said plainly: a hostile loss scale skips every step, say
        return f"{phase}: DeepSharpWarning"
    except Exception as error:  # any other exception is what this hunts
        return _failure(error, phase)


# --- the run -------------------------------------------------------------------------------


def _where(error: BaseException) -> str:
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if "deepsharp" in frame.filename and "/tests/" not in frame.filename
    ]
    if not frames:
        return "?"
    frame = frames[-1]
    return f"{frame.filename.split('deepsharp/core/')[-1]}:{frame.lineno} in {frame.name}"


def reset_peak() -> None:
    """Forget the peak memory so far (Linux's VmHWM), where the kernel allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass


def _failure(error: BaseException, phase: str = "load") -> dict[str, Any]:
    return {
        "phase": phase,
        "error": type(error).__name__,
        "message": str(error)[:200],
        "where": _where(error),
    }


def _rows() -> list[dict[str, str | None]]:
    from deepsharp.core.samples import titanic

    return titanic.rows()[:4]


def _serve(trained: TrainedNetwork, rows: list[dict[str, str | None]]) -> str | dict[str, Any]:
    """A loaded trained network must serve rows as any other: finite predictions, or a clear
    refusal. The outcome's name, or the failure."""
    try:
        predictions = trained.predict(rows)
    except DeepSharpError:
        return "loaded, then refused to serve (DeepSharpError)"
    except Exception as error:  # any other exception is what this hunts
        return _failure(error, "serve")
    if not np.all(np.isfinite(predictions)):
        return {
            "phase": "serve",
            "error": "predictions not finite",
            "message": "",
            "where": "(served)",
        }
    return "loaded and served finite predictions"


def peak_mib() -> float:
    """The process's peak resident memory since the last reset_peak (MiB)."""
    try:
        with open("/proc/self/status") as lines:
            return next(int(line.split()[1]) / 1024 for line in lines if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mib() -> float:
    try:
        with open("/proc/self/status") as lines:
            return next(int(line.split()[1]) / 1024 for line in lines if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return peak_mib()


def run(files: int, seed: int, folder: Path) -> dict[str, Any]:
    """Load `files` mutated copies; what happened, counted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hostile statistics make NumPy warn while serving
        return _run(files, seed, folder)


def _run(files: int, seed: int, folder: Path) -> dict[str, Any]:
    originals = make_originals(folder)
    expected = {}
    for kind, data in originals.items():
        (folder / f"original-{kind}").write_bytes(data)
        expected[kind] = read_safetensors(folder / f"original-{kind}")
    reset_peak()
    baseline = rss_mib()
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    mutations: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    slowest = 0.0
    largest = 0
    target = folder / "mutated.safetensors"
    rows = _rows()
    began = time.perf_counter()
    for index in range(files):
        kind = rng.choice(list(originals))
        family, what, data, sealed = mutate(rng, originals[kind])
        mutations[family] += 1
        largest = max(largest, len(data))
        target.write_bytes(data)
        loader = kind if rng.random() < 0.8 else rng.choice(list(LOADERS))
        started = time.perf_counter()
        record = {"file": index, "kind": kind, "loader": loader, "mutation": what[:160]}
        outcome = bounded(_load, loader, target, sealed, expected[kind], rows)
        if isinstance(outcome, dict):
            failures.append({**record, **outcome})
        else:
            outcomes[outcome] += 1
        slowest = max(slowest, time.perf_counter() - started)
    outcomes["failed"] = len(failures)
    return {
        "files": files,
        "seed": seed,
        "seconds": round(time.perf_counter() - began, 1),
        "slowest_load_seconds": round(slowest, 4),
        "largest_file_bytes": largest,
        "peak_rss_growth_mib": round(peak_mib() - baseline, 1),
        "outcomes": dict(outcomes),
        "mutations": dict(sorted(mutations.items())),
        "failures": failures,
    }


def _load(
    loader: str,
    target: Path,
    sealed: bool,
    expected: tuple[dict[str, Any], dict[str, str]],
    rows: list[dict[str, str | None]],
) -> str | dict[str, Any]:
    """One mutated copy loaded (and a trained network served): the outcome, or the failure."""
    try:
        loaded = LOADERS[loader](target)
    except FileFormatError:
        return "refused (FileFormatError)"
    except Exception as error:  # any other exception is what this hunts
        return _failure(error)
    if not sealed and not _same(read_safetensors(target), expected):
        return {"error": "loaded changed", "message": "", "where": "?"}
    if isinstance(loaded, TrainedNetwork):
        return _serve(loaded, rows)
    return "loaded" + (" (sealed again: a valid file)" if sealed else ", unchanged")


CASE_SECONDS = 60.0
"""The longest one case may take (a load, and what uses it) before it counts as a hang."""


class Overtime(BaseException):
    """A case that ran past CASE_SECONDS (a BaseException: no `except Exception` takes it)."""


def bounded(case: Callable[..., str | dict[str, Any]], *arguments: Any) -> str | dict[str, Any]:
    """`case(*arguments)`, or a failure named "hang" where it runs past CASE_SECONDS (a timer's
    signal interrupts it between two of Python's steps; memory is bounded by `limit_memory`)."""

    def stop(signum: int, frame: Any) -> None:
        raise Overtime

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        return case(*arguments)
    except Overtime:
        return {"error": "hang", "message": f"over {CASE_SECONDS:g} s", "where": "?"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- every byte of a trained file, changed -------------------------------------------------


SINGLE_BITS = tuple(1 << bit for bit in range(8))


def run_flips(folder: Path, every: bool = False) -> dict[str, Any]:
    """Each byte of a trained-network file changed, one change a copy, each copy loaded: refused,
    or loaded to exactly the original. Each byte has one of its bits flipped (bit `at % 8`),
    or with `every`, each of its eight bits in turn and all eight at once."""
    data = make_originals(folder)["trained"]
    (folder / "original").write_bytes(data)
    want = read_safetensors(folder / "original")
    target = folder / "flipped.safetensors"
    counts: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    for at in range(len(data)):
        for mask in (*SINGLE_BITS, 0xFF) if every else (SINGLE_BITS[at % 8],):
            target.write_bytes(data[:at] + bytes([data[at] ^ mask]) + data[at + 1 :])
            try:
                TrainedNetwork.load(target)
            except FileFormatError:
                counts["refused"] += 1
                continue
            except Exception as error:  # any other exception is what this hunts
                counts["failed"] += 1
                failures.append(
                    {
                        "byte": at,
                        "mask": mask,
                        "error": type(error).__name__,
                        "message": str(error)[:200],
                        "where": _where(error),
                    }
                )
                continue
            if _same(read_safetensors(target), want):
                counts["loaded, identical"] += 1
            else:
                counts["loaded changed"] += 1
                failures.append({"byte": at, "mask": mask, "error": "loaded changed"})
    return {
        "file_bytes": len(data),
        "flips": sum(counts.values()),
        **counts,
        "failures": failures,
    }


# --- files that are not files, or not what their size says ---------------------------------


def special_cases(folder: Path) -> dict[str, Path]:
    """Paths that are no regular file, or regular files far bigger than their contents."""
    import socket

    made = make_originals(folder / "originals")
    cases: dict[str, Path] = {}
    pipe = folder / "pipe.safetensors"
    os.mkfifo(pipe)
    cases["a named pipe with no writer"] = pipe
    cases["/dev/zero"] = Path("/dev/zero")
    cases["/dev/urandom"] = Path("/dev/urandom")
    cases["a symbolic link to /dev/zero"] = folder / "zero.safetensors"
    os.symlink("/dev/zero", cases["a symbolic link to /dev/zero"])
    cases["a folder"] = folder
    cases["a socket"] = folder / "socket.safetensors"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(cases["a socket"]))
    listener.close()
    cases["an empty file"] = folder / "empty.safetensors"
    cases["an empty file"].write_bytes(b"")
    cases["4 GiB of nothing (sparse)"] = _sparse(folder / "zeros.safetensors", 4 << 30, b"")
    cases["a trained file, then 4 GiB of nothing"] = _sparse(
        folder / "tail.safetensors", 4 << 30, made["trained"]
    )
    header, body = split(made["network"])
    more = 96 << 20  # over the 64 MiB from which a body is checked before it is kept
    header["w"] = {
        "dtype": "F32",
        "shape": [more // 4],
        "data_offsets": [len(body), len(body) + more],
    }
    sealed = seal(header, body)  # sealed over the real body: the 96 MiB of nothing do not match
    cases["a network file claiming 96 MiB more, its digest wrong"] = _sparse(
        folder / "claims.safetensors", len(sealed) + more, sealed
    )
    cases["no file at all"] = folder / "missing.safetensors"
    return cases


def _sparse(path: Path, size: int, start: bytes) -> Path:
    with open(path, "wb") as file:
        file.write(start)
        file.truncate(size)
    return path


def run_special(folder: Path) -> dict[str, Any]:
    """Every special case through every loader: what each said, its peak memory, its time."""
    said: dict[str, Any] = {}
    for name, path in special_cases(folder).items():
        for kind, loader in LOADERS.items():
            reset_peak()
            before = rss_mib()
            started = time.perf_counter()
            message = ""
            try:
                loader(path)
                outcome = "loaded"
            except Exception as error:  # any other exception is what this hunts
                outcome = type(error).__name__
                message = str(error)
            said[f"{name} / {kind}"] = {
                "outcome": outcome,
                "message": message[:300],
                "growth_mib": round(peak_mib() - before, 1),
                "seconds": round(time.perf_counter() - started, 3),
            }
    return said


def _same(
    got: tuple[dict[str, Any], dict[str, str]], want: tuple[dict[str, Any], dict[str, str]]
) -> bool:
    tensors, metadata = got
    return (
        metadata == want[1]
        and tensors.keys() == want[0].keys()
        and all(
            tensors[name].dtype == want[0][name].dtype
            and tensors[name].shape == want[0][name].shape
            and np.array_equal(tensors[name].view(np.uint8), want[0][name].view(np.uint8))
            for name in tensors
        )
    )


def limit_memory(mib: int) -> None:
    """Let this process grow `mib` MiB past what it maps now, then meet MemoryError (which the
    fuzzer records with the file that caused it) rather than the machine's out-of-memory killer."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + (mib << 20), resource.RLIM_INFINITY))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE")
    parser.add_argument(
        "--special", action="store_true", help="load the special paths (pipes, devices, sparse)"
    )
    parser.add_argument(
        "--flips", action="store_true", help="flip a bit of every byte of a trained file in turn"
    )
    parser.add_argument(
        "--every-bit", action="store_true", help="with --flips: each bit of each byte, and all 8"
    )
    parser.add_argument(
        "--numbers",
        action="store_true",
        help="set every number of every metadata entry to each hostile number in turn",
    )
    parser.add_argument(
        "--memory-limit", type=int, default=2048, metavar="MIB", help="MemoryError past this growth"
    )
    arguments = parser.parse_args()
    if sys.platform == "linux":
        limit_memory(arguments.memory_limit)
    if arguments.flips:
        with tempfile.TemporaryDirectory() as folder:
            census = run_flips(Path(folder), every=arguments.every_bit)
        print(json.dumps(census, indent=1))
        return 1 if census["failures"] else 0
    if arguments.numbers:
        with tempfile.TemporaryDirectory() as folder:
            census = run_numbers(Path(folder))
        print(json.dumps(census, indent=1))
        return 1 if census["failures"] else 0
    if arguments.special:
        with tempfile.TemporaryDirectory() as folder:
            said = run_special(Path(folder))
        print(json.dumps(said, indent=1))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        summary = run(arguments.files, arguments.seed, Path(folder))
    text = json.dumps(summary, indent=1)
    if arguments.json:
        Path(arguments.json).write_text(text)
    failures = summary.pop("failures")
    print(json.dumps(summary, indent=1))
    kinds = Counter(f"{f['error']} at {f['where']}" for f in failures)
    for kind, count in kinds.most_common():
        print(f"{count:>7}  {kind}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Network files: the architecture as JSON, the slots and buffers as tensors, one safetensors file.

Format 3 (this deepsharp) records a network as its inputs (name, shape, dtype), its layers (kind,
name, constructor's arguments) and its nodes in order (each a layer and the places it reads:
the inputs first, then each node's output); its tensors are the slots and buffers by full name
(`<layer>.<slot>`). Files of format 1 (a chain of layers, slots named by position,
`0.dense.weights`) still load: their layers are named as a chain of today would name them, and
their slots renamed so. A file is never trusted: every part is checked against the others,
and a bad file raises FileFormatError saying what is wrong.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import ConfigurationError, FileFormatError, StateError
from deepsharp.core.files import Declared, Expectation, read_safetensors, write_safetensors
from deepsharp.core.kinds import warn_unrecorded
from deepsharp.core.nn.graph import (
    DTYPES,
    MOST_VALUES_A_ROW,
    Graph,
    InputSpec,
    Node,
    check_layer_name,
    row_shape,
)
from deepsharp.core.nn.layer import (
    BufferSpec,
    Layer,
    SlotSpec,
    layer_from_json,
    value_refusal,
)
from deepsharp.core.nn.layers.recurrent import GRU, LSTM
from deepsharp.core.version import __version__

if TYPE_CHECKING:
    from deepsharp.core.nn.network import Network

__all__ = [
    "FORMAT_VERSION",
    "NETWORK_FORMAT",
    "architecture",
    "check_declared",
    "check_format",
    "expectation",
    "file_tensors",
    "load_network",
    "network_from_file",
    "network_from_json",
    "network_metadata",
    "warn_of_scripts",
    "network_to_json",
    "save_network",
    "take_tensors",
]

NETWORK_FORMAT = "deepsharp.network"
FORMAT_VERSION = "4"
READS = ("1", "3", "4")
"""The versions of network and trained-network files this deepsharp reads (there was no 2).
Format 4: LSTM and GRU pass over the padding an Embedding's mask marks; a file of an earlier
format is read with them reading it (`skip_padding=False`), as it was trained."""

PADDING_READ = ("1", "3")
"""The formats whose LSTM and GRU read the padding as tokens."""

_LOADERS = {
    "deepsharp.trained": ": it is a trained network (network, loss and pipeline), saved by "
    "TrainedNetwork.save; load it with TrainedNetwork.load(path) (its .network is the Network)",
    "deepsharp.network": ": it is a network alone, saved by Network.save; load it with "
    "Network.load(path) (a TrainedNetwork is what fit's run.trained saves)",
    "deepsharp.checkpoint": ": it is a checkpoint of a run; load it with Checkpoint.load(path), "
    "or go on with fit(..., resume_from=path)",
}
"""What to call instead, for a file of another deepsharp kind."""


def check_format(
    metadata: Mapping[str, str], where: str, kind: str, reads: tuple[str, ...] = READS
) -> str:
    """The file's format version, where it is a file of `kind` in a version this deepsharp reads;
    a FileFormatError saying what it is and what to do otherwise."""
    found = metadata.get("format")
    if found != kind:
        raise FileFormatError(
            f"{where} is not a {kind} file (its format says {found!r})"
            + _LOADERS.get(str(found), "")
        )
    held = metadata.get("format_version")
    if held not in reads:
        raise FileFormatError(
            f"{where} has format version {held!r}; this deepsharp ({__version__}) reads versions "
            f"{', '.join(reads)}: use the deepsharp that wrote it, or upgrade"
        )
    return str(held)


# --- the architecture ---------------------------------------------------------------------


def network_to_json(network: Network, warn: bool = True) -> dict[str, Any]:
    """The architecture as format 4 records it (as format 3 did); `warn`: of a layer's settings
    it records none of (once a kind, as a file is written)."""
    graph = network.graph
    return {
        "inputs": [
            {
                "name": spec.name,
                "shape": None if spec.shape is None else list(spec.shape),
                "dtype": spec.dtype,
            }
            for spec in graph.inputs
        ],
        "layers": [
            {"kind": layer.key, "name": layer.name, "config": _config(layer, warn)}
            for layer in graph.layers
        ],
        "nodes": [[node.layer, list(node.sources)] for node in graph.nodes],
        "chain": network.chained,
    }


def _config(layer: Layer, warn: bool = True) -> dict[str, Any]:
    """A layer's settings as a file records them: JSON values, else a ConfigurationError naming
    the layer (a NumPy number in a config() of one's own ended a run at its first checkpoint
    with json's own error, naming neither: trial X)."""
    config = layer.config()
    try:  # (infinity as JSON's Infinity, as files have held it)
        json.dumps(config)
    except (TypeError, ValueError) as error:
        raise ConfigurationError(
            f"{layer.label}: its settings (config()) must be JSON values for files to record "
            f"them (text, numbers, lists, mappings; float(x) for a NumPy number), not "
            f"{config!r}: {error}"
        ) from None
    if warn:
        warn_unrecorded(layer, Layer, "layer", config)
    return config


def network_from_json(
    cls: type[Network], data: Any, where: str = "the file", version: str = FORMAT_VERSION
) -> Network:
    """A network from its recorded architecture (format 1, 3 or 4), every part checked."""
    try:
        if version == "1":
            return _chain_of_format_1(cls, data)
        return _graph(cls, data, version)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        if isinstance(error, FileFormatError):
            raise
        said = f"it lacks the entry {error}" if isinstance(error, KeyError) else str(error)
        raise FileFormatError(f"{where}: its architecture cannot be read: {said}") from None


def _chain_of_format_1(cls: type[Network], data: Any) -> Network:
    layers = [layer_from_json(entry) for entry in _list(data["layers"], "layers")]
    network = cls(_as_trained(layers, "1"), inputs=data["inputs"])
    _check_values(network)  # (a format-1 file was not held to it: trial H)
    return network


def _as_trained(layers: list[Layer], version: str) -> list[Layer]:
    """The layers as a file of `version` was trained: before format 4, LSTM and GRU read the
    padding as tokens (a review: an old file's padded rows were otherwise predicted anew)."""
    if version in PADDING_READ:
        for layer in layers:
            if isinstance(layer, (LSTM, GRU)):
                layer.skip_padding = False
    return layers


def _graph(cls: type[Network], data: Any, version: str = FORMAT_VERSION) -> Network:
    if not isinstance(data, dict):
        raise ValueError(f"an architecture is an object, not {type(data).__name__}")
    inputs = []
    for entry in _list(data["inputs"], "inputs"):
        dtype = entry["dtype"]
        if dtype not in DTYPES:
            raise ValueError(f"an input's dtype is one of {DTYPES}, not {dtype!r}")
        shape = None if entry["shape"] is None else row_shape(entry["shape"], "an input")
        inputs.append(InputSpec(check_layer_name(entry["name"], "an input"), shape, dtype))
    layers = [layer_from_json(entry) for entry in _list(data["layers"], "layers")]
    layers = _as_trained(layers, version)
    if not inputs or not layers:
        raise ValueError("a network has at least one input and one layer")
    nodes = []
    for place, entry in enumerate(_list(data["nodes"], "nodes")):
        layer, sources = entry
        reach = len(inputs) + place  # a node reads the inputs and the nodes before it
        if (
            not _whole(layer, len(layers))
            or not sources
            or not all(_whole(s, reach) for s in sources)
        ):
            raise ValueError(
                f"node {place} ({entry!r}) reads a layer or a place that is not before it"
            )
        taker = layers[layer]
        if not (2 if taker.several else 1) <= len(sources) <= taker.most_inputs:
            raise ValueError(f"node {place} gives {taker.kind} {len(sources)} inputs")
        nodes.append(Node(layer, tuple(sources)))
    if not nodes:
        raise ValueError("a network has at least one node")
    used = {node.layer for node in nodes}
    read = {source for node in nodes for source in node.sources}
    if len(used) != len(layers) or not all(i in read for i in range(len(inputs))):
        raise ValueError("every layer is used and every input read by a node")
    chained = data.get("chain") is True
    if chained and (
        len(inputs) != 1 or [n.sources for n in nodes] != [(i,) for i in range(len(nodes))]
    ):
        raise ValueError("a chain is one input and each layer reading the one before")
    if any(layer.name is None for layer in layers):
        raise ValueError("every layer of a format-3 file is named")
    network = cls.of_graph(Graph(inputs, layers, nodes), chained)
    _check_values(network)
    return network


SERVED_ROWS = 32
"""The rows `predict` serves at a time (`nn.predicting.CHUNK`, held equal by a test)."""

FILE_VALUES_A_ROW = MOST_VALUES_A_ROW // SERVED_ROWS
"""The most values one tensor of a file's network may hold a row (2^25): `predict` serves 32
rows at a time, so a tensor of them holds at most 2^30 values, 4 GiB (at 2^30 a row, a file of
a few hundred bytes asked 128 GiB for one row: trial H)."""


def _check_values(network: Network) -> None:
    """Refuse a network whose pass would hold over `FILE_VALUES_A_ROW` values a row in one
    tensor (a layer's output, an attention's scores: `Layer.values_a_row`): its slots are
    bounded by the file's bytes, these not."""
    if not all(spec.shape is not None for spec in network.input_specs):
        return
    network.build()
    made = max(layer.values_a_row() for layer in network.layers)
    if made > FILE_VALUES_A_ROW:
        served = made * SERVED_ROWS * 4 // 2**30
        raise ValueError(
            f"a layer's output (or an attention's scores) would take {_large(made)} values a row "
            f"({_large(served)} GiB for the {SERVED_ROWS} rows predict serves at a time), beyond "
            f"the {FILE_VALUES_A_ROW:,} a file's network may: the file is damaged or made to "
            "exhaust memory"
        )


def _large(count: int) -> str:
    """A whole number as a message shows it: with commas, or its power of two past 2^60 (a
    file's shapes may hold numbers of hundreds of digits, beyond what str() writes)."""
    return f"{count:,}" if count < 2**60 else f"about 2^{count.bit_length() - 1}"


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"its {what} must be a list, not {type(value).__name__}")
    return value


def _whole(value: object, below: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < below


def renamed_from_format_1(network: Network) -> dict[str, str]:
    """Each slot's name in a format-1 file ('<position>.<kind in lower case>.<slot>') -> its
    name now ('<layer>.<slot>')."""
    return {
        f"{index}.{layer.kind.lower()}.{slot}": f"{layer.name}.{slot}"
        for index, layer in enumerate(network.layers)
        for slot in layer.specs
    }


# --- the tensors --------------------------------------------------------------------------


def file_tensors(network: Network) -> dict[str, NDArray[np.float32]]:
    """The slots and buffers as a file records them: refused (StateError) where there are none
    yet or where any is not finite (a file that would not load)."""
    if not network.initialized:
        raise StateError(
            "the network has no slot values yet, so its file would not load: train it, "
            "load it, or give it inputs and initialize it first"
        )
    slots, buffers = network.values()
    for name, value in {**slots, **buffers}.items():
        if not np.all(np.isfinite(value)):
            raise StateError(
                f"{'slot' if name in slots else 'buffer'} {name!r} holds NaN or infinite values: "
                "a file of it would not load (a run that diverged puts back its best epoch's "
                "slots; set finite ones)"
            )
    return {**slots, **buffers}


def take_tensors(
    network: Network, tensors: Mapping[str, NDArray[Any]], where: str, version: str = FORMAT_VERSION
) -> None:
    """Give `network` a file's slots and buffers, each checked: present, float32 at its shape,
    finite, and nothing else in the file (FileFormatError naming `where`)."""
    if version == "1":
        names = renamed_from_format_1(network)
        unknown = sorted(set(tensors) - set(names))
        if unknown:
            raise FileFormatError(f"{where}: slots the architecture does not hold: {unknown}")
        tensors = {names[old]: value for old, value in tensors.items()}
    check_tensors(network, tensors, where)
    network._values = {name: tensors[name] for name in network.specs}
    network._buffers = {name: tensors[name] for name in network.buffer_specs}


def check_tensors(network: Network, tensors: Mapping[str, NDArray[Any]], where: str) -> None:
    """Refuse (a FileFormatError naming `where`) tensors that are not every slot and buffer of
    the architecture, each float32 at its shape, finite and within its least value, and
    nothing else."""
    check_declared(
        network,
        {name: Declared(value.dtype, tuple(value.shape)) for name, value in tensors.items()},
        where,
    )
    specs: dict[str, SlotSpec | BufferSpec] = {**network.specs, **network.buffer_specs}
    for name, spec in specs.items():
        what = "slot" if name in network.specs else "buffer"
        refusal = value_refusal(what, name, tensors[name], spec)
        if refusal is not None:
            raise FileFormatError(f"{where}: {refusal}")


def check_declared(network: Network, declared: Mapping[str, Declared], where: str) -> None:
    """Refuse (a FileFormatError naming `where`) a file's tensors, as its header declares them
    (before a byte of their values is read), that are not every slot and buffer of the
    architecture, each float32 at its shape, and nothing else."""
    wanted: dict[str, SlotSpec | BufferSpec] = {**network.specs, **network.buffer_specs}
    for name, spec in wanted.items():
        what = "slot" if name in network.specs else "buffer"
        if name not in declared:
            raise FileFormatError(f"{where}: {what} {name!r} is missing {_CHANGED}")
        dtype, shape = declared[name]
        if tuple(shape) != spec.shape or dtype != np.float32:
            raise FileFormatError(
                f"{where}: {what} {name!r} is {dtype} of shape {tuple(shape)}, "
                f"the architecture needs float32 of shape {spec.shape}"
            )
    extra = sorted(set(declared) - set(wanted))
    if extra:
        raise FileFormatError(
            f"{where}: slots or buffers the architecture does not hold: {extra} {_CHANGED}"
        )


_CHANGED = (
    "(a layer's code changed since the file was written, a slot or buffer added or removed: "
    "load it with that code; or the file is damaged)"
)


# --- files --------------------------------------------------------------------------------


def network_metadata(network: Network) -> dict[str, str]:
    recorded = network_to_json(network)
    refuse_settings_past_build(network, recorded)
    return {
        "format": NETWORK_FORMAT,
        "format_version": FORMAT_VERSION,
        "network": json.dumps(recorded),
        "deepsharp_version": __version__,
    }


def refuse_settings_past_build(network: Network, recorded: Any = None) -> None:
    """Refuse (ConfigurationError) a built network whose layers' settings, as they stand, make
    other slots or buffers than those it was built with: a setting that shapes a slot (a
    Dense's units) assigned after the build is not taken — its runs and predictions kept the
    built shapes while its repr and its file said the new one, and the file did not load
    (trial NB)."""
    if not network.built or not all(spec.shape is not None for spec in network.input_specs):
        return
    if not all(type(layer).__module__.startswith("deepsharp.") for layer in network.layers):
        return  # a layer of one's own may record less than makes it (warned of as a file is
        # written): its network made again from the file is no witness (trial RV)
    if recorded is None:  # a run starts: settings no file could record are refused at a write
        try:
            recorded = network_to_json(network, warn=False)
        except ConfigurationError:
            return
    try:
        with warnings.catch_warnings():  # (what the layers made again say is said elsewhere)
            warnings.simplefilter("ignore")
            made = network_from_json(type(network), recorded)
            made.build()
    except Exception:  # settings that make no network: what reads them says so
        return
    built = {**network.specs, **network.buffer_specs}
    now = {**made.specs, **made.buffer_specs}
    for name in sorted(set(built) | set(now)):
        shape = getattr(built.get(name), "shape", None)
        theirs = getattr(now.get(name), "shape", None)
        if shape != theirs:
            raise ConfigurationError(
                f"the network was built with {name!r} "
                + ("of no shape" if shape is None else f"of shape {shape}")
                + ", and its layers' settings as they stand make it "
                + ("none" if theirs is None else f"of shape {theirs}")
                + ": a setting that shapes a slot (units, filters, a kernel's size, ...) "
                "assigned after the network was built is not taken. For another shape make a "
                "new layer, in a new Network; to keep the trained one, assign the setting back"
            )


def save_network(network: Network, path: str | os.PathLike[str]) -> None:
    """The architecture, slots and buffers in one safetensors file (no engine, no code)."""
    write_safetensors(path, file_tensors(network), network_metadata(network))
    warn_of_scripts(path, [layer.key for layer in network.graph.layers], depth=4)


def warn_of_scripts(path: str | os.PathLike[str], kinds: list[str], depth: int) -> None:
    """Warn where a file names a class defined in the script being run ("__main__.Doubler"):
    a file never brings code, and no other script, nor the command line, can import it (the
    warning points `depth` frames up: the caller's line)."""
    scripts = sorted({kind for kind in kinds if kind.startswith("__main__.")})
    if scripts:
        warnings.warn(
            f"{os.fspath(path)}: names {', '.join(map(repr, scripts))}, defined in the script "
            "being run (__main__): only a script that defines the same class can read the "
            "file, not another one nor the command line; define the class in a module of its "
            "own and import it from there (the command line takes --import MODULE)",
            UserWarning,
            stacklevel=depth,
        )


def load_network(cls: type[Network], path: str | os.PathLike[str]) -> Network:
    where = f"network file {os.fspath(path)!r}"
    expect = expectation(cls, where, NETWORK_FORMAT)
    tensors, metadata = read_safetensors(path, "network file", expect=expect)
    return network_from_file(cls, tensors, metadata, where, NETWORK_FORMAT)


def expectation(cls: type[Network], where: str, kind: str) -> Expectation:
    """What a file of `kind` must declare before its values are read: every slot and buffer of
    the architecture it records, float32 at its shape, and nothing else (a file's header that
    promises gigabytes its architecture does not need costs nothing to refuse)."""

    def expect(metadata: Mapping[str, str], declared: Mapping[str, Declared]) -> None:
        network, version = architecture(cls, metadata, where, kind)
        if version == "1":
            names = renamed_from_format_1(network)
            declared = {names.get(name, name): kept for name, kept in declared.items()}
        check_declared(network, declared, where)

    return expect


def architecture(
    cls: type[Network], metadata: Mapping[str, str], where: str, kind: str
) -> tuple[Network, str]:
    """The network a file of `kind` records (its format checked first), without its values, and
    the file's format version."""
    version = check_format(metadata, where, kind)
    try:
        data = json.loads(metadata["network"])
    except (KeyError, json.JSONDecodeError, RecursionError):
        raise FileFormatError(f"{where}: its metadata lacks a readable 'network' entry") from None
    network = network_from_json(cls, data, where, version)
    if not network.built:
        raise FileFormatError(f"{where}: its architecture names no inputs' shapes")
    return network, version


def network_from_file(
    cls: type[Network],
    tensors: dict[str, NDArray[Any]],
    metadata: dict[str, str],
    where: str,
    kind: str,
) -> Network:
    """The network a file of `kind` records, with its slots and buffers."""
    network, version = architecture(cls, metadata, where, kind)
    take_tensors(network, tensors, where, version)
    return network

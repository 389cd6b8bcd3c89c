"""Exporting a network, or a trained network with its pipeline, as one ONNX file.

The network's forward pass for serving is run on the writing engine: each layer's export (its
kind's entry in `deepsharp.core.export.layers`) writes the ONNX form of every engine operation
it makes, the slots and buffers as constants named as the network names them. A trained
network's pipeline is written before it (`deepsharp.core.export.columns`), so the file takes
raw columns, and the loss's link after it, so the file gives what `predict` gives: one output,
`predictions` (rows, outputs). The network alone gives `outputs` (or `predictions`, given a
loss). The rows' count is free ("N").

The file's metadata records deepsharp's version and the SHA-256 of the deepsharp file it came
from (`sha256sum` of the saved file, or of the file saving would write), the loss, the classes,
and how each input is fed. It is written atomically: a failure leaves no file, or the old one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from deepsharp.core.atomic import write_atomically
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.errors import ExportError, check_instance
from deepsharp.core.export.columns import Inputs, write_columns
from deepsharp.core.export.graph import (
    DEFAULT_OPSET,
    OnnxGraph,
    Written,
    highest_opset,
    onnx_module,
)
from deepsharp.core.export.layers import export_of
from deepsharp.core.export.writer import TRACES, Traced, WritingEngine
from deepsharp.core.files import encode_safetensors
from deepsharp.core.nn.binding import Bound
from deepsharp.core.nn.layer import Pass, carry_mask
from deepsharp.core.nn.losses import Loss, loss_to_json
from deepsharp.core.nn.saving import file_tensors, network_metadata
from deepsharp.core.version import __version__

if TYPE_CHECKING:
    from deepsharp.core.nn.network import Network
    from deepsharp.core.serving import TrainedNetwork

__all__ = [
    "export_network",
    "export_trained",
    "network_model",
    "sha256_of",
    "trained_model",
]


def sha256_of(data: bytes) -> str:
    """`sha256:<hex>` of bytes (what `sha256sum` prints of a file holding them)."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def check_opset(opset: object) -> int:
    """The opset asked for: a whole number no higher than the installed onnx package knows."""
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) or opset < 1:
        raise ExportError(f"opset is a whole number such as {DEFAULT_OPSET}, not {opset!r}")
    highest = highest_opset()
    if opset > highest:
        raise ExportError(
            f"opset {opset} is beyond {highest}, the highest the installed onnx package knows: "
            f"export at {highest} or lower (deepsharp's operators are held to the contract at "
            f"{DEFAULT_OPSET})"
        )
    return int(opset)


# --- writing ----------------------------------------------------------------------------------


def write_network(
    writer: WritingEngine, network: Network, inputs: list[Traced], layers: bool = False
) -> Tensor:
    """The network's output for `inputs` (one an input, in order), every node written; with
    `layers`, every node's output (and padding mask) an output of the graph too, `layer K`
    (`layer K mask`), K its place in the network's order, and the inputs as `input K`: the
    tests hold each layer of a file to its bound from its own inputs."""
    graph = writer.graph
    slots, buffers = network.values()
    tensors = {name: _constant(writer, name, value) for name, value in slots.items()}
    kept = {name: _constant(writer, name, value) for name, value in buffers.items()}
    shorts = [
        {short: f"{layer.name}.{short}" for short in (*layer.specs, *layer.buffer_specs)}
        for layer in network.layers
    ]
    bound = Bound(writer, tensors, kept, shorts)
    context = Pass(writer, False, None)
    dtypes = [spec.dtype for spec in network.input_specs]
    values: list[Any] = [
        Tensor(x, x.shape, writer, None, dtype) for x, dtype in zip(inputs, dtypes)
    ]
    if layers:
        for place, value in enumerate(values):
            _shown(graph, value, f"input {place}")
    for place, node in enumerate(network.graph.nodes):
        layer = network.layers[node.layer]
        export = export_of(layer)
        if isinstance(export, str):
            raise ExportError(f"{layer.label} cannot be exported to ONNX: {export}")
        x = [values[i] for i in node.sources] if len(node.sources) > 1 else values[node.sources[0]]
        graph.scope = str(layer.name)
        try:
            made = export(layer, x, bound.per_layer[node.layer], context)
        except ExportError as error:
            raise ExportError(f"{layer.label} cannot be exported to ONNX: {error}") from None
        values.append(carry_mask(made, x, layer.keeps_positions))
        if layers:
            _shown(graph, values[-1], f"layer {place}")
    out: Tensor = values[-1]
    return out


def _shown(graph: OnnxGraph, value: Tensor, name: str) -> None:
    """A value (and its padding mask) as outputs of the graph, under `name`."""
    for made, called in ((value, name), (value.mask, f"{name} mask")):
        if made is not None:
            graph.nodes.append(Written("Identity", [made.handle.name], [called]))
            traced = made.handle
            shape = list(traced.shape)
            graph.output(called, traced.dtype, ["N", *shape[1:]] if traced.batched else shape)


def _constant(writer: WritingEngine, name: str, value: Any) -> Tensor:
    made = writer.constant(value, name)
    return Tensor(made, made.shape, writer)


def _finish(
    writer: WritingEngine, out: Tensor, loss: Loss | None, network: Network
) -> tuple[str, int]:
    """The link (with a loss) and the named output: its name and width."""
    graph = writer.graph
    width = network.outputs
    graph.scope = "link"
    try:
        rows: Any = writer.reshape(out.handle, (out.shape[0], width))
        if loss is not None:
            rows = loss.predictions(writer, out.handle, out.shape[0], width)
    except ExportError as error:
        raise ExportError(f"the loss's link cannot be exported to ONNX: {error}") from None
    name = "predictions" if loss is not None else "outputs"
    if any(taken == name for taken, _, _ in graph.inputs):  # a file names each value once
        raise ExportError(
            f"an input of the network is named {name!r}, the name the file gives its output: "
            f"rename that input (Input(..., name=...), or the column) and export again"
        )
    graph.scope = ""
    graph.nodes.append(Written("Identity", [rows.name], [name]))
    graph.output(name, np.float32, ["N", width])
    return name, width


def network_model(
    network: Network,
    opset: int = DEFAULT_OPSET,
    loss: Loss | None = None,
    source: str | None = None,
    layers: bool = False,
) -> Any:
    """The onnx.ModelProto of a network alone: its inputs by name (float32, or int64 ids), its
    output `outputs`, or `predictions` with a loss's link; `source` the digest to record (that
    of the network file saving it would write, when not given); `layers`: every layer's output
    an output too (`write_network`)."""
    opset = check_opset(opset)
    tensors = file_tensors(network)  # refuses a network without values, or with non-finite ones
    if source is None:
        source = sha256_of(encode_safetensors(tensors, network_metadata(network)))

    def traced(batch: int) -> tuple[OnnxGraph, dict[str, str]]:
        writer = WritingEngine(OnnxGraph(opset), batch)
        inputs = []
        described = []
        for spec in network.input_specs:
            assert spec.shape is not None
            dtype = np.int64 if spec.dtype == "int64" else np.float32
            inputs.append(writer.input(spec.name, dtype, spec.shape))
            described.append({"name": spec.name, "type": spec.dtype, "shape": ["N", *spec.shape]})
        with np.errstate(all="ignore"):
            out = write_network(writer, network, inputs, layers)
            name, width = _finish(writer, out, loss, network)
        return writer.graph, _metadata("network", source, loss, None, described, name, width)

    return _model(*_traced_twice(traced))


def trained_model(
    trained: TrainedNetwork,
    opset: int = DEFAULT_OPSET,
    source: str | None = None,
    layers: bool = False,
) -> Any:
    """The onnx.ModelProto of a trained network: raw columns in (its pipeline written as ONNX),
    `predictions` out; `source` the digest to record (that of the trained file saving it would
    write, when not given); `layers`: every layer's output an output too."""
    opset = check_opset(opset)
    network, pipeline = trained.network, trained.pipeline
    tensors, saved = trained.contents()
    if source is None:
        source = sha256_of(encode_safetensors(tensors, saved))

    def traced(batch: int) -> tuple[OnnxGraph, dict[str, str]]:
        writer = WritingEngine(OnnxGraph(opset), batch)
        with np.errstate(all="ignore"):
            inputs, described = _pipeline_inputs(writer, trained)
            out = write_network(writer, network, inputs, layers)
            name, width = _finish(writer, out, trained.loss, network)
        metadata = _metadata(
            "trained network",
            source,
            trained.loss,
            pipeline.classes,
            described,
            name,
            width,
            pipeline.to_json(),
        )
        return writer.graph, metadata

    return _model(*_traced_twice(traced))


def _traced_twice(
    traced: Callable[[int], tuple[OnnxGraph, dict[str, str]]],
) -> tuple[OnnxGraph, dict[str, str]]:
    """The graph traced at a pair of counts of rows (`TRACES`), the next pair tried where one
    is refused (a size of a layer's own may be one of the pair's); the first refusal where
    every pair is refused. What the first trace warned of is said once, at the caller's line
    (the exporter's own lines are no use to whoever reads it)."""
    refused: ExportError | None = None
    first: list[warnings.WarningMessage] = []
    for batch, again in TRACES:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                made = _traced_at(traced, batch, again)
            except ExportError as error:
                refused = refused or error
                first = first or list(said)
                continue
        _say(first or said)
        return made
    _say(first)
    assert refused is not None
    raise refused


def _say(said: list[warnings.WarningMessage]) -> None:
    level = _outside_level()
    for warning in said:
        warnings.warn(warning.message, warning.category, stacklevel=level)


def _traced_at(
    traced: Callable[[int], tuple[OnnxGraph, dict[str, str]]], batch: int, again: int
) -> tuple[OnnxGraph, dict[str, str]]:
    """The graph traced at `batch` rows, refused where tracing at `again` rows writes another:
    the pass then depends on the count of rows in a way no operation named (a layer dividing by
    `x.shape[0]`, a Python number), and the file would serve only the count it was traced
    with. The first trace's warnings are recorded by the caller; the second's are not said."""
    graph, metadata = traced(batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        second, _ = traced(again)
    differs = graph.first_difference(second)
    if differs is not None:
        raise ExportError(
            f"{differs} depends on the count of rows the pass is traced with (written one way "
            f"for {batch} rows, another for {again}): a layer's forward reads the batch's size "
            "as a number (x.shape[0]), which would tie the file to the rows it is traced with: "
            "a row's prediction is made from its own row alone (predict serves rows in chunks, "
            "a file rows as they come), so compute it without the batch, or export without it; "
            "or a layer's forward keeps state between calls (an attribute it changes), so that "
            "each trace writes another value: check_layer names such a layer"
        )
    return graph, metadata


def _outside_level() -> int:
    """The stacklevel, for a warning said by its caller, of the first frame outside deepsharp's
    core package: the line of the user's call (or of the command line's entry)."""
    package = str(Path(__file__).resolve().parents[1])
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _pipeline_inputs(
    writer: WritingEngine, trained: TrainedNetwork
) -> tuple[list[Traced], list[dict[str, Any]]]:
    """The network's inputs as the pipeline makes them from the file's inputs."""
    network, pipeline = trained.network, trained.pipeline
    specs = network.input_specs
    if pipeline.takes_arrays:
        shapes = pipeline.input_shapes or {specs[0].name: pipeline.row_shape}
        made, described = [], []
        for spec in specs:
            assert spec.shape is not None
            row = tuple(shapes.get(spec.name, spec.shape))
            dtype = np.int64 if spec.dtype == "int64" else np.float32
            x = writer.input(spec.name, dtype, row)
            described.append({"name": spec.name, "type": spec.dtype, "shape": ["N", *row]})
            made.append(_shaped(writer, x, spec.shape))
        return made, described
    groups = pipeline.column_groups()
    if len(groups) != len(specs) or (len(specs) > 1 and set(groups) != {s.name for s in specs}):
        raise ExportError(
            f"the network takes {len(specs)} inputs ({', '.join(s.name for s in specs)}) and "
            f"its pipeline feeds {', '.join(repr(n) for n in groups)}: export the network alone "
            "(trained.network.export_onnx(path))"
        )
    inputs = Inputs(writer.graph)
    writer.graph.reserve(str(column.name) for column in pipeline.columns)
    made = []
    for spec in specs:
        group = groups[spec.name] if len(specs) > 1 else next(iter(groups.values()))
        features = write_columns(writer.graph, group, inputs)
        ids = group[0].dtype == "int64"
        width = sum(column.width() for column in group)
        shadow = writer.shadow.put(np.zeros((writer.batch, width), np.int64 if ids else np.float32))
        if writer.batch_source is None:
            first = writer.graph.inputs[0][0]
            writer.batch_source = Traced(
                first, writer.shadow.put(np.zeros((writer.batch, 1))), True
            )
        assert spec.shape is not None
        made.append(_shaped(writer, Traced(features, shadow, True), spec.shape))
    described = [
        {"name": name, "type": kind, "shape": ["N", width]}
        for name, (kind, _, width) in inputs.taken.items()
    ]
    return made, described


def _shaped(writer: WritingEngine, x: Traced, shape: tuple[int, ...]) -> Traced:
    """Rows as the network's input takes them: flat features reshaped to its images."""
    if x.shape[1:] == tuple(shape):
        return x
    if math.prod(x.shape[1:]) != math.prod(shape):
        raise ExportError(
            f"the pipeline makes rows of shape {x.shape[1:]}, the network takes {tuple(shape)}"
        )
    writer.graph.scope = "features"
    return writer.reshape(x, (x.shape[0], *shape))


# --- the file -----------------------------------------------------------------------------------


def _metadata(
    kind: str,
    source: str,
    loss: Loss | None,
    classes: list[str] | None,
    inputs: list[dict[str, Any]],
    output: str,
    width: int,
    pipeline: dict[str, Any] | None = None,
) -> dict[str, str]:
    made = {
        "deepsharp.version": __version__,
        "deepsharp.source": source,
        "deepsharp.source_kind": kind,
        "deepsharp.inputs": json.dumps(inputs),
        "deepsharp.output": json.dumps({"name": output, "shape": ["N", width]}),
    }
    if loss is not None:
        made["deepsharp.loss"] = json.dumps(loss_to_json(loss))
    if classes is not None:
        made["deepsharp.classes"] = json.dumps(classes)
    if pipeline is not None:  # its recipe and statistics: a text column's tokens among them
        made["deepsharp.pipeline"] = json.dumps(pipeline, allow_nan=False)
    return made


def _model(graph: OnnxGraph, metadata: dict[str, str]) -> Any:
    """The graph pruned of what no output needs, as a checked onnx.ModelProto."""
    onnx = onnx_module()
    graph.prune()
    fed = "; ".join(
        f"{entry['name']}: {entry['type']} {entry['shape']}"
        for entry in json.loads(metadata["deepsharp.inputs"])
    )
    doc = (
        f"Exported by deepsharp {__version__} from a {metadata['deepsharp.source_kind']} "
        f"({metadata['deepsharp.source']}). Inputs: {fed}. Output: "
        f"{json.loads(metadata['deepsharp.output'])['name']}."
    )
    model = graph.model(doc, metadata)
    model.producer_name = "deepsharp"
    model.producer_version = __version__
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # a form written wrong is deepsharp's fault: say so
        raise ExportError(
            f"deepsharp wrote an ONNX graph the onnx checker refuses ({error}); please report it"
        ) from error
    return model


def export_network(
    network: Network,
    path: str | os.PathLike[str],
    opset: int = DEFAULT_OPSET,
    loss: Loss | None = None,
    source: str | None = None,
) -> None:
    """Write `network_model(network, opset, loss, source)` to `path`, atomically."""
    if loss is not None:
        check_instance("loss", loss, Loss, "export_onnx")
    write_atomically(path, network_model(network, opset, loss, source).SerializeToString())


def export_trained(
    trained: TrainedNetwork,
    path: str | os.PathLike[str],
    opset: int = DEFAULT_OPSET,
    source: str | None = None,
) -> None:
    """Write `trained_model(trained, opset, source)` to `path`, atomically."""
    write_atomically(path, trained_model(trained, opset, source).SerializeToString())

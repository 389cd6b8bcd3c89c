"""The network: a graph of layers and the values of their slots and buffers. It never keeps an
engine.

`Network([Dense(16), Relu(), Dense(1)])` is a chain; `Network(inputs=x, outputs=y)` a graph of
symbols (`deepsharp.core.nn.graph`). Either way a network holds its inputs, its layers (each
named: given, or its kind in lower case, `dense`, `dense_1`, ... in the order the network first
meets them) and its nodes in order. Its slots are named `<layer>.<slot>`, its buffers
`<layer>.<buffer>`. Between runs these are host arrays; a run binds them to its engine
(`deepsharp.core.nn.binding`). Files: `deepsharp.core.nn.saving`.
"""

from __future__ import annotations

import copy
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.tensor import Recording, Tensor, open_recording
from deepsharp.core.engine import Engine
from deepsharp.core.errors import ConfigurationError, DataError, ShapeError, StateError
from deepsharp.core.export.graph import DEFAULT_OPSET
from deepsharp.core.export.model import export_network
from deepsharp.core.nn import predicting, saving
from deepsharp.core.nn.binding import Bound, checked_values, put_values
from deepsharp.core.nn.graph import (
    Graph,
    InputSpec,
    Symbol,
    chain,
    check_made,
    check_shared,
    name_graph,
    row_shape,
    trace,
)
from deepsharp.core.nn.layer import BufferSpec, Layer, Pass, Shape, SlotSpec
from deepsharp.core.nn.losses import Loss, MeanSquaredError
from deepsharp.core.nn.rows import channels_last_hint, checked_features, checked_ids, reshaped
from deepsharp.core.nn.summary import summarized
from deepsharp.core.random import Generator

__all__ = ["Features", "Network", "in_order"]

Features = tuple[NDArray[Any], ...]
"""A batch's features as a network takes them: one array a network input, in its inputs' order."""


class Network:
    """Layers and the values of their slots and buffers.

    `Network(layers, inputs=None)`: a chain, each layer reading the one before; `inputs` the rows'
    shape (a feature count, or a shape such as (1, 28, 28)), or None for the first run to find.
    `Network(inputs=x, outputs=y)`: a graph from `Input` symbols `x` (one, or a list) to the
    symbol `y` that layers called on them give. A network of several inputs is fed a dict keyed
    by their names, or a list in their order.
    """

    def __init__(
        self,
        layers: Sequence[Layer] | None = None,
        inputs: int | Sequence[int] | Symbol | Sequence[Symbol] | None = None,
        outputs: Symbol | None = None,
    ) -> None:
        if outputs is not None or isinstance(inputs, Symbol) or _symbols(inputs):
            if layers is not None:
                raise ConfigurationError(
                    "a network is a chain, Network([layers], inputs=shape), or a graph, "
                    "Network(inputs=symbols, outputs=symbol): not both"
                )
            if outputs is None:
                raise ConfigurationError(
                    "Network(inputs=...) of symbols needs outputs=: the symbol its layers give"
                )
            listed: list[Any] = [inputs] if isinstance(inputs, Symbol) else list(inputs or [])  # type: ignore[arg-type]
            graph = trace(listed, outputs)
        else:
            if not isinstance(layers, (list, tuple)):
                raise TypeError(
                    f"a network takes a list of layers (or inputs= and outputs= symbols), not "
                    f"{layers!r}"
                )
            if not layers:
                raise ValueError("a network needs at least one layer")
            for index, layer in enumerate(layers):
                if isinstance(layer, type) and issubclass(layer, Layer):
                    raise TypeError(
                        f"layer {index} is the class {layer.__name__}, not a layer: make one, "
                        f"{layer.__name__}(...)"
                    )
                if not isinstance(layer, Layer):
                    raise TypeError(
                        f"layer {index} is {layer!r}, not a Layer"
                        + (
                            ": a chain's rows are given by inputs=, Network([layers], "
                            "inputs=shape); an Input starts a graph (docs/layers.md)"
                            if isinstance(layer, Symbol)
                            else ""
                        )
                    )
                check_made(layer)
                if layer.several:
                    raise ConfigurationError(
                        f"layer {index}, {layer.label}, takes a list of two or more inputs, and a "
                        "chain gives each layer one: build a graph, calling it on the symbols "
                        f"it joins ({layer.kind}()([a, b]); docs/layers.md)"
                    )
            shape = None if inputs is None else row_shape(inputs, "inputs")
            graph = chain(layers, shape)
        self._start(graph, chained=outputs is None)
        clash = {spec.name for spec in self.input_specs} & {layer.name for layer in self.layers}
        if clash and not self.chained:  # a graph's inputs are named by their maker (a chain's
            # is 'input', which a layer may be: its slots are named so); a file loads as it is
            raise ConfigurationError(
                f"an input and a layer are both named {sorted(clash)[0]!r}: a summary and what "
                "each layer reads name them, so each name must differ"
            )

    def _start(self, graph: Graph, chained: bool) -> None:
        self.chained = chained
        self.graph: Graph = graph
        self.layers: list[Layer] = graph.layers
        self.input_specs: list[InputSpec] = graph.inputs
        name_graph(graph)
        # Each node as the forward pass takes it: the layer's forward, its index, what it reads.
        self._plan = [
            (graph.layers[n.layer].carried, n.layer, n.sources, len(n.sources) > 1)
            for n in graph.nodes
        ]
        self._checkers: list[tuple[Layer, int]] = [
            (graph.layers[node.layer], source)
            for node in graph.nodes
            for source in node.sources
            if source < len(graph.inputs)
            and (
                type(graph.layers[node.layer]).check_input is not Layer.check_input
                or graph.layers[node.layer].takes[:1] == ("int64",)  # its parts check ids
            )
        ]
        self.specs: dict[str, SlotSpec] = {}
        self.buffer_specs: dict[str, BufferSpec] = {}
        self._short: list[dict[str, str]] = []
        self.built = False
        self._values: dict[str, NDArray[np.float32]] | None = None
        self._buffers: dict[str, NDArray[np.float32]] = {}
        self._bound: Bound | None = None
        self._binding = threading.Lock()  # one run at a time binds it
        if all(spec.shape is not None for spec in self.input_specs):
            self.build()

    # --- structure ---------------------------------------------------------------------------
    @property
    def inputs(self) -> Shape | None:
        """The rows' shape of its one input (None until it is built); for a network of several
        inputs, see `input_specs` (each input's name, shape and dtype)."""
        if len(self.input_specs) != 1:
            raise ShapeError(
                f"the network has {len(self.input_specs)} inputs "
                f"({', '.join(repr(s.name) for s in self.input_specs)}): read their shapes in "
                "network.input_specs"
            )
        return self.input_specs[0].shape

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.input_specs]

    def build(self, inputs: Shape | Mapping[str, Shape] | None = None) -> None:
        """Work out every layer's shapes, slots and buffers for rows of shape `inputs` (a chain's
        one input; a graph's are known from its `Input`s)."""
        if inputs is not None:
            shapes = dict(inputs) if isinstance(inputs, Mapping) else {self.input_names[0]: inputs}
            for spec in self.input_specs:
                if shapes.get(spec.name) is None:
                    continue
                given = row_shape(shapes[spec.name], f"build's shape of {spec.name!r}")
                if given == spec.shape:
                    continue
                if self.built:
                    raise ShapeError(
                        f"the network was built for rows of shape {spec.shape}, not {given}"
                    )
                spec.shape = given
        if self.built:
            return
        if any(spec.shape is None for spec in self.input_specs):
            raise ShapeError("the network is not built yet: give it inputs, or run it once")
        shapes_of: list[Any] = [spec.shape for spec in self.input_specs]
        done: set[int] = set()
        for node in self.graph.nodes:
            layer = self.layers[node.layer]
            read = [shapes_of[i] for i in node.sources]
            taken: Any = read if len(read) > 1 else read[0]
            if node.layer in done:
                shapes_of.append(check_shared(layer, taken))
                continue
            done.add(node.layer)
            if layer.input_shape is not None and layer.input_shape != taken:
                raise ShapeError(
                    f"{layer.label} is built for rows of shape {layer.input_shape} (in another "
                    f"network), and this network gives it rows of shape {taken}: a layer's "
                    "shapes belong to the network it is built in (the other's summary and output "
                    f"would read this one's); give this network a layer of its own: "
                    f"{layer.described()}"
                )
            shapes_of.append(layer.built_for(taken))
            for source in node.sources:
                if source < len(self.input_specs):
                    layer.meets_input(shapes_of[source])
        self.specs, self.buffer_specs, self._short = {}, {}, []
        for layer in self.layers:
            short: dict[str, str] = {}
            for slot, slot_spec in layer.specs.items():
                self.specs[f"{layer.name}.{slot}"] = slot_spec
                short[slot] = f"{layer.name}.{slot}"
            for buffer, kept in layer.buffer_specs.items():
                self.buffer_specs[f"{layer.name}.{buffer}"] = kept
                short[buffer] = f"{layer.name}.{buffer}"
            self._short.append(short)
        self.built = True

    @property
    def output_shape(self) -> Shape:
        """The shape of one row of the network's output."""
        if not self.built:
            raise ShapeError("the network is not built yet: give it inputs, or run it once")
        shape = self.layers[self.graph.nodes[-1].layer].output_shape
        assert shape is not None
        return shape

    @property
    def outputs(self) -> int:
        """How many values the network gives for each row."""
        return math.prod(self.output_shape)

    @property
    def ends_in(self) -> str | None:
        """What the last layer's outputs are, where a loss must know ("sigmoid", "softmax")."""
        return self.layers[self.graph.nodes[-1].layer].ends_in

    @property
    def whole_batch(self) -> bool:
        """Whether a training pass reads statistics of the whole batch (a BatchNorm, or a layer
        built of one)."""
        pending = list(self.layers)
        while pending:
            layer = pending.pop()
            if layer.whole_batch:
                return True
            pending.extend(layer.parts.values())
        return False

    # --- features ----------------------------------------------------------------------------
    def arrange(
        self,
        features: Any,
        where: str = "the features",
        reshape: bool = False,
        finite: bool = True,
    ) -> Features:
        """A batch's features as the network takes them: one array an input, in its inputs' order
        (from an array for one input; a dict keyed by the inputs' names, or a list in their
        order, for several), each checked: float32 features finite, int64 ids whole and within
        what the layers reading them take, rows alike in count and (once built) in shape.
        `reshape`: flat rows of as many values as an input's rows hold are reshaped to them (a
        pipeline's columns to images). `finite=False` leaves whether the float features are
        finite to the caller (a trainer checks it as it puts them on its engine)."""
        specs = self.input_specs
        several = len(specs) > 1
        if not several and isinstance(features, np.ndarray):
            given: list[Any] = [features]  # the common case, without the looks below
        else:
            given = self._given(features, where)
        arrays = tuple(
            _checked(spec, value, where, several, finite) for spec, value in zip(specs, given)
        )
        if several and len({array.shape[0] for array in arrays}) > 1:
            held = ", ".join(f"{s.name!r} {a.shape[0]}" for s, a in zip(specs, arrays))
            raise DataError(f"{where}: every input holds the same rows, and these hold {held}")
        if reshape:
            arrays = tuple(reshaped(spec, array) for spec, array in zip(specs, arrays))
        if self.built:
            self.check_rows(arrays, where)
        for layer, source in self._checkers:  # layers that read an input directly check it
            name = specs[source].name
            layer.check_input(arrays[source], f"{where} (input {name!r})" if several else where)
        return arrays

    def named(self, features: Any) -> Any:
        """Features of several inputs given as a list or tuple in the inputs' order, as a dict
        keyed by the inputs' names (what a pipeline of arrays learns and reads); anything else
        as it is (one input's array, a dict, rows of named columns)."""
        specs = self.input_specs
        if len(specs) > 1 and isinstance(features, (list, tuple)) and len(features) == len(specs):
            if all(np.ndim(value) >= 1 for value in features):
                return {spec.name: value for spec, value in zip(specs, features)}
        return features

    def _given(self, features: Any, where: str) -> list[Any]:
        specs, names = self.input_specs, self.input_names
        if isinstance(features, Mapping):
            missing = [name for name in names if name not in features]
            extra = [str(key) for key in features if key not in names]
            if missing or extra:
                said = []
                if missing:
                    said.append(f"lacks {', '.join(map(repr, missing))}")
                if extra:
                    said.append(f"holds {', '.join(map(repr, extra))}, which it has not")
                raise DataError(
                    f"{where}: the network's inputs are {', '.join(map(repr, names))}, and the "
                    f"dict {' and '.join(said)}: give one array an input, keyed by its name"
                )
            return [features[name] for name in names]
        if in_order(features) and len(features) == len(specs):
            return list(features)
        if len(specs) == 1:
            return [features]
        if isinstance(features, (list, tuple)) and len(features) == len(specs):
            return list(features)
        raise DataError(
            f"{where}: the network takes {len(specs)} inputs ({', '.join(map(repr, names))}): "
            "give a dict of one array an input, keyed by its name, or a list in that order"
        )

    def check_rows(self, features: Features, where: str = "the features") -> None:
        """A ShapeError naming the input and both shapes, for rows the network cannot take."""
        for spec, array in zip(self.input_specs, features):
            rows = tuple(array.shape[1:])
            if spec.shape is not None and rows != spec.shape:
                taker = self.layers[0].label if self.chained else f"input {spec.name!r}"
                raise ShapeError(
                    f"{taker} takes rows of shape {spec.shape}, but {where} are of shape "
                    f"{tuple(array.shape)} (rows of shape {rows})"
                    + channels_last_hint(rows, spec.shape)
                )

    # --- slots and buffers -------------------------------------------------------------------
    def initialize(self, generator: Generator) -> None:
        """Draw first values for every slot (each layer's initialiser), in order; buffers start
        at their declared zeros or ones."""
        self._values = {name: spec.initial(generator) for name, spec in self.specs.items()}
        self._buffers = {name: spec.initial() for name, spec in self.buffer_specs.items()}

    @property
    def initialized(self) -> bool:
        return self._values is not None or self._bound is not None

    @property
    def slots(self) -> dict[str, NDArray[np.float32]]:
        """A host copy of every slot's values (brought back from the engine during a run, as
        one step left them)."""
        bound = self._bound
        if bound is not None:
            return bound.read()[0]
        if self._values is None:
            return {}
        return {name: value.copy() for name, value in self._values.items()}

    @property
    def buffers(self) -> dict[str, NDArray[np.float32]]:
        """A host copy of every buffer's values (state that is not trained: BatchNorm's running
        statistics), brought back as `slots` are."""
        bound = self._bound
        if bound is not None:
            return bound.read()[1]
        return {name: value.copy() for name, value in self._buffers.items()}

    def values(self) -> tuple[dict[str, NDArray[np.float32]], dict[str, NDArray[np.float32]]]:
        """The slots and the buffers, taken at one moment (during a run, between two steps)."""
        bound = self._bound
        if bound is not None:
            return bound.read()
        return self.slots, self.buffers

    def set_slots(self, values: Mapping[str, Any]) -> None:
        """Replace every slot's values (names and shapes must match the network's)."""
        if not self.built:  # no slots yet: its rows' shape is not known (trial RN)
            raise ShapeError(
                "the network is not built yet, so it has no slots to set: its slots' shapes "
                "follow from its rows' shape; give Network(..., inputs=shape), or call "
                "network.build(shape) first"
            )
        checked = checked_values(values, self.specs, "slot")
        if self._bound is not None:
            raise StateError("a run is training this network: set its slots before or after")
        self._values = checked
        if set(self._buffers) != set(self.buffer_specs):
            self._buffers = {name: spec.initial() for name, spec in self.buffer_specs.items()}

    def set_buffers(self, values: Mapping[str, Any]) -> None:
        """Replace every buffer's values (names and shapes must match the network's)."""
        checked = checked_values(values, self.buffer_specs, "buffer")
        if self._bound is not None:
            raise StateError("a run is training this network: set its buffers before or after")
        self._buffers = checked

    def bind(self, engine: Engine) -> Bound:
        """Put the slots and buffers on `engine` for a run; the network reads them from there
        until `release`."""
        with self._binding:
            if self._bound is not None:
                raise StateError(
                    "this network is already bound to a run; one run at a time: close the "
                    "other trainer first (trainer.close(), or use it in a with block; "
                    "network.release() where that trainer is gone unclosed)"
                )
            saving.refuse_settings_past_build(self)
            bound = self.put(engine)
            self._bound = bound
        return bound

    def put(
        self,
        engine: Engine,
        values: tuple[Mapping[str, NDArray[np.float32]], Mapping[str, NDArray[np.float32]]]
        | None = None,
    ) -> Bound:
        """The slots and buffers (or `values`: slots and buffers) on `engine`, without binding."""
        slots, buffers = (self._values, self._buffers) if values is None else values
        if slots is None and values is None and self.built and not self.specs:
            self.initialize(Generator(0))  # no slot to draw; buffers take their declared values
            slots, buffers = self._values, self._buffers
        if slots is None:
            raise StateError(
                "the network has no slot values yet: train it, load it or set them (values are a "
                "network's, not its layers': a network sharing layers with a trained one takes "
                "its values with network.set_slots({name: trained.slots[name] for name in "
                "network.specs}))"
            )
        return put_values(
            engine,
            slots,
            buffers,
            {n: s.shape for n, s in self.specs.items()},
            {n: s.shape for n, s in self.buffer_specs.items()},
            self._short,
        )

    @property
    def bound(self) -> Bound | None:
        """Where a run holds the values now (None between runs)."""
        return self._bound

    def release(self) -> None:
        """Bring the slots and buffers back from the engine a run trained them on."""
        with self._binding:
            if self._bound is not None:
                self._values, self._buffers = self._bound.read()
                self._bound = None

    # --- passes ------------------------------------------------------------------------------
    def forward(self, xs: Tensor | Sequence[Tensor], bound: Bound, context: Pass) -> Tensor:
        """The network's output for a batch: its inputs' tensors (one, or one an input in
        order), every node in order."""
        values: list[Any] = [xs] if isinstance(xs, Tensor) else list(xs)
        per_layer = bound.per_layer
        recording = open_recording()
        if recording is not None:  # a recorded pass names each layer's nodes
            return self._named_forward(values, per_layer, context, recording)
        for forward, index, sources, several in self._plan:
            x = [values[i] for i in sources] if several else values[sources[0]]
            values.append(forward(x, per_layer[index], context))
        out: Tensor = values[-1]
        return out

    def _named_forward(
        self, values: list[Any], per_layer: Any, context: Pass, recording: Recording
    ) -> Tensor:
        layers = self.layers
        try:
            for forward, index, sources, several in self._plan:
                recording.layer = layers[index].name
                x = [values[i] for i in sources] if several else values[sources[0]]
                values.append(forward(x, per_layer[index], context))
        finally:
            recording.layer = None
        out: Tensor = values[-1]
        return out

    def predict(
        self, features: Any, loss: Loss | None = None, engine: Engine | str | None = None
    ) -> NDArray[np.float32]:
        """The predictions (the loss's link applied: a softmax for CrossEntropy's logits) for a
        batch of features; without a loss, the network's outputs as they are. The same bits for
        a row in any company, as `TrainedNetwork.predict` gives (one path serves both). While a
        run trains the network, with the slots one of its steps left."""
        if loss is None:  # (trial RN: a loss was asked for raw outputs) the identity link
            loss = MeanSquaredError()
        return predicting.predict(self, loss, features, engine)

    def summary(self, print_fn: Callable[[str], object] = print) -> None:
        """Print each layer, its output shape and its slot count, as a table; `print_fn` takes
        the table's text instead (Keras's: `summary(print_fn=lines.append)` keeps it). Nothing
        is returned, so that a notebook shows the table once, not again as a string."""
        print_fn(summarized(self))

    # --- files -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The architecture as a network file records it: inputs, layers, nodes (format 4)."""
        return saving.network_to_json(self)

    @classmethod
    def from_json(
        cls, data: Any, where: str = "the file", version: str = saving.FORMAT_VERSION
    ) -> Network:
        """A network from what `to_json` gave (`version`: the format a file recorded it in;
        before format 4, LSTM and GRU read padding as tokens, and are made so)."""
        return saving.network_from_json(cls, data, where, version)

    def metadata(self) -> dict[str, str]:
        """What a network file's metadata holds (format, version, architecture, deepsharp's
        version)."""
        return saving.network_metadata(self)

    def save(self, path: str | os.PathLike[str]) -> None:
        """The architecture, slots and buffers in one safetensors file (no engine, no code)."""
        saving.save_network(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Network:
        """A network from its file (Network.save's); never runs code from it."""
        return saving.load_network(cls, path)

    def export_onnx(
        self, path: str | os.PathLike[str], loss: Loss | None = None, opset: int = DEFAULT_OPSET
    ) -> None:
        """One ONNX file of the network alone: its inputs by name, its output `outputs` (or,
        given a loss, `predictions` with its link), as `predict` computes them
        (docs/export.md). Needs `deepsharp[onnx]`; written atomically."""
        export_network(self, path, opset, loss)

    @classmethod
    def of_graph(cls, graph: Graph, chained: bool) -> Network:
        """A network of a graph already made (a file's): its layers named as recorded."""
        network = cls.__new__(cls)
        network._start(graph, chained)
        return network

    def __call__(self, *given: Any) -> Any:
        raise TypeError(
            "a Network is not a layer, to call on symbols: call its layers on them (a function "
            "that adds them to a graph), or put them in a chain: Network([*network.layers, ...])"
        )

    def __repr__(self) -> str:
        if self.chained:
            inner = ", ".join(layer.described() for layer in self.layers)
            return f"Network([{inner}], inputs={self.input_specs[0].shape})"
        names = ", ".join(repr(spec.name) for spec in self.input_specs)
        return f"Network(graph of {len(self.layers)} layers, inputs {names})"

    # --- copies ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """A copy (copy.deepcopy, pickle, scikit-learn's clone) holds the layers and the slots'
        and buffers' host values — during a run, the run's current ones — never an engine or a
        run's lock."""
        state = dict(self.__dict__)
        if self.initialized:
            state["_values"], state["_buffers"] = self.values()
        state["_bound"] = None
        del state["_binding"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._binding = threading.Lock()

    def kept_copy(self) -> Network:
        """A copy holding the same host values, unbound, and layers of its own: what a finished
        run keeps of the network it trained (`Run.trained`). Nothing changes a network's host
        arrays in place (a run, set_slots and initialize put new ones), so the two share them,
        read-only, without a second copy of every slot; its layers are copies, so that a
        setting assigned to the network's layers for the next run changes nothing of this
        one's (trial NB: an activation assigned after a run changed its predictions and the
        file it saved). During a run, a copy of the run's current values (as deepcopy takes)."""
        if self._bound is not None:
            return copy.deepcopy(self)
        held = ("_values", "_buffers", "_binding")
        rest = {k: v for k, v in vars(self).items() if k not in held}
        made: Network = object.__new__(type(self))
        made.__dict__.update(own_copy(rest))
        for name in held[:2]:
            values = getattr(self, name)
            if values is not None:
                for array in values.values():
                    array.setflags(write=False)
                values = dict(values)
            setattr(made, name, values)
        made._binding = threading.Lock()
        return made


def own_copy(value: Any) -> Any:
    """A deep copy of `value`, or `value` itself where it cannot be copied (a layer or a loss of
    one's own holding a lock or a file: a finished run is never lost to its copy, trial RV)."""
    try:
        return copy.deepcopy(value)
    except Exception:  # (TypeError, pickle's errors, a __deepcopy__ of one's own)
        return value


def in_order(features: object) -> bool:
    """Whether features are one array an input, in order: a list or tuple of arrays of rows
    (what a run's feeds hand a step)."""
    return (
        isinstance(features, (list, tuple))
        and len(features) > 0
        and all(isinstance(f, np.ndarray) and f.ndim >= 2 for f in features)
    )


def _symbols(inputs: object) -> bool:
    return isinstance(inputs, (list, tuple)) and any(isinstance(i, Symbol) for i in inputs)


def _checked(
    spec: InputSpec, value: Any, where: str, several: bool, finite: bool = True
) -> NDArray[Any]:
    """One input's values as the network takes them (float32 features or int64 ids), checked."""
    place = f"{where} (input {spec.name!r})" if several else where
    if spec.dtype == "int64":
        return checked_ids(value, place)
    return checked_features(value, place, finite=finite)

"""The network: layers in order and the values of their slots. It never keeps an engine.

Between runs its slots are host arrays. A run (a `Trainer`) binds them to its engine for as
long as it trains — reading `network.slots` then brings them back, counted — and hands them
back to the host when it is done.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.functions import parts
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine, make_engine
from deepsharp.core.errors import DeepSharpWarning, FileFormatError, ShapeError, StateError
from deepsharp.core.files import Declared, Expectation, read_safetensors, write_safetensors
from deepsharp.core.nn.layers import Conv2D, Layer, Pass, SlotSpec, layer_from_json
from deepsharp.core.nn.losses import Loss
from deepsharp.core.random import Generator
from deepsharp.core.version import __version__

__all__ = ["NETWORK_FORMAT", "Network", "Served", "own_engine"]

NETWORK_FORMAT = "deepsharp.network"
FORMAT_VERSION = "1"
Shape = tuple[int, ...]

_OWN_ENGINE: list[Engine] = []
_OWN_ENGINE_LOCK = threading.Lock()


def own_engine(engine: Engine | str | None = None) -> Engine:
    """The engine named, or (for None) one light engine made once for every call that names
    none: serving without an engine does not look for installed engines on each call."""
    if engine is not None:
        return make_engine(engine)
    with _OWN_ENGINE_LOCK:
        if not _OWN_ENGINE:
            _OWN_ENGINE.append(make_engine("light"))
        return _OWN_ENGINE[0]


def _row_shape(inputs: int | Sequence[int] | None) -> Shape | None:
    if inputs is None:
        return None
    shape = (inputs,) if isinstance(inputs, (int, np.integer)) else tuple(inputs)
    if (
        not 0 < len(shape) <= 8
        or not all(_size(s) for s in shape)
        or math.prod(int(s) for s in shape) > 2**31
    ):
        raise ValueError(
            f"inputs is a feature count or a shape of one to eight positive sizes, not {inputs!r}"
        )
    return tuple(int(s) for s in shape)


def _size(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value > 0)


class Bound:
    """A network's slots on one engine: what a run trains and what a server predicts with."""

    def __init__(
        self, engine: Engine, tensors: dict[str, Tensor], per_layer: list[dict[str, Tensor]]
    ):
        self.engine = engine
        self.tensors = tensors
        self.per_layer = per_layer


class Network:
    """Layers in order. `inputs` (a feature count or a row shape such as (1, 28, 28)) may be
    left for the first run to infer from its features."""

    def __init__(self, layers: Sequence[Layer], inputs: int | Sequence[int] | None = None) -> None:
        if isinstance(layers, Layer) or not isinstance(layers, Sequence):
            raise TypeError(f"a network takes a list of layers, not {layers!r}")
        self.layers = list(layers)
        if not self.layers:
            raise ValueError("a network needs at least one layer")
        for index, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"layer {index} is {layer!r}, not a Layer")
        self.inputs: Shape | None = None
        self.specs: dict[str, SlotSpec] = {}
        self._names: list[list[tuple[str, str]]] = []
        self._values: dict[str, NDArray[np.float32]] | None = None
        self._bound: Bound | None = None
        self._binding = threading.Lock()  # one run at a time binds it
        shape = _row_shape(inputs)
        if shape is not None:
            self.build(shape)

    # --- shapes ----------------------------------------------------------------------------
    def build(self, inputs: Shape) -> None:
        """Work out every layer's shapes and slots for rows of shape `inputs`."""
        if self.inputs == inputs:
            return
        if self._values is not None:
            raise ShapeError(f"the network was built for rows of shape {self.inputs}, not {inputs}")
        if (
            len(inputs) == 3
            and inputs[2] in (1, 3, 4)
            and min(inputs[:2]) > 4
            and isinstance(self.layers[0], Conv2D)
        ):
            warnings.warn(
                f"{self.layers[0]!r} is built for images of shape {inputs}, read as (channels, "
                f"height, width): {inputs[0]} channels of {inputs[1]}x{inputs[2]}. If these are "
                "channels-last images (N, H, W, C), give x.transpose(0, 3, 1, 2): deepsharp "
                "takes images (N, C, H, W)",
                DeepSharpWarning,
                stacklevel=3,
            )
        shape = inputs
        self.specs, self._names = {}, []
        for index, layer in enumerate(self.layers):
            layer.label = f"layer {index} ({layer!r})"
            shape = layer.built_for(shape)
            names = []
            for slot, spec in layer.specs.items():
                name = f"{index}.{layer.kind.lower()}.{slot}"
                self.specs[name] = spec
                names.append((slot, name))
            self._names.append(names)
        self.inputs = inputs

    @property
    def outputs(self) -> int:
        """How many values the network gives for each row."""
        last = self.layers[-1].output_shape
        if last is None:
            raise ShapeError("the network is not built yet: give it inputs, or run it once")
        return math.prod(last)

    def check_rows(self, features: NDArray[Any]) -> None:
        """A ShapeError naming the first layer and both shapes, for rows it cannot take."""
        if self.inputs is not None and tuple(features.shape[1:]) != self.inputs:
            raise ShapeError(
                f"{self.layers[0].label} takes rows of shape {self.inputs}, "
                f"but the features have shape {tuple(features.shape)} "
                f"(rows of shape {tuple(features.shape[1:])})"
                + channels_last_hint(tuple(features.shape[1:]), self.inputs)
            )

    # --- slots -----------------------------------------------------------------------------
    def initialize(self, generator: Generator) -> None:
        """Draw first values for every slot (Glorot-uniform weights, zero biases), in order."""
        self._values = {name: spec.initial(generator) for name, spec in self.specs.items()}

    @property
    def initialized(self) -> bool:
        return self._values is not None or self._bound is not None

    @property
    def slots(self) -> dict[str, NDArray[np.float32]]:
        """A host copy of every slot's values (brought back from the engine during a run)."""
        if self._bound is not None:
            engine = self._bound.engine
            return {name: engine.get(t.handle) for name, t in self._bound.tensors.items()}
        if self._values is None:
            return {}
        return {name: value.copy() for name, value in self._values.items()}

    def set_slots(self, values: Mapping[str, Any]) -> None:
        """Replace every slot's values (names and shapes must match the network's)."""
        checked = {}
        for name, spec in self.specs.items():
            if name not in values:
                raise ShapeError(f"slot {name!r} is missing; the network has {list(self.specs)}")
            value = np.ascontiguousarray(values[name], dtype=np.float32)
            if value.shape != spec.shape:
                raise ShapeError(
                    f"slot {name!r} has shape {value.shape}, the network's is {spec.shape}"
                )
            checked[name] = value
        extra = set(values) - set(self.specs)
        if extra:
            raise ShapeError(f"slots {sorted(extra)} are not the network's ({list(self.specs)})")
        if self._bound is not None:
            raise StateError("a run is training this network: set its slots before or after")
        self._values = checked

    def bind(self, engine: Engine) -> Bound:
        """Put the slots on `engine` for a run; the network reads them from there until `release`."""
        with self._binding:
            if self._bound is not None:
                raise StateError(
                    "this network is already bound to a run; one run at a time: close the "
                    "other trainer first (trainer.close(), or use it in a with block)"
                )
            bound = self.put(engine)
            self._bound = bound
        return bound

    def put(self, engine: Engine, values: Mapping[str, NDArray[np.float32]] | None = None) -> Bound:
        """The slots (or `values` of them) on `engine` in one transfer, without binding."""
        values = self._values if values is None else values
        if values is None:
            raise StateError("the network has no slot values yet: train it or load it")
        if not self.specs:
            return Bound(engine, {}, [{} for _ in self.layers])
        # One flat tensor, its parts the slots: one transfer, and one pass for an optimizer.
        shapes = [spec.shape for spec in self.specs.values()]
        flat = engine.put(np.concatenate([values[name].ravel() for name in self.specs]))
        handles = parts(engine, flat, shapes)
        tensors = {
            name: Tensor(handle, shape, engine)
            for name, handle, shape in zip(self.specs, handles, shapes)
        }
        per_layer = [{slot: tensors[name] for slot, name in names} for names in self._names]
        return Bound(engine, tensors, per_layer)

    def release(self) -> None:
        """Bring the slots back from the engine a run trained them on."""
        with self._binding:
            if self._bound is not None:
                values = self.slots
                self._bound = None
                self._values = values

    # --- passes ----------------------------------------------------------------------------
    def forward(self, x: Tensor, bound: Bound, context: Pass) -> Tensor:
        for layer, slots in zip(self.layers, bound.per_layer):
            x = layer.forward(x, slots, context)
        return x

    @contextmanager
    def served(self, loss: Loss, engine: Engine | str | None = None) -> Iterator[Served]:
        """The current slots on the engine once, for many calls of `predict`: while a run trains
        the network, those it holds now (on the run's engine as they are, on another brought
        back from it)."""
        made = own_engine(engine)
        bound = self._bound
        if bound is None or bound.engine is not made:
            bound = self.put(made, None if bound is None else self.slots)
        yield Served(self, bound, loss)

    def predict(
        self, features: Any, loss: Loss, engine: Engine | str | None = None
    ) -> NDArray[np.float32]:
        """The predictions (the loss's link applied) for a batch of feature rows."""
        rows = np.asarray(features, dtype=np.float32)
        if self.inputs is None:
            raise ShapeError("the network is not built yet: give it inputs, or train it first")
        with self.served(loss, engine) as served:
            return served.predict(rows)

    # --- files -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": None if self.inputs is None else list(self.inputs),
            "layers": [{"kind": layer.key, "config": layer.config()} for layer in self.layers],
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "the file") -> Network:
        try:
            layers = [layer_from_json(entry) for entry in data["layers"]]
            inputs = data["inputs"]
            return cls(layers, inputs=inputs)
        except (KeyError, TypeError, ValueError) as error:
            raise FileFormatError(f"{where}: its architecture cannot be read: {error}") from None

    def metadata(self) -> dict[str, str]:
        return {
            "format": NETWORK_FORMAT,
            "format_version": FORMAT_VERSION,
            "network": json.dumps(self.to_json()),
            "deepsharp_version": __version__,
        }

    def saved_slots(self) -> dict[str, NDArray[np.float32]]:
        """The slots as a file records them: refused (StateError) where there are none yet or
        where any is not finite (a file that would not load)."""
        if not self.initialized:
            raise StateError(
                "the network has no slot values yet, so its file would not load: train it, "
                "load it, or give it inputs and initialize it first"
            )
        slots = self.slots
        for name, value in slots.items():
            if not np.all(np.isfinite(value)):
                raise StateError(
                    f"slot {name!r} holds NaN or infinite values: a file of it would not load "
                    "(a run that diverged puts back its best epoch's slots; set finite ones)"
                )
        return slots

    def save(self, path: str | os.PathLike[str]) -> None:
        """The architecture and slots in one safetensors file (no engine, no code)."""
        write_safetensors(path, self.saved_slots(), self.metadata())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Network:
        where = f"network file {os.fspath(path)!r}"
        expect = cls.expectation(where, NETWORK_FORMAT)
        tensors, metadata = read_safetensors(path, "network file", expect=expect)
        return cls.from_file(tensors, metadata, where, NETWORK_FORMAT)

    @classmethod
    def from_file(
        cls, tensors: dict[str, NDArray[Any]], metadata: dict[str, str], where: str, kind: str
    ) -> Network:
        network = cls.from_metadata(metadata, where, kind)
        network.check_slots(tensors, where)
        network._values = {name: tensors[name] for name in network.specs}
        return network

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str], where: str, kind: str) -> Network:
        """The architecture a file of `kind` records (its format checked first), without slots."""
        check_format(metadata, where, kind)
        try:
            data = json.loads(metadata["network"])
        except (KeyError, json.JSONDecodeError):
            raise FileFormatError(
                f"{where}: its metadata lacks a readable 'network' entry"
            ) from None
        return cls.from_json(data, where)

    @classmethod
    def expectation(cls, where: str, kind: str) -> Expectation:
        """What a file of `kind` must declare before its values are read: every slot of the
        architecture it records, float32 at its shape, and nothing else."""

        def expect(metadata: Mapping[str, str], declared: Mapping[str, Declared]) -> None:
            cls.from_metadata(metadata, where, kind).check_declared(declared, where)

        return expect

    def check_slots(self, tensors: Mapping[str, NDArray[Any]], where: str) -> None:
        """Refuse (a FileFormatError naming `where`) tensors that are not every slot of the
        architecture, each float32 at its shape and finite, and nothing else."""
        self.check_declared(
            {name: Declared(value.dtype, tuple(value.shape)) for name, value in tensors.items()},
            where,
        )
        for name in self.specs:
            if not np.all(np.isfinite(tensors[name])):
                raise FileFormatError(f"{where}: slot {name!r} holds NaN or infinite values")

    def check_declared(self, declared: Mapping[str, Declared], where: str) -> None:
        """Refuse (a FileFormatError naming `where`) a file's tensors, as its header declares
        them, that are not every slot of the architecture, each float32 at its shape, and
        nothing else."""
        for name, spec in self.specs.items():
            if name not in declared:
                raise FileFormatError(f"{where}: slot {name!r} is missing")
            dtype, shape = declared[name]
            if shape != spec.shape or dtype != np.float32:
                raise FileFormatError(
                    f"{where}: slot {name!r} is {dtype} of shape {shape}, "
                    f"the architecture needs float32 of shape {spec.shape}"
                )
        extra = sorted(set(declared) - set(self.specs))
        if extra:
            raise FileFormatError(f"{where}: slots the architecture does not hold: {extra}")

    def __repr__(self) -> str:
        inner = ", ".join(repr(layer) for layer in self.layers)
        return f"Network([{inner}], inputs={self.inputs})"


_LOADERS = {
    "deepsharp.trained": ": it is a trained network (network, loss and pipeline), saved by "
    "TrainedNetwork.save; load it with TrainedNetwork.load(path) (its .network is the Network)",
    "deepsharp.network": ": it is a network alone, saved by Network.save; load it with "
    "Network.load(path) (a TrainedNetwork is what fit's run.trained saves)",
    "deepsharp.checkpoint": ": it is a checkpoint of a run; load it with Checkpoint.load(path), "
    "or go on with fit(..., resume_from=path)",
}
"""What to call instead, for a file of another deepsharp kind."""


def channels_last_hint(rows: tuple[int, ...], inputs: tuple[int, ...]) -> str:
    """What to do where rows look like channels-last images of the images a network takes."""
    if len(rows) == 3 and len(inputs) == 3 and rows == (inputs[1], inputs[2], inputs[0]):
        return (
            f": these look like channels-last images (N, H, W, C); deepsharp takes (N, C, H, W), "
            f"so give x.transpose(0, 3, 1, 2) (rows of shape {inputs})"
        )
    return ""


def check_format(
    metadata: Mapping[str, str], where: str, kind: str, version: str = FORMAT_VERSION
) -> None:
    found = metadata.get("format")
    if found != kind:
        raise FileFormatError(
            f"{where} is not a {kind} file (its format says {found!r})"
            + _LOADERS.get(str(found), "")
        )
    held = metadata.get("format_version")
    if held != version:
        raise FileFormatError(
            f"{where} has format version {held!r}; this deepsharp ({__version__}) reads "
            f"version {version}: use the deepsharp that wrote it, or upgrade"
        )


class Served:
    """A network's slots on an engine, predicting batches of rows (no recording)."""

    def __init__(self, network: Network, bound: Bound, loss: Loss) -> None:
        self.network = network
        self.bound = bound
        self.loss = loss
        self.context = Pass(bound.engine, False, None)

    def predict(self, rows: NDArray[np.float32]) -> NDArray[np.float32]:
        """Predictions for `rows` (one transfer in, one out)."""
        self.network.check_rows(rows)
        engine = self.bound.engine
        outputs = self.network.forward(Tensor.put(engine, rows), self.bound, self.context)
        flat = (
            outputs.handle
            if outputs.ndim == 2
            else engine.reshape(outputs.handle, (rows.shape[0], math.prod(outputs.shape[1:])))
        )
        predicted: NDArray[np.float32] = engine.get(self.loss.link(engine, flat))
        return predicted

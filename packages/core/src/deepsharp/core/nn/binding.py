"""A network's values on an engine: its slots and buffers put there for a run or for serving.

Between runs a network's slots and buffers are host arrays. `bind` puts them on an engine for a
run — reading them then brings them back, counted — and `release` hands them back to the host.
The slots go as one flat tensor whose parts they are (one transfer, and an optimizer may update
every part in one pass), the buffers as another. A `Bound` also holds a lock: a training step
holds it from its forward pass to its update, and every read takes it, so a read from another
thread sees one step's values, whole.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.functions import parts
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine
from deepsharp.core.errors import DataError, ShapeError
from deepsharp.core.nn.layer import BufferSpec, SlotSpec, value_refusal

__all__ = ["Bound", "checked_values", "put_values"]

Values = Mapping[str, NDArray[np.float32]]


class Bound:
    """A network's slots (`tensors`) and buffers (`buffers`) on `engine`, by full name, and
    each layer's own by its short names (`per_layer`: slots and buffers together, as `forward`
    reads them; `layers` maps each layer's short names to full ones). `lock` is held by a
    training step and by every read."""

    def __init__(
        self,
        engine: Engine,
        tensors: dict[str, Tensor],
        buffers: dict[str, Tensor],
        layers: Sequence[Mapping[str, str]],
    ) -> None:
        self.engine = engine
        self.tensors = tensors
        self.buffers = buffers
        self.layers = layers
        every = {**tensors, **buffers}
        self.per_layer = [{short: every[full] for short, full in layer.items()} for layer in layers]
        self.lock = threading.RLock()

    def read(self) -> tuple[dict[str, NDArray[np.float32]], dict[str, NDArray[np.float32]]]:
        """Host copies of every slot and buffer, taken at one moment (counted transfers out)."""
        engine = self.engine
        with self.lock:
            return (
                {name: engine.get(t.handle) for name, t in self.tensors.items()},
                {name: engine.get(t.handle) for name, t in self.buffers.items()},
            )

    def copied(self) -> Bound:
        """A copy of every slot and buffer on the same engine, taken at one moment (no transfer):
        what a prediction reads while a run goes on changing these."""
        engine = self.engine
        with self.lock:
            tensors, buffers = (
                {n: Tensor(engine.copy(t.handle), t.shape, engine) for n, t in kept.items()}
                for kept in (self.tensors, self.buffers)
            )
        return Bound(engine, tensors, buffers, self.layers)


def _flat(
    engine: Engine, values: Values, shapes: Mapping[str, tuple[int, ...]]
) -> dict[str, Tensor]:
    """These values on the engine as the parts of one flat tensor (one transfer in)."""
    if not shapes:
        return {}
    names, sizes = list(shapes), list(shapes.values())
    flat = engine.put(np.concatenate([np.asarray(values[n]).ravel() for n in names]))
    return {
        name: Tensor(handle, shape, engine)
        for name, handle, shape in zip(names, parts(engine, flat, sizes), sizes)
    }


def put_values(
    engine: Engine,
    slots: Values,
    buffers: Values,
    slot_shapes: Mapping[str, tuple[int, ...]],
    buffer_shapes: Mapping[str, tuple[int, ...]],
    layers: Sequence[Mapping[str, str]],
) -> Bound:
    """Slots and buffers on `engine` (a transfer in for each kind there is), with each layer's
    mapping from its short names to full ones (`layers`, one a layer)."""
    return Bound(
        engine, _flat(engine, slots, slot_shapes), _flat(engine, buffers, buffer_shapes), layers
    )


def checked_values(
    values: Mapping[str, Any], specs: Mapping[str, SlotSpec | BufferSpec], what: str
) -> dict[str, NDArray[np.float32]]:
    """Values set for a network's slots or buffers (`what`), as float32 arrays: refused where a
    name is unknown or missing, a shape differs, or a value cannot be held (NaN, infinity, a
    variance below 0): a network never holds NaN, and its predictions would blame the rows."""
    checked = {}
    unknown = [str(name) for name in values if name not in specs]
    if unknown:  # a misspelt name first: it is why the right one is missing
        raise ShapeError(f"{what}s {unknown} are not the network's; its {what}s are {list(specs)}")
    for name, spec in specs.items():
        if name not in values:
            raise ShapeError(f"{what} {name!r} is missing; the network has {list(specs)}")
        with np.errstate(over="ignore"):  # beyond float32: infinite, refused below
            value = np.asarray(values[name], dtype=np.float32, order="C")  # 0-d kept
        if value.ndim == 0 and spec.shape != ():  # a number for a slot of one value, as before
            value = value.reshape(1)
        if value.shape != spec.shape:
            raise ShapeError(
                f"{what} {name!r} has shape {value.shape}, the network's is {spec.shape}"
            )
        refusal = value_refusal(what, name, value, spec)
        if refusal is not None:
            raise DataError(f"{refusal} (as float32): set values a network can hold")
        checked[name] = value
    return checked

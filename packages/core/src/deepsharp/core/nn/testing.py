"""Checking a layer the way every one of deepsharp's own is checked (as Keras's
`run_layer_test` does): `check_layer(Dense(4), (3,))`.

One call holds a layer to what a layer promises:
- it builds for rows of the given shape(s), and its output has the shape its build said, a row
  for each row given;
- its forward pass is a function of its inputs, slots, buffers and pass: run again, the same
  values; and in an evaluation pass each row's output is the one it gets alone;
- its way back is right: on a float64 engine (the light engine's float64 twin) the gradients of
  sum(out · r) towards every float input and every slot agree with central differences of the
  forward pass (|rule - nudged| <= 1e-7 + 1e-5·|nudged|, the contract's nudging tolerance),
  a value the layer detaches (`ops.detached`) held as the pass made it, as the way back holds it;
- on each engine named, its output and those gradients agree with the float64 ones within the
  engine's precision: 1e-5·(|ref| + max|ref|) for strict and float32 (float32 totals and
  value-by-value functions stray by far less), 8·u_h·(|ref| + max|ref|) for a mixed precision
  (u_h the half format's unit roundoff);
- its constructor's arguments survive a file: a network of it saved and loaded gives the same
  bits.
A failure raises AssertionError saying which check, which input or slot, and how far.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import PRECISIONS, Engine, make_engine
from deepsharp.core.nn.graph import Input
from deepsharp.core.nn.layer import Layer, Pass, layer_from_json
from deepsharp.core.nn.network import Network
from deepsharp.core.random import Generator
from deepsharp.engines.light._engine import ReferenceEngine  # not the package: it imports the core

__all__ = ["LayerCheck", "check_layer"]

Array = NDArray[Any]
NUDGE = 1e-6


class LayerCheck:
    """What `check_layer` found: the float64 output and gradients, and each engine's worst
    ratio of its difference to what it is allowed (at most 1)."""

    def __init__(self) -> None:
        self.output: Array | None = None
        self.gradients: dict[str, Array] = {}
        self.nudge_ratio = 0.0
        self.engine_ratios: dict[str, float] = {}


def check_layer(
    layer: Layer,
    shape: Sequence[int] | Sequence[Sequence[int]],
    *,
    inputs: Sequence[Array] | None = None,
    engines: Sequence[str | Engine] = ("light",),
    rows: int = 3,
    training: bool = True,
    seed: int = 0,
    nudged: int = 40,
) -> LayerCheck:
    """Hold `layer` to what a layer promises (see the module's docstring), on rows of `shape`
    (a list of shapes for a layer that takes several inputs). `inputs`: the batches to use (one
    an input; needed for int64 ids), else drawn from a normal. `training`: the pass is a
    training one (BatchNorm's batch statistics, Dropout's masks drawn from a fixed key).
    `nudged`: how many values of each input and slot are nudged (a sample: nudging every value
    of a large slot takes long)."""
    if isinstance(shape, np.ndarray) and shape.ndim == 1 and shape.dtype.kind in "iu":
        shape = tuple(int(size) for size in shape)  # a shape given as NumPy's array of it
    if not isinstance(shape, (tuple, list)):
        raise TypeError(
            f"check_layer: shape is one row's shape, (3,) or (1, 28, 28) (a list of them for "
            f"several inputs), not {type(shape).__name__}; the rows themselves go in inputs="
        )
    listed = bool(shape) and isinstance(shape[0], (tuple, list))
    given_shapes: list[Any] = list(shape) if listed else [shape]
    shapes = [tuple(int(size) for size in s) for s in given_shapes]
    rng = np.random.default_rng(seed)
    network = _network(layer, shapes, inputs)
    if inputs is None:
        inputs = [rng.standard_normal((rows, *s)) for s in shapes]
    # Every value one float32 holds exactly: each engine is given the same numbers.
    given = [
        x if x.dtype.kind in "iu" else x.astype(np.float32).astype(np.float64)
        for x in map(np.asarray, inputs)
    ]
    network.initialize(Generator(seed))
    slots = {
        n: (v + rng.standard_normal(v.shape) * 0.1).astype(np.float32).astype(np.float64)
        for n, v in network.slots.items()
    }
    buffers = network.buffers
    found = LayerCheck()
    reference = ReferenceEngine()
    out, grads, projection = _pass(network, reference, given, slots, buffers, training, None, seed)
    if tuple(out.shape[1:]) != network.output_shape:
        raise AssertionError(
            f"{layer.label}: its build said rows of shape {network.output_shape}, its forward "
            f"gives {tuple(out.shape[1:])}"
        )
    if out.shape[0] != len(given[0]):
        raise AssertionError(
            f"{layer.label}: its forward gives {out.shape[0]} rows for {len(given[0])} rows in; "
            "a layer gives one output row for each row it is given"
        )
    again = _output(network, reference, given, slots, buffers, training, seed)
    if again.tobytes() != out.tobytes():
        raise AssertionError(
            f"{layer.label}: its forward pass, run again on the same rows, slots and pass, gives "
            f"other values (up to {float(np.abs(again - out).max())!r} apart): it keeps state "
            "between calls (an attribute it changes, a buffer it writes in each pass); a "
            "forward pass must depend only on its inputs, slots, buffers and pass"
        )
    _rows_alone(network, reference, given, slots, buffers)
    found.output, found.gradients = out, grads
    found.nudge_ratio = _nudge(
        network, reference, given, slots, buffers, training, projection, grads, nudged, seed
    )
    for spec in engines:
        engine = make_engine(spec)
        kind = str(spec) if isinstance(spec, str) else engine.identity.name
        got_out, got_grads, _ = _pass(
            network, engine, given, slots, buffers, training, projection, seed
        )
        found.engine_ratios[kind] = _agree(kind, engine, out, grads, got_out, got_grads)
    _survives_a_file(layer, network, given, slots, buffers)
    return found


def _network(
    layer: Layer, shapes: list[tuple[int, ...]], inputs: Sequence[Array] | None
) -> Network:
    kinds = [
        "int64" if inputs is not None and np.asarray(inputs[i]).dtype.kind in "iu" else "float32"
        for i in range(len(shapes))
    ]
    symbols = [Input(s, dtype=k, name=f"x{i}") for i, (s, k) in enumerate(zip(shapes, kinds))]
    out = layer(symbols if len(symbols) > 1 else symbols[0])
    return Network(inputs=symbols, outputs=out)


def _pass(
    network: Network,
    engine: Engine,
    given: Sequence[Array],
    slots: Mapping[str, Array],
    buffers: Mapping[str, Array],
    training: bool,
    projection: Array | None,
    seed: int,
) -> tuple[Array, dict[str, Array], Array]:
    """The output, and the gradients of sum(out · projection) towards each float input and each
    slot, on `engine` (projection drawn where none is given)."""
    bound = network.put(engine, (slots, buffers))
    xs = [Tensor.put(engine, x if x.dtype.kind in "iu" else x.astype(np.float64)) for x in given]
    wanted = [*(x for x in xs if x.dtype == "float32"), *bound.tensors.values()]
    names = [*(f"input {i}" for i, x in enumerate(xs) if x.dtype == "float32"), *bound.tensors]
    context = Pass(engine, training, Generator(seed).next_key())
    with Recording(wanted) as recording:
        out = network.forward(xs, bound, context)
        output = np.asarray(engine.get(out.handle), np.float64)
        if projection is None:
            projection = np.random.default_rng(seed + 1).standard_normal(output.shape)
        r = Tensor.put(engine, projection)
        total = ops.sum(out * r)
        grads = recording.gradients(total, wanted)
    return (
        output,
        {n: np.asarray(engine.get(g), np.float64) for n, g in zip(names, grads)},
        projection,
    )


def _output(
    network: Network,
    engine: Engine,
    given: Sequence[Array],
    slots: Mapping[str, Array],
    buffers: Mapping[str, Array],
    training: bool,
    seed: int,
) -> Array:
    bound = network.put(engine, (slots, buffers))
    xs = [Tensor.put(engine, x) for x in given]
    out = network.forward(xs, bound, Pass(engine, training, Generator(seed).next_key()))
    return np.asarray(engine.get(out.handle), np.float64)


def _rows_alone(
    network: Network,
    engine: Engine,
    given: Sequence[Array],
    slots: Mapping[str, Array],
    buffers: Mapping[str, Array],
) -> None:
    """In an evaluation pass, each row's output is the one it gets alone: serving passes rows
    in chunks (the last one padded), so no row's answer may depend on its company. Within
    1e-9 of the row's largest value: the float64 engine may add a row's terms in another
    order alone (a matrix-vector product) than among others."""
    together = _output(network, engine, given, slots, buffers, False, 0)
    for row in range(len(together) if len(together) > 1 else 0):
        alone = _output(
            network, engine, [x[row : row + 1] for x in given], slots, buffers, False, 0
        )
        ref = together[row : row + 1]
        apart = float(np.abs(alone - ref).max()) if ref.size else 0.0
        if not apart <= 1e-9 * (float(np.abs(ref).max()) if ref.size else 0.0) + 1e-300:
            raise AssertionError(
                f"{network.layers[0].label}: in an evaluation pass, row {row}'s output among "
                f"{len(together)} rows is {apart!r} from its output alone: a row's output must "
                "come from that row alone (predict serves rows in chunks, the last one padded)"
            )


def _nudge(
    network: Network,
    engine: Engine,
    given: Sequence[Array],
    slots: Mapping[str, Array],
    buffers: Mapping[str, Array],
    training: bool,
    projection: Array,
    grads: Mapping[str, Array],
    nudged: int,
    seed: int,
) -> float:
    """The worst |rule - nudged| / (1e-7 + 1e-5·|nudged|) over a sample of every float input's
    and every slot's values."""
    worst = 0.0
    values = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in given]
    held = _Held()
    with held.recording():  # the pass's detached values, held in the nudged passes
        _output(network, engine, values, slots, buffers, training, seed)
    rng = np.random.default_rng(seed + 2)
    for name, gradient in grads.items():
        is_input = name.startswith("input ")
        base = values[int(name.split()[1])] if is_input else np.asarray(slots[name])
        places = list(np.ndindex(base.shape))
        chosen = [places[i] for i in rng.permutation(len(places))[:nudged]]
        for place in chosen:
            sides = []
            for step in (NUDGE, -NUDGE):
                moved = base.copy()
                moved[place] += step
                now, changed = list(values), dict(slots)
                if is_input:
                    now[int(name.split()[1])] = moved
                else:
                    changed[name] = moved
                with held.replaying():
                    out = _output(network, engine, now, changed, buffers, training, seed)
                sides.append(float(np.sum(out * projection)))
            expected = (sides[0] - sides[1]) / (2 * NUDGE)
            ratio = abs(gradient[place] - expected) / (1e-7 + 1e-5 * abs(expected))
            if ratio > 1.0:
                raise AssertionError(
                    f"{network.layers[0].label}: the gradient towards {name} at {place} is "
                    f"{float(gradient[place])!r}, nudging says {float(expected)!r}: its way back "
                    "is wrong"
                )
            worst = max(worst, ratio)
    return worst


class _Held:
    """The values a pass detached (`ops.detached`), recorded in order, then handed back in that
    order in the passes that nudge an input or a slot: what the way back takes as a constant is
    one in the nudging too."""

    def __init__(self) -> None:
        self.values: list[Array] = []
        self.at = 0

    @contextmanager
    def recording(self) -> Iterator[None]:
        def record(x: Tensor) -> Tensor:
            self.values.append(np.asarray(x.engine.get(x.handle)))
            return x

        token = ops.HELD_DETACHED.set(record)
        try:
            yield
        finally:
            ops.HELD_DETACHED.reset(token)

    @contextmanager
    def replaying(self) -> Iterator[None]:
        self.at = 0

        def replay(x: Tensor) -> Tensor:
            if self.at >= len(self.values):
                raise AssertionError(
                    "the layer detaches more values in a nudged pass than in the pass before: "
                    "its forward pass must make the same calls whatever its values"
                )
            value, self.at = self.values[self.at], self.at + 1
            return Tensor.put(x.engine, value)

        token = ops.HELD_DETACHED.set(replay)
        try:
            yield
        finally:
            ops.HELD_DETACHED.reset(token)


def _agree(
    kind: str,
    engine: Engine,
    out: Array,
    grads: Mapping[str, Array],
    got_out: Array,
    got_grads: Mapping[str, Array],
) -> float:
    precision = PRECISIONS.get(engine.identity.precision or "strict")
    factor = 8.0 * precision.half_unit if precision is not None and precision.mixed else 1e-5
    worst = 0.0
    for what, ref, got in [
        ("output", out, got_out),
        *((f"gradient towards {n}", grads[n], got_grads[n]) for n in grads),
    ]:
        allowed = factor * (np.abs(ref) + (np.abs(ref).max() if ref.size else 0.0)) + 1e-30
        ratio = float((np.abs(got - ref) / allowed).max()) if ref.size else 0.0
        if not math.isfinite(ratio) or ratio > 1.0:
            raise AssertionError(
                f"on {kind}: the {what} strays {float(np.abs(got - ref).max())!r} from the "
                f"float64 one, {ratio:.3g} times what its precision allows"
            )
        worst = max(worst, ratio)
    return worst


def _survives_a_file(
    layer: Layer,
    network: Network,
    given: Sequence[Array],
    slots: Mapping[str, Array],
    buffers: Mapping[str, Array],
) -> None:
    entry = {"kind": layer.key, "name": layer.name, "config": layer.config()}
    again = layer_from_json(entry)
    if again.config() != layer.config():
        raise AssertionError(
            f"{layer.label}: its config {layer.config()!r} comes back from a file as {again.config()!r}"
        )
    network.set_slots({n: v.astype(np.float32) for n, v in slots.items()})
    network.set_buffers(buffers)
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        # (a layer of the script being run is warned of where one saves a file, not here)
        warnings.filterwarnings("ignore", message=r".*defined in the script being run")
        path = Path(folder) / "layer.safetensors"
        network.save(path)
        loaded = Network.load(path)
    engine = make_engine("light")
    xs = [x if x.dtype.kind in "iu" else x.astype(np.float32) for x in given]
    context = Pass(engine, False, None)
    before = network.forward([Tensor.put(engine, x) for x in xs], network.put(engine), context)
    after = loaded.forward([Tensor.put(engine, x) for x in xs], loaded.put(engine), context)
    if engine.get(before.handle).tobytes() != engine.get(after.handle).tobytes():
        raise AssertionError(f"{layer.label}: a network of it saved and loaded serves other bits")

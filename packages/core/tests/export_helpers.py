"""Helpers of the export tests: raw rows as onnxruntime's feeds, the bound a served prediction is
held to, and random graphs of every layer kind."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.contracts.propagated import Propagated, bounded_predictions
from deepsharp.core import (
    Add,
    AvgPool2D,
    BatchNorm,
    BinaryCrossEntropy,
    Concatenate,
    Conv1D,
    Conv2D,
    CrossEntropy,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    Gelu,
    Generator,
    GlobalAvgPool,
    Input,
    LayerNorm,
    LeakyRelu,
    Loss,
    MaxPool2D,
    MeanSquaredError,
    MultiHeadAttention,
    Network,
    PositionalEmbedding,
    Relu,
    Reshape,
    SequencePool,
    Sigmoid,
    Silu,
    Softmax,
    Tanh,
    TransformerBlock,
)
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.nn.graph import Symbol
from deepsharp.core.nn.layer import Layer, Pass, carry_mask
from deepsharp.engines.light import LightEngine

FEATURE_ROUNDING = 2.0**-23
"""How far an exported pipeline's features may be from deepsharp's, relative to each: it rounds
its own float64 values to float32 (at most one unit in the last place apart)."""


def session(path: str | Path) -> Any:
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def metadata(path: str | Path) -> dict[str, str]:
    import onnx

    return {entry.key: entry.value for entry in onnx.load(str(path)).metadata_props}


def feeds(served: Any, rows: Sequence[dict[str, Any]]) -> dict[str, NDArray[Any]]:
    """Raw rows as an exported file takes them: a number column float64 (NaN where missing),
    text stripped ('' where missing), an image its values in float64."""
    made: dict[str, NDArray[Any]] = {}
    for entry in served.get_inputs():
        values = [row[entry.name] for row in rows]
        if entry.type == "tensor(double)":
            made[entry.name] = np.array(
                [
                    np.full(entry.shape[1], np.nan)
                    if value is None or (isinstance(value, str) and not value.strip())
                    else np.asarray(value, np.float64).reshape(-1)
                    for value in values
                ],
                np.float64,
            ).reshape(len(rows), entry.shape[1])
        else:
            made[entry.name] = np.array(
                ["" if value is None else str(value).strip() for value in values], object
            ).reshape(-1, 1)
    return made


def within_bound(
    got: NDArray[Any],
    network: Network,
    loss: Loss,
    features: Sequence[NDArray[Any]],
    input_error: float = 0.0,
    unbounded: list[float] | None = None,
) -> float:
    """Assert onnxruntime's predictions lie within the float32 family's bound, propagated
    through the network, of the exact ones (and light's within the strict bound, as a check of
    the bound itself); the largest share of its bound onnxruntime used.

    Where the contract bounds nothing, a row's bound is infinite: through a mask (its 0s and 1s
    times float32's lowest, each within the value tolerance's 1e-5), or a LayerNorm of values whose spread
    is within that 1e-5 of nothing. Such rows are held to light's predictions within the value
    tolerance; `unbounded` gets their share."""
    exact, bound = bounded_predictions(network, loss, features, "float32", input_error)
    assert got.shape == exact.shape, (got.shape, exact.shape)
    light = network.predict(list(features) if len(features) > 1 else features[0], loss)
    exact_strict, strict = bounded_predictions(network, loss, features, "strict")
    held = np.isfinite(strict)
    assert (np.abs(light - exact_strict)[held] <= strict[held]).all()
    finite = np.isfinite(bound).all(axis=1)
    if unbounded is not None:
        unbounded.append(float(1.0 - finite.mean()))
    loose = ~finite
    apart = np.abs(got[loose] - light[loose])
    assert (apart <= 1e-5 + 1.3e-6 * np.abs(light[loose])).all(), (
        f"where the contract bounds nothing, onnxruntime is {apart.max():.3g} from light"
    )
    got, exact, bound = got[finite], exact[finite], bound[finite]
    over = np.abs(got - exact) > bound
    assert not over.any(), (
        f"onnxruntime's prediction {got[over][0]!r} is {np.abs(got - exact)[over][0]:.3g} from "
        f"the exact {exact[over][0]!r}, beyond the bound {bound[over][0]:.3g}"
    )
    return _share(np.abs(got - exact), bound)


def _share(apart: NDArray[Any], bound: NDArray[Any]) -> float:
    """The largest share of its bound a value used (a bound of 0 is met only by 0 apart)."""
    held = bound > 0
    return float((apart[held] / bound[held]).max()) if held.any() else 0.0


def layered(network: Network, loss: Loss, path: Path, trained: Any = None) -> Any:
    """The network (or trained network) exported with every layer's output an output too, and
    its onnxruntime session."""
    import onnx

    from deepsharp.core.export.model import network_model, trained_model

    if trained is not None:
        model = trained_model(trained, layers=True)
    else:
        model = network_model(network, loss=loss, layers=True)
    onnx.save(model, str(path))
    return session(path)


def layers_within_bound(network: Network, outputs: dict[str, NDArray[Any]]) -> tuple[float, int]:
    """Hold each layer of an exported file, as onnxruntime ran it (`outputs`: a layered file's,
    by name), to the float32 family's bound propagated through that layer alone from the inputs
    onnxruntime gave it: errors do not compound from layer to layer, so every layer is held,
    however deep the network. Where the contract bounds nothing (a mask's float32 lowest), the layer is
    held to light's output from the same inputs within the value tolerance. The largest share
    of its bound a layer used, and how many layers were held to light's instead."""
    engine, light = Propagated("float32"), LightEngine()
    bounds, lights = network.put(engine), network.put(light)  # type: ignore[arg-type]
    count = len(network.input_specs)
    values = [outputs[f"input {k}"] for k in range(count)]
    masks = {k: outputs.get(f"input {k} mask") for k in range(count)}
    worst, loose = 0.0, 0
    for place, node in enumerate(network.graph.nodes):
        layer = network.layers[node.layer]
        made = []
        for on, kept in ((engine, bounds), (light, lights)):
            xs = []
            for source in node.sources:
                array = values[source]
                kind = "int64" if array.dtype.kind in "iu" else "float32"
                x = Tensor(on.put(array), array.shape, on, None, kind)  # type: ignore[arg-type]
                if masks.get(source) is not None:
                    mask = masks[source]
                    x.mask = Tensor(on.put(mask), mask.shape, on)  # type: ignore[arg-type]
                xs.append(x)
            x_in: Any = xs if len(xs) > 1 else xs[0]
            context = Pass(on, False, None)  # type: ignore[arg-type]
            made.append(carry_mask(layer.forward(x_in, kept.per_layer[node.layer], context), x_in))
        got = outputs[f"layer {place}"]
        values.append(got)
        masks[count + place] = outputs.get(f"layer {place} mask")
        exact, bound = made[0].handle.value, made[0].handle.bound
        assert got.shape == exact.shape, (layer.label, got.shape, exact.shape)
        finite = np.isfinite(bound)
        if not finite.all():
            loose += 1
            ours = light.get(made[1].handle)
            apart = np.abs(got[~finite] - ours[~finite])
            assert (apart <= 1e-5 + 1.3e-6 * np.abs(ours[~finite])).all(), (
                f"{layer.label}: where the contract bounds nothing, onnxruntime is "
                f"{apart.max():.3g} from light"
            )
        over = (np.abs(got - exact) > bound) & finite
        assert not over.any(), (
            f"{layer.label}: onnxruntime's {got[over][0]!r} is {np.abs(got - exact)[over][0]:.3g} "
            f"from the exact {exact[over][0]!r}, beyond the bound {bound[over][0]:.3g}"
        )
        worst = max(worst, _share(np.abs(got - exact)[finite], bound[finite]))
    return worst, loose


def described_inputs(path: str | Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(metadata(path)["deepsharp.inputs"])
    return found


# --- random graphs ------------------------------------------------------------------------------


class Graphs:
    """Random graphs of every layer kind: `make(seed)` gives a network of one to two inputs,
    its loss, inputs to feed it, and the kinds it holds."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.random = np.random.default_rng(seed)
        self.kinds: set[str] = set()
        self.masked = False  # a sequence of an Embedding's: no channels-first layer takes it

    def pick(self, options: Sequence[Any]) -> Any:
        return options[int(self.random.integers(len(options)))]

    def size(self, low: int, high: int) -> int:
        return int(self.random.integers(low, high + 1))

    def use(self, layer: Layer, x: Symbol | list[Symbol], kind: str | None = None) -> Symbol:
        self.kinds.add(kind or layer.kind)
        return layer(x)

    # one step from a symbol of each shape
    def rows(self, x: Symbol) -> Symbol:
        (features,) = x.shape
        steps: list[Callable[[], Symbol]] = [
            lambda: self.use(
                Dense(
                    self.size(2, 9),
                    activation=self.pick(
                        [None, "relu", "tanh", "sigmoid", "silu", "leaky_relu", "softmax", "gelu"]
                    ),
                ),
                x,
            ),
            lambda: self.use(self.pick(self._activations())(), x),
            lambda: self.use(LeakyRelu(float(self.random.uniform(0.0, 0.5))), x),
            lambda: self._normalized(x),
            lambda: self.use(BatchNorm(), x),
            lambda: self.use(Dropout(0.3), x),
            lambda: self.use(Add(), [x, self.use(Dense(features), x)]),
            lambda: self.use(Concatenate(), [x, self.use(Dense(self.size(1, 4)), x)]),
        ]
        if features % 2 == 0 and features >= 4:
            steps.append(lambda: self.use(Reshape((features // 2, 2)), x))
        return self.pick(steps)()

    def _normalized(self, x: Symbol) -> Symbol:
        """LayerNorm over at least 6 values (of few, the spread is often within the value
        tolerance of nothing, where the contract bounds nothing)."""
        if x.shape[-1] < 6:
            x = self.use(Dense(self.size(6, 9)), x)
        return self.use(LayerNorm(), x)

    def _block(self, x: Symbol) -> Symbol:
        """A TransformerBlock over rows of six values or more (its LayerNorms: see
        `_normalized`)."""
        if x.shape[-1] < 6:
            x = self.use(Dense(6), x)
        heads = [h for h in (1, 2, 3) if x.shape[-1] % h == 0]
        causal = bool(self.size(0, 1))
        return self.use(TransformerBlock(self.pick(heads), self.size(4, 8), causal=causal), x)

    def _activations(self) -> list[type[Layer]]:
        return [Relu, Sigmoid, Tanh, Softmax, Silu, Gelu]

    def sequence(self, x: Symbol) -> Symbol:
        length, width = x.shape
        steps: list[Callable[[], Symbol]] = [
            lambda: self.use(Dense(self.size(2, 6), activation=self.pick([None, "relu"])), x),
            lambda: self._normalized(x),
            lambda: self.use(self.pick(self._activations())(), x),
            lambda: self.use(
                Conv1D(
                    self.size(1, 4),
                    self.size(1, min(3, width)),
                    padding=self.pick(["valid", "same"]),
                ),
                self._channels_first(x),
            ),
            lambda: self.use(Concatenate(axis=-1), [x, self.use(Dense(2), x)]),
            lambda: self.use(BatchNorm(), x),
            lambda: self.use(GlobalAvgPool(), self._channels_first(x)),
            lambda: self.use(SequencePool(self.pick(["mean", "max"])), x),
            lambda: self.use(Flatten(), x),
            lambda: self.use(PositionalEmbedding(length + self.size(0, 2), width), x),
        ]
        heads = [h for h in (1, 2, 3) if width % h == 0]
        steps += [
            lambda: self.use(MultiHeadAttention(self.pick(heads), causal=bool(self.size(0, 1))), x),
            lambda: self._block(x),
        ]
        return self.pick(steps)()

    def image(self, x: Symbol) -> Symbol:
        channels, height, width = x.shape
        pools: list[Any] = [2, (3, 2) if height >= 3 else 2]
        steps: list[Callable[[], Symbol]] = [
            lambda: self.use(
                Conv2D(
                    self.size(1, 4),
                    self.pick([k for k in (1, 2, 3, (2, 3)) if _fits(k, height, width)]),
                    stride=self.pick([1, 1, 2]),
                    padding=self.pick(["valid", "same"]),
                    activation=self.pick([None, "relu", "tanh"]),
                ),
                x,
            ),
            lambda: self._pool(MaxPool2D, pools, x),
            lambda: self._pool(AvgPool2D, [2, (2, 3)], x),
            lambda: self._pool(MaxPool2D, pools, x),
            lambda: self._pool(AvgPool2D, [2, (3, 2)], x),
            lambda: self.use(BatchNorm(), x),
            lambda: self.use(GlobalAvgPool(), x),
            lambda: self.use(Flatten(), x),
            lambda: self.use(Reshape((channels, height * width)), x),
            lambda: self.use(Add(), [x, self.use(Conv2D(channels, 3, padding="same"), x)]),
            lambda: self.use(Concatenate(axis=1), [x, self.use(Conv2D(2, 3, padding="same"), x)]),
        ]
        return self.pick(steps)()

    def _pool(self, kind: type[Layer], sizes: list[Any], x: Symbol) -> Symbol:
        size = self.pick(sizes)
        pair = isinstance(size, tuple) and size[0] != size[1]
        _, height, width = x.shape
        fits = (size, size) if not isinstance(size, tuple) else size
        if fits[0] > height or fits[1] > width:
            return self.use(Relu(), x)
        label = f"{kind.__name__} pair" if pair and kind is MaxPool2D else None
        return self.use(kind(size), x, label)  # type: ignore[call-arg]

    def _channels_first(self, x: Symbol) -> Symbol:
        """A sequence of an Embedding's as one signal of one channel (its mask dropped):
        Conv1D and GlobalAvgPool refuse a sequence of positions."""
        if not self.masked:
            return x
        return self.use(Reshape((1, x.shape[0] * x.shape[1])), x)

    def step(self, x: Symbol) -> Symbol:
        if len(x.shape) == 1:
            return self.rows(x)
        if len(x.shape) == 2:
            return self.sequence(x)
        if min(x.shape[1:]) < 2:
            return self.use(Flatten(), x)
        return self.image(x)

    def make(self) -> tuple[Network, Loss, list[NDArray[Any]]]:
        start = ["rows", "image", "sequence", "two", "ids", "image"][self.seed % 6]
        rows = 23
        inputs: list[Input] = []
        feeds: list[NDArray[Any]] = []
        if start == "rows":
            x = Input(self.size(3, 10), name="features")
            inputs, heads = [x], [x]
        elif start == "image":
            x = Input((self.size(1, 3), self.size(4, 9), self.size(4, 9)), name="images")
            inputs, heads = [x], [x]
        elif start == "sequence":
            x = Input((self.size(2, 6), self.size(2, 5)), name="signals")
            inputs, heads = [x], [x]
        elif start == "two":
            a, b = Input(self.size(2, 6), name="a"), Input(self.size(2, 6), name="b")
            inputs = [a, b]
            heads = [self.use(Concatenate(), [a, b])]
        else:
            ids = Input(self.size(2, 6), dtype="int64", name="ids")
            numbers = Input(3, name="numbers")
            inputs = [ids, numbers]
            heads = [self.use(Embedding(11, self.pick([3, 6])), ids)]  # id 0: padding
            self.masked = True
        h = heads[0]
        if start == "image":  # every kind of images met early, by turns
            first = [(MaxPool2D, 2), (MaxPool2D, (2, 3)), (AvgPool2D, 2), (AvgPool2D, (3, 2)), None]
            chosen = first[self.seed // 6 % len(first)]
            if chosen is not None:
                h = self._pool(chosen[0], [chosen[1]], h)
        for _ in range(self.size(2, 5)):
            h = self.step(h)
        if len(h.shape) > 1:
            h = self.use(Flatten(), h)
        if start == "ids":
            h = self.use(Concatenate(), [h, inputs[1]])
        ending = self.seed % 5  # each loss and link by turns
        loss: Loss = [
            MeanSquaredError(),
            BinaryCrossEntropy(),
            CrossEntropy(),
            BinaryCrossEntropy(from_logits=False),  # after a Sigmoid
            CrossEntropy(from_logits=False),  # after a Softmax
        ][ending]
        outputs = 1 if isinstance(loss, BinaryCrossEntropy) else self.size(2, 4)
        out = self.use(Dense(outputs), h)
        if ending == 3:
            out = self.use(Sigmoid(), out)
        elif ending == 4:
            out = self.use(Softmax(), out)
        network = Network(inputs=inputs if len(inputs) > 1 else inputs[0], outputs=out)
        network.initialize(Generator(int(self.random.integers(1 << 30))))
        slots = {
            name: value + self.random.normal(0, 0.2, value.shape).astype(np.float32)
            for name, value in network.slots.items()
        }
        network.set_slots(slots)
        buffers = {  # (a causal mask's triangle kept: its 0s and 1s are what it is)
            name: value
            if name.endswith(".causal")
            else (
                self.random.uniform(0.5, 2.0, value.shape)
                if name.endswith("variance")
                else self.random.normal(0, 0.5, value.shape)
            ).astype(np.float32)
            for name, value in network.buffers.items()
        }
        network.set_buffers(buffers)
        for spec in network.input_specs:
            assert spec.shape is not None
            if spec.dtype == "int64":
                feeds.append(self.random.integers(0, 11, (rows, *spec.shape)).astype(np.int64))
            else:
                feeds.append(self.random.normal(0, 1, (rows, *spec.shape)).astype(np.float32))
        return network, loss, feeds


def _fits(kernel: int | tuple[int, int], height: int, width: int) -> bool:
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    return kh <= height and kw <= width


EVERY_KIND = {
    "Dense",
    "Dropout",
    "Flatten",
    "Reshape",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "Gelu",
    "Silu",
    "LeakyRelu",
    "Conv2D",
    "Conv1D",
    "MaxPool2D",
    "MaxPool2D pair",
    "AvgPool2D",
    "GlobalAvgPool",
    "SequencePool",
    "Add",
    "Concatenate",
    "BatchNorm",
    "LayerNorm",
    "Embedding",
    "PositionalEmbedding",
    "MultiHeadAttention",
    "TransformerBlock",
}
"""What the random graphs must hold between them (a max-pool over a pair counted apart)."""

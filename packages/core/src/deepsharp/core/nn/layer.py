"""What a layer is: a step of a network that declares its slots and buffers when it is built for
the shape of its input rows, and maps a batch to a batch with ordinary arithmetic on tensors.

A layer never knows an engine. Its *slots* are trained (weights, biases); its *buffers* are
state that is not trained (BatchNorm's running mean and variance): no optimizer touches them, a
training pass may update them, and files keep both. A layer is called on symbols to make a
graph (`h = Dense(16)(x)`), or listed in a chain (`Network([Dense(16), Relu()])`); the same
layer called twice shares its slots.

A layer written as code subclasses `Layer`; every subclass is registered so that a network file
can name it (deepsharp's own by their name, a user's by module and name: see
`deepsharp.core.kinds`). A file never brings code of its own: only layers already imported can
be loaded. docs/layers.md says how to write one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor, open_recording
from deepsharp.core.edits import Checked, Edited
from deepsharp.core.engine import Engine
from deepsharp.core.errors import ConfigurationError, ShapeError
from deepsharp.core.kinds import Kinds
from deepsharp.core.nn.graph import MOST_VALUES_A_ROW, Symbol, apply_layer, check_layer_name
from deepsharp.core.nn.initializers import check_initializer, initial_values
from deepsharp.core.random import Generator
from deepsharp.core.reals import brief

__all__ = [
    "LAYERS",
    "carry_mask",
    "BufferSpec",
    "Layer",
    "Pass",
    "Shape",
    "SlotSpec",
    "layer_from_json",
    "whole",
]

Shape = tuple[int, ...]
LAYERS: Kinds[Layer] = Kinds("layer kind")


def whole(layer: str, what: str, value: object, least: int = 1) -> int:
    """A whole number of at least `least` (not a bool, not 1.5), or a ValueError saying which
    argument of which layer."""
    kind = "positive whole number" if least == 1 else f"whole number of {least} or more"
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or value < least
    ):
        raise ValueError(f"{layer}: {what} must be a {kind}, not {brief(value, 80)}")
    return int(value)


@dataclass(frozen=True)
class SlotSpec:
    """A slot a layer asks for: its shape and how its first values are drawn (an initialiser's
    name, `deepsharp.core.nn.initializers`), with the fans that initialiser reads."""

    shape: Shape
    init: str = "glorot_uniform"
    fan_in: int = 0
    fan_out: int = 0

    def initial(self, generator: Generator) -> NDArray[np.float32]:
        return initial_values(self.init, self.shape, generator, self.fan_in, self.fan_out)


@dataclass(frozen=True, eq=False)
class BufferSpec:
    """A buffer a layer asks for: state that is not trained, its shape and first values
    ("zeros", "ones", or the values themselves: a causal mask's triangle)."""

    shape: Shape
    init: str | NDArray[np.float32] | Callable[[], NDArray[np.float32]] = "zeros"
    """A function: the values made where they are first asked for (a loaded network's come
    from its file, and a file's causal mask of 65,536 positions made 32 GiB first: trial HF)."""
    least: float | None = None
    """The smallest value the buffer may hold (a variance's 0), or None."""
    only: tuple[float, ...] | None = None
    """The only values the buffer may hold (a causal mask's 0 and 1), or None: a file's mask of
    other values made every blocked score infinite, and its predictions NaN."""

    def initial(self) -> NDArray[np.float32]:
        if callable(self.init):
            return self.init()
        if not isinstance(self.init, str):
            return np.array(self.init, np.float32)
        return np.full(self.shape, 1.0 if self.init == "ones" else 0.0, np.float32)


def _made_values(make: Callable[[], NDArray[Any]], shape: Shape, named: str) -> NDArray[np.float32]:
    """A buffer's values from the function its layer gave, checked of its shape."""
    values = np.array(make(), np.float32)
    if values.shape != shape:
        raise ValueError(f"{named} of shape {shape} given values of {values.shape}")
    return values


def value_refusal(
    what: str, name: str, value: NDArray[Any], spec: SlotSpec | BufferSpec
) -> str | None:
    """Why a slot's or buffer's values cannot be held (NaN or infinity; below the buffer's
    `least`), in words naming it, or None."""
    if not np.all(np.isfinite(value)):
        return f"{what} {name!r} holds NaN or infinite values"
    least = getattr(spec, "least", None)
    if least is not None and value.size and float(value.min()) < least:
        return f"{what} {name!r} holds {float(value.min()):g}, below its least value {least:g}"
    only = getattr(spec, "only", None)
    if only is not None and not np.isin(value, only).all():
        other = float(value.reshape(-1)[np.argmin(np.isin(value.reshape(-1), only))])
        shown = ", ".join(f"{v:g}" for v in only)
        return f"{what} {name!r} holds {other:g}, where it may hold only {shown}"
    return None


class Pass:
    """What one forward pass knows beyond its values: the engine, training or not, the
    generator (a training step's dropout key), and where its rows lie in the whole batch
    (`share`: (start, stop, total), when a batch is shared among processes; None: the rows are
    all of it).

    `batch_total(t)` is the total over the whole batch of a partial total this process took
    over its own rows (BatchNorm's statistics): itself in one process; under data parallelism the
    sum over every process's (`reducer`: engine, handle -> the handle summed in rank order), with
    a way back that sums the same way.
    """

    __slots__ = ("engine", "generator", "reducer", "share", "training")

    def __init__(
        self,
        engine: Engine,
        training: bool,
        generator: Generator | None,
        share: tuple[int, int, int] | None = None,
        reducer: Callable[[Engine, Any], Any] | None = None,
    ) -> None:
        self.engine = engine
        self.training = training
        self.generator = generator
        self.share = share
        self.reducer = reducer

    @property
    def batch_rows(self) -> int | None:
        """The rows of the whole batch (every process's), where the pass knows it."""
        return None if self.share is None else self.share[2]

    def batch_total(self, partial: Tensor) -> Tensor:
        if self.reducer is None or self.share is None:
            return partial
        start, stop, total = self.share
        return ops.apply(
            ops.RULES["batch_total"], (partial,), reduce=self.reducer, weight=(stop - start) / total
        )


def _trains(layer: object, value: object) -> bool:
    if isinstance(value, (bool, int, np.bool_, np.integer)) and value == 1:  # True, np.True_, 1
        return True
    raise ConfigurationError(
        f"{layer}: trainable = {value!r}: deepsharp's layers have no frozen form, every slot "
        "trains. To keep a layer's slots as they are, give the run a step hook whose "
        "gradients() gives those slots zeros (StepHook, with SGD or a fresh Adam they do not "
        "move), or train a network without the layer on its outputs"
    )


class Layer(Edited):
    """A step of a network. Subclasses implement `build` (optional) and `forward`.

    `build(shape)` receives the shape of one input row (a feature count as `(n,)`, an image as
    `(C, H, W)`, a sequence as `(L, D)`; a list of shapes for a layer that takes several inputs),
    declares slots with `self.slot(...)` and buffers with `self.buffer(...)`, and returns the
    shape of one output row. `forward(x, slots, context)` maps a batch to a batch; `slots` holds
    its slots and buffers by name, `context` is the `Pass`.
    """

    kind: ClassVar[str] = "Layer"
    key: ClassVar[str] = "Layer"
    several: ClassVar[bool] = False
    """Whether it takes a list of two or more inputs (Add, Concatenate) rather than one."""
    trainable = Checked(lambda layer, value: _trains(layer, value), default=True)
    """Every layer's slots train: `trainable = False` (Keras's, PyTorch's requires_grad) is
    refused, where it was taken and ignored, the layer trained on (trial X3)."""
    most_inputs: ClassVar[int] = 1
    """How many inputs it takes at most (a layer called on a list gets a list; on one input,
    that input): one; MultiHeadAttention two (a sequence and its mask); Add any number."""
    whole_batch: ClassVar[bool] = False
    """Whether a training pass reads statistics of the whole batch (BatchNorm): under data
    parallelism every process then needs rows of every batch."""
    takes: ClassVar[tuple[str, ...]] = ("float32",)
    """The dtypes of the inputs it takes (an embedding takes int64 ids)."""
    keeps_positions: bool | None = None
    """Whether its output keeps its inputs' positions (a sequence's: their padding mask goes
    on): None judges by the shapes (the leading two sizes kept), False for a layer whose
    output's second axis is no position of its input's (a convolution's filters, a sequence's
    last state, Flatten) however the sizes fall."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        if not cls.__name__.startswith("_"):  # a private base is no kind a file names
            cls.key = LAYERS.add(cls)

    def carried(self, x: Any, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        """`forward`, its output carrying its inputs' padding masks where it keeps their
        positions (`carry_mask`, as `keeps_positions` says): how networks run their layers."""
        out = carry_mask(self.forward(x, slots, context), x, self.keeps_positions)
        built, given = self.output_shape, self.input_shape
        if built is not None and out.shape[1:] != built:  # on rows of the shape it was built
            rows = [t.shape[1:] for t in x] if isinstance(x, (list, tuple)) else x.shape[1:]
            if rows == given:  # for: the shape its build said (trial X: the next layer, or
                raise ShapeError(  # NumPy after an epoch, was blamed)
                    f"{self.label}: its forward gives rows of shape {out.shape[1:]}, and its "
                    f"build said {built} (the shape the layers after it are built for): build "
                    "returns the shape of the rows forward gives"
                )
        return out

    def __init__(self, name: str | None = None) -> None:
        self.name: str | None = None if name is None else check_layer_name(name, self.kind)
        self.specs: dict[str, SlotSpec] = {}
        self.buffer_specs: dict[str, BufferSpec] = {}
        self.parts: dict[str, Layer] = {}
        self.input_shape: Shape | list[Shape] | None = None
        self.output_shape: Shape | None = None
        self.label = self.kind

    # --- what build declares -------------------------------------------------------------
    def slot(
        self,
        name: str,
        shape: Sequence[int],
        init: str = "glorot_uniform",
        fan_in: int = 0,
        fan_out: int = 0,
    ) -> None:
        """Declare a slot (called from `build`): trained, drawn first by `init`."""
        self._check_new(name)
        init = check_initializer(init, f"{self.label}: slot {name!r}")
        self.specs[name] = SlotSpec(tuple(int(s) for s in shape), init, fan_in, fan_out)

    def buffer(
        self,
        name: str,
        shape: Sequence[int],
        init: str | NDArray[Any] | Callable[[], NDArray[Any]] = "zeros",
        least: float | None = None,
        only: tuple[float, ...] | None = None,
    ) -> None:
        """Declare a buffer (called from `build`): state that is not trained, starting at zeros,
        ones, or the values given (an array of `shape`, or a function making it: made once its
        size is checked). A training pass may change it (`ops.assign`); no optimizer does.
        `least`: the smallest value it may hold (a variance's 0), checked where values are set
        or loaded; `only`: the only values it may hold (a mask's 0 and 1), checked so too. At
        most `MOST_VALUES_A_ROW` values."""
        self._check_new(name)
        made = tuple(int(s) for s in shape)
        if math.prod(made) > MOST_VALUES_A_ROW:
            raise ShapeError(
                f"{self.label}: buffer {name!r} of shape {made} would hold "
                f"{math.prod(made):,} values, beyond the {MOST_VALUES_A_ROW:,} a layer may keep"
            )
        if callable(init):
            self.buffer_specs[name] = BufferSpec(
                made, functools.partial(_made_values, init, made, f"{self.label}: buffer {name!r}"),
                least, only,
            )  # fmt: skip
            return
        if isinstance(init, str):
            if init not in ("zeros", "ones"):
                raise ValueError(
                    f"{self.label}: buffer {name!r} starts at 'zeros', 'ones' or values given, "
                    f"not {init!r}"
                )
            self.buffer_specs[name] = BufferSpec(made, init, least, only)
            return
        values = np.array(init, np.float32)
        if values.shape != made:
            raise ValueError(
                f"{self.label}: buffer {name!r} of shape {made} given values of {values.shape}"
            )
        self.buffer_specs[name] = BufferSpec(made, values, least, only)

    def sublayer(self, name: str, layer: Layer, shape: Shape | list[Shape]) -> Shape:
        """Build `layer` as a part of this one (called from `build`): its slots and buffers are
        this layer's, named '<name>.<slot>'. `self.call(name, x, slots, context)` runs it."""
        self._check_new(name)
        twice = next((held for held, part in self.parts.items() if part is layer), None)
        if twice is not None:  # two parts of one object would still train two sets of slots
            raise ValueError(
                f"{self.label}: the layer given as part {name!r} is already its part {twice!r}: "
                f"a part is a layer of its own; to use one part's slots twice, call it twice "
                f"(self.call({twice!r}, ...))"
            )
        layer.label = f"{self.label}'s {name}"
        out = layer.built_for(shape)
        self.parts[name] = layer
        for slot, spec in layer.specs.items():
            self.specs[f"{name}.{slot}"] = spec
        for buffer, given in layer.buffer_specs.items():
            self.buffer_specs[f"{name}.{buffer}"] = given
        return out

    def call(self, name: str, x: Any, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        """Run the part `name` (a `sublayer`) on x, with its own slots and buffers."""
        prefix = f"{name}."
        own = {key[len(prefix) :]: value for key, value in slots.items() if key.startswith(prefix)}
        recording = open_recording()
        if recording is None:
            return self.parts[name].carried(x, own, context)
        outer = recording.layer  # a recorded pass names the part's nodes '<layer>.<part>'
        recording.layer = f"{outer}.{name}" if outer else name
        try:
            return self.parts[name].carried(x, own, context)
        finally:
            recording.layer = outer

    def _check_new(self, name: str) -> None:
        if not isinstance(name, str) or not name or name in self.specs or name in self.buffer_specs:
            raise ValueError(f"{self.label}: a slot or buffer named {name!r} twice, or no name")

    # --- what a subclass writes ----------------------------------------------------------
    def build(self, shape: Any) -> Any:
        return shape

    def forward(self, x: Any, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement forward")

    def config(self) -> dict[str, Any]:
        """The constructor's arguments but the name, as JSON values (what a network file
        records)."""
        return {}

    def meets_input(self, shape: Shape) -> None:
        """Called when a network is built, for a layer that reads one of its inputs directly,
        with that input's row shape (a convolution warns of channels-last images)."""

    def check_input(self, values: NDArray[Any], where: str) -> None:
        """Called on the host with the values of an input this layer reads directly, before they
        go to the engine: refuse (DataError naming `where`) values it cannot take (an embedding,
        ids outside its vocabulary).

        By default a layer of one input that takes ids hands them to its parts that take ids
        (an `Embedding` built by `sublayer`) to check: an engine can do little with ids but look
        rows up, so the ids a part gets are those the layer got. Override it to check otherwise."""
        if self.several or self.takes[:1] != ("int64",):
            return
        for part in self.parts.values():
            if part.takes[:1] == ("int64",):
                part.check_input(values, where)

    def values_a_row(self) -> int:
        """The most values one tensor of its pass holds a row, as far as it knows once built: its
        output's, its parts' (a transformer block's inner layer); an attention's scores too. A
        network read from a file is held to `MOST_VALUES_A_ROW` of them (`nn/saving.py`)."""
        shapes = self.output_shape if isinstance(self.output_shape, list) else [self.output_shape]
        own = sum(math.prod(shape) for shape in shapes if shape is not None)
        return max([own, *(part.values_a_row() for part in self.parts.values())])

    @property
    def ends_in(self) -> str | None:
        """What its outputs are, where a loss must know: "sigmoid" (probabilities of a
        sigmoid), "softmax" (of a softmax), or None (anything else, such as logits)."""
        return None

    # --- building ----------------------------------------------------------------------------
    def built_for(self, shape: Shape | list[Shape]) -> Shape:
        """Build for rows of `shape` (declaring slots and buffers afresh); the output row shape."""
        self.specs, self.buffer_specs, self.parts = {}, {}, {}
        self.input_shape = shape
        made = self.build(list(shape) if isinstance(shape, list) else shape)
        if isinstance(made, (int, np.integer)) and not isinstance(made, bool):
            made = (made,)
        if not isinstance(made, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in made
        ):
            raise ConfigurationError(
                f"{self.label}: build must return the shape of one output row (a tuple of sizes, "
                f"such as `return shape` where it keeps its input's), not {made!r}"
            )
        self.output_shape = tuple(int(n) for n in made)
        return self.output_shape

    def __call__(self, inputs: Symbol | Sequence[Symbol], **given: Any) -> Symbol:
        """This layer applied to symbols (`Input`s, or other layers' outputs): a symbol of its
        output, for `Network(inputs=..., outputs=...)`."""
        if given:  # Keras's training=, mask=
            raise TypeError(
                f"{self.kind}() is called on symbols alone, not with {', '.join(given)}=: "
                "whether a pass trains is the run's to say (fit trains, predict serves), and a "
                "padding mask travels with the symbols (Embedding(mask_zero=True))"
            )
        return apply_layer(self, inputs)

    def described(self) -> str:
        """Its kind and constructor's arguments, without its name: `Dense(units=16)`."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{self.kind}({args})"

    def __repr__(self) -> str:
        if self.name is None:
            return self.described()
        args = ", ".join([*(f"{k}={v!r}" for k, v in self.config().items()), f"name={self.name!r}"])
        return f"{self.kind}({args})"


def _kind(value: object) -> str:
    """A value's type, with its module where that is not Python's own (numpy.ndarray, a torch
    Tensor's torch.Tensor: not deepsharp's Tensor)."""
    kind = type(value)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def carry_mask(out: Tensor, given: Any, keeps: bool | None = None) -> Tensor:
    """A layer's output carries on its inputs' padding masks (1 where a token is, 0 where
    padding is), where it made no mask of its own: where it keeps the batch's positions (the
    same leading two sizes: a layer of one input, `Add`, `Concatenate` of features, a
    `Reshape` of each position's values), a position is padding where any masked input's is
    (the masks multiplied, whatever the inputs' order); where it joins its inputs' positions
    one after another (`Concatenate(axis=1)`), the masks are joined the same way, an input
    without one taking every position as a token's. None where the layer says its output keeps
    no positions (`keeps=False`: a convolution's filters, a sequence's last state, Flatten,
    however the sizes fall), nor on an output of one value a row's place, (N, k), from a
    sequence of several values a place: no positions are left (as in Keras)."""
    if not isinstance(out, Tensor):
        recording = open_recording()
        layer = f"layer {recording.layer!r}" if recording and recording.layer else "a layer"
        raise ConfigurationError(
            f"{layer}: its forward gave {_kind(out)} {_brief(out)}, where one tensor "
            "belongs: "
            + (
                "a layer computes with the tensors it is given (their operators and "
                "deepsharp.core.autodiff.functions), not with "
                f"{type(out).__module__.partition('.')[0]}'s arrays, whose values leave the "
                "engine and the way back"
                if hasattr(out, "__array__") and not isinstance(out, (list, tuple))
                else "a layer gives one output (for two, make two layers, or join them with "
                "ops.concatenate)"
            )
        )
    inputs = list(given) if isinstance(given, (list, tuple)) else [given]
    masked = [x for x in inputs if getattr(x, "mask", None) is not None]
    if out.mask is not None or not masked or len(out.shape) < 2:
        return out
    if keeps is False:
        return out
    if all(
        x.shape[:2] == out.shape[:2] and (len(out.shape) > 2 or len(x.shape) <= 2) for x in masked
    ):
        mask = masked[0].mask
        for x in masked[1:]:
            if x.mask is not mask:
                mask = ops.mul(mask, x.mask)
        out.mask = mask
    elif (
        len(inputs) > 1
        and all(len(x.shape) == len(out.shape) and x.shape[0] == out.shape[0] for x in inputs)
        and sum(x.shape[1] for x in inputs) == out.shape[1]
    ):
        out.mask = ops.concatenate([_mask_of(x) for x in inputs], axis=1)
    return out


def _mask_of(x: Tensor) -> Tensor:
    """x's padding mask, or (where it has none) 1 at each of its positions: made from x's
    values (greater has no gradient), so that it is a pass's own value on any engine."""
    if x.mask is not None:
        return x.mask
    values = ops.sum(x, tuple(range(2, len(x.shape)))) if len(x.shape) > 2 else x
    return ops.greater(ops.mul(values, 0.0), -1.0)  # 1 (NaN only where x holds NaN)


def layer_from_json(data: Any) -> Layer:
    """A layer from what a network file records ({"kind", "config", "name"}); only registered
    layer kinds are made, from their constructor's arguments."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ValueError(f"a layer is recorded as {{'kind': ..., 'config': {{...}}}}, not {data!r}")
    kind = data["kind"]
    cls = LAYERS.get(kind)
    if cls is None:
        raise ValueError(LAYERS.unknown(kind))
    config = data.get("config", {})
    if not isinstance(config, dict) or "name" in config:
        raise ValueError(
            f"layer {kind!r}: its config must be a mapping without a name, not {brief(config, 200)}"
        )
    try:
        layer = cls(**config)
    except (TypeError, ValueError) as error:
        said = str(error)  # a file's config of 300 KB was said twice whole (trial HF)
        said = said if len(said) <= 300 else f"{said[:297]}..."
        raise ValueError(f"layer {kind!r}: bad config {brief(config, 200)} ({said})") from None
    name = data.get("name")
    if name is not None:
        layer.name = check_layer_name(name, f"layer {kind!r}")
    return layer

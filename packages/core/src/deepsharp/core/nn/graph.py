"""Networks as graphs: symbols, the inputs a graph starts from, and its calls put in order.

`Input(shape)` is a symbol of one row's shape; calling a layer on symbols gives the symbol of its
output (`h = Dense(16)(x)`), and records the call. `Network(inputs=x, outputs=y)` walks back from
`y` to the inputs (`trace`) and keeps the calls in an order where each comes after those it
reads: that order is the network's, and its layers are named in it. A chain
(`Network([Dense(16), Relu()])`) is the graph whose every layer reads the one before (`chain`).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deepsharp.core.errors import ConfigurationError, ShapeError

if TYPE_CHECKING:
    from deepsharp.core.nn.layer import Layer, Shape

__all__ = [
    "DTYPES",
    "Call",
    "Graph",
    "Input",
    "InputSpec",
    "Node",
    "Symbol",
    "chain",
    "check_layer_name",
    "name_graph",
    "row_shape",
    "trace",
]

DTYPES = ("float32", "int64")
"""What an input's values may be: float32 features, or int64 ids (tokens, class indices)."""

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def check_layer_name(name: object, where: str) -> str:
    """A layer's (or an input's) name: letters, digits, '_' and '-' (slots are named
    '<layer>.<slot>', so a dot would make two names one)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"{where}: a name is letters, digits, '_' and '-' (no dots, spaces or slashes), "
            f"not {name!r}"
        )
    return name


MOST_VALUES_A_ROW = 2**30
"""The most values one row may hold where a network takes it, a layer makes it or a buffer keeps
it (4 GiB at float32; a 512 x 512 image of 64 channels is 2^24): a file's architecture can ask
for any size however few its slots' bytes (an input of 2^31 values, a causal mask of 65,536
squared: gigabytes made before anything was checked, trial HF)."""


def row_shape(given: object, where: str) -> tuple[int, ...]:
    """One row's shape from a size or a sequence of one to eight positive sizes (at most 2**30
    values in all); a ValueError naming `where` otherwise."""
    shape = (given,) if isinstance(given, (int, np.integer)) else given
    if (
        not isinstance(shape, (tuple, list))
        or not 0 < len(shape) <= 8
        or not all(_size(s) for s in shape)
        or math.prod(int(s) for s in shape) > MOST_VALUES_A_ROW
    ):
        rest = (
            tuple(shape[1:])
            if isinstance(shape, (tuple, list)) and len(shape) > 1 and shape[0] is None
            else None
        )
        raise ValueError(
            f"{where} is a feature count or a shape of one to eight positive sizes (at most "
            f"2**30 values), not {given!r}"
            + (f": one row's shape, without the batch axis ({rest!r})" if rest else "")
        )
    return tuple(int(s) for s in shape)


def _size(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value > 0)


class Symbol:
    """A value a graph will hold: one row's shape and dtype, and the layer call that makes it
    (None for an `Input`). Symbols are what layers are called on to make a graph."""

    __slots__ = ("call", "dtype", "name", "shape")

    def __init__(
        self, shape: Shape, dtype: str, call: Call | None = None, name: str | None = None
    ) -> None:
        self.shape = shape
        self.dtype = dtype
        self.call = call
        self.name = name

    def __repr__(self) -> str:
        made = "an input" if self.call is None else f"{self.call.layer.label}'s output"
        return f"<Symbol of rows {self.shape} {self.dtype}: {made}>"


class Input(Symbol):
    """A symbolic input of a graph network: rows of `shape` (without the batch axis), float32
    features or int64 ids (`dtype="int64"`: token ids, class indices), and an optional `name` —
    a network of several inputs is fed a dict keyed by these names (unnamed inputs are named
    `input`, `input_1`, ... in the order the network lists them)."""

    __slots__ = ()

    def __init__(
        self, shape: int | Sequence[int], dtype: str = "float32", name: str | None = None
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"Input: dtype is 'float32' or 'int64', not {dtype!r}")
        made = row_shape(shape, "Input: shape")
        super().__init__(
            made, dtype, None, None if name is None else check_layer_name(name, "Input")
        )

    def __repr__(self) -> str:
        named = "" if self.name is None else f", name={self.name!r}"
        return f"Input({self.shape}, dtype={self.dtype!r}{named})"


@dataclass(frozen=True)
class Call:
    """One application of a layer to symbols (a layer called twice makes two calls)."""

    layer: Layer
    inputs: tuple[Symbol, ...]


def check_made(layer: Layer) -> None:
    """Refuse a layer whose class's `__init__` did not run `Layer.__init__` (what every layer
    keeps, its name and slots, is not there: its first use raised a raw AttributeError), or
    whose forward does not take (x, slots, context) (its first call raised a raw TypeError)."""
    if "parts" not in vars(layer):
        raise ConfigurationError(
            f"{type(layer).__name__}: its __init__ did not call super().__init__(), which sets "
            "what every layer keeps (its name, slots and parts): call super().__init__(name) "
            "first (docs/layers.md)"
        )
    try:
        inspect.signature(layer.forward).bind(None, None, None)
    except TypeError:
        raise ConfigurationError(
            f"{type(layer).__name__}: its forward is forward"
            f"({', '.join(inspect.signature(layer.forward).parameters)}), "
            "and a layer's forward is given the batch, the layer's slots and the pass: write "
            "def forward(self, x, slots, context) (docs/layers.md)"
        ) from None
    except ValueError:  # no signature to read (a builtin): its first call will say
        pass


def apply_layer(layer: Layer, given: Symbol | Sequence[Symbol]) -> Symbol:
    """`layer(given)`: checked (one symbol, or a list for a layer that takes several; dtypes the
    layer takes; a shared layer's shapes), the layer built where it is not yet, and the symbol of
    its output."""
    check_made(layer)
    if layer.name is not None and layer.label == layer.kind:  # named in its errors as a chain's
        layer.label = f"layer {layer.name!r} ({layer.described()})"  # are (trial LY)
    if isinstance(given, (list, tuple)):
        least = 2 if layer.several else 1
        if not least <= len(given) <= layer.most_inputs:
            takes = (
                f"a list of {least} to {layer.most_inputs} inputs"
                if layer.most_inputs < 2**31
                else f"a list of {least} or more inputs"
            )
            raise ShapeError(
                f"{layer.label} takes {takes if layer.most_inputs > 1 else 'one input'}, not a "
                f"list of {len(given)}"
                + (
                    ""
                    if layer.most_inputs > 1
                    else "; a list goes to a layer that merges, such as Add() or Concatenate()"
                )
            )
        inputs = tuple(given)
    else:
        if layer.several:
            raise ShapeError(
                f"{layer.label} takes a list of two or more inputs ({layer.kind}()([a, b])), "
                f"not {given!r}"
            )
        inputs = (given,)
    for symbol in inputs:
        if not isinstance(symbol, Symbol):
            raise ShapeError(
                f"{layer.label}: {symbol!r} is not a symbol (an Input or a layer's output)"
            )
        if symbol.dtype not in layer.takes:
            raise ShapeError(
                f"{layer.label} takes {' or '.join(layer.takes)} values, and is given {symbol!r} "
                "(int64 ids go to an Embedding first)"
                if symbol.dtype == "int64"
                else f"{layer.label} takes {' or '.join(layer.takes)} values, not {symbol!r}"
            )
    listed = isinstance(given, (list, tuple))
    shapes: Shape | list[Shape] = [s.shape for s in inputs] if listed else inputs[0].shape
    if layer.output_shape is None:
        out = layer.built_for(shapes)
    else:
        out = check_shared(layer, shapes)
    return Symbol(out, "float32", Call(layer, inputs))


def check_shared(layer: Layer, shapes: Shape | list[Shape]) -> Shape:
    """A layer met again (shared, or built before): the same input shapes, or a ShapeError."""
    if layer.input_shape != shapes:
        raise ShapeError(
            f"{layer.label} is built for rows of shape {layer.input_shape} and is called on rows "
            f"of shape {shapes}: a layer called twice shares its slots, so it takes one shape"
        )
    assert layer.output_shape is not None
    return layer.output_shape


@dataclass
class InputSpec:
    """One input of a network: its name, its rows' shape (None until a chain is built) and dtype."""

    name: str
    shape: Shape | None
    dtype: str = "float32"


@dataclass(frozen=True)
class Node:
    """One call in a network's order: its layer (an index into the network's layers) and where
    its inputs come from — positions in the pass's values, the network's inputs first, then each
    node's output in order."""

    layer: int
    sources: tuple[int, ...]


@dataclass
class Graph:
    """A network's structure: its inputs, its distinct layers in the order first met, its nodes."""

    inputs: list[InputSpec]
    layers: list[Layer]
    nodes: list[Node]


def chain(layers: Sequence[Layer], shape: Shape | None) -> Graph:
    """The graph of layers in a line, each reading the one before; one input, of the values its
    first layer takes."""
    seen: set[int] = set()
    for layer in layers:
        if id(layer) in seen:
            raise ConfigurationError(
                f"{layer!r} stands twice in the list: a chain takes each layer once (to share a "
                "layer, call it on symbols: Network(inputs=..., outputs=...))"
            )
        seen.add(id(layer))
    for before, layer in itertools.pairwise(layers):  # each layer after the first reads float32
        if "float32" not in layer.takes:
            raise ShapeError(
                f"{layer.label} takes {' or '.join(layer.takes)} values, and follows "
                f"{before.label}, whose outputs are float32 numbers: an Embedding reads the "
                "network's int64 ids, so it comes first (or reads an Input(..., dtype='int64'))"
            )
    nodes = [Node(index, (index,)) for index in range(len(layers))]
    # Its one input takes what its first layer takes: int64 ids where that is an Embedding.
    dtype = layers[0].takes[0] if layers else "float32"
    return Graph([InputSpec("input", shape, dtype)], list(layers), nodes)


def trace(inputs: Sequence[Symbol], output: Symbol) -> Graph:
    """The graph from `inputs` to `output`: every call the output depends on, each after those
    it reads; refused (ConfigurationError naming it) where the output depends on an input not
    listed, or a listed input is never read, or the output is an input."""
    if isinstance(output, (list, tuple)) and all(isinstance(o, Symbol) for o in output):
        raise ConfigurationError(
            f"a network gives one output, and outputs= holds {len(output)}: join them into one, "
            "outputs=Concatenate()([...]) (each row's values side by side), and split the "
            "predictions by their columns"
        )
    for given in (*inputs, output):
        if not isinstance(given, Symbol):
            raise ConfigurationError(
                f"Network(inputs=..., outputs=...) takes symbols (Input(...) and what layers "
                f"called on them give), not {given!r}"
            )
    listed: dict[int, int] = {}
    for place, symbol in enumerate(inputs):
        if symbol.call is not None:
            raise ConfigurationError(
                f"{symbol!r} is a layer's output, not an input: a network's inputs are Input(...)s"
            )
        if id(symbol) in listed:
            raise ConfigurationError(f"{symbol!r} is listed twice among the inputs")
        listed[id(symbol)] = place
    if output.call is None:
        raise ConfigurationError(
            f"the output {output!r} is an input: a network needs at least one layer between them"
        )
    made: dict[int, int] = dict(listed)  # symbol -> its place among the pass's values
    calls: list[tuple[Call, tuple[int, ...]]] = []
    stack: list[tuple[Symbol, bool]] = [(output, False)]
    while stack:  # depth first, each call after the calls it reads (no recursion limit)
        symbol, ready = stack.pop()
        if id(symbol) in made:
            continue
        call = symbol.call
        if call is None:
            raise ConfigurationError(
                f"the output depends on {symbol!r}, which inputs= does not list: list it among "
                "the network's inputs"
            )
        if ready:
            made[id(symbol)] = len(inputs) + len(calls)
            calls.append((call, tuple(made[id(s)] for s in call.inputs)))
            continue
        stack.append((symbol, True))
        stack.extend((s, False) for s in reversed(call.inputs) if id(s) not in made)
    read = {source for _, sources in calls for source in sources}
    for symbol, place in zip(inputs, range(len(inputs))):
        if place not in read:
            raise ConfigurationError(
                f"input {symbol!r} is never used: the output does not depend on it. Use it, or "
                "leave it out of inputs="
            )
    layers: list[Layer] = []
    index: dict[int, int] = {}
    nodes = []
    for call, sources in calls:
        if id(call.layer) not in index:
            index[id(call.layer)] = len(layers)
            layers.append(call.layer)
        nodes.append(Node(index[id(call.layer)], sources))
    specs = [InputSpec(symbol.name or "", symbol.shape, symbol.dtype) for symbol in inputs]
    return Graph(specs, layers, nodes)


_AUTOMATIC: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""The inputs and layers `name_graph` named, with the name it gave (a name the user did not)."""


def _automatic(item: object) -> str | None:
    try:
        return _AUTOMATIC.get(item)
    except TypeError:
        return None


def name_graph(graph: Graph) -> None:
    """Name the inputs and layers that have no name: `input`, `input_1`, ...; a layer by its kind
    in lower case, `dense`, `dense_1`, ... in the order the graph meets them. Given names must
    differ."""
    taken: dict[str, object] = {}  # an automatic name is neither an input's nor a layer's
    for family, named in (("input", graph.inputs), ("layer", graph.layers)):
        given: dict[str, object] = {}
        for item in named:
            if item.name:
                if item.name in given and given[item.name] is not item:
                    automatic = [_automatic(x) == item.name for x in (given[item.name], item)]
                    raise ConfigurationError(
                        f"two {family}s are named {item.name!r}: names tell slots and inputs "
                        "apart, so each must differ"
                        + (  # (the user named nothing: trial G, an ensemble of two networks)
                            f"; {'both were' if all(automatic) else 'one was'} named so by the "
                            f"network {'each' if all(automatic) else 'it'} was first used in "
                            "(a layer takes its name once): give each a name of its own where it "
                            f"is made ({type(item).__name__}(..., name=...))"
                            if any(automatic)
                            else ""
                        )
                    )
                given[item.name] = item
        taken.update(given)
    counts: dict[str, int] = {}  # each base's last count tried: naming stays linear (trial Q)
    for family, named in (("input", graph.inputs), ("layer", graph.layers)):
        for item in named:
            if item.name:
                continue
            base = "input" if family == "input" else type(item).__name__.lower()
            count = counts.get(base, 0)
            name = base if count == 0 else f"{base}_{count}"
            while name in taken:
                count += 1
                name = f"{base}_{count}"
            counts[base] = count
            item.name = name
            taken[name] = item
            if family == "layer":
                with contextlib.suppress(TypeError):  # (a layer of one's own may not hash)
                    _AUTOMATIC[item] = name
    for layer in graph.layers:
        layer.label = f"layer {layer.name!r} ({layer.described()})"

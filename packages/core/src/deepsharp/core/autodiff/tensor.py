"""Tensors, the recording of a pass, and the way back through it.

A `Tensor` wraps an engine handle and its shape. Each operation is a `Rule` (its forward in
engine operations beside how it sends a gradient back), entered in `RULES` by the rulebook;
`apply` runs one. While a `Recording` is open, every operation
that involves a tensor asked for (a slot) or one made from it leaves a `Node` on the tape: its
rule, its inputs, its attributes and what its forward saved. `Recording.gradients` walks the tape
backwards and applies each rule only towards the inputs that lead to a tensor asked for; then
the tape is dropped. Nodes never refer to their outputs, so no reference cycles form.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from deepsharp.core.engine import Engine, Handle

__all__ = [
    "RULES",
    "Grads",
    "Node",
    "Recording",
    "Rule",
    "Tensor",
    "Value",
    "apply",
    "open_recording",
    "register",
]


class _Recordings(threading.local):
    """The recording open in each thread: one thread may train while another serves."""

    active: Recording | None = None


_recordings = _Recordings()


class Tensor:
    """Values on an engine: a handle, a shape, its dtype ("float32", or "int64" for ids and
    indices, which no rule differentiates), (during a recorded pass) its node, and (for a
    sequence after an Embedding) its padding mask."""

    __slots__ = ("__weakref__", "dtype", "engine", "handle", "mask", "node", "shape")

    def __init__(
        self,
        handle: Handle,
        shape: tuple[int, ...],
        engine: Engine,
        node: Node | None = None,
        dtype: str = "float32",
    ) -> None:
        self.handle = handle
        self.shape = shape
        self.engine = engine
        self.node = node
        self.dtype = dtype
        self.mask: Tensor | None = None
        """A sequence's padding mask, where a layer made one: (N, L), 1 at a token, 0 at
        padding (an Embedding's id 0); layers that keep the positions carry it on."""

    @classmethod
    def put(cls, engine: Engine, array: Any) -> Tensor:
        """Host values onto the engine (one counted transfer in): integers as int64, anything
        else as float32 (a list as the array NumPy makes of it)."""
        if getattr(array, "dtype", None) is None:  # a list of ints was said float32 (trial AP)
            array = np.asarray(array)
        handle = engine.put(array)
        kind = getattr(array, "dtype", None)
        dtype = "int64" if kind is not None and kind.kind in "iub" else "float32"
        return cls(handle, engine.shape(handle), engine, None, dtype)

    def numpy(self) -> Any:
        """The values, brought back to the host (one counted transfer out)."""
        return self.engine.get(self.handle)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        kind = "" if self.dtype == "float32" else f", dtype={self.dtype}"
        return f"Tensor(shape={self.shape}{kind}, engine={self.engine.name})"

    # Ordinary operators, so that layers read like the arithmetic they do.
    def __add__(self, other: Tensor | float) -> Tensor:
        return apply(RULES["add"], (self, other))

    def __radd__(self, other: float) -> Tensor:
        return apply(RULES["add"], (other, self))

    def __sub__(self, other: Tensor | float) -> Tensor:
        return apply(RULES["sub"], (self, other))

    def __rsub__(self, other: float) -> Tensor:
        return apply(RULES["sub"], (other, self))

    def __mul__(self, other: Tensor | float) -> Tensor:
        return apply(RULES["mul"], (self, other))

    def __rmul__(self, other: float) -> Tensor:
        return apply(RULES["mul"], (other, self))

    def __truediv__(self, other: Tensor | float) -> Tensor:
        return apply(RULES["div"], (self, other))

    def __rtruediv__(self, other: float) -> Tensor:
        return apply(RULES["div"], (other, self))

    def __neg__(self) -> Tensor:
        return apply(RULES["neg"], (self,))

    def __matmul__(self, other: Tensor) -> Tensor:
        # Matrices take the plain product; stacks (attention's) take the product of stacks.
        name = "matmul" if self.ndim == 2 and other.ndim == 2 else "batch_matmul"
        return apply(RULES[name], (self, other))


class Node:
    """One recorded operation: enough to send its gradient back, or to run it again elsewhere;
    `layer` names the layer whose forward made it (None: the loss, or code outside a network)."""

    __slots__ = ("attrs", "generation", "inputs", "layer", "needs", "rule", "saved", "shape")

    def __init__(
        self,
        rule: Rule,
        inputs: tuple[Tensor | float, ...],
        attrs: dict[str, Any],
        saved: Any,
        needs: tuple[bool, ...],
        shape: tuple[int, ...],
        generation: int,
        layer: str | None = None,
    ) -> None:
        self.rule = rule
        self.inputs = inputs
        self.attrs = attrs
        self.saved = saved
        self.needs = needs
        self.shape = shape
        self.generation = generation
        self.layer = layer

    def forget(self) -> None:
        """Let go of its inputs and what it saved: its way back has run, or will not."""
        self.inputs = ()
        self.saved = None


class Recording:
    """A pass that needs gradients towards `wanted` (and nothing else).

    While it is open it also says where the pass is, for whoever watches the engine's calls
    (`deepsharp.core.comparing`): `layer`, the layer whose forward runs (set by the network;
    each node keeps it), `rule`, the rule whose forward runs, and `running`, the node whose way
    back runs (None during the forward pass).
    """

    _generations = itertools.count(1)  # next() on a count is one step: safe across threads

    def __init__(self, wanted: Sequence[Tensor]) -> None:
        self.generation = next(Recording._generations)
        self.wanted = {id(tensor): index for index, tensor in enumerate(wanted)}
        self.tape: list[Node] = []
        self.rules_applied = 0
        self.layer: str | None = None
        self.rule: Rule | None = None
        self.running: Node | None = None

    def __enter__(self) -> Recording:
        if _recordings.active is not None:
            raise RuntimeError("a recording is already open in this thread: passes do not nest")
        _recordings.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        _recordings.active = None
        self.drop()

    def involves(self, value: Tensor | float) -> bool:
        if not isinstance(value, Tensor):
            return False
        node = value.node
        if node is not None:
            return node.generation == self.generation
        return id(value) in self.wanted

    def gradients(self, loss: Tensor, wanted: Sequence[Tensor]) -> list[Handle]:
        """The gradient of `loss` (a single value) towards each tensor in `wanted`, on the engine.

        A wanted tensor the loss does not depend on gets zeros. The tape is dropped afterwards.
        """
        engine = loss.engine
        grads: dict[int, Handle] = {}
        if loss.node is not None and loss.node.generation == self.generation:
            self.running = loss.node
            grads[id(loss.node)] = engine.add(engine.zeros(loss.shape), 1.0)
        stretches: dict[int, list[tuple[int, int, int, Handle, Node]]] = {}
        for node in reversed(self.tape):
            grad = grads.pop(id(node), None)
            if id(node) in stretches:
                held = stretches.pop(id(node))
                self.running = held[-1][4]  # the join is the slices' way back
                grad = _joined(engine, node.shape, held, grad)
            inputs = node.inputs
            if grad is not None and node.rule.stretch and node.needs[0]:
                # Held until its input's gradient is asked for: see `_joined`.
                self.rules_applied += 1
                x = inputs[0]
                assert isinstance(x, Tensor)
                key = id(x.node) if x.node is not None else id(x)
                attrs = node.attrs
                piece = (attrs["axis"], attrs["start"], attrs["stop"], grad, node)
                stretches.setdefault(key, []).append(piece)
                node.forget()
                continue
            if grad is not None:
                self.rules_applied += 1
                self.running = node
                sent = node.rule.backward(engine, node, grad)
                if not node.rule.own:
                    sent = _checked_sent(engine, node, sent)
            # Its way back is done: let go of what it kept now, not at the end, so that a large
            # value (a convolution's) is freed before the layers below it allocate theirs.
            node.forget()
            if grad is None:
                continue
            for value, needed, part in zip(inputs, node.needs, sent):
                if not needed or part is None:
                    continue
                assert isinstance(value, Tensor)
                key = id(value.node) if value.node is not None else id(value)
                earlier = grads.get(key)
                grads[key] = part if earlier is None else engine.add(earlier, part)
        for tensor in wanted:
            if id(tensor) in stretches:
                held = stretches.pop(id(tensor))
                self.running = held[-1][4]
                grads[id(tensor)] = _joined(engine, tensor.shape, held, grads.get(id(tensor)))
        self.running = None
        result = [grads.get(id(tensor)) for tensor in wanted]
        self.drop()
        return [
            engine.zeros(tensor.shape) if grad is None else grad
            for tensor, grad in zip(wanted, result)
        ]

    def drop(self) -> None:
        """Let go of the tape: nodes forget their inputs and what they saved."""
        for node in self.tape:
            node.forget()
        self.tape.clear()


def _joined(
    engine: Engine,
    shape: tuple[int, ...],
    stretches: list[tuple[int, int, int, Handle, Node]],
    grad: Handle | None,
) -> Handle:
    """A value's gradient from the gradients of stretches of it (axis, start, stop, gradient,
    the slice's node; in the order the way back reached them) and `grad`, what its other uses
    sent (None: none).

    Stretches along one axis that meet end to end, each once (q, k and v of one projection, an
    RNN's positions), are concatenated and padded once with the zeros around them: each value
    is written once, where zeros around each and their sum would pass over the whole value once
    a stretch. Others (stretches that overlap, or leave gaps between them) are each padded and
    added in order, as a slice's own way back does. Then `grad` comes first in the sum."""
    stretches = sorted(stretches, key=lambda piece: (piece[0], piece[1]))
    axis = stretches[0][0]
    joins = all(
        later[0] == axis and later[1] == earlier[2]
        for earlier, later in itertools.pairwise(stretches)
    )
    if joins:
        start, stop = stretches[0][1], stretches[-1][2]
        whole = (
            stretches[0][3]
            if len(stretches) == 1
            else engine.concatenate([piece[3] for piece in stretches], axis)
        )
        if (start, stop) != (0, shape[axis]):
            widths = [(0, 0)] * len(shape)
            widths[axis] = (start, shape[axis] - stop)
            whole = engine.pad(whole, widths)
    else:
        whole = None
        for axis, start, stop, part, _ in stretches:
            widths = [(0, 0)] * len(shape)
            widths[axis] = (start, shape[axis] - stop)
            padded = engine.pad(part, widths)
            whole = padded if whole is None else engine.add(whole, padded)
        assert whole is not None
    return whole if grad is None else engine.add(grad, whole)


Value = Tensor | float
Grads = tuple[Handle | None, ...]


class Rule:
    """One operation: its forward in engine operations, and how it sends a gradient back."""

    name = ""
    keeps_output = True
    """Whether the way back reads the output (`_output(node)`): a node keeps it only then."""
    keeps_inputs = True
    """Whether the way back reads the inputs' values: where it does not, a node keeps only
    where each input came from, so a large input can go as soon as nothing else holds it."""
    moves = False
    """Whether it only moves values (a reshape, a slice, ...): its output then has its first
    input's dtype (int64 ids stay ids); every other rule gives float32."""
    stretch = False
    """Whether its output is one stretch of its input along an axis (`attrs` axis, start,
    stop): the way back joins the gradients of several stretches of one input end to end
    (`_joined`) instead of running `backward` on each (zeros around it) and adding them."""
    own = False
    """Whether it is deepsharp's (set by `register`): a rule of one's own has what its way
    back sends checked (a gradient an input, of its shape), deepsharp's are held to that by
    their tests."""

    def check(self, inputs: tuple[Value, ...], attrs: dict[str, Any]) -> None:
        """Refuse inputs of shapes the operation cannot take (a ShapeError naming both)."""

    def forward(self, engine: Engine, *args: Any, **attrs: Any) -> tuple[Handle, Any]:
        """The output's handle, and whatever the way back needs beyond inputs and output."""
        raise NotImplementedError

    def backward(self, engine: Engine, node: Node, grad: Handle) -> Grads:
        """The gradient towards each input (None where `node.needs` says it is not needed)."""
        raise NotImplementedError


RULES: dict[str, Rule] = {}


def _checked_sent(engine: Engine, node: Node, sent: Any) -> Grads:
    """What a rule of one's own sent back, as a tuple: a gradient an input that needs one (None
    where not needed; those left off the end are taken as None), each of its input's shape.
    Else a slot went untrained, silently, or an engine's error deep in the next rule named
    neither (trial XP)."""
    name, inputs = node.rule.name, node.inputs
    if isinstance(sent, Iterator):  # a generator of them: taken as they come
        sent = tuple(sent)
    if not isinstance(sent, (tuple, list)):
        raise TypeError(
            f"rule {name!r}: its backward gave {type(sent).__name__}, not a tuple of one "
            f"gradient an input ({len(inputs)}; None where node.needs says it is not needed)"
        )
    left_off = [place for place in range(len(sent), len(inputs)) if node.needs[place]]
    if len(sent) > len(inputs) or left_off:
        raise ValueError(
            f"rule {name!r}: its backward gave {len(sent)} gradients for its {len(inputs)} "
            "inputs: give one an input (None where node.needs says it is not needed)"
        )
    for place, (value, needed, part) in enumerate(zip(inputs, node.needs, sent)):
        if needed and part is not None and isinstance(value, Tensor):
            shape = tuple(engine.shape(part))
            if shape != tuple(value.shape):
                raise ValueError(
                    f"rule {name!r}: its gradient towards input {place} has shape {shape}, "
                    f"and that input has shape {tuple(value.shape)}: give each input's "
                    "gradient its shape (sum over the axes its forward broadcast it along)"
                )
    return tuple(sent)


def register(cls: type[Rule]) -> Rule:
    """Make one rule of `cls` and enter it in RULES under its name (a class decorator). A rule
    of one's own may not take the name of one of deepsharp's: it would stand in for it in
    every layer and loss of the process, silently (one of one's own is replaced, as a cell of
    a notebook run again registers it again)."""
    rule = cls()
    rule.own = cls.__module__.startswith("deepsharp.")
    taken = RULES.get(rule.name)
    if taken is not None and taken.own and not rule.own:
        raise ValueError(
            f"register: {cls.__qualname__} is named {rule.name!r}, the name of deepsharp's own "
            f"rule {type(taken).__qualname__}; it would run in its place in every layer and "
            "loss: give your rule a name of its own"
        )
    RULES[rule.name] = rule
    return rule


def apply(rule: Rule, inputs: tuple[Value, ...], **attrs: Any) -> Tensor:
    """Run `rule` forward on the inputs' engine; record it when the pass needs its gradient."""
    engine: Engine | None = None
    args: list[Any] = []
    for value in inputs:
        if type(value) is Tensor or isinstance(value, Tensor):
            if engine is None:
                engine = value.engine
            elif value.engine is not engine:
                raise ValueError(
                    f"{rule.name}: its inputs live on different engines "
                    f"({engine.name} and {value.engine.name}); put them on one"
                )
            args.append(value.handle)
        else:
            args.append(value)
    if engine is None:
        raise TypeError(f"{rule.name}: at least one input must be a Tensor")
    rule.check(inputs, attrs)
    recording = _recordings.active
    if recording is not None:
        recording.rule = rule  # where the engine's calls come from, for a witness of them
    made = rule.forward(engine, *args, **attrs)
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise TypeError(
            f"rule {rule.name!r}: its forward gave {type(made).__name__}, not the pair (output, "
            "saved): return (handle, None) where its way back needs nothing saved"
        )
    handle, saved = made
    shape = engine.shape(handle)
    dtype = inputs[0].dtype if rule.moves and isinstance(inputs[0], Tensor) else "float32"
    if recording is None:
        return Tensor(handle, shape, engine, None, dtype)
    needs = tuple([recording.involves(value) for value in inputs])
    if True not in needs:
        return Tensor(handle, shape, engine, None, dtype)
    if not rule.keeps_inputs:
        inputs = tuple([_origin(value, recording.generation) for value in inputs])
    kept = handle if rule.keeps_output else None
    node = Node(
        rule, inputs, attrs, (kept, saved), needs, shape, recording.generation, recording.layer
    )
    recording.tape.append(node)
    return Tensor(handle, shape, engine, node, dtype)


def open_recording() -> Recording | None:
    """The recording open in this thread (None outside a recorded pass)."""
    return _recordings.active


def unruled() -> None:
    """The engine calls that follow come from no rule (one_hot, assign): a witness of them
    names none (it named the rule that ran before, "one_hot (affine)": trial CP)."""
    recording = _recordings.active
    if recording is not None:
        recording.rule = None


def _origin(value: Value, generation: int) -> Value:
    """What a node keeps of an input whose value its way back does not read: a tensor made in
    this pass by its node alone (no handle), so its values can be freed; others as they are."""
    if isinstance(value, Tensor) and value.node is not None and value.node.generation == generation:
        return Tensor(None, value.shape, value.engine, value.node)
    return value

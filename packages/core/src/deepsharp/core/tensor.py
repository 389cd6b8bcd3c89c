"""Tensors, the recording of a pass, and the way back through it.

A `Tensor` wraps an engine handle and its shape. While a `Recording` is open, every operation
that involves a tensor asked for (a slot) or one made from it leaves a `Node` on the tape: its
rule, its inputs, its attributes and what its forward saved. `Recording.gradients` walks the tape
backwards and applies each rule only towards the inputs that lead to a tensor asked for; then
the tape is dropped. Nodes never refer to their outputs, so no reference cycles form.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from deepsharp.core.engine import Engine, Handle

if TYPE_CHECKING:
    from deepsharp.core import ops as _ops
    from deepsharp.core.ops import Rule
else:
    _ops = None  # deepsharp.core.ops, which sets this when it is imported (it imports us)

__all__ = ["Node", "Recording", "Replay", "Tensor"]


class _Recordings(threading.local):
    """The recording open in each thread: one thread may train while another serves."""

    active: Recording | None = None


_recordings = _Recordings()


class Tensor:
    """Values on an engine: a handle, a shape, and (during a recorded pass) its node."""

    __slots__ = ("__weakref__", "engine", "handle", "node", "shape")

    def __init__(
        self, handle: Handle, shape: tuple[int, ...], engine: Engine, node: Node | None = None
    ) -> None:
        self.handle = handle
        self.shape = shape
        self.engine = engine
        self.node = node

    @classmethod
    def put(cls, engine: Engine, array: Any) -> Tensor:
        """Host values onto the engine (one counted transfer in)."""
        handle = engine.put(array)
        return cls(handle, engine.shape(handle), engine)

    def numpy(self) -> Any:
        """The values, brought back to the host (one counted transfer out)."""
        return self.engine.get(self.handle)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, engine={self.engine.name})"

    # Ordinary operators, so that layers read like the arithmetic they do.
    def __add__(self, other: Tensor | float) -> Tensor:
        return _ops.add(self, other)

    def __radd__(self, other: float) -> Tensor:
        return _ops.add(other, self)

    def __sub__(self, other: Tensor | float) -> Tensor:
        return _ops.sub(self, other)

    def __rsub__(self, other: float) -> Tensor:
        return _ops.sub(other, self)

    def __mul__(self, other: Tensor | float) -> Tensor:
        return _ops.mul(self, other)

    def __rmul__(self, other: float) -> Tensor:
        return _ops.mul(other, self)

    def __truediv__(self, other: Tensor | float) -> Tensor:
        return _ops.div(self, other)

    def __rtruediv__(self, other: float) -> Tensor:
        return _ops.div(other, self)

    def __neg__(self) -> Tensor:
        return _ops.neg(self)

    def __matmul__(self, other: Tensor) -> Tensor:
        return _ops.matmul(self, other)


class Node:
    """One recorded operation: enough to send its gradient back, or to run it again elsewhere."""

    __slots__ = ("attrs", "generation", "inputs", "needs", "rule", "saved", "shape")

    def __init__(
        self,
        rule: Rule,
        inputs: tuple[Tensor | float, ...],
        attrs: dict[str, Any],
        saved: Any,
        needs: tuple[bool, ...],
        shape: tuple[int, ...],
        generation: int,
    ) -> None:
        self.rule = rule
        self.inputs = inputs
        self.attrs = attrs
        self.saved = saved
        self.needs = needs
        self.shape = shape
        self.generation = generation

    def forget(self) -> None:
        """Let go of its inputs and what it saved: its way back has run, or will not."""
        self.inputs = ()
        self.saved = None


class Recording:
    """A pass that needs gradients towards `wanted` (and nothing else)."""

    _generations = itertools.count(1)  # next() on a count is one step: safe across threads

    def __init__(self, wanted: Sequence[Tensor]) -> None:
        self.generation = next(Recording._generations)
        self.wanted = {id(tensor): index for index, tensor in enumerate(wanted)}
        self.tape: list[Node] = []
        self.rules_applied = 0

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
            grads[id(loss.node)] = engine.add(engine.zeros(loss.shape), 1.0)
        for node in reversed(self.tape):
            grad = grads.pop(id(node), None)
            inputs = node.inputs
            if grad is not None:
                self.rules_applied += 1
                sent = node.rule.backward(engine, node, grad)
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


_INPUT, _EARLIER, _FIXED = 0, 1, 2


class Replay:
    """A pass traced once and run again on other inputs of the same shape, rule by rule.

    `Replay.trace(function, x)` runs `function(x)` while recording every rule that involves `x`
    (what involves only slots is worked out once, during the trace, and kept). `replay(handle)`
    then calls the same rules' forwards on the engine in the same order, without layers,
    tensors or shape checks in between: the same engine calls, so the same bits, as running
    `function` again. Serving uses it for its chunks. A pass that brings values to the host or
    puts new ones on the engine (it could depend on the values) cannot be replayed: `trace`
    returns None for it, with the traced output, and the caller runs the function each time.
    """

    __slots__ = ("_output", "_steps")

    def __init__(
        self,
        steps: list[tuple[Any, tuple[tuple[int, Any], ...], dict[str, Any]]],
        output: tuple[int, Any],
    ) -> None:
        self._steps = steps
        self._output = output

    @classmethod
    def trace(cls, function: Callable[[Tensor], Tensor], x: Tensor) -> tuple[Replay | None, Tensor]:
        counters = x.engine.counters
        transfers = (counters.transfers_in, counters.transfers_out)
        with Recording([x]) as recording:
            out = function(x)
            tape = list(recording.tape)
            if (counters.transfers_in, counters.transfers_out) != transfers:
                return None, out
            index = {id(node): i for i, node in enumerate(tape)}

            def ref(value: Tensor | float) -> tuple[int, Any]:
                if isinstance(value, Tensor):
                    if value.node is not None and id(value.node) in index:
                        return (_EARLIER, index[id(value.node)])
                    if value is x:
                        return (_INPUT, None)
                    return (_FIXED, value.handle)
                return (_FIXED, value)

            steps = [
                (node.rule.forward, tuple(ref(value) for value in node.inputs), node.attrs)
                for node in tape
            ]
            return cls(steps, ref(out)), out

    def replay(self, engine: Engine, handle: Handle) -> Handle:
        """The traced pass's output handle for the input `handle`."""
        made: list[Handle] = []
        for forward, refs, attrs in self._steps:
            args = [
                handle if kind == _INPUT else made[value] if kind == _EARLIER else value
                for kind, value in refs
            ]
            made.append(forward(engine, *args, **attrs)[0])
        kind, value = self._output
        return handle if kind == _INPUT else made[value] if kind == _EARLIER else value

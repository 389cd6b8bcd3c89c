"""Replaying a traced pass: serving's chunks run the same rules' forwards without the layers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine, Handle

__all__ = ["Replay"]

_INPUT, _EARLIER, _FIXED = 0, 1, 2


class Replay:
    """A pass traced once and run again on other inputs of the same shapes, rule by rule.

    `Replay.trace(function, xs)` runs `function(xs)` while recording every rule that involves
    the input tensors `xs` (what involves only slots is worked out once, during the trace, and
    kept). `replay(engine, handles)` then calls the same rules' forwards on the engine in the same
    order, without layers, tensors or shape checks in between: the same engine calls, so the same
    bits, as running `function` again. Serving uses it for its chunks. A pass that brings values
    to the host or puts new ones on the engine (it could depend on the values) cannot be
    replayed: `trace` returns None for it, with the traced output, and the caller runs the
    function each time.
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
    def trace(
        cls, function: Callable[[list[Tensor]], Tensor], xs: list[Tensor]
    ) -> tuple[Replay | None, Tensor]:
        counters = xs[0].engine.counters
        transfers = (counters.transfers_in, counters.transfers_out)
        places = {id(x): i for i, x in enumerate(xs)}
        with Recording(xs) as recording:
            out = function(xs)
            tape = list(recording.tape)
            if (counters.transfers_in, counters.transfers_out) != transfers:
                return None, out
            index = {id(node): i for i, node in enumerate(tape)}

            def ref(value: Tensor | float) -> tuple[int, Any]:
                if isinstance(value, Tensor):
                    if value.node is not None and id(value.node) in index:
                        return (_EARLIER, index[id(value.node)])
                    if id(value) in places:
                        return (_INPUT, places[id(value)])
                    return (_FIXED, value.handle)
                return (_FIXED, value)

            steps = [
                (node.rule.forward, tuple(ref(value) for value in node.inputs), node.attrs)
                for node in tape
            ]
            return cls(steps, ref(out)), out

    def replay(self, engine: Engine, handles: list[Handle]) -> Handle:
        """The traced pass's output handle for the inputs `handles`."""
        made: list[Handle] = []
        for forward, refs, attrs in self._steps:
            args = [
                handles[value] if kind == _INPUT else made[value] if kind == _EARLIER else value
                for kind, value in refs
            ]
            made.append(forward(engine, *args, **attrs)[0])
        kind, value = self._output
        return handles[value] if kind == _INPUT else made[value] if kind == _EARLIER else value

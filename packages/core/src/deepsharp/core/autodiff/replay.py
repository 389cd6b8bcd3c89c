"""Replaying a traced pass: serving's chunks run the same rules' forwards without the layers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine, Handle

__all__ = ["Replay"]

_INPUT, _EARLIER, _FIXED = 0, 1, 2


class _Unruled(Exception):
    """A traced pass read a tensor no rule made from its inputs, slots or buffers."""


class Replay:
    """A pass traced once and run again on other inputs of the same shapes, rule by rule.

    `Replay.trace(function, xs, fixed)` runs `function(xs)` while recording every rule that
    involves the input tensors `xs` or the `fixed` ones (the slots and buffers, whose handles
    the pass reads as they are). `replay(engine, handles)` then calls the same rules' forwards on
    the engine in the same order, without layers, tensors or shape checks in between: the same
    engine calls, so the same bits, as running `function` again. Serving uses it for its chunks.
    A pass that cannot be replayed gets None from `trace`, with the traced output, and the caller
    runs the function each time: one that brings values to the host or puts new ones on the
    engine (they could depend on the values), and one that reads a tensor made outside the rules
    (`ops.detached`, `ops.one_hot`, a layer's own engine call): a replay would read the first
    pass's values of it again (trial CT: every chunk after the first served the first's
    predictions)."""

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
        cls,
        function: Callable[[list[Tensor]], Tensor],
        xs: list[Tensor],
        fixed: Sequence[Tensor] = (),
    ) -> tuple[Replay | None, Tensor]:
        counters = xs[0].engine.counters
        transfers = (counters.transfers_in, counters.transfers_out)
        places = {id(x): i for i, x in enumerate(xs)}
        kept = {id(tensor) for tensor in fixed}
        with Recording([*xs, *fixed]) as recording:
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
                    if id(value) not in kept:  # made outside the rules: unknown to a replay
                        raise _Unruled
                    return (_FIXED, value.handle)
                return (_FIXED, value)

            try:
                steps = [
                    (node.rule.forward, tuple(ref(value) for value in node.inputs), node.attrs)
                    for node in tape
                ]
                return cls(steps, ref(out)), out
            except _Unruled:
                return None, out

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

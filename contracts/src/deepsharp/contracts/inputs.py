"""Every operation leaves its inputs as they were, bit for bit: the engine under test, watched.

The suite's operation checks run on `InputsKept(engine)`: each call reads every handle it is
handed before and after the operation (through the engine's own `get`) and fails when one
changed. `assign` updates its target, and the optimizer updates their slots and what they
remember of them (velocities; first and second moments), in place; everything else they are
handed must stay as it was. And what an operation handed out stays too: the results and inputs
of its last `KEPT` (4) calls are read again after each later call of it, and a change fails (an
engine that writes each result into one buffer a shape, or keeps an input and changes it at
its next call, passes every check made right after one call). The reads count as transfers
out, so the checks that count transfers run on engines made fresh, unwatched.
"""

from __future__ import annotations

import numbers
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from deepsharp.contracts.measure import Contract, mismatching_bits

__all__ = ["IN_PLACE", "InputsKept"]

IN_PLACE: dict[str, tuple[tuple[int, ...], frozenset[str]]] = {
    "assign": ((0,), frozenset({"target"})),
    "sgd_update": ((0, 2), frozenset({"slots", "velocities"})),
    "adam_update": ((0, 2, 3), frozenset({"slots", "firsts", "seconds"})),
    "decay_update": ((0,), frozenset({"slots"})),
}
"""The operations that update arguments in place: their positions, and their names as keywords."""

_NOT_OPERATIONS = frozenset({"put", "get", "shape", "zeros", "identity", "counters", "name"})

KEPT = 4
"""How many of an operation's earlier calls are read again after each later one: an engine
cycling through up to four buffers is caught (a deeper pool would pass)."""


def _handles(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """The handles inside one argument (lists and tuples searched), each with where it sits;
    numbers, text and None are constants, shapes and attributes, not handles."""
    if value is None or isinstance(value, (numbers.Number, str, np.generic)):
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _handles(item, f"{where}[{index}]")
        return
    yield where, value


class InputsKept:
    """The engine under test, each of its operations checked to leave its inputs unchanged."""

    def __init__(self, engine: Any, contract: Contract) -> None:
        self._engine = engine
        self._contract = contract
        self._earlier: dict[str, deque[list[tuple[str, Any, np.ndarray]]]] = {}

    def __repr__(self) -> str:
        return f"InputsKept({self._engine!r})"

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._engine, name)
        if name in _NOT_OPERATIONS or name.startswith("_") or not callable(value):
            return value

        def operation(*args: Any, **kwargs: Any) -> Any:
            before = self._read(name, args, kwargs)
            if name in IN_PLACE:  # what it updates may be an earlier result, or what one is
                self._earlier.clear()  # a view of (parts, a reshape): nothing earlier is kept
            result = value(*args, **kwargs)
            self._compare(name, before)
            self._compare_earlier(name)
            handed = list(before)
            for where, handle in _handles(result, "its result"):
                try:
                    handed.append((where, handle, np.array(self._engine.get(handle))))
                except Exception:  # not one of the engine's handles
                    continue
            self._earlier.setdefault(name, deque(maxlen=KEPT)).append(handed)
            return result

        return operation

    def _compare_earlier(self, name: str) -> None:
        for call in self._earlier.get(name, ()):
            for where, handle, values in call:
                after = np.asarray(self._engine.get(handle))
                if after.shape == values.shape and after.dtype == values.dtype:
                    bits = mismatching_bits(after, values)
                else:
                    bits = 8 * max(values.nbytes, 1)
                if bits:
                    self._contract.measurements.record(
                        self._contract.spec, "inputs", f"inputs of {name}", float(bits)
                    )
                    raise AssertionError(
                        f"{name} on {self._contract.spec}: a later call changed what an earlier "
                        f"call handed out or was handed ({where}): {bits} bits differ. An engine "
                        "hands out no memory it writes into later, nor changes an input it kept."
                    )

    def _read(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[tuple[str, Any, np.ndarray]]:
        positions, keywords = IN_PLACE.get(name, ((), frozenset()))
        arguments = [(f"argument {i + 1}", a) for i, a in enumerate(args) if i not in positions]
        arguments += [(f"{k}=", a) for k, a in kwargs.items() if k not in keywords]
        read = []
        for label, argument in arguments:
            for where, handle in _handles(argument, label):
                try:
                    values = np.array(self._engine.get(handle))
                except Exception:  # not one of the engine's handles: nothing of its to keep
                    continue
                read.append((where, handle, values))
        return read

    def _compare(self, name: str, before: list[tuple[str, Any, np.ndarray]]) -> None:
        changed = 0
        for where, handle, values in before:
            after = np.asarray(self._engine.get(handle))
            bits = (
                mismatching_bits(after, values)
                if after.shape == values.shape and after.dtype == values.dtype
                else 8 * max(values.nbytes, 1)
            )
            changed += bits
            if bits:
                self._contract.measurements.record(
                    self._contract.spec, "inputs", f"inputs of {name}", float(bits)
                )
                raise AssertionError(
                    f"{name} on {self._contract.spec} changed its input ({where}): {bits} bits "
                    "differ. Every operation must leave its inputs as they were, but assign "
                    "(its target) and the optimizer updates (slots, velocities and moments)."
                )
        self._contract.measurements.record(
            self._contract.spec, "inputs", f"inputs of {name}", float(changed)
        )

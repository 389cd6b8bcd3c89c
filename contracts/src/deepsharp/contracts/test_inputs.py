"""Every operation leaves its inputs as they were, bit for bit, and hands out nothing it will
change later: its result and its inputs keep their bits when it is called again.

Every check of the suite runs on the engine watched (`deepsharp.contracts.inputs.InputsKept`),
which reads each handle an operation is handed before and after it; here each operation is
called once on its own, so that the promise has a check of its name for every operation:
`test_operation_leaves_its_inputs_unchanged[light-tanh]`. `assign` changes its target and the
optimizer updates their slots and memory, in place; what else they are handed must stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from deepsharp.contracts.data import draw
from deepsharp.contracts.inputs import IN_PLACE
from deepsharp.contracts.measure import Contract
from deepsharp.core.engine import Engine, fused

VALID = ((0, 0), (0, 0))


def _values(seed: int, *shape: int) -> Any:
    return draw(seed, shape, low=-2, high=1, zeros=0.1, negative_zeros=True)


def _positive(seed: int, *shape: int) -> Any:
    return draw(seed, shape, signs="positive", low=-2, high=1, zeros=0.0)


def _maxpool2d_back(engine: Engine) -> tuple[Any, ...]:
    _, selection = engine.maxpool2d(engine.put(_values(9, 1, 2, 4, 4)), 2)
    return engine.put(_values(10, 1, 2, 2, 2)), selection, (4, 4), 2


OPERATIONS: dict[str, Callable[[Engine], tuple[Any, ...]]] = {
    "matmul": lambda e: (e.put(_values(0, 3, 4)), e.put(_values(1, 4, 2)), False, False),
    "sum": lambda e: (e.put(_values(0, 3, 4)), (0,), False),
    "mean": lambda e: (e.put(_values(0, 3, 4)), (1,), True),
    "conv2d": lambda e: (e.put(_values(0, 2, 3, 5, 5)), e.put(_values(1, 2, 3, 3, 3)), 1, VALID),
    "conv2d_weight_grad": lambda e: (
        e.put(_values(0, 2, 3, 5, 5)),
        e.put(_values(1, 2, 2, 3, 3)),
        (3, 3),
        1,
        VALID,
    ),
    "conv2d_fold": lambda e: (
        e.put(_values(0, 2, 2, 3, 3)),
        e.put(_values(1, 2, 3, 3, 3)),
        (5, 5),
        1,
        VALID,
    ),
    **{
        name: (lambda e: (e.put(_values(0, 3, 4)), e.put(_positive(1, 4))))
        for name in ("add", "sub", "mul", "div", "maximum", "greater")
    },
    "where": lambda e: (
        e.put((_values(2, 3, 4) > 0).astype(np.float32)),
        e.put(_values(0, 3, 4)),
        e.put(_values(1, 3, 4)),
    ),
    **{
        name: (lambda e: (e.put(_values(0, 3, 4)),))
        for name in ("neg", "abs", "exp", "softplus", "tanh", "sigmoid", "relu", "copy")
    },
    **{name: (lambda e: (e.put(_positive(0, 3, 4)),)) for name in ("log", "log1p", "sqrt")},
    "assign": lambda e: (e.put(_values(0, 3, 4)), e.put(_values(1, 3, 4))),
    "reshape": lambda e: (e.put(_values(0, 3, 4)), (2, 6)),
    "transpose": lambda e: (e.put(_values(0, 3, 4)), (1, 0)),
    "slice": lambda e: (e.put(_values(0, 3, 4)), 1, 1, 3),
    "take_rows": lambda e: (e.put(_values(0, 3, 4)), e.put(np.array([2, 0, 2], np.int64))),
    "concatenate": lambda e: ([e.put(_values(0, 3, 4)), e.put(_values(1, 2, 4))], 0),
    "split": lambda e: (e.put(_values(0, 3, 4)), [1, 3], 1),
    "pad": lambda e: (e.put(_values(0, 3, 4)), [(1, 0), (0, 2)]),
    "broadcast_to": lambda e: (e.put(_values(0, 1, 4)), (3, 4)),
    "max": lambda e: (e.put(_values(0, 3, 4)), (0,), False),
    "one_hot": lambda e: (e.put(np.array([1, 0, 3], np.int64)), 4),
    "maxpool2d": lambda e: (e.put(_values(0, 1, 2, 4, 4)), 2),
    "maxpool2d_back": _maxpool2d_back,
}
"""Each operation and a way to make its arguments on an engine."""

NOT_WATCHED = {"put", "get", "zeros", "shape"}
"""Transfers and questions: nothing handed to them is an input to keep."""


def protocol_operations() -> set[str]:
    """The operations the engine protocol lists, and the updates an engine may run in place."""
    return {
        name for name, value in vars(Engine).items() if callable(value) and not name.startswith("_")
    } - NOT_WATCHED


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_operation_leaves_its_inputs_unchanged(
    engine: Engine, contract: Contract, operation: str
) -> None:
    arguments = OPERATIONS[operation](engine)
    getattr(engine, operation)(*arguments)  # the watched engine fails here on a changed input


@pytest.mark.parametrize("operation", sorted(set(OPERATIONS) - {"assign"}))
def test_operation_s_result_and_inputs_keep_their_bits_after_its_next_call(
    engine: Engine, contract: Contract, operation: str
) -> None:
    """An engine reuses no buffer it has handed out: an output written into again by the next
    call (a result that a Tensor kept then reads another's values), or an input kept and
    changed later, passed every check made right after one call."""
    first = OPERATIONS[operation](engine)
    made = getattr(engine, operation)(*first)
    kept = _bits(engine, (first, made))
    getattr(engine, operation)(*_other(engine, first))
    assert _bits(engine, (first, made)) == kept, (
        f"{operation} on {contract.spec}: a result or an input of one call changed at its next "
        "call (an engine hands out no memory it writes into later)"
    )


def _bits(engine: Engine, value: Any) -> Any:
    """Every handle's bits (and dtype) within arguments or results; the rest as it is."""
    if isinstance(value, (list, tuple)):
        return [_bits(engine, item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    array = np.asarray(engine.get(value))
    return array.dtype.str, array.shape, array.tobytes()


def _other(engine: Engine, value: Any) -> Any:
    """Arguments of the same shapes and kinds with other values (ids and 0/1 flags kept)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_other(engine, item) for item in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    array = np.asarray(engine.get(value))
    if array.dtype.kind != "f" or np.isin(array, (0.0, 1.0)).all():
        return engine.put(array.copy())
    return engine.put((array * 0.5 + 0.25).astype(array.dtype))


def test_every_operation_has_a_check(contract: Contract) -> None:
    """Every operation of the protocol is called above (the fused ones, updated in place or
    offered as fast paths, are held by the watch wherever the other checks call them)."""
    missing = protocol_operations() - set(OPERATIONS) - set(IN_PLACE) - set(fused.FAST_PATHS)
    assert not missing, f"operations without an inputs check here: {sorted(missing)}"

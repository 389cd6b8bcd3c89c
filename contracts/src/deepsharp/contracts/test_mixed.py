"""What a product's output costs the operations after it, and products across float32's range.

A mixed precision's engine may keep what its products and convolutions give in its half format
(`torch:cpu:mixed_bfloat16` does, as PyTorch's autocast does: the next product reads it as it is).
These checks take a product's output as the core takes it — the product of drawn values with
the identity, which holds those values as the engine keeps a product's result — and hand it to
every other operation, each held to the float64 reference computed from the values the output
holds (what `get` gives):

- moves, `max`, `relu`, ReLU's way back and max-pooling: bit for bit (they select values);
- `add` of a float32 tensor broadcast onto it (a bias): the value tolerance plus
  u_h·|ref| + u_h(1 + u_h)·|bias|, the one value-by-value operation whose result an engine may
  keep in the half format (the bias rounded to it, as a product's kernel takes its bias, and
  the float32 sum rounded once more);
- every other value-by-value operation (exp, log, the loss's arithmetic, the optimizer's update
  taking it as a gradient): the value tolerance, as on float32 inputs — an engine widens a half
  input exactly and computes in float32, never in the half format;
- sums and means: the float32 totals bound; products of two such outputs: the precision's.

They hold on every engine (an engine whose products give float32 passes them as it passes the
value checks). And products and convolutions of values across float32's range (2^-60 .. 2^60)
are held to the totals bound on every precision whose format has that range: a `mixed_bfloat16`
engine that computes in float16 (largest 65,504) is caught there, whatever its accuracy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepsharp.contracts.data import draw, pinned, references, seeds
from deepsharp.contracts.half import input_sizes
from deepsharp.contracts.measure import Contract, value_tolerance
from deepsharp.contracts.test_totals import convolution
from deepsharp.core.engine import Engine, fused

Array = np.ndarray
ROWS, COLUMNS = 64, 64
"""A product of 64 x 64 x 64 multiply-adds: large enough that an engine runs its half kernels
(torch's run small products in float32 kernels on rounded inputs, and give float32)."""


def product_output(engine: Engine, values: Array) -> tuple[Any, Array]:
    """A product's output holding `values` as the engine keeps a product's result (values @ I),
    and the float64 values it holds."""
    handle = engine.matmul(
        engine.put(values), engine.put(np.eye(values.shape[1], dtype=np.float32))
    )
    return handle, engine.get(handle).astype(np.float64)


UNARY: dict[str, Callable[[Array], Array]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "softplus": lambda x: np.logaddexp(0.0, x),
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}
POSITIVE = ("log", "log1p", "sqrt")

BINARY: dict[str, Callable[[Array, Array], Array]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "greater": lambda a, b: np.greater(a, b).astype(np.float64),
}


@pytest.mark.parametrize("operation", list(UNARY))
@pinned
@given(seed=seeds)
def test_a_products_output_is_read_exactly_by_value_operations(
    engine: Engine, contract: Contract, operation: str, seed: int
) -> None:
    signs = "positive" if operation in POSITIVE else "mixed"
    handle, held = product_output(
        engine, draw(seed, (ROWS, COLUMNS), low=-3, high=1, signs=signs, zeros=0.0)
    )
    got = engine.get(getattr(engine, operation)(handle))
    contract.values(f"{operation} of a product's output", got, UNARY[operation](held))


OTHERS = ["tensor", "row", "float", "output"]
"""What a product's output meets: a float32 tensor of its shape, a float32 row broadcast onto it
(a bias), a constant, or another product's output."""


@pytest.mark.parametrize("operation", list(BINARY))
@pytest.mark.parametrize("other", OTHERS)
@pinned
@given(seed=seeds, first=st.booleans())
def test_a_products_output_meets_float32_operands_as_float32(
    engine: Engine, contract: Contract, operation: str, other: str, seed: int, first: bool
) -> None:
    handle, held = product_output(engine, draw(seed, (ROWS, COLUMNS), low=-3, high=3))
    values = draw(
        seed + 1, (ROWS, COLUMNS) if other != "row" else (COLUMNS,), low=-2, high=3, zeros=0.0
    )
    if other == "float":
        operand: Any = float(values.reshape(-1)[0])
        seen: Array = np.float64(operand)
    elif other == "output":
        operand, seen = product_output(engine, values)
    else:
        operand, seen = engine.put(values), values.astype(np.float64)
    if operation == "div":  # a product's output divides, or is divided by a nonzero operand
        first = True
    a, b = (handle, operand) if first else (operand, handle)
    ra, rb = (held, seen) if first else (seen, held)
    got = engine.get(getattr(engine, operation)(a, b))
    ref = np.asarray(BINARY[operation](ra, rb), np.float64)
    name = f"{operation} of a product's output and a {other}"
    if operation == "add" and other == "row":
        # A bias onto a product's output: an engine may take the bias in its half format and
        # give the sum in it: fl_h(x + fl_h(b)) strays u_h·|ref| + u_h(1 + u_h)·|b|.
        half = contract.precision.half_unit
        bias = np.abs(np.broadcast_to(seen, ref.shape))
        allowed = value_tolerance(ref) + half * np.abs(ref) + half * (1 + half) * bias
        unit = "of 1e-5 + 1.3e-6·|ref| + u_h·|ref| + u_h(1 + u_h)·|bias|"
        contract.within("values", name, got, ref, allowed, unit)
    else:
        contract.values(name, got, ref)


@pinned
@given(seed=seeds)
def test_selections_of_a_products_output_move_every_bit(
    engine: Engine, contract: Contract, seed: int
) -> None:
    handle, held = product_output(engine, draw(seed, (ROWS, COLUMNS), low=-3, high=3))
    values = held.astype(np.float32)
    images = engine.reshape(handle, (4, 4, 16, 16))
    pooled, _ = engine.maxpool2d(engine.reshape(handle, (1, 4, 32, 32)), 2)
    windows = (
        values.reshape(1, 4, 16, 2, 16, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 4, 16, 16, 4)
    )
    rows = engine.put(np.array([3, 0, 11], np.int64))
    checks: list[tuple[str, Any, Array]] = [
        ("reshape", images, values.reshape(4, 4, 16, 16)),
        ("transpose", engine.transpose(handle, (1, 0)), values.T),
        ("slice", engine.slice(handle, 1, 2, 7), values[:, 2:7]),
        ("take_rows", engine.take_rows(handle, rows), values[[3, 0, 11]]),
        ("concatenate", engine.concatenate([handle, handle], 0), np.concatenate([values] * 2)),
        ("split", engine.split(handle, [4, COLUMNS - 4], 1)[1], values[:, 4:]),
        ("pad", engine.pad(handle, [(1, 0), (0, 2)]), np.pad(values, [(1, 0), (0, 2)])),
        (
            "broadcast_to",
            engine.broadcast_to(handle, (2, ROWS, COLUMNS)),
            np.broadcast_to(values, (2, ROWS, COLUMNS)),
        ),
        ("max", engine.max(handle, (1,), True), values.max(axis=1, keepdims=True)),
        ("copy", engine.copy(handle), values),
        ("relu", engine.relu(handle), np.maximum(values, np.float32(0.0))),
        ("maxpool2d", pooled, windows.max(axis=-1)),
    ]
    for operation, got, want in checks:
        contract.moves(
            f"{operation} of a product's output", engine.get(got), np.ascontiguousarray(want)
        )
    target = engine.zeros((ROWS, COLUMNS))
    engine.assign(target, handle)
    contract.moves("assign of a product's output", engine.get(target), values)
    back = fused.relu_back(engine, engine.relu(handle), handle)
    contract.values(
        "relu_back of a product's output", engine.get(back), np.where(held > 0, held, 0.0)
    )


@pinned
@given(seed=seeds)
def test_totals_of_a_products_output_hold_their_bounds(
    engine: Engine, contract: Contract, seed: int
) -> None:
    handle, held = product_output(engine, draw(seed, (ROWS, COLUMNS), low=-3, high=3))
    values = held.astype(np.float32)
    for operation, axes in (("sum", (0,)), ("mean", (1,)), ("sum", (0, 1))):
        got = engine.get(getattr(engine, operation)(handle, axes, False))
        contract.totals(
            f"{operation} of a product's output",
            got,
            *references(operation, values, axes, False),
            product=False,
        )
    other, other_held = product_output(engine, draw(seed + 1, (COLUMNS, 7), low=-3, high=3))
    got = engine.get(engine.matmul(handle, other))
    args = (values, other_held.astype(np.float32))
    contract.totals(
        "matmul of products' outputs",
        got,
        *references("matmul", *args),
        product=True,
        inputs=input_sizes("matmul", *args),
    )


@pinned
@given(seed=seeds)
def test_an_update_takes_a_products_output_as_its_gradient_in_float32(
    engine: Engine, contract: Contract, seed: int
) -> None:
    # A weight gradient is a product's output: Adam applies it in float32, as it would the
    # same values handed in float32.
    handle, held = product_output(engine, draw(seed, (ROWS, COLUMNS), low=-4, high=1))
    start = draw(seed + 1, (ROWS, COLUMNS), low=-2, high=1)
    settings = {"step_size": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}
    slot, first, second = (
        engine.put(start),
        engine.zeros((ROWS, COLUMNS)),
        engine.zeros((ROWS, COLUMNS)),
    )
    fused.adam_update(engine, [slot], [handle], [first], [second], **settings)
    m = 0.1 * held
    v = 0.001 * held * held
    p = start.astype(np.float64) - 0.01 * m / (np.sqrt(v) + 1e-7)
    contract.values("adam_update of a product's output", engine.get(first), m)
    contract.values("adam_update of a product's output", engine.get(second), v)
    contract.values("adam_update of a product's output", engine.get(slot), p)


# --- across float32's range ----------------------------------------------------------------------


def _wide(seed: int, shape: tuple[int, ...], sign: str = "mixed") -> Array:
    """Values of magnitudes 10^-18 .. 10^18 (products stay within float32's normal range)."""
    return draw(seed, shape, low=-18.0, high=18.0, zeros=0.0, signs=sign)


def _skip_where_the_format_is_narrower(contract: Contract) -> None:
    if contract.precision.half == "float16":
        pytest.skip(
            "mixed_float16's inputs are float16's: 2^-24 .. 65,504 (loss scaling keeps "
            "gradients there); its range is held by the drawn checks"
        )


def _within(contract: Contract, operation: str, got: Any, *args: Any) -> None:
    """`operation` on these inputs within the totals bound, recorded apart from the drawn checks
    of the same operation ("... across float32's range")."""
    ref = references(operation, *args)
    contract.totals(
        f"{operation} across float32's range",
        got,
        *ref,
        product=True,
        inputs=input_sizes(operation, *args),
    )


@pytest.mark.parametrize("seed", range(4))
def test_products_across_float32s_range_within_totals_bound(
    engine: Engine, contract: Contract, seed: int
) -> None:
    _skip_where_the_format_is_narrower(contract)
    for inner in (1, 7, 64):
        a, b = _wide(seed, (5, inner)), _wide(seed + 9, (inner, 4))
        for transpose_a, transpose_b in itertools.product([False, True], repeat=2):
            stored_a = np.ascontiguousarray(a.T) if transpose_a else a
            stored_b = np.ascontiguousarray(b.T) if transpose_b else b
            handle = engine.matmul(
                engine.put(stored_a), engine.put(stored_b), transpose_a, transpose_b
            )
            _within(contract, "matmul", engine.get(handle), a, b)


@pytest.mark.parametrize("sign", ["mixed", "positive"])
def test_convolutions_across_float32s_range_within_totals_bound(
    engine: Engine, contract: Contract, sign: str
) -> None:
    _skip_where_the_format_is_narrower(contract)
    case = convolution(2, 3, 4, (7, 6), (3, 3), 1, "same")
    stride, padding, kernel, image = case["stride"], case["padding"], case["kernel"], case["image"]
    x = _wide(11, (case["count"], case["channels"], *image), sign)
    w = _wide(12, (case["filters"], case["channels"], *kernel), sign)
    gy = _wide(13, (case["count"], case["filters"], *case["out"]), sign)
    put = engine.put
    _within(
        contract,
        "conv2d",
        engine.get(engine.conv2d(put(x), put(w), stride, padding)),
        x,
        w,
        stride,
        padding,
    )
    got = engine.get(engine.conv2d_weight_grad(put(x), put(gy), kernel, stride, padding))
    _within(contract, "conv2d_weight_grad", got, x, gy, kernel, stride, padding)
    got = engine.get(engine.conv2d_fold(put(gy), put(w), image, stride, padding))
    _within(contract, "conv2d_fold", got, gy, w, image, stride, padding)

"""Value by value: |got - ref| <= 1e-5 + 1.3e-6 * |ref| for every element.

Binary operations broadcast as NumPy does and take a Python float (a constant) on either side.
The fused operations (ReLU's way back, the optimizer updates) are taken as the core takes them,
through `deepsharp.core.engine.fused` (the engine's own where it offers one, the core's reference
in primitives otherwise), and held to their formulas, evaluated in float64. The tails, where
the absolute 1e-5 would pass anything, are held to relative accuracy alone, 1.3e-6·|ref|:
sigmoid, exp and softplus down to -80 (e^-80 ≈ 1.8e-35, still a normal float32), log1p near 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

from deepsharp.contracts.data import draw, momenta, pinned, seeds
from deepsharp.contracts.measure import Contract
from deepsharp.contracts.reference import Float64Engine
from deepsharp.core.autodiff.functions import parts
from deepsharp.core.engine import Engine, fused

pairs = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1, max_side=5)
operand_kinds = st.sampled_from(
    ["tensor, tensor", "tensor, tensor", "tensor, float", "float, tensor"]
)
small_shapes = st.lists(st.sampled_from([1, 2, 3, 5, 7]), min_size=0, max_size=4).map(tuple)

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "greater": lambda a, b: np.greater(a, b).astype(np.float64),
}


def _operand(engine: Engine, values: np.ndarray, kind: str) -> Any:
    """The engine's operand and the float64 value the reference sees."""
    if kind == "float":
        constant = float(values.reshape(-1)[0])  # exactly a float32 value
        return constant, np.float64(constant)
    return engine.put(values), values.astype(np.float64)


@pytest.mark.parametrize("operation", list(BINARY))
@pinned
@given(shapes=pairs, kinds=operand_kinds, seed=seeds)
def test_binary_operation_within_value_tolerance(
    engine: Engine, contract: Contract, operation: str, shapes: Any, kinds: str, seed: int
) -> None:
    shape_a, shape_b = shapes.input_shapes
    kind_a, kind_b = kinds.split(", ")
    a = draw(seed, shape_a if kind_a == "tensor" else (1,), low=-4, high=4)
    low = -3 if operation == "div" else -4  # divisors of 1e-3 and more: quotients stay finite
    b = draw(
        seed + 1,
        shape_b if kind_b == "tensor" else (1,),
        low=low,
        high=4,
        zeros=0.0 if operation == "div" else 0.05,
    )
    if operation == "greater" and seed % 2:  # ties must compare false
        b = (
            np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)).copy()
            if kind_a == kind_b == "tensor"
            else b
        )
    ea, ra = _operand(engine, a, kind_a)
    eb, rb = _operand(engine, b, kind_b)
    got = engine.get(getattr(engine, operation)(ea, eb))
    contract.values(operation, got, np.asarray(BINARY[operation](ra, rb), np.float64))


UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], dict[str, Any]]] = {
    "neg": (np.negative, {}),
    "abs": (np.abs, {}),
    "exp": (np.exp, {"high": 1.9}),  # below e**80: finite in float32
    "log": (np.log, {"signs": "positive", "low": -30, "high": 30, "zeros": 0.0}),
    "log1p": (np.log1p, {"signs": "positive", "low": -8, "high": 38.5}),  # to 3e38
    "sqrt": (np.sqrt, {"signs": "positive", "low": -30, "high": 30}),
    "softplus": (lambda x: Float64Engine().softplus(x), {"low": -6, "high": 4}),
    "tanh": (np.tanh, {"low": -6, "high": 2}),
    "sigmoid": (lambda x: Float64Engine().sigmoid(x), {"low": -6, "high": 2}),
    "relu": (lambda x: np.maximum(x, 0.0), {}),
}


@pytest.mark.parametrize("operation", list(UNARY))
@pinned
@given(shape=small_shapes, seed=seeds, negative_log1p=st.booleans())
def test_unary_operation_within_value_tolerance(
    engine: Engine,
    contract: Contract,
    operation: str,
    shape: tuple[int, ...],
    seed: int,
    negative_log1p: bool,
) -> None:
    function, domain = UNARY[operation]
    x = draw(seed, shape, **domain)
    if operation == "log1p" and negative_log1p:
        x = np.asarray(-np.minimum(x, 0.99), np.float32)  # (-1, 0]: log1p's other side
    got = engine.get(getattr(engine, operation)(engine.put(x)))
    contract.values(operation, got, function(x.astype(np.float64)))


@pinned
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=4),
    kinds=operand_kinds,
    seed=seeds,
)
def test_where_within_value_tolerance(
    engine: Engine, contract: Contract, shapes: Any, kinds: str, seed: int
) -> None:
    shape_c, shape_a, shape_b = shapes.input_shapes
    condition = (np.random.default_rng(seed).uniform(size=shape_c) < 0.5).astype(np.float32)
    kind_a, kind_b = kinds.split(", ")
    ea, ra = _operand(engine, draw(seed + 1, shape_a if kind_a == "tensor" else (1,)), kind_a)
    eb, rb = _operand(engine, draw(seed + 2, shape_b if kind_b == "tensor" else (1,)), kind_b)
    got = engine.get(engine.where(engine.put(condition), ea, eb))
    contract.values("where", got, np.where(condition != 0, ra, rb))


@pinned
@given(shape=small_shapes, seed=seeds)
def test_relu_back_passes_the_gradient_where_x_is_positive(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    x = draw(seed, shape, low=-3, high=3, zeros=0.2)  # zeros: ReLU's way back sends none there
    grad = draw(seed + 1, shape, low=-3, high=3)
    got = engine.get(fused.relu_back(engine, engine.put(x), engine.put(grad)))
    contract.values("relu_back", got, np.where(x > 0, grad.astype(np.float64), 0.0))


slot_shapes = st.lists(small_shapes, min_size=1, max_size=3)


@pinned
@given(
    shapes=slot_shapes,
    seed=seeds,
    step_size=st.floats(1e-5, 0.1),
    beta1=st.floats(0.5, 0.99),
    beta2=st.floats(0.9, 0.9999),
    epsilon=st.sampled_from([1e-7, 1e-8, 1e-3]),
)
def test_adam_update_follows_its_formula(
    engine: Engine,
    contract: Contract,
    shapes: list[tuple[int, ...]],
    seed: int,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    slots = [draw(seed + i, s, low=-3, high=1) for i, s in enumerate(shapes)]
    grads = [draw(seed + 10 + i, s, low=-6, high=1) for i, s in enumerate(shapes)]
    firsts = [draw(seed + 20 + i, s, low=-6, high=0) for i, s in enumerate(shapes)]
    seconds = [np.abs(draw(seed + 30 + i, s, low=-8, high=0)) for i, s in enumerate(shapes)]
    handles = [[engine.put(v) for v in group] for group in (slots, grads, firsts, seconds)]
    fused.adam_update(
        engine, *handles, step_size=step_size, beta1=beta1, beta2=beta2, epsilon=epsilon
    )
    after: list[list[np.ndarray]] = [[], [], []]
    for i in range(len(shapes)):
        g, m, v, p = (group[i].astype(np.float64) for group in (grads, firsts, seconds, slots))
        m = m + (g - m) * (1.0 - beta1)
        v = v + (g * g - v) * (1.0 - beta2)
        p = p - step_size * m / (np.sqrt(v) + epsilon)
        contract.values("adam_update", engine.get(handles[2][i]), m)
        contract.values("adam_update", engine.get(handles[3][i]), v)
        contract.values("adam_update", engine.get(handles[0][i]), p)
        for group, value in zip(after, (p, m, v)):
            group.append(value)
    got = [[engine.get(h) for h in handles[place]] for place in (0, 2, 3)]
    settings = {"step_size": step_size, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    contract.own_size("adam_update", (slots, grads, firsts, seconds), after, got, **settings)


@pinned
@given(
    shapes=slot_shapes,
    seed=seeds,
    learning_rate=st.floats(1e-5, 1.0),
    momentum=momenta,
)
def test_sgd_update_follows_its_formula(
    engine: Engine,
    contract: Contract,
    shapes: list[tuple[int, ...]],
    seed: int,
    learning_rate: float,
    momentum: float,
) -> None:
    slots = [draw(seed + i, s, low=-3, high=2) for i, s in enumerate(shapes)]
    grads = [draw(seed + 10 + i, s, low=-6, high=2) for i, s in enumerate(shapes)]
    velocities = [draw(seed + 20 + i, s, low=-6, high=1) for i, s in enumerate(shapes)]
    handles = [[engine.put(v) for v in group] for group in (slots, grads, velocities)]
    fused.sgd_update(engine, *handles, learning_rate=learning_rate, momentum=momentum)
    after: list[list[np.ndarray]] = [[], []]
    for i in range(len(shapes)):
        p, g, v = (group[i].astype(np.float64) for group in (slots, grads, velocities))
        v = momentum * v - learning_rate * g
        contract.values("sgd_update", engine.get(handles[2][i]), v)
        contract.values("sgd_update", engine.get(handles[0][i]), p + v)
        after[0].append(p + v)
        after[1].append(v)
    got = [[engine.get(h) for h in handles[place]] for place in (0, 2)]
    contract.own_size("sgd_update", (slots, grads, velocities), after, got)


@pinned
@given(shapes=slot_shapes, seed=seeds, factor=st.floats(0.0, 1.0))
def test_decay_update_follows_its_formula(
    engine: Engine, contract: Contract, shapes: list[tuple[int, ...]], seed: int, factor: float
) -> None:
    """AdamW's decoupled weight decay: every slot times factor = 1 - learning_rate·weight_decay."""
    slots = [draw(seed + i, s, low=-3, high=2) for i, s in enumerate(shapes)]
    handles = [engine.put(v) for v in slots]
    fused.decay_update(engine, handles, factor=factor)
    for handle, slot in zip(handles, slots, strict=True):
        contract.values("decay_update", engine.get(handle), slot.astype(np.float64) * factor)
    after = [[slot.astype(np.float64) * factor for slot in slots]]
    contract.own_size("decay_update", (slots,), after, [[engine.get(h) for h in handles]])


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2)], ids=["laid-out", "other", "some"])
def test_fused_updates_of_parts_of_one_tensor_in_any_order(
    engine: Engine, contract: Contract, order: tuple[int, ...]
) -> None:
    """Slots laid out as the core lays them out (`deepsharp.core.autodiff.functions.parts`: parts of one flat
    tensor, which an engine may update in one pass), handed in that order, in another, or only
    some of them."""
    shapes: list[tuple[int, ...]] = [(3,), (), (2, 2)]
    bounds = np.cumsum([0, *(math.prod(shape) for shape in shapes)])
    groups = {
        name: draw(seed, (int(bounds[-1]),), low=-3, high=0) for seed, name in enumerate("pgmv")
    }
    groups["v"] = np.abs(groups["v"])

    def laid_out(name: str) -> list[Any]:
        made = parts(engine, engine.put(groups[name]), shapes)
        return [made[i] for i in order]

    def expected(name: str, i: int) -> np.ndarray:
        return (
            groups[name][int(bounds[i]) : int(bounds[i + 1])].reshape(shapes[i]).astype(np.float64)
        )

    p, g, m, v = (laid_out(name) for name in "pgmv")
    fused.adam_update(engine, p, g, m, v, step_size=0.01, beta1=0.9, beta2=0.999, epsilon=1e-7)
    for place, i in enumerate(order):
        g64, m64, v64, p64 = (expected(name, i) for name in "gmvp")
        m64 = m64 + (g64 - m64) * 0.1
        v64 = v64 + (g64 * g64 - v64) * 0.001
        contract.values("adam_update", engine.get(m[place]), m64)
        contract.values("adam_update", engine.get(v[place]), v64)
        contract.values(
            "adam_update", engine.get(p[place]), p64 - 0.01 * m64 / (np.sqrt(v64) + 1e-7)
        )
    q, w = (laid_out(name) for name in "pm")
    fused.sgd_update(engine, q, laid_out("g"), w, learning_rate=0.1, momentum=0.5)
    for place, i in enumerate(order):
        velocity = 0.5 * expected("m", i) - 0.1 * expected("g", i)
        contract.values("sgd_update", engine.get(w[place]), velocity)
        contract.values("sgd_update", engine.get(q[place]), expected("p", i) + velocity)
    d = laid_out("p")
    fused.decay_update(engine, d, factor=0.75)
    for place, i in enumerate(order):
        contract.values("decay_update", engine.get(d[place]), expected("p", i) * 0.75)


TAILS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, float]] = {
    "sigmoid": (Float64Engine().sigmoid, -80.0, 16.0),
    "exp": (np.exp, -80.0, 80.0),
    "softplus": (Float64Engine().softplus, -80.0, 80.0),
}
"""Functions held to relative accuracy over [low, high]: e^x at -80 is 1.8e-35, a normal
float32, and so are sigmoid's and softplus's tails there (≈ e^x)."""


@pytest.mark.parametrize("operation", [*TAILS, "log1p"])
@pinned
@given(shape=small_shapes, seed=seeds)
def test_tail_within_relative_tolerance(
    engine: Engine, contract: Contract, operation: str, shape: tuple[int, ...], seed: int
) -> None:
    """The tails to 1.3e-6·|ref|: a formula that loses them (sigmoid as 0.5·(1 + tanh(x/2)),
    softplus as log(1 + e^x), log1p as log(1 + x): 0 where float32 holds 1e-30) fails here."""
    shape = (*shape, 3)
    rng = np.random.default_rng(seed)
    function: Callable[[np.ndarray], np.ndarray] = np.log1p
    if operation == "log1p":  # near 0, both sides: |x| from 1e-30 to 1e-3
        x = draw(seed, shape, low=-30, high=-3, zeros=0.0)
    else:
        function, low, high = TAILS[operation]
        x = np.asarray(rng.uniform(low, high, shape), np.float32)
        x.reshape(-1)[:2] = (low, high)  # both ends, every time
    got = engine.get(getattr(engine, operation)(engine.put(x)))
    contract.tails(f"{operation} tail", got, function(x.astype(np.float64)))


NAN_KEPT = ("neg", "abs", "exp", "log", "log1p", "softplus", "sqrt", "tanh", "sigmoid", "relu")
"""The value-by-value operations a NaN goes through as NaN (IEEE arithmetic's, NumPy's and
PyTorch's), as it does through a product and a total (`sum`, `mean`, `max`)."""


def test_a_nan_goes_through_every_operation_as_nan(engine: Engine, contract: Contract) -> None:
    """A NaN in is a NaN out, at its place (a row's total, of its row): a run's NaN is what
    stops it (fit names the epoch and step) and what a loss scale skips. A ReLU written as
    np.fmax, or a total that leaves NaN out, passed every check and turned a diverged run's
    NaN into numbers (trial E); so did a maximum written as np.fmax, through the losses' clip
    of probabilities (trial EX4)."""
    x = np.array([[np.nan, 0.5, 2.0], [1.0, 0.25, 3.0]], np.float32)
    handle = engine.put(x)
    for name in NAN_KEPT:
        with np.errstate(all="ignore"):  # (NumPy warns of a NaN in logaddexp: a run is quiet)
            got = np.asarray(engine.get(getattr(engine, name)(handle)))
        assert np.isnan(got[0, 0]) and not np.isnan(got[1]).any(), (
            f"{name} on {contract.spec}: a NaN in gave {float(got[0, 0])!r} out (a NaN goes through as "
            f"NaN, and only where it was): {got.tolist()}"
        )
    for name in ("sum", "mean", "max"):
        got = np.asarray(engine.get(getattr(engine, name)(handle, (1,))))
        assert np.isnan(got[0]) and not np.isnan(got[1]), (
            f"{name} over each row on {contract.spec}: the row of a NaN gave {float(got[0])!r} (a "
            f"total of a NaN is NaN): {got.tolist()}"
        )
    other = engine.put(np.array([[1.0, 2.0, 0.5], [4.0, 0.5, 1.0]], np.float32))
    for name in ("add", "sub", "mul", "div", "maximum"):  # each side, and against a number
        for a, b, said in (
            (handle, other, "first"),
            (other, handle, "second"),
            (handle, 0.5, "first"),
        ):
            got = np.asarray(engine.get(getattr(engine, name)(a, b)))
            assert np.isnan(got[0, 0]) and not np.isnan(got[1]).any(), (
                f"{name} on {contract.spec}: a NaN as its {said} operand gave "
                f"{float(got[0, 0])!r} (a NaN goes through as NaN: NumPy's maximum, not fmax, "
                f"which leaves it out): {got.tolist()}"
            )
    product = np.asarray(engine.get(engine.matmul(handle, engine.put(np.ones((3, 2), np.float32)))))
    assert np.isnan(product[0]).all() and not np.isnan(product[1]).any(), (
        f"matmul on {contract.spec}: the row of a NaN gave {product.tolist()} (a NaN term makes "
        "its total NaN)"
    )

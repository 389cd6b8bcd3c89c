"""Fast paths: each fused operation an engine offers of its own, held to the core's reference.

The core writes each fused operation once in primitives (`deepsharp.core.engine.fused`; its
`FAST_PATHS` maps each name to that reference), and an engine may offer a method of the same
name, which the core then calls instead. Here the engine's own runs on drawn and fixed inputs,
and the core's reference on the suite's float64 engine from the same inputs: the convolution
and a dense layer's product with their biases and the weight gradient with the biases' within
the totals bound, ReLU's way back and the optimizer updates (SGD's, Adam's, AdamW's decay)
within the value tolerance, the binary cross entropy's terms within the bound their reference
propagates (a chain, as LayerNorm's), the parts of a flat tensor bit for bit. An engine that
offers none of them passes with each check skipped: the core's reference then runs in its
primitives, which the other checks hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from deepsharp.contracts.data import (
    bias_references,
    draw,
    momenta,
    pinned,
    references,
    seeds,
    sides,
    signs,
)
from deepsharp.contracts.half import input_sizes
from deepsharp.contracts.measure import Contract
from deepsharp.contracts.propagated import Propagated
from deepsharp.contracts.reference import Float64Engine
from deepsharp.contracts.test_normalization import CHECKED as NORMALIZATION_CHECKED
from deepsharp.contracts.test_recurrent import CHECKED as RECURRENT_CHECKED
from deepsharp.contracts.test_recurrent import held
from deepsharp.contracts.test_totals import FIXED_CONVOLUTIONS, convolutions, inner_sizes
from deepsharp.contracts.test_training_tools import CHECKED as TRAINING_TOOLS_CHECKED
from deepsharp.contracts.test_transfers import CHECKED as TRANSFERS_CHECKED
from deepsharp.contracts.test_values import slot_shapes, small_shapes
from deepsharp.core.engine import Engine, fused

CHECKED = {
    "conv2d_bias",
    "matmul_bias",
    "conv2d_weight_bias_grad",
    "relu_back",
    "binary_cross_entropy_terms",
    "sgd_update",
    "adam_update",
    "decay_update",
    "parts",
    # held by test_layer_operations: the operations networks as graphs are built from
    "batch_matmul",
    "add_rows",
    "erf",
    "gelu",
    "gelu_back",
    "maxpool2d_pair",
    "maxpool2d_pair_back",
}
"""The fast paths this suite knows how to hold."""
CHECKED |= TRAINING_TOOLS_CHECKED  # the gradient clippings, held in test_training_tools
CHECKED |= TRANSFERS_CHECKED  # the checked put of a batch, held in test_transfers
CHECKED |= RECURRENT_CHECKED  # an LSTM's position forward and back, held in test_recurrent
CHECKED |= NORMALIZATION_CHECKED  # LayerNorm each way, held in test_normalization


def own(engine: Engine, name: str) -> Callable[..., Any]:
    """The engine's own fast path `name`; the check is skipped where it offers none."""
    method: Callable[..., Any] | None = getattr(engine, name, None)
    if not callable(method):
        pytest.skip(f"the engine offers no {name} of its own: the core's reference runs")
    return method


def reference(name: str, *args: Any, **kwargs: Any) -> tuple[Float64Engine, list[Any], Any]:
    """The core's reference for `name` run on the suite's float64 engine from the same values
    (arrays, and lists of arrays, are put on it): the engine, the handles it was given, and
    what the reference returned."""
    f64 = Float64Engine()

    def put(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return f64.put(value)
        if isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            return [f64.put(v) for v in value]
        return value

    handles = [put(arg) for arg in args]
    return f64, handles, fused.FAST_PATHS[name](f64, *handles, **kwargs)


def test_every_fast_path_has_a_check(contract: Contract) -> None:
    missing = sorted(set(fused.FAST_PATHS) - CHECKED)
    assert not missing, (
        f"fast paths the contract cannot hold yet (add a check to "
        f"deepsharp.contracts.test_fast_paths): {missing}"
    )


def check_convolution_fast_paths(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    stride, padding, kernel = case["stride"], case["padding"], case["kernel"]
    x = draw(seed, (case["count"], case["channels"], *case["image"]), signs=sign)
    w = draw(seed + 1, (case["filters"], case["channels"], *kernel), signs=sign)
    b = draw(seed + 2, (case["filters"],), signs=sign)
    gy = draw(seed + 3, (case["count"], case["filters"], *case["out"]), signs=sign)
    offered = [name for name in ("conv2d_bias", "conv2d_weight_bias_grad") if hasattr(engine, name)]
    if not offered:
        pytest.skip("the engine offers no convolution fast path of its own")
    if "conv2d_bias" in offered:
        got = engine.get(
            own(engine, "conv2d_bias")(engine.put(x), engine.put(w), engine.put(b), stride, padding)
        )
        f64, _, out = reference("conv2d_bias", x, w, b, stride, padding)
        _, terms, count = bias_references(x, w, b, stride, padding)
        inputs = input_sizes("conv2d", x, w, stride, padding, b)
        contract.totals(
            "fast conv2d_bias", got, f64.get(out), terms, count, product=True, inputs=inputs
        )
    if "conv2d_weight_bias_grad" in offered:
        weights, biases = own(engine, "conv2d_weight_bias_grad")(
            engine.put(x), engine.put(gy), kernel, stride, padding
        )
        f64, _, (ref_weights, ref_biases) = reference(
            "conv2d_weight_bias_grad", x, gy, kernel, stride, padding
        )
        _, terms, count = references("conv2d_weight_grad", x, gy, kernel, stride, padding)
        contract.totals(
            "fast conv2d_weight_bias_grad",
            engine.get(weights),
            f64.get(ref_weights),
            terms,
            count,
            product=True,
            inputs=input_sizes("conv2d_weight_grad", x, gy, kernel, stride, padding),
        )
        _, terms, count = references("sum", gy, (0, 2, 3))
        contract.totals(
            "fast conv2d_weight_bias_grad",
            engine.get(biases),
            f64.get(ref_biases),
            terms,
            count,
            product=False,
        )


@pinned
@given(case=convolutions, sign=st.sampled_from(["mixed", "positive"]), seed=seeds)
def test_offered_convolution_fast_paths_match_the_reference(
    engine: Engine, contract: Contract, case: dict[str, Any], sign: str, seed: int
) -> None:
    assume(min(case["out"]) >= 1)
    check_convolution_fast_paths(engine, contract, case, sign, seed)


@pytest.mark.parametrize("name", list(FIXED_CONVOLUTIONS))
def test_offered_convolution_fast_paths_match_the_reference_on_fixed_cases(
    engine: Engine, contract: Contract, name: str
) -> None:
    check_convolution_fast_paths(engine, contract, FIXED_CONVOLUTIONS[name], "mixed", len(name))


def check_matmul_bias(
    engine: Engine, contract: Contract, rows: int, inner: int, columns: int, sign: str, seed: int
) -> None:
    """x (rows, inner) @ w (inner, columns) + bias, w stored either way: the bias one more term
    of each total."""
    matmul_bias = own(engine, "matmul_bias")
    x = draw(seed, (rows, inner), signs=sign)
    w = draw(seed + 1, (inner, columns), signs=sign)
    bias = draw(seed + 2, (columns,), signs=sign)
    _, terms, count = references("matmul", x, w)
    size = np.abs(bias.astype(np.float64))
    inputs = input_sizes("matmul", x, w) + size
    for transpose_b in (False, True):
        stored = np.ascontiguousarray(w.T) if transpose_b else w
        got = matmul_bias(engine.put(x), engine.put(stored), engine.put(bias), transpose_b)
        f64, _, out = reference("matmul_bias", x, stored, bias, transpose_b)
        contract.totals(
            "fast matmul_bias",
            engine.get(got),
            f64.get(out),
            terms + size,
            count + 1,
            product=True,
            inputs=inputs,
        )


@pinned
@given(rows=sides, inner=inner_sizes, columns=sides, sign=signs, seed=seeds)
def test_offered_matmul_bias_matches_the_reference(
    engine: Engine, contract: Contract, rows: int, inner: int, columns: int, sign: str, seed: int
) -> None:
    check_matmul_bias(engine, contract, rows, inner, columns, sign, seed)


FIXED_DENSE = {
    "titanic": (32, 14, 16),
    "one-output": (32, 16, 1),
    "narrow-tall": (64, 2_048, 10),  # a dense layer of 10 after a convolution: padded columns
    "projection": (256, 128, 384),  # attention's: large enough for a mixed precision's kernels
}
"""Dense layers' shapes (rows, inner, columns) the fast path takes its own ways on."""


@pytest.mark.parametrize("name", list(FIXED_DENSE))
def test_offered_matmul_bias_matches_the_reference_on_fixed_cases(
    engine: Engine, contract: Contract, name: str
) -> None:
    check_matmul_bias(engine, contract, *FIXED_DENSE[name], "mixed", len(name))


@pinned
@given(shape=small_shapes, seed=seeds)
def test_offered_relu_back_matches_the_reference(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    relu_back = own(engine, "relu_back")
    x = draw(seed, shape, low=-3, high=3, zeros=0.2)
    grad = draw(seed + 1, shape, low=-3, high=3)
    got = engine.get(relu_back(engine.put(x), engine.put(grad)))
    f64, _, out = reference("relu_back", x, grad)
    contract.values("fast relu_back", got, f64.get(out))


@pinned
@given(shape=small_shapes, seed=seeds)
def test_offered_binary_cross_entropy_terms_hold_the_reference_s_bound(
    engine: Engine, contract: Contract, shape: tuple[int, ...], seed: int
) -> None:
    # A chain (abs, neg, exp, log1p, relu, mul, sub, add): held to the bound its reference
    # carries on the `Propagated` engine, as LayerNorm's is. Logits of magnitudes 0.001 to
    # 10,000 of either sign; targets 0, 1, label smoothing's 0.005 and 0.995, or between: far
    # below 0 with a target just above it, a formula whose terms of z's size cancel strays
    # past that bound (PyTorch's own, (1 - y)·z - log_sigmoid(z)).
    terms = own(engine, "binary_cross_entropy_terms")
    z = draw(seed, shape, low=-3, high=4)
    rng = np.random.default_rng(seed + 1)
    y = np.choose(
        rng.integers(0, 5, shape), [0.0, 1.0, 0.005, 0.995, rng.uniform(0, 1, shape)]
    ).astype(np.float32)
    got = terms(engine.put(z), engine.put(y))
    bounded = Propagated(contract.precision.name)
    expected = fused.FAST_PATHS["binary_cross_entropy_terms"](
        bounded, bounded.put(z), bounded.put(y)
    )
    held(engine, contract, "fast binary_cross_entropy_terms", [("its terms", got, expected)])


def _slot_groups(seed: int, shapes: list[tuple[int, ...]], count: int) -> list[list[np.ndarray]]:
    """`count` groups of float32 values, one array a slot: slots, gradients and what an
    optimizer remembers (the last group non-negative: Adam's second moments)."""
    groups = [
        [draw(seed + 10 * group + i, s, low=-6, high=1) for i, s in enumerate(shapes)]
        for group in range(count)
    ]
    groups[-1] = [np.asarray(np.abs(v)) for v in groups[-1]]
    return groups


def check_update(
    engine: Engine,
    contract: Contract,
    name: str,
    groups: list[list[np.ndarray]],
    updated: tuple[int, ...],
    settings: dict[str, float],
) -> None:
    """The engine's own update against the core's reference from the same values: each group
    it updates in place (`updated`), slot by slot."""
    update = own(engine, name)
    handles = [[engine.put(v) for v in group] for group in groups]
    update(*handles, **settings)
    f64, ref_handles, _ = reference(name, *groups, **settings)
    for group in updated:
        for got, ref in zip(handles[group], ref_handles[group], strict=True):
            contract.values(f"fast {name}", engine.get(got), f64.get(ref))
    after = [[np.asarray(f64.get(ref), np.float64) for ref in ref_handles[g]] for g in updated]
    mine = [[engine.get(got) for got in handles[g]] for g in updated]
    contract.own_size(name, groups, after, mine, **settings)


@pinned
@given(
    shapes=slot_shapes,
    seed=seeds,
    learning_rate=st.floats(1e-5, 1.0),
    momentum=momenta,
)
def test_offered_sgd_update_matches_the_reference(
    engine: Engine,
    contract: Contract,
    shapes: list[tuple[int, ...]],
    seed: int,
    learning_rate: float,
    momentum: float,
) -> None:
    groups = _slot_groups(seed, shapes, 3)
    settings = {"learning_rate": learning_rate, "momentum": momentum}
    check_update(engine, contract, "sgd_update", groups, (0, 2), settings)


@pinned
@given(
    shapes=slot_shapes,
    seed=seeds,
    step_size=st.floats(1e-5, 0.1),
    beta1=st.floats(0.5, 0.99),
    beta2=st.floats(0.9, 0.9999),
    epsilon=st.sampled_from([1e-7, 1e-8, 1e-3]),
)
def test_offered_adam_update_matches_the_reference(
    engine: Engine,
    contract: Contract,
    shapes: list[tuple[int, ...]],
    seed: int,
    step_size: float,
    beta1: float,
    beta2: float,
    epsilon: float,
) -> None:
    groups = _slot_groups(seed, shapes, 4)
    settings = {"step_size": step_size, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    check_update(engine, contract, "adam_update", groups, (0, 2, 3), settings)


@pinned
@given(shapes=slot_shapes, seed=seeds, factor=st.floats(0.0, 1.0))
def test_offered_decay_update_matches_the_reference(
    engine: Engine,
    contract: Contract,
    shapes: list[tuple[int, ...]],
    seed: int,
    factor: float,
) -> None:
    """AdamW's decoupled decay: every slot times factor (1 - learning_rate·weight_decay)."""
    slots = [draw(seed + i, s, low=-6, high=1) for i, s in enumerate(shapes)]
    check_update(engine, contract, "decay_update", [slots], (0,), {"factor": factor})


@pinned
@given(shapes=slot_shapes, seed=seeds)
def test_offered_parts_match_the_reference_bit_for_bit(
    engine: Engine, contract: Contract, shapes: list[tuple[int, ...]], seed: int
) -> None:
    parts = own(engine, "parts")
    flat = draw(seed, (sum(math.prod(s) for s in shapes),), low=-30, high=30, negative_zeros=True)
    got = parts(engine.put(flat), shapes)
    f64, _, expected = reference("parts", flat, shapes)
    assert len(got) == len(expected), f"parts gave {len(got)} parts for {len(shapes)} shapes"
    for part, ref in zip(got, expected, strict=True):
        contract.moves("fast parts", engine.get(part), f64.get(ref).astype(np.float32))

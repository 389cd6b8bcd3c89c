"""compare names every planted fault of the broken engines: the operation, its layer and where in
the step, against the light engine. Each fault gets a step that uses what it broke (a product
large enough, a sum over the trailing axis, a tail, a reshape, AdamW's decay, ...), as a user's
network would; the honest engines among them (mixed_bfloat16 products that say so, products kept
in bfloat16 as torch's are) are within every bound.

One planted fault is out of compare's reach, by its nature: a broken rule (half_gradient_rule)
is the same on every engine, since every engine follows the one rulebook; the contract's nudging
check holds rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import broken_engines
import mixed_broken_engines
import numpy as np
import pytest

from deepsharp.core import (
    LSTM,
    AdamW,
    BinaryCrossEntropy,
    ConfigurationError,
    CrossEntropy,
    Dense,
    Embedding,
    Flatten,
    Gelu,
    Input,
    Layer,
    LayerNorm,
    MaxPool2D,
    MeanSquaredError,
    Network,
    Relu,
    Tanh,
)
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.comparing import Comparison, Difference, compare
from deepsharp.core.nn.layer import Pass, Shape

Array = np.ndarray
SMALL = np.float32(2.0**-24 * (1.0 + 2.0**-10))
"""Just over half an ulp of 1: added to 1 in float32 it rounds the total up by a whole ulp."""


def _targets(rows: int, seed: int = 1) -> Array:
    return (np.random.default_rng(seed).random(rows) > 0.5).astype(np.float32)


def _rows(rows: int, features: int, seed: int = 0, scale: float = 1.0) -> Array:
    return (np.random.default_rng(seed).normal(size=(rows, features)) * scale).astype(np.float32)


def _titanic_like() -> Network:
    return Network([Dense(16), Relu(), Dense(1)])


def _adversarial(rows: int, features: int, small: float) -> Array:
    """Rows of 1 then features - 1 small terms: a total a float32 (or half) accumulator adds
    up one small term at a time rounds n times, where a strict one rounds once."""
    x = np.full((rows, features), small, np.float32)
    x[:, 0] = 1.0
    return x


def _first(comparison: Comparison) -> Difference:
    first = comparison.first
    assert first is not None, f"no operation past its bound:\n{comparison}"
    return first


def _named(comparison: Comparison, operation: str, layer: str, phase: str) -> Difference:
    first = _first(comparison)
    assert (first.operation, first.layer, first.phase) == (operation, layer, phase), comparison
    return first


class Pointwise(Layer):
    """A 1x1 convolution of stride 2 without a bias, written as code (its way back asks the
    engine for the filters' gradient alone)."""

    def build(self, shape: Shape) -> Shape:
        self.slot("weights", (2, shape[0], 1, 1), fan_in=shape[0], fan_out=2)
        return (2, (shape[1] + 1) // 2, (shape[2] + 1) // 2)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.conv2d(x, slots["weights"], stride=2)


def _with_slots(network: Network, values: Mapping[str, Any]) -> Network:
    network.set_slots(values)
    return network


# --- products, sums, moves -----------------------------------------------------------------------


def test_float16_products_are_named_at_the_first_product() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", broken_engines.float16_products()),
    )
    assert _named(found, "matmul_bias", "dense", "forward").rule == "affine"
    assert found.first is not None and found.first.ratio > 100


def test_float32_large_products_claiming_strict_are_named_on_a_large_product() -> None:
    found = compare(
        Network([Dense(16, init="ones"), Relu(), Dense(1)]),
        BinaryCrossEntropy(),
        (_adversarial(64, 4096, SMALL), _targets(64)),
        engines=("light", broken_engines.float32_large_products()),
    )
    assert _named(found, "matmul_bias", "dense", "forward").ratio > 10


def test_a_sum_that_drops_its_last_term_is_named_in_the_way_back() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", broken_engines.drops_last_term()),
    )
    assert _named(found, "sum", "dense_1", "way back").rule == "affine"


def test_a_float32_engine_dropping_a_term_is_named_against_its_own_wider_bound() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", broken_engines.float32_drops_last_term()),
    )
    first = _named(found, "sum", "dense_1", "way back")
    assert first.bounds[1] > first.bounds[0]  # float32's bound, the looser, is the one held
    assert first.bound == first.bounds[1]
    assert "looser bound, float32's" in str(found)


def test_a_reshape_that_flips_a_bit_is_named_at_the_flatten() -> None:
    images = np.random.default_rng(0).normal(size=(8, 1, 6, 6)).astype(np.float32)
    found = compare(
        Network([Flatten(), Dense(1)]),
        BinaryCrossEntropy(),
        (images, _targets(8)),
        engines=("light", broken_engines.flips_a_bit()),
    )
    first = _named(found, "reshape", "flatten", "forward")
    assert first.ratio == float("inf") and first.bound == 0.0


def test_operations_that_cross_to_the_host_are_named_by_their_transfers() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", broken_engines.round_trips()),
    )
    first = _named(found, "matmul_bias", "dense", "forward")
    assert first.difference == 0.0  # its values are right: its transfers are not
    assert "made 1 transfers in and 1 out" in first.detail


def test_float32_kernels_claiming_strict_are_named_on_a_long_product() -> None:
    found = compare(
        Network([Dense(16, init="ones"), Relu(), Dense(1)]),
        BinaryCrossEntropy(),
        (_adversarial(8, 4096, SMALL), _targets(8)),
        engines=("light", broken_engines.float32_claims_strict()),
    )
    assert _named(found, "matmul_bias", "dense", "forward").ratio > 10


@pytest.mark.parametrize("fault", ["tf32_products", "bfloat16_products"])
def test_products_on_rounded_inputs_claiming_float32_are_named(fault: str) -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", getattr(broken_engines, fault)()),
    )
    first = _named(found, "matmul_bias", "dense", "forward")
    assert found.precisions[1].name == "float32" and first.ratio > 10


def test_trailing_sums_in_float32_claiming_strict_are_named_in_the_softmax() -> None:
    classes = 256
    bias = np.full(classes, np.log(float(SMALL)), np.float32)  # e^bias just over half an ulp
    bias[0] = 0.0
    network = _with_slots(
        Network([Dense(classes)], inputs=4),
        {"dense.weights": np.zeros((4, classes), np.float32), "dense.bias": bias},
    )
    found = compare(
        network,
        CrossEntropy(),
        (_rows(8, 4), np.zeros(8, np.int64)),
        engines=("light", broken_engines.float32_trailing_sums()),
    )
    assert _named(found, "sum", "loss", "forward").rule == "cross_entropy"


def test_a_stride_blind_pointwise_weight_gradient_is_named_at_its_layer() -> None:
    images = np.random.default_rng(0).normal(size=(8, 1, 6, 6)).astype(np.float32)
    found = compare(
        Network([Pointwise(), Flatten(), Dense(1)]),
        BinaryCrossEntropy(),
        (images, _targets(8)),
        engines=("light", broken_engines.stride_blind_pointwise_weight_grad()),
    )
    first = _named(found, "conv2d_weight_grad", "pointwise", "way back")
    assert first.rule == "conv2d"


def test_an_operation_that_overwrites_its_input_is_named() -> None:
    found = compare(
        Network([Dense(8), Tanh(), Dense(1)]),
        BinaryCrossEntropy(),
        (_rows(8, 5), _targets(8)),
        engines=("light", broken_engines.overwrites_its_input()),
    )
    first = _named(found, "tanh", "tanh", "forward")
    assert "changed its input (argument 1)" in first.detail


def test_functions_that_lose_their_tails_are_named_on_confident_logits() -> None:
    found = compare(
        Network([Dense(1, init="ones")]),
        BinaryCrossEntropy(),
        (_rows(32, 14, scale=10.0), _targets(32)),  # logits far past ±17
        engines=("light", broken_engines.loses_the_tails()),
    )
    first = _named(found, "exp", "loss", "forward")
    assert first.rule == "binary_cross_entropy" and first.ratio > 100


def test_a_decay_of_the_first_slot_alone_is_named_at_another_slot() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(8, 5), _targets(8)),
        engines=("light", broken_engines.decays_only_the_first_slot()),
        optimizer=AdamW(0.01, weight_decay=0.1),
    )
    first = _first(found)
    assert (first.operation, first.phase) == ("decay_update", "update"), found
    assert first.layer in ("dense", "dense_1")
    assert "worst: dense" in first.detail and "dense.weights" not in first.detail


def test_products_on_rounded_inputs_said_as_mixed_are_within_the_mixed_bound() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", broken_engines.mixed_bfloat16_products()),
    )
    assert found.within, found
    assert 0.0 < found.ratio <= 1.0


@pytest.mark.parametrize("fault", ["no_identity", "unknown_precision"])
def test_an_engine_that_does_not_say_its_precision_is_refused(fault: str) -> None:
    with pytest.raises(ConfigurationError, match="must say its own"):
        compare(
            _titanic_like(),
            BinaryCrossEntropy(),
            (_rows(8, 14), _targets(8)),
            engines=("light", getattr(broken_engines, fault)()),
        )


# --- mixed precisions ----------------------------------------------------------------------------


def test_products_kept_in_bfloat16_as_torch_keeps_them_are_within_every_bound() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", mixed_broken_engines.half_outputs()),
    )
    assert found.within, found


def test_functions_computed_in_bfloat16_are_named_where_they_read_a_products_output() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", mixed_broken_engines.half_values()),
    )
    first = _named(found, "sigmoid", "loss", "way back")
    assert first.ratio > 100


def test_float16_said_as_bfloat16_is_named_past_float16s_range() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14, scale=1e5), _targets(32)),  # beyond 65,504 after rounding
        engines=("light", mixed_broken_engines.float16_claims_bfloat16()),
    )
    assert _named(found, "matmul_bias", "dense", "forward").ratio == float("inf")


def test_four_bits_said_as_bfloat16_are_named_at_the_first_product() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", mixed_broken_engines.four_bits_claims_bfloat16()),
    )
    _named(found, "matmul_bias", "dense", "forward")


def test_sums_in_bfloat16_are_named_at_the_loss_mean() -> None:
    found = compare(
        _titanic_like(),
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", mixed_broken_engines.half_sums()),
    )
    assert _named(found, "mean", "loss", "forward").rule == "binary_cross_entropy"


def test_a_bfloat16_accumulator_is_named_on_a_long_product() -> None:
    half_ulp = np.float32(2.0**-9)  # lost whole when added to 1 in bfloat16
    found = compare(
        Network([Dense(16, init="ones"), Relu(), Dense(1)]),
        BinaryCrossEntropy(),
        (_adversarial(8, 512, half_ulp), _targets(8)),
        engines=("light", mixed_broken_engines.half_accumulation()),
    )
    assert _named(found, "matmul_bias", "dense", "forward").ratio > 10


# --- the layer operations ------------------------------------------------------------------------


def _embedding_network(length: int, weights: Array) -> Network:
    """ids (N, length) -> an embedding of one value -> Flatten -> Dense(1) of these weights."""
    ids = Input((length,), dtype="int64", name="ids")
    out = Dense(1)(Flatten()(Embedding(2, 1)(ids)))
    return _with_slots(
        Network(inputs=ids, outputs=out),
        {
            "embedding.table": np.zeros((2, 1), np.float32),
            "dense.weights": weights.reshape(-1, 1),
            "dense.bias": np.zeros(1, np.float32),
        },
    )


def test_rows_added_in_float32_claiming_strict_are_named_in_an_embedding_s_way_back() -> None:
    length = 1024
    weights = np.full(length, SMALL, np.float32)
    weights[0] = 1.0  # the one id's gradients: 1, then small terms just over half an ulp
    found = compare(
        _embedding_network(length, weights),
        MeanSquaredError(),
        (np.zeros((1, length), np.int64), np.full((1, 1), -0.5, np.float32)),
        engines=("light", broken_engines.float32_add_rows()),
    )
    first = _named(found, "add_rows", "embedding", "way back")
    assert first.rule == "take_rows" and first.ratio > 10


def test_rows_added_in_another_order_each_call_are_named_by_their_bits() -> None:
    rng = np.random.default_rng(0)
    found = compare(
        _embedding_network(64, rng.normal(size=64).astype(np.float32)),
        MeanSquaredError(),
        (rng.integers(0, 2, (8, 64)), rng.normal(size=(8, 1)).astype(np.float32)),
        engines=("light", broken_engines.add_rows_in_turned_order()),
    )
    first = _named(found, "add_rows", "embedding", "way back")
    assert first.difference <= first.bound  # within its bound: its bits are not its own twice
    assert "gave other bits when run again" in first.detail


class Products(Layer):
    """Each row's sequence times its own transpose: a product of stacks (N, L, D) @ (N, D, L)."""

    def build(self, shape: Shape) -> Shape:
        return (shape[0], shape[0])

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.matmul(x, x, transpose_b=True)


class Weighed(Layer):
    """A sequence (N, L, K) times one weight column (K, 1), the same for every row: a product of
    stacks."""

    def build(self, shape: Shape) -> Shape:
        self.slot("weights", (shape[1], 1), "ones")
        return (shape[0], 1)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        count, depth = x.shape[0], x.shape[2]
        column = ops.reshape(slots["weights"], (1, depth, 1))
        return ops.matmul(x, ops.broadcast_to(column, (count, depth, 1)))


def test_stacks_paired_backwards_are_named_at_the_product_of_stacks() -> None:
    sequences = np.random.default_rng(0).normal(size=(4, 3, 5)).astype(np.float32)
    found = compare(
        Network([Products(), Flatten(), Dense(1)], inputs=(3, 5)),
        BinaryCrossEntropy(),
        (sequences, _targets(4)),
        engines=("light", broken_engines.stacks_paired_backwards()),
    )
    assert _named(found, "batch_matmul", "products", "forward").rule == "batch_matmul"


def test_erf_as_gelu_s_tanh_approximation_is_named_in_the_gelu() -> None:
    """The engine's own GELU (its reference's calls) runs the broken erf: the operation named
    is the GELU, in the Gelu layer."""
    found = compare(
        Network([Dense(16), Gelu(), Dense(1)]),
        BinaryCrossEntropy(),
        (_rows(32, 14, scale=2.0), _targets(32)),
        engines=("light", broken_engines.tanh_erf()),
    )
    assert _named(found, "gelu", "gelu", "forward").ratio > 1


def test_a_dense_layer_s_bias_taken_in_bfloat16_is_named_at_its_product() -> None:
    rng = np.random.default_rng(2)
    network = _with_slots(
        Network([Dense(16), Relu(), Dense(1)], inputs=14),
        {
            "dense.weights": rng.normal(size=(14, 16)).astype(np.float32),
            "dense.bias": rng.normal(size=16).astype(np.float32),  # not bfloat16's values
            "dense_1.weights": rng.normal(size=(16, 1)).astype(np.float32),
            "dense_1.bias": np.zeros(1, np.float32),
        },
    )
    found = compare(
        network,
        BinaryCrossEntropy(),
        (_rows(32, 14), _targets(32)),
        engines=("light", broken_engines.bias_in_bfloat16()),
    )
    assert _named(found, "matmul_bias", "dense", "forward").ratio > 1


def test_gelu_s_way_back_without_its_density_is_named_going_back() -> None:
    found = compare(
        Network([Dense(16), Gelu(), Dense(1)]),
        BinaryCrossEntropy(),
        (_rows(32, 14, scale=2.0), _targets(32)),
        engines=("light", broken_engines.gelu_forgets_its_density()),
    )
    assert _named(found, "gelu_back", "gelu", "way back").ratio > 1


def test_layer_norm_s_way_back_without_the_spread_s_share_is_named_going_back() -> None:
    found = compare(
        Network([Dense(8), LayerNorm(), Dense(1)]),
        MeanSquaredError(),
        (_rows(16, 6, scale=3.0), _rows(16, 1, seed=2)),
        engines=("light", broken_engines.layer_norm_forgets_the_spread()),
    )
    first = _named(found, "layer_norm_back", "layernorm", "way back")
    assert first.family == "chains" and first.ratio > 1
    assert all(row.ratio <= 1 for row in found.rows if row.operation == "layer_norm")


def test_an_lstm_s_way_back_without_the_forget_gate_s_slope_is_named_at_a_position() -> None:
    rng = np.random.default_rng(0)
    found = compare(
        Network([LSTM(4), Dense(3)], inputs=(5, 2)),
        CrossEntropy(),
        (rng.normal(size=(8, 5, 2)).astype(np.float32), rng.integers(0, 3, 8)),
        engines=("light", broken_engines.lstm_forgets_the_forget_slope()),
    )
    first = _named(found, "lstm_cell_back", "lstm", "way back")
    assert first.family == "chains" and first.ratio > 1


def test_a_pair_pool_selecting_the_last_maximum_is_named_on_ties() -> None:
    counts = np.random.default_rng(0).integers(0, 3, (4, 1, 4, 6)).astype(np.float32)  # ties
    found = compare(
        Network([MaxPool2D((2, 3)), Flatten(), Dense(1)], inputs=(1, 4, 6)),
        BinaryCrossEntropy(),
        (counts, _targets(4)),
        engines=("light", broken_engines.last_maximum_pair()),
    )
    first = _named(found, "maxpool2d_pair", "maxpool2d", "forward")
    assert first.bound == 0.0 and "worst: output 2 of 2" in first.detail  # the selection


def test_take_rows_that_flattens_its_ids_is_named_by_its_shape() -> None:
    rng = np.random.default_rng(0)
    found = compare(
        _embedding_network(6, rng.normal(size=6).astype(np.float32)),
        MeanSquaredError(),
        (rng.integers(0, 2, (4, 6)), rng.normal(size=(4, 1)).astype(np.float32)),
        engines=("light", broken_engines.flat_take_rows()),
    )
    first = _named(found, "take_rows", "embedding", "forward")
    assert "gave (24, 1) where the reference gives (4, 6, 1)" in first.detail
    assert any("the step stopped after it" in note for note in found.notes)


class Present(Layer):
    """1 where an int64 id (a hash, say) is above 0, else 0: the ids' values read on the engine."""

    takes = ("int64",)

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        return ops.greater(x, 0.0)


def test_integers_put_through_float64_are_named_where_the_batch_is_put() -> None:
    hashes = Input((4,), dtype="int64", name="hashes")
    network = Network(inputs=hashes, outputs=Dense(1)(Present()(hashes)))
    big = np.array([[2**62 + 1, 3, 2**53 + 1, 7]] * 8, np.int64)  # beyond 2^53: float64 rounds
    found = compare(
        network,
        BinaryCrossEntropy(),
        (big, _targets(8)),
        engines=("light", broken_engines.integers_through_float64()),
    )
    first = _first(found)
    assert (first.operation, first.phase, first.family) == ("put", "batch", "transfers"), found


def test_a_bfloat16_accumulator_of_stacks_is_named_on_a_long_product_of_stacks() -> None:
    half_ulp = np.float32(2.0**-9)
    sequences = np.stack([_adversarial(3, 512, half_ulp)] * 4)  # (4, 3, 512)
    found = compare(
        Network([Weighed(), Flatten(), Dense(1)], inputs=(3, 512)),
        BinaryCrossEntropy(),
        (sequences, _targets(4)),
        engines=("light", mixed_broken_engines.half_stack_accumulation()),
    )
    assert _named(found, "batch_matmul", "weighed", "forward").ratio > 10

"""Engines broken on purpose, each in one way the contract must catch (and the check that should).

Each is the example engine (which keeps the whole contract) with one thing broken.

Each factory is a `module:factory` spec: `--engine broken_engines:float16_products`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from example_engine import ExampleEngine

from deepsharp.core.autodiff.functions import RULES, Rule
from deepsharp.core.autodiff.tensor import Node
from deepsharp.core.engine import EngineIdentity, fused

Array = Any


class Float16Products(ExampleEngine):
    """Adds its matrix products in float16."""

    name = "float16-products"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        half = np.matmul(
            (a.T if transpose_a else a).astype(np.float16),
            (b.T if transpose_b else b).astype(np.float16),
        )
        return half.astype(np.float32)


class Float32LargeProducts(ExampleEngine):
    """Adds large products in float32, as a plain BLAS call would (small ones stay honest)."""

    name = "float32-large-products"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a, b = (a.T if transpose_a else a), (b.T if transpose_b else b)
        if a.shape[0] * b.shape[1] < 1000:
            return super().matmul(a, b)
        return np.matmul(a, b).astype(np.float32)


class GuessesSquareTransposes(ExampleEngine):
    """Products (and stacks of them) that guess from the shapes whether to transpose the first
    operand: a square one looks the same either way, so it is never transposed."""

    name = "guesses-square-transposes"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        if a.ndim == 2 and a.shape[0] == a.shape[1]:
            transpose_a = False
        return super().matmul(a, b, transpose_a, transpose_b)

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        if a.shape[-1] == a.shape[-2]:
            transpose_a = False
        return super().batch_matmul(a, b, transpose_a, transpose_b)


class DropsLastTerm(ExampleEngine):
    """A sum that leaves out the last term along the last axis it reduces."""

    name = "drops-last-term"

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        last = max(axes)
        kept = np.take(x, np.arange(x.shape[last] - 1), axis=last)
        return np.sum(kept, axis=axes, dtype=np.float64, keepdims=keepdims).astype(np.float32)


class Float32DropsLastTerm(DropsLastTerm):
    """The same dropped term in an engine whose precision is `float32`: the wider bound its
    totals are held to must still catch it."""

    name = "float32-drops-last-term"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="float32")


class FlipsABit(ExampleEngine):
    """A reshape that flips the lowest bit of its first value."""

    name = "flips-a-bit"

    def reshape(self, x: Array, shape: tuple[int, ...]) -> Array:
        out = np.array(x.reshape(shape))
        if out.size:
            out.reshape(-1).view(np.uint32 if out.dtype == np.float32 else np.uint64)[0] ^= 1
        return out


_OPERATIONS = [
    "matmul",
    "sum",
    "mean",
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "greater",
    "where",
    "neg",
    "abs",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "copy",
    "reshape",
    "transpose",
    "slice",
    "take_rows",
    "pad",
    "broadcast_to",
    "max",
    "one_hot",
]


class RoundTrips(ExampleEngine):
    """Copies every result out to the host and back in: right values, far too many transfers."""

    name = "round-trips"


def _round_trip(operation: str) -> Any:
    def run(self: RoundTrips, *args: Any, **kwargs: Any) -> Array:
        return self.put(self.get(getattr(ExampleEngine, operation)(self, *args, **kwargs)))

    return run


for _operation in _OPERATIONS:
    setattr(RoundTrips, _operation, _round_trip(_operation))


class _HalfGradient(Rule):
    """The matrix product's rule, sending back half the gradient it should."""

    name = "matmul"

    def __init__(self, honest: Rule) -> None:
        self.honest = honest

    def forward(self, engine: Any, *args: Any, **attrs: Any) -> Any:
        return self.honest.forward(engine, *args, **attrs)

    def backward(self, engine: Any, node: Node, grad: Any) -> Any:
        return tuple(
            None if g is None else engine.mul(g, 0.5)
            for g in self.honest.backward(engine, node, grad)
        )


def float16_products() -> ExampleEngine:
    return Float16Products()


def float32_large_products() -> ExampleEngine:
    return Float32LargeProducts()


def guesses_square_transposes() -> ExampleEngine:
    return GuessesSquareTransposes()


def drops_last_term() -> ExampleEngine:
    return DropsLastTerm()


def float32_drops_last_term() -> ExampleEngine:
    return Float32DropsLastTerm()


def flips_a_bit() -> ExampleEngine:
    return FlipsABit()


def round_trips() -> ExampleEngine:
    return RoundTrips()


def half_gradient_rule() -> ExampleEngine:
    """An honest engine in a process whose rulebook's matmul rule is broken (a subprocess only)."""
    if not isinstance(RULES["matmul"], _HalfGradient):
        RULES["matmul"] = _HalfGradient(RULES["matmul"])
    return ExampleEngine()


# --- faults of precision and of the totals' order -----------------------------------------------


def _keep_bits(values: Array, bits: int) -> Array:
    """float32 values rounded (to nearest, ties to even) to `bits` bits of mantissa: 10 for
    TF32's products, 7 for bfloat16's."""
    raw = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    drop = 23 - bits
    odd = (raw >> np.uint64(drop)) & np.uint64(1)
    rounded = (raw + np.uint64((1 << (drop - 1)) - 1) + odd) >> np.uint64(drop) << np.uint64(drop)
    return rounded.astype(np.uint32).view(np.float32)


class _ClaimsFloat32(ExampleEngine):
    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="float32")


class Float32ClaimsStrict(ExampleEngine):
    """Products, sums and means in NumPy's float32 kernels, in an engine that says `strict`."""

    name = "float32-claims-strict"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return np.matmul(a.T if transpose_a else a, b.T if transpose_b else b)

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.sum(x, axis=axes, keepdims=keepdims)

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return np.mean(x, axis=axes, keepdims=keepdims)


class TF32Products(_ClaimsFloat32):
    """Matrix products on inputs rounded to TF32's 10 bits of mantissa (as a card with TF32 on
    adds them), in an engine that says `float32`."""

    name = "tf32-products"
    bits = 10

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a, b = (a.T if transpose_a else a), (b.T if transpose_b else b)
        return np.matmul(_keep_bits(a, self.bits), _keep_bits(b, self.bits))


class BFloat16Products(TF32Products):
    """Matrix products on bfloat16 inputs (7 bits of mantissa), in an engine that says `float32`."""

    name = "bfloat16-products"
    bits = 7


class BiasInBfloat16(ExampleEngine):
    """A dense layer's fast path of its own whose bias is taken in bfloat16 (7 bits of
    mantissa), the product right, in an engine that says `strict`: as a half-format Linear
    kernel would, where the precision does not allow it."""

    name = "bias-in-bfloat16"

    def matmul_bias(self, x: Array, w: Array, bias: Array, transpose_b: bool = False) -> Array:
        out = self.matmul(x, w, False, transpose_b)
        return np.add(out, _keep_bits(bias, 7), out=out)


class MixedBFloat16Products(BFloat16Products):
    """The same bfloat16 products in an engine that says so (`mixed_bfloat16`): not broken,
    held to the mixed bound (3·2^-8 + (n + 1)u)·Σ|terms| on products, it passes."""

    name = "mixed-bfloat16-products"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="mixed_bfloat16")


class Float32TrailingSums(ExampleEngine):
    """A sum over the trailing axes added in float32 (NumPy's pairwise sum along the last axis),
    every other sum in float64, in an engine that says `strict`."""

    name = "float32-trailing-sums"

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        if tuple(sorted(axes)) != tuple(range(x.ndim - len(axes), x.ndim)):
            return super().sum(x, axes, keepdims)
        rows = x.reshape(*x.shape[: x.ndim - len(axes)], -1)
        total = np.add.reduce(rows, axis=-1, dtype=np.float32)
        return total.reshape(*total.shape, *(1,) * len(axes)) if keepdims else total


class StrideBlindPointwiseWeightGrad(ExampleEngine):
    """A 1x1 convolution's weight gradient that forgets the stride (it reads the first oh x ow
    places of each image instead of every stride-th one)."""

    name = "stride-blind-pointwise-weight-grad"

    def conv2d_weight_grad(
        self, x: Array, gy: Array, kernel: tuple[int, int], stride: int, padding: Any
    ) -> Array:
        if tuple(kernel) != (1, 1):
            return super().conv2d_weight_grad(x, gy, kernel, stride, padding)
        (top, bottom), (left, right) = padding
        padded = np.pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)])
        out_h, out_w = gy.shape[2:]
        places = padded[:, :, :out_h, :out_w]  # should be [:, :, ::stride, ::stride]
        weights = np.einsum("nchw,nfhw->fc", places, gy, dtype=np.float64)
        return weights.astype(np.float32)[:, :, None, None]


class OverwritesItsInput(ExampleEngine):
    """A tanh that works in place: the right values, and its input is gone."""

    name = "overwrites-its-input"

    def tanh(self, x: Array) -> Array:
        return np.tanh(x, out=x)


class LosesTheTails(ExampleEngine):
    """Functions right to 1e-5 + 1.3e-6·|ref| that lose their tails: sigmoid as
    0.5·(1 + tanh(x/2)) (0 below -17), exp flushed to 0 below e^-16, softplus as
    log(1 + e^x) (0 below -17) and log1p as log(1 + x) (0 for |x| below 6e-8)."""

    name = "loses-the-tails"

    def sigmoid(self, x: Array) -> Array:
        return np.float32(0.5) * (np.float32(1.0) + np.tanh(x * np.float32(0.5)))

    def exp(self, x: Array) -> Array:
        return np.where(x < -16, np.float32(0.0), np.exp(x))

    def softplus(self, x: Array) -> Array:
        return np.where(x > 20, x, np.log(np.float32(1.0) + np.exp(np.minimum(x, 20))))

    def log1p(self, x: Array) -> Array:
        return np.log(np.float32(1.0) + x)


class ClipsWithoutTheRoot(ExampleEngine):
    """Global gradient clipping as a fast path of its own that takes the squares' total for the
    norm, forgetting its root: gradients of a norm above 1 clipped too far, below 1 too little."""

    name = "clips-without-the-root"

    def global_clip_norm(self, grads: Sequence[Array], *, clip_norm: float) -> list[Array]:
        total = sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads)
        factor = np.float32(clip_norm / max(total, clip_norm))
        return [g * factor for g in grads]


class DecaysOnlyTheFirstSlot(ExampleEngine):
    """AdamW's decay as a fast path of its own that decays the first slot it is handed and
    leaves the others as they were."""

    name = "decays-only-the-first-slot"

    def decay_update(self, slots: Sequence[Array], *, factor: float) -> None:
        if slots:
            slots[0] *= np.float32(factor)


# --- faults of the layer operations ------------------------------------------------------------


class Float32AddRows(ExampleEngine):
    """Rows added in float32, value after value (np.add.at), in an engine that says `strict`."""

    name = "float32-add-rows"

    def add_rows(self, values: Array, indices: Array, rows: int) -> Array:
        out = np.zeros((rows, *values.shape[indices.ndim :]), np.float32)
        np.add.at(out, indices, values)
        return out


class AddRowsInTurnedOrder(_ClaimsFloat32):
    """Rows added in float32, each call the other way round from the last (as atomic adds land
    in whatever order threads reach them): within the float32 bound, other bits each run."""

    name = "add-rows-in-turned-order"
    calls = 0

    def add_rows(self, values: Array, indices: Array, rows: int) -> Array:
        self.calls += 1
        row_shape = values.shape[indices.ndim :]
        ids, flat = indices.reshape(-1), values.reshape(indices.size, -1)
        if self.calls % 2 == 0:
            ids, flat = ids[::-1], flat[::-1]
        out = np.zeros((rows, flat.shape[1]), np.float32)
        np.add.at(out, ids, flat)
        return out.reshape(rows, *row_shape)


class StacksPairedBackwards(ExampleEngine):
    """A product of stacks that pairs a's first stack with b's last, and so on."""

    name = "stacks-paired-backwards"

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        if a.ndim > 2:
            lead = b.shape[:-2]
            b = b.reshape(-1, *b.shape[-2:])[::-1].reshape(*lead, *b.shape[-2:])
        return super().batch_matmul(a, b, transpose_a, transpose_b)


class TanhErf(ExampleEngine):
    """erf as GELU's tanh approximation has it, tanh(√(2/π)·(z + 0.044715·z³)), z = √2·x:
    within 3e-4 of erf, far outside the value tolerance."""

    name = "tanh-erf"

    def erf(self, x: Array) -> Array:
        z = np.float32(np.sqrt(2.0)) * x
        return np.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (z + np.float32(0.044715) * z**3))


class GeluForgetsItsDensity(ExampleEngine):
    """GELU's way back of its own that sends grad·Φ(x) alone, the x·φ(x) of the product rule
    forgotten: right at 0 and far out, off by up to 0.17·|grad| around |x| = 1.4."""

    name = "gelu-forgets-its-density"

    def gelu(self, x: Array) -> Array:
        return fused.gelu_reference(self, x)

    def gelu_back(self, x: Array, grad: Array) -> Array:
        cdf = self.mul(fused.gelu_rising(self, x), 0.5)
        return self.mul(grad, cdf)


class LayerNormForgetsTheSpread(ExampleEngine):
    """LayerNorm's way back of its own that leaves out n·mean(dn·n), the normalised values'
    share of the gradient: right where the gradient is orthogonal to them."""

    name = "layer-norm-forgets-the-spread"

    def layer_norm(self, x: Array, scale: Array, shift: Array, epsilon: float) -> Array:
        return fused.layer_norm_reference(self, x, scale, shift, epsilon)

    def layer_norm_back(
        self, x: Array, scale: Array, grad: Array, epsilon: float
    ) -> tuple[Array, Array, Array]:
        _, toward_scale, toward_shift = fused.layer_norm_back_reference(
            self, x, scale, grad, epsilon
        )
        centered = x - x.mean(-1, keepdims=True, dtype=np.float64).astype(np.float32)
        deviation = np.sqrt((centered * centered).mean(-1, keepdims=True) + np.float32(epsilon))
        toward_normed = grad * scale
        kept = toward_normed - toward_normed.mean(-1, keepdims=True)
        return (kept / deviation).astype(np.float32), toward_scale, toward_shift


class LastMaximumPair(ExampleEngine):
    """Max-pooling over a pair that selects each window's last maximum, not its first."""

    name = "last-maximum-pair"

    def maxpool2d_pair(self, x: Array, pool: tuple[int, int]) -> tuple[Array, Array]:
        maxima, _ = super().maxpool2d_pair(x, pool)
        (count, channels, height, width), (down, across) = x.shape, pool
        out_h, out_w = height // down, width // across
        grid = x[:, :, : out_h * down, : out_w * across]
        grid = grid.reshape(count, channels, out_h, down, out_w, across).transpose(0, 1, 2, 4, 3, 5)
        windows = grid.reshape(count, channels, out_h, out_w, down * across)
        return maxima, down * across - 1 - windows[..., ::-1].argmax(-1)


class FlatTakeRows(ExampleEngine):
    """take_rows that flattens its indices: ids (N, L) give rows (N·L, D), not (N, L, D)."""

    name = "flat-take-rows"

    def take_rows(self, x: Array, rows: Array) -> Array:
        return np.take(x, rows.reshape(-1), axis=0)


class IntegersThroughFloat64(ExampleEngine):
    """Integers put through float64: exact to 2^53, not beyond (ids are, a hash's are not)."""

    name = "integers-through-float64"

    def put(self, array: Array) -> Array:
        source = np.asarray(array)
        if source.dtype.kind in "iub":
            self.counters.transfers_in += 1
            return source.astype(np.float64).astype(np.int64)
        return super().put(array)


class MeanOverflows(ExampleEngine):
    """A mean that adds in float64 but rounds the total to float32 before it divides: two
    roundings, within 3u·Σ|terms| wherever the total's sum fits float32, and inf where it does
    not (the mean of [3e38, 3e38, 0, 0]), as the test engine's did."""

    name = "mean-overflows"

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        count = int(np.prod([x.shape[axis] for axis in axes])) if axes else 1
        with np.errstate(over="ignore"):
            total = np.sum(x, axis=axes, dtype=np.float64, keepdims=keepdims).astype(np.float32)
        return np.divide(total, np.float32(count), dtype=np.float32)


class SharesItsMemory(ExampleEngine):
    """A `get` that gives the engine's own array, not a copy: the right values, counted, and a
    user's copy of the slots that moves with the next step."""

    name = "shares-its-memory"

    def get(self, handle: Array) -> Array:
        self.counters.transfers_out += 1
        return np.asarray(handle)  # the handle itself (a scalar wrapped)


class IgnoresSmallMomentum(ExampleEngine):
    """SGD's update as a fast path of its own that drops momentum below 0.5 (plain SGD there):
    right at 0, 0.5, 0.9 and 0.99, the values a suite might try alone."""

    name = "ignores-small-momentum"

    def sgd_update(
        self,
        slots: Sequence[Array],
        grads: Sequence[Array],
        velocities: Sequence[Array],
        *,
        learning_rate: float,
        momentum: float,
    ) -> None:
        super().sgd_update(
            slots,
            grads,
            velocities,
            learning_rate=learning_rate,
            momentum=momentum if momentum >= 0.5 else 0.0,
        )


class LstmForgetsTheForgetSlope(ExampleEngine):
    """An LSTM position's way back of its own that sends the cell's gradient to the forget gate
    without the sigmoid's slope f·(1 - f): right at the first position, where there is no
    last cell to forget."""

    name = "lstm-forgets-the-forget-slope"

    def lstm_cell_back(
        self,
        dh: Array,
        dc: Array | None,
        entering: Array,
        forget: Array,
        candidate: Array,
        out: Array,
        squashed: Array,
        cell: Array | None,
    ) -> tuple[Array, Array | None]:
        gates, carried = super().lstm_cell_back(
            dh, dc, entering, forget, candidate, out, squashed, cell
        )
        if cell is None:
            return gates, carried
        units = forget.shape[1]
        towards_cell = dh * out * (1 - squashed * squashed) + (0 if dc is None else dc)
        gates = np.array(gates, copy=True)
        gates[:, units : 2 * units] = towards_cell * cell
        return gates, carried


# --- engines that do not say what they are ------------------------------------------------------


class NoIdentity(ExampleEngine):
    """An engine without an identity (so without a precision)."""

    name = "no-identity"
    identity = None  # type: ignore[assignment]


class UnknownPrecision(ExampleEngine):
    """An identity whose precision is none of the precisions there are."""

    name = "unknown-precision"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="fast")


def float32_claims_strict() -> ExampleEngine:
    return Float32ClaimsStrict()


def tf32_products() -> ExampleEngine:
    return TF32Products()


def bfloat16_products() -> ExampleEngine:
    return BFloat16Products()


def bias_in_bfloat16() -> ExampleEngine:
    return BiasInBfloat16()


def mixed_bfloat16_products() -> ExampleEngine:
    return MixedBFloat16Products()


def float32_trailing_sums() -> ExampleEngine:
    return Float32TrailingSums()


def stride_blind_pointwise_weight_grad() -> ExampleEngine:
    return StrideBlindPointwiseWeightGrad()


def overwrites_its_input() -> ExampleEngine:
    return OverwritesItsInput()


def loses_the_tails() -> ExampleEngine:
    return LosesTheTails()


def clips_without_the_root() -> ExampleEngine:
    return ClipsWithoutTheRoot()


def decays_only_the_first_slot() -> ExampleEngine:
    return DecaysOnlyTheFirstSlot()


def mean_overflows() -> ExampleEngine:
    return MeanOverflows()


def shares_its_memory() -> ExampleEngine:
    return SharesItsMemory()


def ignores_small_momentum() -> ExampleEngine:
    return IgnoresSmallMomentum()


def no_identity() -> ExampleEngine:
    return NoIdentity()


def unknown_precision() -> ExampleEngine:
    return UnknownPrecision()


def float32_add_rows() -> ExampleEngine:
    return Float32AddRows()


def add_rows_in_turned_order() -> ExampleEngine:
    return AddRowsInTurnedOrder()


def stacks_paired_backwards() -> ExampleEngine:
    return StacksPairedBackwards()


def tanh_erf() -> ExampleEngine:
    return TanhErf()


def last_maximum_pair() -> ExampleEngine:
    return LastMaximumPair()


def flat_take_rows() -> ExampleEngine:
    return FlatTakeRows()


def integers_through_float64() -> ExampleEngine:
    return IntegersThroughFloat64()


def lstm_forgets_the_forget_slope() -> ExampleEngine:
    return LstmForgetsTheForgetSlope()


def gelu_forgets_its_density() -> ExampleEngine:
    return GeluForgetsItsDensity()


def layer_norm_forgets_the_spread() -> ExampleEngine:
    return LayerNormForgetsTheSpread()

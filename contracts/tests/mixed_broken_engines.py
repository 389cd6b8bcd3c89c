"""Mixed-precision engines, broken on purpose in the ways a half format tempts, and one honest
engine that keeps products' outputs in the half format as torch's does (the contract must pass
it). Each is the light engine at `mixed_bfloat16` (`example_engine`'s fused updates) with one thing
changed; each factory is a `module:factory` spec: `--engine mixed_broken_engines:half_outputs`.

The half format is emulated on NumPy: bfloat16 values held in float32, and a product's output
marked as "held in the half format" by the array subclass `Half`, which every NumPy function
drops (moves such as reshape and slices keep it, as an engine's moves keep the format).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from example_engine import ExampleEngine

from deepsharp.core.engine import EngineIdentity
from deepsharp.core.engine.half import to_bfloat16, to_float16

Array = Any


class Half(np.ndarray):  # type: ignore[type-arg]
    """A float32 array of bfloat16 values, held in the half format: a product's output. NumPy's
    functions see a plain array and give one."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        plain = [np.asarray(x) if isinstance(x, Half) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(
                np.asarray(x) if isinstance(x, Half) else x for x in kwargs["out"]
            )
        return getattr(ufunc, method)(*plain, **kwargs)


def half(values: Array) -> Half:
    """`values` rounded to bfloat16, held as a product's output."""
    return np.ascontiguousarray(to_bfloat16(values)).view(Half)


def is_half(value: Any) -> bool:
    return isinstance(value, Half)


class _MixedBFloat16(ExampleEngine):
    """The light engine at mixed_bfloat16, its identity naming the example's."""

    def __init__(self) -> None:
        super().__init__("mixed_bfloat16")

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity(self.name, precision="mixed_bfloat16")


class HalfOutputs(_MixedBFloat16):
    """Honest: products and convolutions keep their outputs in bfloat16 (rounded once more, the
    third u_h of the bound), a bias added onto one stays bfloat16 (the bias rounded to it, the
    float32 sum rounded once), every other operation computes in float32 — what
    torch:cpu:mixed_bfloat16 does."""

    name = "half-outputs"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return half(super().matmul(a, b, transpose_a, transpose_b))

    def matmul_bias(self, x: Array, w: Array, bias: Array, transpose_b: bool = False) -> Array:
        # as libtorch's addmm on half inputs: the bias in bfloat16 one more term of the float32
        # total, the sum rounded once
        return half(super().matmul(x, w, False, transpose_b) + to_bfloat16(bias))

    def conv2d(self, x: Array, w: Array, stride: int, padding: Any) -> Array:
        return half(super().conv2d(x, w, stride, padding))

    def conv2d_bias(self, x: Array, w: Array, bias: Array, stride: int, padding: Any) -> Array:
        return half(super().conv2d_bias(x, w, bias, stride, padding))

    def conv2d_weight_grad(
        self, x: Array, gy: Array, kernel: Any, stride: int, padding: Any
    ) -> Array:
        return half(super().conv2d_weight_grad(x, gy, kernel, stride, padding))

    def conv2d_weight_bias_grad(
        self, x: Array, gy: Array, kernel: Any, stride: int, padding: Any
    ) -> Any:
        weights, biases = super().conv2d_weight_bias_grad(x, gy, kernel, stride, padding)
        return half(weights), biases

    def conv2d_fold(self, gy: Array, w: Array, image: Any, stride: int, padding: Any) -> Array:
        return half(super().conv2d_fold(gy, w, image, stride, padding))

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        return half(super().batch_matmul(a, b, transpose_a, transpose_b))

    def add(self, a: Any, b: Any) -> Array:
        if is_half(a) and isinstance(b, np.ndarray) and not is_half(b) and b.size < a.size:
            # a bias onto a product's output: taken and kept in the half format
            return half(super().add(a, to_bfloat16(b)))
        return super().add(a, b)


class HalfValues(HalfOutputs):
    """Computes every value-by-value operation on a product's output in bfloat16 (its result
    rounded), as an engine that keeps everything in the half format would: exp, log, the loss's
    arithmetic. On float32 inputs it is exact, so only a product's output gives it away."""

    name = "half-values"


def _in_half(operation: str) -> Any:
    def run(self: HalfValues, *args: Any, **kwargs: Any) -> Array:
        result = getattr(HalfOutputs, operation)(self, *args, **kwargs)
        if any(is_half(arg) for arg in args):
            return half(result)
        return result

    return run


for _operation in (
    "erf",
    "exp",
    "log",
    "log1p",
    "softplus",
    "sqrt",
    "tanh",
    "sigmoid",
    "sub",
    "mul",
    "div",
    "neg",
):
    setattr(HalfValues, _operation, _in_half(_operation))


class Float16ClaimsBFloat16(_MixedBFloat16):
    """Says mixed_bfloat16, but rounds products' inputs to float16: more bits, far less range
    (beyond 65,504 infinite, below 6.1e-5 fewer bits)."""

    name = "float16-claims-bfloat16"

    def __init__(self) -> None:
        super().__init__()
        self.totals.half = to_float16  # type: ignore[attr-defined]


def _four_bits(values: Array) -> Array:
    """float32 values rounded to 4 significant bits (to nearest, ties to even)."""
    raw = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    drop = 20
    odd = (raw >> np.uint64(drop)) & np.uint64(1)
    kept = (raw + np.uint64((1 << (drop - 1)) - 1) + odd) >> np.uint64(drop) << np.uint64(drop)
    return kept.astype(np.uint32).view(np.float32)


class FourBitsClaimsBFloat16(_MixedBFloat16):
    """Says mixed_bfloat16, but rounds products' inputs to 4 significant bits (bfloat16 has 8)."""

    name = "four-bits-claims-bfloat16"

    def __init__(self) -> None:
        super().__init__()
        self.totals.half = _four_bits  # type: ignore[attr-defined]


class HalfSums(_MixedBFloat16):
    """Honest products, but sums and means taken on bfloat16 inputs and given in bfloat16: the
    speed of a mixed precision claimed for totals the contract holds to float32's bound."""

    name = "half-sums"

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return to_bfloat16(super().sum(to_bfloat16(x), axes, keepdims))

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool = False) -> Array:
        return to_bfloat16(super().mean(to_bfloat16(x), axes, keepdims))


class HalfAccumulation(_MixedBFloat16):
    """Products whose running totals are kept in bfloat16, each partial sum rounded (a half
    accumulator, as cuBLAS's reduced-precision reductions may add): n·u_h astray, not 3u_h."""

    name = "half-accumulation"

    def matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a = to_bfloat16(a.T if transpose_a else a)
        b = to_bfloat16(b.T if transpose_b else b)
        total = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k in range(a.shape[1]):
            total = to_bfloat16(total + np.outer(a[:, k], b[k]))
        return total


class HalfStackAccumulation(_MixedBFloat16):
    """Products of stacks whose running totals are kept in bfloat16, as `HalfAccumulation`'s
    products are: n·u_h astray, not 3u_h."""

    name = "half-stack-accumulation"

    def batch_matmul(
        self, a: Array, b: Array, transpose_a: bool = False, transpose_b: bool = False
    ) -> Array:
        a = to_bfloat16(np.swapaxes(a, -1, -2) if transpose_a else a)
        b = to_bfloat16(np.swapaxes(b, -1, -2) if transpose_b else b)
        total = np.zeros((*a.shape[:-1], b.shape[-1]), np.float32)
        for k in range(a.shape[-1]):
            total = to_bfloat16(total + a[..., :, k, None] * b[..., None, k, :])
        return total


def half_stack_accumulation() -> HalfStackAccumulation:
    return HalfStackAccumulation()


def half_outputs() -> HalfOutputs:
    return HalfOutputs()


def half_values() -> HalfValues:
    return HalfValues()


def float16_claims_bfloat16() -> Float16ClaimsBFloat16:
    return Float16ClaimsBFloat16()


def four_bits_claims_bfloat16() -> FourBitsClaimsBFloat16:
    return FourBitsClaimsBFloat16()


def half_sums() -> HalfSums:
    return HalfSums()


def half_accumulation() -> HalfAccumulation:
    return HalfAccumulation()

"""Edges of the torch engine's operations that trial TE found: a number divided by a tensor,
LayerNorm's way back at strict on another thread count, convolutions of no channels or no
filters, stacked products of no terms. Each gave other bits, another shape or an error than
the light engine."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deepsharp.engines.light import LightEngine  # noqa: E402
from deepsharp.engines.torch import TorchEngine  # noqa: E402

LIGHT = LightEngine()
PRECISIONS = ["float32", "strict", "mixed_bfloat16"]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_number_divided_by_a_tensor_is_numpy_s_quotient(precision: str) -> None:
    """Before: libtorch's number / tensor multiplied by the reciprocal: a unit off on a third
    of ordinary values, inf for 1e-38 / 1e-39, NaN for 0 / 1e-45."""
    engine = TorchEngine.on_cpu(precision)
    x = (np.random.default_rng(0).standard_normal(10_000) * 10).astype(np.float32)
    x[:3] = [1e-39, 1e-45, 7.0]
    with np.errstate(all="ignore"):
        for number in (3.0, 0.1, 0.0, 1e-38):
            expected = np.float32(number) / x
            got = engine.get(engine.div(number, engine.put(x)))
            np.testing.assert_array_equal(got, expected)


def test_layer_norm_s_way_back_at_strict_is_the_same_bits_on_any_thread_count() -> None:
    """Before: the scale's and the shift's gradients were libtorch's float32 totals, split
    among its threads: up to 3.2e-4 apart between one thread and two."""
    engine = TorchEngine.on_cpu("strict")
    rng = np.random.default_rng(0)
    x, grad = (rng.standard_normal((4096, 64)).astype(np.float32) for _ in range(2))
    scale = rng.standard_normal(64).astype(np.float32)
    threads = torch.get_num_threads()
    made = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            gradients = engine.layer_norm_back(
                engine.put(x), engine.put(scale), engine.put(grad), 1e-5
            )
            made.append([engine.get(g).tobytes() for g in gradients])
    finally:
        torch.set_num_threads(threads)
    assert made[0] == made[1]
    # the scale's and the shift's: float64 totals of the float32 terms, rounded once
    mean = x.astype(np.float64).mean(1, keepdims=True)
    root = 1 / np.sqrt(x.astype(np.float64).var(1, keepdims=True) + 1e-5)
    shift = np.frombuffer(made[0][2], np.float32)
    np.testing.assert_array_equal(shift, grad.astype(np.float64).sum(0).astype(np.float32))
    scale_grad = np.frombuffer(made[0][1], np.float32)
    expected = (grad * ((x - mean) * root)).sum(0)
    assert np.abs(scale_grad - expected).max() <= 3 * 2**-24 * np.abs(grad * x).sum(0).max() * 4


@pytest.mark.parametrize("precision", PRECISIONS)
def test_convolutions_of_no_channels_or_no_filters_and_products_of_no_terms(
    precision: str,
) -> None:
    """Before: a convolution of 0 channels came out (2, 0, 3, 3), not (2, 3, 3, 3); of 0
    filters, a RuntimeError; a stacked product of 0 terms, a RuntimeError of reshape."""
    engine = TorchEngine.on_cpu(precision)
    none = ((0, 0), (0, 0))
    for x_shape, w_shape in (((2, 0, 5, 5), (3, 0, 3, 3)), ((2, 2, 5, 5), (0, 2, 3, 3))):
        x, w = np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)
        expected = LIGHT.conv2d(x, w, 1, none)
        got = engine.get(engine.conv2d(engine.put(x), engine.put(w), 1, none))
        assert got.shape == expected.shape and not got.any()
    bias = np.array([1.0, 2.0, 3.0], np.float32)
    x, w = np.zeros((2, 0, 5, 5), np.float32), np.zeros((3, 0, 3, 3), np.float32)
    with_bias = engine.get(
        engine.conv2d_bias(engine.put(x), engine.put(w), engine.put(bias), 1, none)
    )
    assert with_bias.shape == (2, 3, 3, 3) and with_bias[1, 2].tolist() == [[3.0] * 3] * 3
    a, b = np.zeros((2, 2, 0), np.float32), np.zeros((2, 0, 4), np.float32)
    product = engine.get(engine.batch_matmul(engine.put(a), engine.put(b)))
    assert product.shape == (2, 2, 4) and not product.any()


def test_layer_norm_at_strict_takes_each_row_s_totals_in_float64() -> None:
    """Before (trial NU2): strict's LayerNorm ran libtorch's kernel, which takes a row's mean
    and variance in float32: a constant row of -1e10 (variance exactly 0) came out with the
    input's gradient 0 where it is ±790, and rows far from 0 strayed far past strict's bound.
    Now strict runs the reference on its float64 totals: the light engine's values, within
    an ulp (each is the same formula's calls, on two libraries' elementwise kernels)."""
    engine = TorchEngine.on_cpu("strict")
    rng = np.random.default_rng(0)
    rows = np.full((3, 6), -1e10, np.float32)
    rows[1] = 1000 + rng.standard_normal(6).astype(np.float32) * np.float32(1e-2)
    rows[2] = rng.standard_normal(6).astype(np.float32)
    scale, shift = (rng.standard_normal(6).astype(np.float32) for _ in range(2))
    grad = np.arange(18, dtype=np.float32).reshape(3, 6)
    for name, args in (
        ("layer_norm", (rows, scale, shift, 1e-5)),
        ("layer_norm_back", (rows, scale, grad, 1e-5)),
    ):
        got = getattr(engine, name)(
            *[engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
        )
        wanted = getattr(LIGHT, name)(
            *[LIGHT.put(a) if isinstance(a, np.ndarray) else a for a in args]
        )
        for ours, light in zip(
            got if isinstance(got, tuple) else (got,),
            wanted if isinstance(wanted, tuple) else (wanted,),
        ):
            np.testing.assert_allclose(engine.get(ours), LIGHT.get(light), rtol=3e-7, atol=1e-6)
    dx = engine.get(
        engine.layer_norm_back(*(engine.put(a) for a in (rows, scale)), engine.put(grad), 1e-5)[0]
    )
    assert np.abs(dx[0]).max() > 100  # the constant row's gradient, 0 before

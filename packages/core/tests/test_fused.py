"""Fast paths: each fused operation has a reference in primitives, the core calls it through
`deepsharp.core.engine.fused`, and an engine's own version (light's here) gives what the
reference gives. An engine of primitives alone trains as the light engine does."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
from engine_helpers import PrimitivesOnly, offers, trains_alike

from deepsharp.core import SGD, Adam, AdamW, Engine
from deepsharp.core.engine import fused
from deepsharp.engines.light import LightEngine

U = 2.0**-24
PADDINGS = [((1, 1), (1, 1)), ((0, 1), (1, 0))]

FAST_PATH_NAMES = {
    "conv2d_bias",
    "conv2d_weight_bias_grad",
    "relu_back",
    "sgd_update",
    "adam_update",
    "decay_update",
    "parts",
}

FAST_PATH_NAMES |= {"clip_norm", "global_clip_norm"}  # gradient clipping (test_clipping.py too)


def test_every_fast_path_has_a_reference_and_light_offers_each_with_its_signature() -> None:
    assert set(fused.FAST_PATHS) == FAST_PATH_NAMES
    engine = LightEngine()
    for name, reference in fused.FAST_PATHS.items():
        assert offers(engine, name), name
        wanted = list(inspect.signature(reference).parameters.values())[1:]  # less the engine
        own = list(inspect.signature(getattr(engine, name)).parameters.values())
        assert [(p.name, p.kind) for p in own] == [(p.name, p.kind) for p in wanted], name


def test_the_protocol_is_the_primitives_alone() -> None:
    primitives = PrimitivesOnly(LightEngine())
    assert isinstance(primitives, Engine)
    for name in FAST_PATH_NAMES:
        assert not offers(primitives, name)
        assert not hasattr(Engine, name)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _within_totals(engine: LightEngine, got: Any, exact: Any, magnitude: Any, terms: int) -> None:
    factor = 3.0 if engine.precision == "strict" else terms + 1.0
    assert got.dtype == np.float32 and got.shape == exact.shape
    assert (np.abs(got - exact) <= factor * U * magnitude).all()


def _conv64(x: Any, w: Any, stride: int, padding: Any) -> Any:
    """The convolution in float64, by windows (the reference of the references)."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), padding[0], padding[1]])
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    return np.einsum("nchwij,fcij->nfhw", windows, w.astype(np.float64))


@pytest.mark.parametrize("precision", ["strict", "float32"])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("padding", PADDINGS)
def test_convolution_fast_paths_give_what_their_references_give(
    precision: str, stride: int, padding: Any
) -> None:
    engine, rng = LightEngine(precision), _rng(1)
    x = rng.standard_normal((3, 2, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    exact = _conv64(x, w, stride, padding) + bias.reshape(1, 4, 1, 1)
    magnitude = _conv64(np.abs(x), np.abs(w), stride, padding) + np.abs(bias).reshape(1, 4, 1, 1)
    own = fused.conv2d_bias(engine, x, w, bias, stride, padding)
    reference = fused.FAST_PATHS["conv2d_bias"](engine, x, w, bias, stride, padding)
    for got in (own, reference):
        _within_totals(engine, got, exact, magnitude, 2 * 9 + 1)
    gy = rng.standard_normal(own.shape).astype(np.float32)
    own_pair = fused.conv2d_weight_bias_grad(engine, x, gy, (3, 3), stride, padding)
    reference_pair = fused.FAST_PATHS["conv2d_weight_bias_grad"](
        engine, x, gy, (3, 3), stride, padding
    )
    places = 3 * own.shape[2] * own.shape[3]
    for got, want in zip(own_pair, reference_pair, strict=True):
        exact_sum = want.astype(np.float64)
        assert got.shape == want.shape
        # both within the bound of the same total: within twice it of each other
        factor = 3.0 if precision == "strict" else places + 1.0
        bound = 2 * factor * U * np.abs(exact_sum) + 1e-5
        assert (np.abs(got - exact_sum) <= bound).all()
    assert np.array_equal(own_pair[0], engine.conv2d_weight_grad(x, gy, (3, 3), stride, padding))


def test_relu_back_gives_what_its_reference_gives() -> None:
    engine, rng = LightEngine(), _rng(2)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    x[0, :3] = 0.0
    grad = rng.standard_normal((5, 7)).astype(np.float32)
    own = fused.relu_back(engine, x, grad)
    assert np.array_equal(own, fused.FAST_PATHS["relu_back"](engine, x, grad))
    assert np.array_equal(own, np.where(x > 0, grad, 0.0))


SHAPES = [(14, 16), (16,), (16, 1), (1,)]


def _laid_out(engine: Any, rng: np.random.Generator, scale: float = 1.0) -> list[Any]:
    """Values laid out as the core lays out slots: the parts of one flat tensor."""
    flat = (rng.standard_normal(sum(int(np.prod(s)) for s in SHAPES)) * scale).astype(np.float32)
    return fused.parts(engine, engine.put(flat), SHAPES)


def _values(engine: Any, handles: list[Any]) -> list[Any]:
    return [engine.get(handle).astype(np.float64) for handle in handles]


@pytest.mark.parametrize("update", ["sgd_update", "adam_update", "decay_update"])
def test_optimizer_updates_give_what_their_references_give(update: str) -> None:
    engine = LightEngine()
    settings: dict[str, dict[str, float]] = {
        "sgd_update": {"learning_rate": 0.1, "momentum": 0.9},
        "adam_update": {"step_size": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7},
        "decay_update": {"factor": 0.996},
    }
    memories = {"sgd_update": 1, "adam_update": 2, "decay_update": 0}[update]
    results = []
    for run in (getattr(fused, update), fused.FAST_PATHS[update]):
        rng = _rng(3)
        slots, grads = _laid_out(engine, rng), _laid_out(engine, rng)
        memory = [_laid_out(engine, rng, 0.1) for _ in range(memories)]
        if update == "adam_update":
            memory[1] = [engine.abs(second) for second in memory[1]]
        groups = [slots] if update == "decay_update" else [slots, grads, *memory]
        run(engine, *groups, **settings[update])
        results.append([_values(engine, group) for group in groups])
    for own, reference in zip(*results, strict=True):
        for got, want in zip(own, reference, strict=True):
            assert (np.abs(got - want) <= 1e-5 + 1.3e-6 * np.abs(want)).all()


def test_parts_are_consecutive_parts_of_the_flat_tensor() -> None:
    engine = LightEngine()
    flat = np.arange(14 * 16 + 16 + 16 + 1, dtype=np.float32)
    own = fused.parts(engine, flat, SHAPES)
    reference = fused.FAST_PATHS["parts"](engine, flat, SHAPES)
    start = 0
    for got, want, shape in zip(own, reference, SHAPES, strict=True):
        count = int(np.prod(shape))
        assert got.shape == shape and np.array_equal(got, want)
        assert np.array_equal(got.ravel(), flat[start : start + count])
        start += count


@pytest.mark.parametrize("optimizer", [SGD(0.05, momentum=0.9), Adam(0.01), AdamW(0.01, 0.1)])
def test_an_engine_of_primitives_alone_trains_as_the_light_engine(optimizer: Any) -> None:
    trains_alike(LightEngine(), PrimitivesOnly(LightEngine()), optimizer)

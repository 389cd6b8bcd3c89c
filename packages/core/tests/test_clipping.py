"""Gradient clipping on every optimizer (`clip_norm`, `global_clip_norm`, as Keras's clipnorm and
global_clipnorm): what the update applies, the fast paths against their references, and the
norm taken after every hook (under a loss scale, the unscaled gradient's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    SGD,
    Adam,
    AdamW,
    BinaryCrossEntropy,
    Dense,
    LossScale,
    Network,
    Relu,
    StepHook,
    Trainer,
)
from deepsharp.core.engine import Handle, fused
from deepsharp.engines.light import LightEngine
from deepsharp.engines.testbuffer import TestBufferEngine


class Seen(StepHook):
    """Keeps the gradients the optimizer is handed (after every earlier hook), on the host."""

    def __init__(self) -> None:
        self.grads: list[np.ndarray] = []

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        self.grads = [np.asarray(trainer.engine.get(g), np.float64) for g in grads]
        return grads


def _batch(scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((16, 5)) * scale).astype(np.float32)
    return x, (rng.random((16, 1)) > 0.5).astype(np.float32)


def _moves(optimizer: Any, scale: float = 30.0, **extra: Any) -> tuple[list[np.ndarray], Seen]:
    """One SGD-like step: each slot's move, and the gradients the optimizer was handed."""
    seen = Seen()
    network = Network([Dense(4), Relu(), Dense(1)], inputs=5)
    with Trainer(network, BinaryCrossEntropy(), optimizer, seed=2, hooks=[seen], **extra) as t:
        t.start()
        before = [v.astype(np.float64) for v in network.slots.values()]
        t.step(*_batch(scale))
        after = [v.astype(np.float64) for v in network.slots.values()]
    return [a - b for a, b in zip(after, before)], seen


def test_clip_norm_limits_each_slot_s_gradient_to_the_norm() -> None:
    moves, seen = _moves(SGD(1.0, clip_norm=0.5))
    norms = [float(np.linalg.norm(g)) for g in seen.grads]
    assert max(norms) > 0.5  # some gradients were clipped, and others not
    for move, grad, norm in zip(moves, seen.grads, norms):
        expected = -grad * (0.5 / max(norm, 0.5))
        np.testing.assert_allclose(move, expected, rtol=1e-5, atol=1e-7)


def test_global_clip_norm_scales_every_gradient_by_one_factor() -> None:
    moves, seen = _moves(SGD(1.0, global_clip_norm=0.5))
    total = float(np.sqrt(sum(np.sum(g * g) for g in seen.grads)))
    assert total > 0.5
    for move, grad in zip(moves, seen.grads):
        np.testing.assert_allclose(move, -grad * 0.5 / total, rtol=1e-5, atol=1e-7)


def test_gradients_within_the_norm_are_applied_to_the_bit() -> None:
    clipped, _ = _moves(Adam(0.01, clip_norm=1e6, global_clip_norm=1e6))
    plain, _ = _moves(Adam(0.01))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(clipped, plain))


def test_under_a_loss_scale_the_norm_is_the_unscaled_gradient_s() -> None:
    """A loss scale of 2^10 multiplies the gradients by it and divides them again (exactly)
    before the optimizer clips them: the same update as without a scale, to the bit."""
    scaled, _ = _moves(
        AdamW(0.01, global_clip_norm=0.25), loss_scale=LossScale(1024.0, dynamic=False)
    )
    plain, _ = _moves(AdamW(0.01, global_clip_norm=0.25), loss_scale=None)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(scaled, plain))


def test_the_optimizer_records_its_clipping_and_refuses_a_norm_of_zero_or_less() -> None:
    assert Adam(clip_norm=1.0).config()["clip_norm"] == 1.0
    assert "clip_norm" not in Adam().config()  # older checkpoints' records stay equal
    assert SGD(0.1, global_clip_norm=2).config()["global_clip_norm"] == 2.0
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="clip_norm must be a finite number > 0"):
            Adam(clip_norm=bad)
        with pytest.raises(ValueError, match="global_clip_norm must be a finite number > 0"):
            SGD(0.1, global_clip_norm=bad)
    with pytest.raises(TypeError, match="clip_norm must be"):
        AdamW(clip_norm="1")  # type: ignore[arg-type]


def _gradients(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [(7, 3), (3,), (1,), (2, 2, 2), ()]
    return [(rng.standard_normal(s) * 4).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("name", ["clip_norm", "global_clip_norm"])
@pytest.mark.parametrize("precision", ["strict", "float32"])
def test_the_light_engine_s_fast_paths_agree_with_their_references(
    name: str, precision: str
) -> None:
    engine = LightEngine(precision)
    for seed in range(5):
        grads = _gradients(seed)
        handles = [engine.put(g) for g in grads]
        own = getattr(engine, name)(handles, clip_norm=2.0)
        reference = fused.FAST_PATHS[name](engine, handles, clip_norm=2.0)
        for got, ref, given in zip(own, reference, grads):
            np.testing.assert_allclose(got, ref, rtol=3e-7 * 8, atol=0)
            assert got.shape == given.shape
        assert all(np.array_equal(h, g) for h, g in zip(handles, grads))  # inputs unchanged


def test_an_engine_without_the_fast_paths_clips_by_the_reference() -> None:
    engine = TestBufferEngine()
    assert not hasattr(engine, "global_clip_norm")
    grads = _gradients(3)
    got = fused.global_clip_norm(engine, [engine.put(g) for g in grads], clip_norm=1.0)
    total = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
    for handle, grad in zip(got, grads):
        np.testing.assert_allclose(engine.get(handle), grad / total, rtol=1e-6)

"""Optimizers: each step as its formula says (AdamW against a step worked by hand), and bad
settings refused when the optimizer is made, naming the optimizer and the setting."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from engine_helpers import PrimitivesOnly

import deepsharp.core
from deepsharp.core import SGD, Adam, AdamW
from deepsharp.core.engine import fused
from deepsharp.core.nn.optimizers import Optimizer
from deepsharp.engines.light import LightEngine

SLOTS = ([1.0, -2.0, 0.5], [3.0])
GRADS = ([0.5, 0.25, -1.0], [0.0])


def _steps(optimizer: Optimizer, engine: Any, steps: int = 1) -> list[np.ndarray]:
    """The slots after `steps` updates with the same gradients, laid out as a run lays them."""
    shapes = [(len(values),) for values in SLOTS]
    flat = engine.put(np.concatenate([np.float32(values) for values in SLOTS]))
    slots = fused.parts(engine, flat, shapes)
    grads = [engine.put(np.float32(values)) for values in GRADS]
    state = optimizer.start(engine, shapes)
    for _ in range(steps):
        optimizer.update(engine, slots, grads, state)
    assert state.steps == steps
    return [engine.get(slot).astype(np.float64) for slot in slots]


def _adamw_by_hand(
    rate: float, decay: float, beta1: float, beta2: float, eps: float
) -> list[float]:
    """Two AdamW steps worked value by value in float64, as Keras takes them."""
    out = []
    for w, g in zip([*SLOTS[0], *SLOTS[1]], [*GRADS[0], *GRADS[1]], strict=True):
        m = v = 0.0
        for t in (1, 2):
            w = w - rate * decay * w  # decoupled: the slot shrinks, the gradient is untouched
            m = m + (g - m) * (1 - beta1)
            v = v + (g * g - v) * (1 - beta2)
            size = rate * math.sqrt(1 - beta2**t) / (1 - beta1**t)
            w = w - size * m / (math.sqrt(v) + eps)
        out.append(w)
    return out


@pytest.mark.parametrize("engine", [LightEngine(), PrimitivesOnly(LightEngine())])
def test_adamw_takes_the_step_worked_by_hand(engine: Any) -> None:
    optimizer = AdamW(0.1, weight_decay=0.05, beta1=0.8, beta2=0.99, epsilon=1e-6)
    got = np.concatenate(_steps(optimizer, engine, steps=2))
    want = np.array(_adamw_by_hand(0.1, 0.05, 0.8, 0.99, 1e-6))
    assert (np.abs(got - want) <= 1e-6 + 2e-6 * np.abs(want)).all(), (got, want)
    # A slot whose gradient is zero still decays (here 3.0 by 0.5 % twice).
    assert got[-1] == pytest.approx(3.0 * (1 - 0.1 * 0.05) ** 2, rel=1e-6)


def test_adamw_without_decay_is_adam() -> None:
    engine = LightEngine()
    adamw = _steps(AdamW(0.01, weight_decay=0.0), engine, steps=3)
    adam = _steps(Adam(0.01), engine, steps=3)
    for a, b in zip(adamw, adam, strict=True):
        assert a.tobytes() == b.tobytes()


def test_adamw_is_public_with_keras_defaults() -> None:
    assert deepsharp.core.AdamW is AdamW and "AdamW" in deepsharp.core.__all__
    optimizer = AdamW()
    assert optimizer.config() == {
        "learning_rate": 0.001,
        "weight_decay": 0.004,
        "beta1": 0.9,
        "beta2": 0.999,
        "epsilon": 1e-7,
    }
    assert repr(optimizer).startswith("AdamW(learning_rate=0.001, weight_decay=0.004")


@pytest.mark.parametrize(
    ("make", "error", "said"),
    [
        (
            lambda: Adam(math.inf),
            ValueError,
            "Adam's learning_rate must be a finite number > 0, not inf",
        ),
        (lambda: Adam(math.nan), ValueError, "Adam's learning_rate must be a finite number > 0"),
        (lambda: Adam(-0.1), ValueError, "not -0.1"),
        (
            lambda: Adam(True),
            TypeError,
            "Adam's learning_rate must be a finite number > 0, not True (bool)",
        ),
        (lambda: Adam("0.01"), TypeError, "not '0.01' (str)"),
        (lambda: Adam(None), TypeError, "not None (NoneType)"),
        (lambda: Adam(beta1=1.0), ValueError, "Adam's beta1 must be a finite number >= 0 and < 1"),
        (lambda: Adam(beta2=-0.5), ValueError, "Adam's beta2"),
        (lambda: Adam(epsilon=0.0), ValueError, "Adam's epsilon must be a finite number > 0"),
        (lambda: SGD(math.inf), ValueError, "SGD's learning_rate"),
        (lambda: SGD(0.1, momentum=True), TypeError, "SGD's momentum"),
        (
            lambda: SGD(0.1, momentum=1.0),
            ValueError,
            "SGD's momentum must be a finite number >= 0 and < 1",
        ),
        (lambda: AdamW(math.inf), ValueError, "AdamW's learning_rate"),
        (
            lambda: AdamW(weight_decay=-0.1),
            ValueError,
            "AdamW's weight_decay must be a finite number >= 0",
        ),
        (lambda: AdamW(weight_decay=math.inf), ValueError, "AdamW's weight_decay"),
        (lambda: AdamW(weight_decay=[0.1]), TypeError, "AdamW's weight_decay"),
        (  # a whole number no float holds: before, a raw OverflowError
            lambda: SGD(10**400),
            ValueError,
            "SGD's learning_rate must be a finite number > 0, not 1000000000",
        ),
        (
            lambda: AdamW(1.0, weight_decay=1.0),
            ValueError,
            "learning_rate * weight_decay must be < 1",
        ),
    ],
)
def test_bad_settings_are_refused_when_the_optimizer_is_made(
    make: Any, error: type[Exception], said: str
) -> None:
    with pytest.raises(error) as refused:
        make()
    assert said in str(refused.value)


def test_numbers_of_any_real_kind_are_taken() -> None:
    assert Adam(np.float32(0.5)).learning_rate == 0.5
    assert SGD(1, momentum=np.float64(0.5)).config() == {"learning_rate": 1.0, "momentum": 0.5}
    assert isinstance(AdamW(np.float16(0.25)).learning_rate, float)


def test_an_adamw_schedule_whose_rate_keeps_nothing_of_the_slots_is_named_at_its_step() -> None:
    """Failed before (trial TT): a ValueError, "at step 1 the learning rate 20.0 ...", naming
    neither the schedule nor the step it was asked at (schedules count from 0)."""
    from deepsharp.core import (
        ConfigurationError,
        CosineDecay,
        CrossEntropy,
        Dense,
        FitOptions,
        Network,
        Relu,
        fit,
    )

    x = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    optimizer = AdamW(CosineDecay(20.0, 10), weight_decay=0.1)
    with pytest.raises(ConfigurationError, match=r"AdamW: CosineDecay.rate\(0\) gave 20.0 times "
                       r"weight_decay 0.1 is 1 or more"):  # fmt: skip
        fit(None, (x, np.arange(40) % 3), Network([Dense(4), Relu(), Dense(3)]), CrossEntropy(),
            optimizer, FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip


@pytest.mark.parametrize("engine", [LightEngine(), PrimitivesOnly(LightEngine())])
def test_nesterov_takes_pytorch_s_steps(engine: Any) -> None:
    """Asked for by trial RN: SGD(nesterov=True), as Keras writes it; the steps PyTorch's
    SGD(lr, momentum, nesterov=True) takes (buf = μ·buf + g; p -= lr·(g + μ·buf)), worked by
    hand in float64."""
    rate, momentum = 0.1, 0.9
    got = _steps(SGD(rate, momentum=momentum, nesterov=True), engine, steps=3)
    for values, grad, mine in zip(SLOTS, GRADS, got, strict=True):
        slot, buf = np.array(values, np.float64), np.zeros(len(values))
        for _ in range(3):
            buf = momentum * buf + np.array(grad)
            slot = slot - rate * (np.array(grad) + momentum * buf)
        np.testing.assert_allclose(mine, slot, rtol=1e-6)
    plain = _steps(SGD(rate, momentum=momentum), engine, steps=3)
    assert not np.allclose(plain[0], got[0])
    assert SGD(rate, momentum=momentum, nesterov=True).config()["nesterov"] is True
    assert "nesterov" not in SGD(rate, momentum=momentum).config()
    with pytest.raises(ValueError, match="nesterov=True looks ahead along the momentum"):
        SGD(rate, nesterov=True)
    with pytest.raises(TypeError, match="nesterov is True or False, not 1"):
        SGD(rate, momentum=0.5, nesterov=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "name", "value", "error", "said"),
    [
        (lambda: Adam(0.01), "learning_rate", -1.0, ValueError, "Adam's learning_rate must be"),
        (lambda: Adam(0.01), "learning_rate", "x", TypeError, "Adam's learning_rate"),
        (lambda: Adam(0.01), "beta2", 2.0, ValueError, "Adam's beta2 must be"),
        (lambda: SGD(0.1), "momentum", 1.0, ValueError, "SGD's momentum must be"),
        (lambda: AdamW(), "weight_decay", -0.1, ValueError, "AdamW's weight_decay must be"),
        (lambda: deepsharp.core.Dropout(0.5), "rate", -0.5, ValueError, "Dropout's rate"),
        (lambda: deepsharp.core.Dropout(0.5), "rate", 1.0, ValueError, "Dropout's rate"),
        (
            lambda: deepsharp.core.BinaryCrossEntropy(),
            "label_smoothing",
            3.0,
            ValueError,
            "label_smoothing",
        ),
        (lambda: deepsharp.core.CrossEntropy(), "from_logits", "no", TypeError, "from_logits"),
        (lambda: deepsharp.core.Huber(), "delta", 0.0, ValueError, "delta"),
        (lambda: deepsharp.core.Dense(3), "activation", "gelu_tanh", ValueError, "did you mean"),
        # (trial S2: clip_norm = -1 trained the slots the wrong way, R^2 0.9996 to -2.70)
        (lambda: Adam(0.01, clip_norm=1.0), "clip_norm", -1.0, ValueError, "Adam's clip_norm"),
        (lambda: SGD(0.1), "global_clip_norm", 0.0, ValueError, "SGD's global_clip_norm"),
        (lambda: SGD(0.1, 0.9, nesterov=True), "nesterov", "yes", TypeError, "nesterov is True"),
    ],
)
def test_a_setting_assigned_after_it_is_made_is_checked_as_the_constructor_checks_it(
    make: Any, name: str, value: Any, error: type[Exception], said: str
) -> None:
    # Trial NB: only the constructors checked: learning_rate = -1 assigned between runs was
    # taken and climbed the loss (3.47 to 45.2), Dropout.rate = -0.5 and label_smoothing = 3.0
    # silently, an unknown activation failed later as a bare KeyError.
    made = make()
    before = getattr(made, name)
    with pytest.raises(error, match=said):
        setattr(made, name, value)
    assert getattr(made, name) == before

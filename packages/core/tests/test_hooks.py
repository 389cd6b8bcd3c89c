"""Hooks: step hooks handed to fit, callbacks after every batch, and gradient accumulation
(K batches a step), which takes a step's rows in parts and applies one update."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import deepsharp.core
from deepsharp.core import (
    Adam,
    BatchNorm,
    BinaryCrossEntropy,
    Callback,
    ConfigurationError,
    CrossEntropy,
    Dense,
    Dropout,
    FitOptions,
    LossScale,
    Network,
    Relu,
    RunState,
    StepHook,
    Trainer,
    fit,
)
from deepsharp.core.engine import Handle


def _data(rows: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((rows, 6)).astype(np.float32)
    return x, (x[:, :2].sum(axis=1, keepdims=True) > 0).astype(np.float32)


def _options(**extra: Any) -> FitOptions:
    return FitOptions(seed=4, epochs=2, batch_size=16, progress=False, **extra)


class Counting(StepHook):
    """Counts the steps it takes part in, and keeps the last gradients it saw."""

    name = "counting"

    def __init__(self) -> None:
        self.steps = 0
        self.last: list[np.ndarray] = []

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        self.steps += 1
        self.last = [trainer.engine.get(g) for g in grads]
        return grads

    def state(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def restore(self, state: Any) -> None:
        self.steps = int(state["steps"])


def test_step_hook_is_importable_from_the_core() -> None:
    assert deepsharp.core.StepHook is StepHook and "StepHook" in deepsharp.core.__all__


def test_fit_takes_step_hooks_which_run_every_step_after_the_loss_scale() -> None:
    """Before: fit took no hooks; a hook had to be put into run.trainer.hooks by a callback."""
    hook = Counting()
    order: list[str] = []

    class Watch(Callback):
        def on_run_start(self, run: RunState) -> None:
            order.extend(type(h).__name__ for h in run.trainer.hooks)

    run = fit(
        None,
        _data(),
        Network([Dense(4), Relu(), Dense(1)]),
        BinaryCrossEntropy(),
        Adam(0.01),
        _options(loss_scale=LossScale(8.0, dynamic=False)),
        hooks=[hook],
        callbacks=[Watch()],
    )
    assert hook.steps == 2 * 9  # 140 training rows, 16 a batch, two epochs
    assert order == ["LossScale", "Counting"]
    assert run.report.epochs_run == 2


def test_a_hook_that_is_no_step_hook_is_refused() -> None:
    with pytest.raises(TypeError, match="a step hook is a StepHook"):
        fit(None, _data(), Network([Dense(1)]), BinaryCrossEntropy(), Adam(), _options(),
            hooks=[lambda trainer, grads: grads])  # type: ignore[list-item]  # fmt: skip
    # a loss scale given as a hook scaled on top of the run's own, and its state overwrote the
    # run's in checkpoints, which then refused to resume (trial CN)
    from deepsharp.core.training.scaling import LossScale

    with pytest.raises(ConfigurationError, match=r"is given as a step hook: a run's loss scale "
                       r"is its setting, loss_scale="):  # fmt: skip
        fit(None, _data(), Network([Dense(1)]), BinaryCrossEntropy(), Adam(), _options(),
            hooks=[LossScale(16.0)])  # fmt: skip


def test_callbacks_hear_of_every_batch_with_its_loss() -> None:
    heard: list[tuple[int, int, float]] = []

    class Batches(Callback):
        def on_batch_end(self, run: RunState, batch: int, loss: float) -> None:
            heard.append((run.epoch + 1, batch, loss))

    run = fit(None, _data(), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01), _options(),
              callbacks=[Batches()])  # fmt: skip
    assert [(e, b) for e, b, _ in heard] == [(e, b) for e in (1, 2) for b in range(1, 10)]
    losses = [loss for e, _, loss in heard if e == 1]
    sizes = [16] * 8 + [140 - 8 * 16]
    mean = sum(loss * size for loss, size in zip(losses, sizes)) / 140
    assert mean == pytest.approx(run.report.history[0].loss, rel=1e-12)


def _accumulated_step(accumulate: int, dropout: float = 0.0) -> tuple[list[np.ndarray], float]:
    x, _ = _data(64)
    network = Network([Dense(8), Relu(), Dropout(dropout), Dense(3)], inputs=6)
    targets = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5)
    with Trainer(network, CrossEntropy(), Adam(0.01), seed=6, accumulate=accumulate) as trainer:
        hook = Counting()
        trainer.hooks.append(hook)
        loss = trainer.step(x[:48], targets[:48])
    return [g.astype(np.float64) for g in hook.last], loss


@pytest.mark.parametrize("dropout", [0.0, 0.4])
def test_accumulated_parts_hold_the_one_batch_step_s_gradients_to_the_strict_bound(
    dropout: float,
) -> None:
    """A step of 48 rows taken in 3 parts of 16 (each part's gradients weighted by its third
    and added) against the same step in one pass: each gradient a total over the same terms,
    rounded in a few places more — within a few units of float32's roundoff of the gradients'
    sizes. Dropout's masks are the whole batch's, part by part."""
    whole, whole_loss = _accumulated_step(1, dropout)
    parts, parts_loss = _accumulated_step(3, dropout)
    assert parts_loss == pytest.approx(whole_loss, rel=1e-6)
    for got, ref in zip(parts, whole):
        scale = np.abs(ref).max()
        assert np.max(np.abs(got - ref)) <= 16 * 2.0**-24 * scale + 1e-12


def test_accumulate_takes_k_batches_a_step_through_fit() -> None:
    hook = Counting()
    fit(None, _data(), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
        _options(accumulate=3), hooks=[hook])  # fmt: skip
    assert hook.steps == 2 * 3  # 140 training rows, 48 a step


def test_accumulate_refuses_batch_norm_and_what_is_no_count() -> None:
    with pytest.raises(ConfigurationError, match="BatchNorm takes its statistics from the whole"):
        Trainer(Network([Dense(4), BatchNorm(), Dense(1)], inputs=6), BinaryCrossEntropy(),
                Adam(), accumulate=2)  # fmt: skip
    for bad in (0, -2):
        with pytest.raises(ValueError, match="accumulate must be 1 or more"):
            FitOptions(seed=1, accumulate=bad)
    with pytest.raises(TypeError, match="accumulate must be a whole number"):
        FitOptions(seed=1, accumulate=2.0)  # type: ignore[arg-type]

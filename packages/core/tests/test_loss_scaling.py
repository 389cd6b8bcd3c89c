"""Loss scaling (deepsharp.core.training.scaling): the loss times S for the way back, the gradients
divided by S before the update, a step whose gradients hold inf or NaN skipped and counted, and
PyTorch's GradScaler rule for S. On by default under mixed_float16, engine-agnostic, in
checkpoints."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import titanic_shaped, titanic_trainer

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    CheckpointMismatchError,
    CrossEntropy,
    DeepSharpWarning,
    Dense,
    FileFormatError,
    FitOptions,
    LossScale,
    MeanSquaredError,
    Network,
    Relu,
    Trainer,
    TrainingDivergedError,
    fit,
)
from deepsharp.core.engine import Handle
from deepsharp.core.samples import titanic
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.core.training.distribution import OneProcess
from deepsharp.core.training.hooks import StepHook

# --- what a run takes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "scaled"),
    [
        ("light:mixed_float16", True),
        ("light:mixed_bfloat16", False),
        ("light:float32", False),
        ("light", False),
    ],
)
def test_auto_scales_under_mixed_float16_only(engine: str, scaled: bool) -> None:
    trainer = titanic_trainer(engine=engine)
    assert (trainer.loss_scale is not None) is scaled
    if scaled:
        assert trainer.loss_scale is not None and trainer.loss_scale.scale == 2.0**16
        assert trainer.loss_scale in trainer.hooks


def test_settings_name_the_scale() -> None:
    def made_with(setting: Any) -> LossScale | None:
        network = Network([Dense(1)], inputs=3)
        return Trainer(network, MeanSquaredError(), Adam(), loss_scale=setting).loss_scale

    made = {setting: made_with(setting) for setting in ("dynamic", 1024.0, 8, None)}
    assert repr(made["dynamic"]) == "LossScale(65536, growth=2, backoff=0.5, interval=2000)"
    assert repr(made[1024.0]) == repr(made[8.0 * 128]) == "LossScale(1024, dynamic=False)"
    assert made[None] is None
    given = LossScale(4.0, interval=3)
    copy = made_with(given)
    assert copy is not given and repr(copy) == repr(given)  # a run never changes the caller's
    assert FitOptions(seed=0).loss_scale == "auto"


@pytest.mark.parametrize(
    ("setting", "error", "said"),
    [
        ("dinamic", ValueError, "loss_scale is 'auto', 'dynamic', a number"),
        (0.0, ValueError, "a finite number above 0"),
        (-5.0, ValueError, "a finite number above 0, a LossScale or None, not -5.0"),
        (math.inf, ValueError, "a finite number above 0"),
        (True, TypeError, "not True"),
        ([2.0], TypeError, "not [2.0]"),
        # Failed before: accepted here, refused at the trainer "must be a finite number above
        # 0" (it is one), or (1e-39) trained to NaN slots blamed on the learning rate.
        (1e40, ValueError, "loss_scale 1e+40 is beyond float32's range (3.4e38)"),
        (1e-39, ValueError, "loss_scale 1e-39 is below 2**-126, the least scale"),
        # Failed before: 2**-127 was taken, though the docs say 2**-126 is the least
        (2.0**-127, ValueError, "is below 2**-126, the least scale"),
    ],
)
def test_what_is_no_loss_scale_is_refused(setting: Any, error: type, said: str) -> None:
    with pytest.raises(error, match=f"FitOptions: .*{re.escape(said)}"):
        FitOptions(seed=0, loss_scale=setting)
    with pytest.raises(error, match=re.escape(said)):
        Trainer(Network([Dense(1)], inputs=3), MeanSquaredError(), Adam(), loss_scale=setting)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"initial": -1.0}, "initial must be a finite number above 0"),
        ({"initial": 1e39}, "initial 1e+39 is beyond float32's range (3.4e38)"),
        ({"initial": 1e-39}, "initial 1e-39 is below 2**-126, the least scale"),
        ({"growth": 1e39}, "growth 1e+39 is beyond float32's range"),
        ({"growth": 0.5}, "growth must be a finite number above 1"),
        ({"backoff": 1.0}, "backoff must be a number in (0, 1)"),
        ({"interval": 0}, "interval must be a whole number from 1"),
        # rounded to 1 by the float32 rule, they never moved the scale (trial M)
        ({"growth": 1 + 1e-9}, "growth 1.000000001 rounds to 1 in float32"),
        ({"backoff": 1 - 1e-9}, "backoff 0.999999999 rounds to 1 in float32"),
        # and where the scale starts (2**16 alone was looked at: a review)
        ({"initial": 65537.0, "backoff": 1 - 3.5e-8}, "backoff 0.999999965 rounds to 1"),
    ],
)
def test_a_loss_scale_refuses_what_is_no_rule(arguments: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        LossScale(**arguments)


# --- the rule ------------------------------------------------------------------------------------


def test_the_rule_is_gradscalers() -> None:
    # torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3) from 4.0 on
    # [ok, ok, inf, ok, ok, ok] gives (4, 1) (4, 2) (2, 0) (2, 1) (2, 2) (4, 0)
    scale = LossScale(4.0, interval=3)
    seen = []
    for finite in (True, True, False, True, True, True):
        scale.update(finite)
        seen.append((scale.scale, scale.good_steps))
    assert seen == [(4, 1), (4, 2), (2, 0), (2, 1), (2, 2), (4, 0)]


def test_the_scale_never_grows_to_infinity() -> None:
    scale = LossScale(3e38, interval=1)
    assert scale.scale == float(np.float32(3e38))  # held as GradScaler holds it, in float32
    scale.update(True)
    assert (scale.scale, scale.good_steps) == (float(np.float32(3e38)), 0)  # kept, count reset


def test_a_fixed_scale_stays_fixed() -> None:
    scale = LossScale(512.0, dynamic=False)
    for finite in (False, True, False):
        scale.update(finite)
    assert scale.scale == 512.0


# --- steps ---------------------------------------------------------------------------------------


def scaled_trainer(engine: str, setting: Any, seed: int = 0) -> Trainer:
    """The Titanic-shaped network (core_helpers.titanic_trainer) with a loss scale of choice."""
    network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine, seed, loss_scale=setting)


def test_where_nothing_overflows_or_underflows_scaling_changes_no_bit() -> None:
    # A power of two scales every rounding exactly: the same losses and slots as without.
    rows, targets = titanic_shaped()
    runs = []
    for setting in (None, "dynamic", 2.0**10):
        trainer = scaled_trainer("light:float32", setting)
        runs.append(([trainer.step(rows, targets) for _ in range(20)], _slots(trainer)))
    for losses, slots in runs[1:]:
        assert losses == runs[0][0]
        assert all(slots[k].tobytes() == runs[0][1][k].tobytes() for k in slots)


def _slots(trainer: Trainer) -> dict[str, np.ndarray]:
    return {name: trainer.engine.get(t.handle) for name, t in trainer.bound.tensors.items()}


def test_a_scaled_step_still_makes_two_transfers_in_and_one_out() -> None:
    trainer = titanic_trainer(engine="light:mixed_float16")
    rows, targets = titanic_shaped()
    trainer.step(rows, targets)
    counters = trainer.engine.counters
    before = (counters.transfers_in, counters.transfers_out)
    value = trainer.step(rows, targets)
    assert (counters.transfers_in - before[0], counters.transfers_out - before[1]) == (2, 1)
    assert value == trainer.evaluate(rows, targets)[0] or math.isfinite(value)


class Poison(StepHook):
    """Makes one step's first gradient infinite (before any other hook sees it)."""

    def __init__(self, at: int) -> None:
        self.at, self.steps = at, 0

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        self.steps += 1
        if self.steps == self.at:
            grads = [trainer.engine.add(grads[0], math.inf), *grads[1:]]
        return grads


class PoisonEvery(Poison):
    """Makes every step's first gradient infinite."""

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        return [trainer.engine.add(grads[0], math.inf), *grads[1:]]


def test_the_scale_backs_off_no_lower_than_the_least_and_the_run_goes_on() -> None:
    """Failed before: every step overflowing, the scale halved on below 2**-126 to 0 and the
    170th step died in the loss scale with a raw ZeroDivisionError."""
    scaled = scaled_trainer("light", "dynamic", seed=1)
    scaled.hooks.insert(0, PoisonEvery(at=0))
    rows, targets = titanic_shaped()
    before = _slots(scaled)
    for _ in range(200):
        assert math.isfinite(scaled.step(rows, targets))
    assert scaled.loss_scale is not None and scaled.loss_scale.scale == 2.0**-126
    assert scaled.skipped_steps == 200
    assert all(_slots(scaled)[k].tobytes() == v.tobytes() for k, v in before.items())
    scaled.hooks.pop(0)  # the gradients finite again: the steps are taken, from the least
    scaled.step(rows, targets)
    assert scaled.skipped_steps == 200 and scaled.loss_scale.good_steps == 1


def test_an_infinite_gradient_is_skipped_and_the_run_goes_on() -> None:
    scaled = scaled_trainer("light", "dynamic", seed=1)
    scaled.hooks.insert(0, Poison(at=3))
    rows, targets = titanic_shaped()
    losses = [scaled.step(rows, targets) for _ in range(2)]
    before = _slots(scaled)
    assert scaled.state is not None
    steps = scaled.state.steps
    losses.append(scaled.step(rows, targets))  # the poisoned step: not applied
    assert scaled.skipped_steps == 1
    assert all(_slots(scaled)[k].tobytes() == v.tobytes() for k, v in before.items())
    assert scaled.state.steps == steps  # the optimizer did not see it
    assert scaled.loss_scale is not None and scaled.loss_scale.scale == 2.0**15
    losses += [scaled.step(rows, targets) for _ in range(20)]
    assert all(math.isfinite(value) for value in losses)
    assert losses[-1] < losses[0] and scaled.skipped_steps == 1


class PoisonedRun(OneProcess):
    """A run in this process whose 5th step's gradient turns infinite."""

    def start(self, trainer: Trainer) -> None:
        trainer.hooks.insert(0, Poison(at=5))


def test_a_run_counts_its_skipped_steps_and_without_scaling_diverges() -> None:
    options = {"seed": 3, "epochs": 20, "progress": False, "distributed": PoisonedRun()}
    run = titanic.run("light", loss_scale="dynamic", **options)
    assert run.report.skipped_steps == 1
    assert "1 steps skipped" in str(run.report)
    assert run.report.measures["accuracy"] > 0.75
    with pytest.raises(TrainingDivergedError), np.errstate(invalid="ignore"):
        titanic.run("light", loss_scale=None, **options)  # Adam makes the inf a NaN slot


def test_an_epoch_whose_every_step_is_skipped_warns_naming_the_scale() -> None:
    """Before: a fixed scale that overflowed float16 on every step skipped them all and the run
    ended as if it had trained (a count in the report only)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 10)).astype(np.float32)
    y = (x[:, 0] + x[:, 3] > 0).astype(np.int64)
    options = FitOptions(
        seed=5, epochs=1, progress=False, engine="light:mixed_float16", loss_scale=2.0**40
    )
    network = Network([Dense(32), Relu(), Dense(2)], inputs=10)
    with pytest.warns(DeepSharpWarning, match=r"every step of epoch 1 \(7 of 7\) was skipped"):
        fit(None, (x, y), network, CrossEntropy(), Adam(0.01), options)


def _underflowing(
    setting: Any, engine: str = "light:mixed_float16"
) -> tuple[Trainer, list[float], dict[str, np.ndarray]]:
    """A regression whose gradients at the products lie far below float16's smallest value:
    slots and targets of about 1e-5, a mean over 2,048 x 64 outputs (dz = 2(z - y)/131,072,
    about 1e-9: float16's smallest value is 6e-8)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 16)).astype(np.float32)
    y = (x @ (1e-5 * rng.standard_normal((16, 64)))).astype(np.float32)
    network = Network([Dense(64)], inputs=16)
    trainer = Trainer(network, MeanSquaredError(), Adam(3e-6), engine, seed=0, loss_scale=setting)
    start = {
        name: (1e-5 * rng.standard_normal(value.shape)).astype(np.float32)
        for name, value in network.slots.items()
    }
    trainer.put_slots(start)
    return trainer, [trainer.step(x, y) for _ in range(40)], start


def test_float16_gradients_that_underflow_without_scaling_train_with_it() -> None:
    plain, plain_losses, start = _underflowing(None)
    scaled, scaled_losses, _ = _underflowing("dynamic")
    # Without scaling every gradient reaching the weights' product is 0 in float16: the
    # weights never move (their biases' gradient is a float32 sum, and does).
    after = _slots(plain)
    weights = [name for name, value in after.items() if value.ndim == 2]
    assert weights
    for name in weights:
        assert after[name].tobytes() == start[name].tobytes()
    assert plain_losses[-1] > 0.9 * plain_losses[0]
    assert scaled.skipped_steps == 0
    assert scaled_losses[-1] < 0.05 * scaled_losses[0]
    # float32 products lose nothing: the same run trains there unscaled
    _, float32_losses, _ = _underflowing(None, "light:float32")
    assert float32_losses[-1] < 0.05 * float32_losses[0]


# --- checkpoints ---------------------------------------------------------------------------------


def _titanic(engine: str, **options: Any) -> Any:
    return titanic.run(engine, 5, progress=False, **options)


def test_a_resumed_mixed_float16_run_ends_bit_for_bit_where_the_whole_one_does(
    tmp_path: Path,
) -> None:
    # From 2^50 the first steps overflow float16 and are skipped, halving the scale each time,
    # across the checkpoint: the scale and its counter must travel with it.
    setting = LossScale(2.0**50, interval=7)
    with pytest.warns(
        DeepSharpWarning, match=r"multiplied by 0\.5 at each skipped step\): a scale"
    ):
        whole = _titanic("light:mixed_float16", epochs=4, loss_scale=setting)
    quartered = LossScale(2.0**100, interval=7, backoff=0.25)  # said as it is (it said halves)
    with pytest.warns(DeepSharpWarning, match=r"now \d.*multiplied by 0\.25 at each skipped step"):
        _titanic("light:mixed_float16", epochs=1, loss_scale=quartered)
    assert whole.report.skipped_steps > 20
    with pytest.warns(DeepSharpWarning, match="every step of epoch 1"):
        _titanic(
            "light:mixed_float16",
            epochs=2,
            loss_scale=setting,
            checkpoint_dir=tmp_path,
            checkpoint_every=1,
            checkpoint_keep=2,
        )
    saved = Checkpoint.load(Checkpoint.path_in(tmp_path, 1))
    state = saved.trainer.hooks["loss_scale"]
    assert state["scale"] < 2.0**50 and saved.trainer.skipped_steps > 0
    resumed = fit(
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.001),
        FitOptions(
            seed=5, engine="light:mixed_float16", epochs=4, loss_scale=setting, progress=False
        ),
        resume_from=saved,
    )
    assert resumed.report.skipped_steps == whole.report.skipped_steps
    assert [r.loss for r in resumed.report.history] == [r.loss for r in whole.report.history]
    for name, value in whole.trained.network.slots.items():
        assert resumed.trained.network.slots[name].tobytes() == value.tobytes()


def test_a_checkpoint_refuses_another_loss_scale_and_a_lying_one(tmp_path: Path) -> None:
    _titanic("light:mixed_float16", epochs=1, checkpoint_dir=tmp_path, checkpoint_every=1)
    saved = Checkpoint.load(Checkpoint.path_in(tmp_path))
    arguments = (
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.001),
    )
    for other, said in (
        (None, "this run has no loss scale"),
        (128.0, "this run has the fixed loss scale 128.0"),
        (LossScale(interval=10), "after 10 good steps"),
    ):
        with pytest.raises(CheckpointMismatchError) as refused:
            fit(
                *arguments,
                FitOptions(
                    seed=5, engine="light:mixed_float16", epochs=2, loss_scale=other, progress=False
                ),
                resume_from=saved,
            )
        message = str(refused.value)
        assert "was taken with the dynamic loss scale (from 65536.0" in message and said in message
    for lying, said in (
        (-1.0, "loss scale must be a finite number above 0"),
        # taken as they were (trial M): 1e39 became inf at its first overflow and every step
        # was skipped; 1e-45 made 1/S infinite and the slots NaN, blamed on the learning rate
        (1e39, "checkpoint: its loss scale 1e+39 is beyond float32's range"),
        (1e-45, "checkpoint: its loss scale 1e-45 is below 2**-126"),
    ):
        saved.trainer.hooks["loss_scale"]["scale"] = lying
        with pytest.raises(FileFormatError, match=re.escape(said)):
            fit(
                *arguments,
                FitOptions(seed=5, engine="light:mixed_float16", epochs=2, progress=False),
                resume_from=saved,
            )


class _Penalty(StepHook):
    """Adds half the squared first slot to the objective (an L2 penalty)."""

    def objective(self, trainer: Trainer, value: Any, share: Any) -> Any:
        from deepsharp.core.autodiff.functions import add, mul
        from deepsharp.core.autodiff.functions import sum as total

        weights = trainer._slots[0]
        return add(value, mul(total(mul(weights, weights)), 0.5))

    def objective_key(self) -> int:
        return 0


def test_a_hook_s_term_of_the_objective_is_scaled_with_the_loss() -> None:
    """Failed before: the loss scale multiplied the loss before the hooks added their terms,
    and unscaling then divided the penalty's gradient by the scale: one SGD step 0.08 off."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 8)).astype(np.float32)

    def slots(engine: str, **settings: Any) -> np.ndarray:
        trainer = Trainer(
            Network([Dense(1)]), MeanSquaredError(), SGD(0.1), engine, seed=0,
            hooks=[_Penalty()], **settings,
        )  # fmt: skip
        trainer.step(x, x[:, :1] * 2)
        return np.concatenate([np.ravel(trainer.engine.get(h)) for h in trainer.held.slots])

    unscaled = slots("light:float32")
    assert np.abs(slots("light:float32", loss_scale=1024.0) - unscaled).max() < 1e-6
    # (at the default 2**16, this step's scaled products pass float16's 65,504: skipped, as a
    # card's would be)
    assert np.abs(slots("light:mixed_float16", loss_scale=1024.0) - unscaled).max() < 1e-3


def test_finite_gradients_whose_largest_values_add_up_past_float32_are_not_skipped() -> None:
    """Failed before: the largest |g| of each slot were added up, and four finite ones of
    about 1e38 made inf: the step was skipped as an overflow."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    trainer = Trainer(
        Network([Dense(4), Dense(1)]), MeanSquaredError(), SGD(1e-3), "light:float32", seed=0,
        loss_scale=LossScale(2.0**126, dynamic=False),
    )  # fmt: skip
    trainer.step(x, 2 * x[:, :1])
    assert trainer.skipped_steps == 0


def test_a_buffer_a_skipped_step_s_forward_pass_overflowed_is_named_at_prediction() -> None:
    """Before (trial M): a step skipped for a feature past float16's range left a BatchNorm's
    moving mean infinite (as PyTorch's GradScaler does), and predict blamed 'a training step's
    update' and the learning rate, though no update was made."""
    from deepsharp.core import BatchNorm, StateError

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 6)).astype(np.float32), rng.integers(0, 3, 32)
    network = Network([Dense(8), BatchNorm(), Relu(), Dense(3)], inputs=6)
    with Trainer(network, CrossEntropy(), Adam(0.01), "light:mixed_float16", seed=0) as trainer:
        trainer.step(x[:16], y[:16])
        big = x[16:].copy()
        big[0, 0] = 1e5  # past float16's 65,504
        trainer.step(big, y[16:])
        assert trainer.skipped_steps == 1 and trainer.state.steps == 1
    with pytest.raises(
        StateError, match=r"buffer 'batchnorm.moving_mean' .*forward pass overflowed"
    ):
        network.predict(x[:2], CrossEntropy())


def test_a_step_cut_into_parts_overflows_at_the_scale_one_batch_of_its_rows_does() -> None:
    """Failed before (trial W): each part's loss is the mean over its own rows, and scaled by the
    scale alone its way back's half-format values were twice one batch's under accumulate=2 (on
    two processes too): at 2^11 it skipped a step one batch of the same rows did not."""
    import warnings

    from deepsharp.core import fit

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((61, 4)) * 30).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0.3).astype(np.int64)

    def skipped(accumulate: int) -> int:
        options = FitOptions(seed=5, epochs=1, batch_size=8 // accumulate, accumulate=accumulate,
                             progress=False, engine="light:mixed_float16",
                             loss_scale=LossScale(2.0**11, dynamic=False))  # fmt: skip
        network = Network([Dense(16), Relu(), Dense(2)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeepSharpWarning)
            run = fit(None, (x, y), network, CrossEntropy(), SGD(1e-9), options)
        return run.report.skipped_steps

    assert skipped(1) == skipped(2) == 0

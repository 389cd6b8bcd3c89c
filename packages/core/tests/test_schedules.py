"""Learning-rate schedules: the rate of each step a function of the trainer's step count, kept in
checkpoints, so a run resumed mid-schedule (or after ReduceOnPlateau lowered its rate) ends bit
for bit where the uninterrupted one does."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    SGD,
    Adam,
    AdamW,
    BinaryCrossEntropy,
    Callback,
    Checkpoint,
    CheckpointMismatchError,
    ConfigurationError,
    CosineDecay,
    Dense,
    FitOptions,
    Network,
    ReduceOnPlateau,
    Relu,
    Run,
    Schedule,
    StepDecay,
    StepHook,
    Trainer,
    fit,
)


def _data(seed: int = 5, rows: int = 240) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 6)).astype(np.float32)
    y = (x @ rng.standard_normal(6) + 0.3 * rng.standard_normal(rows) > 0).astype(np.float32)
    return x, y.reshape(-1, 1)


def _network() -> Network:
    return Network([Dense(8), Relu(), Dense(1)], inputs=6)


def _fit(optimizer: Any, epochs: int, folder: Path | None = None, **extra: Any) -> Run:
    options = FitOptions(
        seed=3,
        epochs=epochs,
        batch_size=16,
        patience=50,
        progress=False,
        checkpoint_dir=folder,
    )
    return fit(None, _data(), _network(), BinaryCrossEntropy(), optimizer, options, **extra)


def _losses(run: Run) -> list[tuple[float, float]]:
    return [(record.loss, record.validation_loss) for record in run.report.history]


def _bits(run: Run) -> dict[str, bytes]:
    return {name: value.tobytes() for name, value in run.trained.network.slots.items()}


class Halving(Schedule):
    """A schedule of one's own: the rate halves every `every` steps."""

    def __init__(self, initial: float, every: int) -> None:
        self.initial, self.every = initial, every

    def rate(self, step: int) -> float:
        return self.initial / 2 ** (step // self.every)

    def config(self) -> dict[str, Any]:
        return {"initial": self.initial, "every": self.every}


def test_cosine_decay_warms_up_then_follows_half_a_cosine_to_its_final_rate() -> None:
    schedule = CosineDecay(0.1, steps=100, warmup=10, final=0.01)
    assert [schedule.rate(t) for t in (0, 5)] == [0.0, 0.05]
    assert schedule.rate(10) == 0.1
    assert schedule.rate(60) == pytest.approx(0.01 + 0.09 * 0.5)
    assert schedule.rate(110) == schedule.rate(10_000) == pytest.approx(0.01)
    # Keras's CosineDecay without warm-up: initial * ((1 - alpha) * cosine + alpha).
    keras = CosineDecay(0.2, steps=50)
    for t in (0, 13, 49, 50, 70):
        cosine = 0.5 * (1 + math.cos(math.pi * min(t, 50) / 50))
        assert keras.rate(t) == pytest.approx(0.2 * cosine, rel=1e-12)


def test_step_decay_multiplies_the_rate_every_so_many_steps() -> None:
    schedule = StepDecay(0.1, every=3, factor=0.5)
    assert [schedule.rate(t) for t in range(7)] == [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025]


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: CosineDecay(0.1, steps=0), "CosineDecay's steps must be a whole number >= 1"),
        (lambda: CosineDecay(-0.1, steps=10), "CosineDecay's initial must be a finite number > 0"),
        (lambda: CosineDecay(0.1, steps=10, final=-1.0), "final must be a finite number >= 0"),
        (lambda: CosineDecay(0.1, steps=10, final=0.5), "final must .* <= 0.1"),
        (lambda: CosineDecay(0.1, steps=10, warmup=-2), "warmup must be a whole number >= 0"),
        (lambda: StepDecay(0.1, every=0, factor=0.5), "StepDecay's every must be a whole number"),
        (lambda: StepDecay(0.0, every=2, factor=0.5), "StepDecay's initial must be .* > 0"),
        (lambda: StepDecay(0.1, every=2, factor=-0.5), "StepDecay's factor must be .* > 0"),
        # failed before: accepted, then rate(5000) raised a raw OverflowError
        (lambda: StepDecay(0.1, every=1, factor=2.0), "StepDecay's factor must be .* <= 1"),
    ],
)
def test_a_schedule_with_no_steps_or_a_negative_rate_is_refused(make: Any, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        make()


def test_a_schedule_s_settings_of_the_wrong_kind_are_type_errors() -> None:
    with pytest.raises(TypeError, match="steps must be a whole number"):
        CosineDecay(0.1, steps=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("given", [-0.1, None, "0.1", math.nan, math.inf, True])
def test_a_rate_a_schedule_of_one_s_own_gives_is_checked_where_it_is_read(given: Any) -> None:
    """Before: a negative rate climbed the loss silently (fit returned its report), None and
    text raised a raw TypeError inside the optimizer, NaN blamed the learning rate's size."""

    class Giving(Halving):
        def rate(self, step: int) -> float:
            return given if step >= 2 else super().rate(step)  # type: ignore[no-any-return]

    # below 0 alone is said to climb the loss (trial TT4: NaN and a text were said so too)
    why = "climb the loss" if given == -0.1 else "the number each update multiplies its step by"
    with pytest.raises(
        ConfigurationError, match=rf"Giving.rate\(2\) gave .*finite number of at.*{why}"
    ):
        _fit(Adam(Giving(0.01, 5)), 1)


def test_an_optimizer_on_a_schedule_is_written_as_it_is_made() -> None:
    """Before (trial TT4): Adam(learning_rate={'schedule': 'CosineDecay', ...}), no call."""
    made = Adam(CosineDecay(0.01, 100))
    assert repr(made).startswith("Adam(learning_rate=CosineDecay(initial=0.01, steps=100,")
    assert made.config()["learning_rate"]["schedule"] == "CosineDecay"  # files keep the record


def test_each_update_takes_the_schedule_s_rate_at_the_trainer_s_step_count() -> None:
    """SGD without momentum moves a slot by -rate·gradient: from the same slots, the third
    update of StepDecay(0.5, every=2, factor=0.1) moves it 0.05 times as far as a rate of 1."""
    x, y = _data(rows=16)
    rates = []
    for optimizer in (SGD(StepDecay(0.5, every=2, factor=0.1)), SGD(1.0)):
        trainer = Trainer(_network(), BinaryCrossEntropy(), optimizer, seed=1)
        trainer.start()
        trainer.state.steps = 2 if isinstance(optimizer.learning_rate, Schedule) else 0  # type: ignore[union-attr]
        before = trainer.network.slots["dense_1.bias"].astype(np.float64)
        trainer.step(x, y)
        rates.append(before - trainer.network.slots["dense_1.bias"].astype(np.float64))
        trainer.close()
    scheduled, unit = rates
    assert scheduled == pytest.approx(0.05 * unit, rel=1e-5)


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda: Adam(CosineDecay(0.05, steps=40, warmup=5, final=0.001)),
        lambda: SGD(StepDecay(0.2, every=7, factor=0.5), momentum=0.9),
        lambda: AdamW(Halving(0.02, every=9), weight_decay=0.01),
    ],
    ids=["cosine-adam", "step-sgd", "own-adamw"],
)
def test_a_run_resumed_mid_schedule_ends_bit_for_bit_where_the_uninterrupted_one_does(
    tmp_path: Path, optimizer: Any
) -> None:
    whole = _fit(optimizer(), epochs=4)
    _fit(optimizer(), epochs=2, folder=tmp_path)
    resumed = _fit(optimizer(), epochs=4, resume_from=tmp_path)
    assert _bits(resumed) == _bits(whole)
    assert _losses(resumed) == _losses(whole)


def test_a_checkpoint_records_the_schedule_and_refuses_another(tmp_path: Path) -> None:
    _fit(Adam(CosineDecay(0.05, steps=40)), epochs=1, folder=tmp_path)
    checkpoint = Checkpoint.load(tmp_path)
    recorded = checkpoint.trainer.optimizer["config"]["learning_rate"]
    assert recorded == {
        "schedule": "CosineDecay",
        "initial": 0.05,
        "steps": 40,
        "warmup": 0,
        "final": 0.0,
    }
    assert checkpoint.trainer.optimizer["steps"] == 11  # 168 training rows, 16 a batch
    with pytest.raises(CheckpointMismatchError, match=r"CosineDecay.*steps': 40.*steps': 30"):
        _fit(Adam(CosineDecay(0.05, steps=30)), epochs=2, resume_from=tmp_path)


class Piecewise(Schedule):
    """A schedule of one's own whose settings are tuples (JSON keeps them as lists)."""

    def __init__(self, rates: tuple[float, ...], bounds: tuple[int, ...]) -> None:
        self.rates, self.bounds = rates, bounds

    def rate(self, step: int) -> float:
        return next((r for r, b in zip(self.rates, self.bounds) if step < b), self.rates[-1])

    def config(self) -> dict[str, Any]:
        return {"rates": self.rates, "bounds": self.bounds}


class Windowed(Callback):
    """A callback of one's own whose settings hold a tuple."""

    name = "windowed"

    def state(self) -> dict[str, Any]:
        return {"settings": {"window": (1, 2)}}


class Halved(StepHook):
    """A named step hook of one's own: every gradient times `factor`."""

    name = "halved"

    def __init__(self, factor: float = 0.5) -> None:
        self.factor = factor

    def gradients(self, trainer: Trainer, grads: Any) -> Any:
        return [trainer.engine.mul(g, self.factor) for g in grads]

    def state(self) -> dict[str, Any]:
        return {"settings": {"factor": self.factor}}


def test_settings_of_tuples_resume_as_the_checkpoint_holds_them_as_lists(tmp_path: Path) -> None:
    """Failed before (trial AD): a schedule's config() or a callback's settings holding a tuple
    were refused on resuming with the very same ones (the checkpoint's, read back from JSON,
    held lists)."""
    make = lambda: Adam(Piecewise((0.05, 0.01), (10, 20)))  # noqa: E731
    whole = _fit(make(), epochs=4, callbacks=[Windowed()])
    _fit(make(), epochs=2, folder=tmp_path, callbacks=[Windowed()])
    resumed = _fit(make(), epochs=4, resume_from=tmp_path, callbacks=[Windowed()])
    assert _bits(resumed) == _bits(whole) and _losses(resumed) == _losses(whole)


def test_a_named_step_hook_lacking_added_or_set_otherwise_on_resuming_is_refused(
    tmp_path: Path,
) -> None:
    """Failed before (trial AD): a checkpoint holding a named step hook's state resumed without
    the hook, or with other settings, and the run went another way, silently (a named
    callback's are refused)."""
    whole = _fit(SGD(0.5), epochs=4, hooks=[Halved()])
    _fit(SGD(0.5), epochs=2, folder=tmp_path, hooks=[Halved()])
    resumed = _fit(SGD(0.5), epochs=4, resume_from=tmp_path, hooks=[Halved()])
    assert _bits(resumed) == _bits(whole)
    for hooks, said in (
        ([], r"holds the state of the step hook\(s\) 'halved', which this run lacks"),
        ([Halved(0.1)], r"the step hook 'halved' set \{'factor': 0\.5\}; this run's is set"),
    ):
        with pytest.raises(CheckpointMismatchError, match=said):
            _fit(SGD(0.5), epochs=4, resume_from=tmp_path, hooks=hooks)
    plain = tmp_path / "plain"
    _fit(SGD(0.5), epochs=2, folder=plain)
    with pytest.raises(CheckpointMismatchError, match=r"was taken without the step hook"):
        _fit(SGD(0.5), epochs=4, resume_from=plain, hooks=[Halved()])


def test_what_a_checkpoint_cannot_hold_or_resume_from_is_refused_before_the_first_epoch(
    tmp_path: Path,
) -> None:
    """Failed before (trial AD): a NumPy number in a schedule's config() stopped the run after
    its first epoch with json's 'Object of type float32 is not JSON serializable';
    resume_from=True raised os.fspath's TypeError."""
    epochs: list[int] = []
    with pytest.raises(ConfigurationError, match=r"optimizer Adam: its settings .* JSON values"):
        _fit(Adam(Halving(np.float32(0.05), 10)), epochs=2, folder=tmp_path,  # type: ignore[arg-type]
             callbacks=[lambda record: epochs.append(record.epoch)])  # fmt: skip
    assert epochs == []
    with pytest.raises(
        TypeError, match=r"resume_from is a checkpoint's file, a folder .* not True"
    ):
        _fit(Adam(0.01), epochs=2, resume_from=True)


def test_other_sample_weights_are_named_as_such_when_resuming(tmp_path: Path) -> None:
    """Before (trial AD): resuming with other sample weights was refused as 'other training
    rows', the rows being the same."""
    weights = np.linspace(0.5, 1.5, 240)
    _fit(Adam(0.01), epochs=2, folder=tmp_path, sample_weight=weights)
    with pytest.raises(CheckpointMismatchError, match="or other sample weights"):
        _fit(Adam(0.01), epochs=4, resume_from=tmp_path, sample_weight=weights[::-1].copy())


def test_reduce_on_plateau_lowers_the_rate_and_its_checkpoints_resume_bit_for_bit(
    tmp_path: Path,
) -> None:
    """Before: the rate could only be changed from a callback by rewriting the optimizer's
    settings, and the run's checkpoints were refused on resuming ("taken with the optimizer
    Adam(learning_rate=0.00125 ...); this run's is Adam(learning_rate=0.01 ...)"). Resumed
    from the checkpoint of an epoch at whose end the rate was lowered: the checkpoint holds
    that epoch's decision (it is written after every other callback has had the epoch)."""
    seen: list[float] = []

    class Rates(ReduceOnPlateau):
        def on_epoch_end(self, run: Any, record: Any) -> None:
            super().on_epoch_end(run, record)
            seen.append(run.trainer.optimizer.rate(run.trainer.state))

    whole = _fit(Adam(0.2), epochs=6, callbacks=[Rates(factor=0.5, patience=1)])
    lowered = [epoch for epoch in range(2, 6) if seen[epoch - 1] < seen[epoch - 2]]
    assert lowered, f"the rate was never lowered: {seen}"
    _fit(Adam(0.2), epochs=lowered[0], folder=tmp_path,
         callbacks=[ReduceOnPlateau(0.5, patience=1)])  # fmt: skip
    resumed = _fit(
        Adam(0.2), epochs=6, resume_from=tmp_path, callbacks=[ReduceOnPlateau(0.5, patience=1)]
    )
    assert _bits(resumed) == _bits(whole)  # the best epoch's slots
    # ... and every epoch after the resume
    assert _losses(resumed) == _losses(whole)


class Scaled(Callback):
    """A callback of one's own that sets the rate's factor at the end of epoch 2 (named: it has
    the epoch before the checkpoint of that epoch is written, which holds its decision)."""

    name = "scaled"

    def __init__(self, scale: Any) -> None:
        self.scale = scale

    def on_epoch_end(self, run: Any, record: Any) -> None:
        if record.epoch == 2:
            run.trainer.state.rate_scale = self.scale


@pytest.mark.parametrize("scale", [2.0, 0.0])
def test_a_rate_scale_a_callback_raises_or_that_reaches_0_resumes_bit_for_bit(
    tmp_path: Path, scale: float
) -> None:
    """Failed before (trial CB): a warm-up's factor of 2 (and a factor ReduceOnPlateau's
    reductions brought to 0) were written into every later checkpoint, and each was refused
    on resuming: "rate scale must be a number above 0 and at most 1"."""
    whole = _fit(SGD(0.05), epochs=4, callbacks=[Scaled(scale)])
    _fit(SGD(0.05), epochs=3, folder=tmp_path, callbacks=[Scaled(scale)])
    resumed = _fit(SGD(0.05), epochs=4, resume_from=tmp_path, callbacks=[Scaled(scale)])
    assert _losses(resumed) == _losses(whole)


@pytest.mark.parametrize("scale", [math.inf, -1.0, "2"])
def test_a_rate_scale_no_checkpoint_can_hold_is_refused_at_the_checkpoint(
    tmp_path: Path, scale: Any
) -> None:
    with pytest.raises(ConfigurationError, match=r"the optimizer's rate scale .* is "):
        _fit(SGD(0.05), epochs=3, folder=tmp_path, callbacks=[Scaled(scale)])


def test_reduce_on_plateau_where_a_rate_belongs_says_it_goes_to_fit() -> None:
    with pytest.raises(TypeError, match=r"callback of the run.*callbacks=\[ReduceOnPlateau"):
        Adam(ReduceOnPlateau())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="write CosineDecay"):
        Adam(CosineDecay)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"factor": 1.5}, "factor must lie between 0 and 1"),
        ({"patience": 0}, "patience is a whole number from 1"),
        ({"min_rate": -1.0}, "min_rate must be 0 or more"),
    ],
)
def test_reduce_on_plateau_refuses_bad_settings(arguments: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        ReduceOnPlateau(**arguments)

"""A run: data in; a trained network and its report out.

`fit` makes the data's feeds (the rows split from the run's seed, the pipeline learned on the
training rows), then loops over epochs: a pass over the training rows in a fresh order, the
validation loss, then every callback — early stopping, checkpoints, progress, the user's own.
At the end the best epoch's slots are back and the test rows are measured. The loop asks the
trainer for everything on the engine (steps, evaluations, snapshots, checkpoint state) and the
distribution for everything about processes; it touches no engine tensor itself.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deepsharp.core.engine import Engine, EngineIdentity, make_engine
from deepsharp.core.engine.registry import check_spec
from deepsharp.core.errors import (
    CheckpointMismatchError,
    EngineMismatchError,
    TrainingDivergedError,
    described,
)
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Optimizer
from deepsharp.core.random import Streams
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.callbacks import (
    Callback,
    CheckpointWriter,
    EachEpoch,
    EarlyStopping,
    ProgressBar,
    RunState,
)
from deepsharp.core.training.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.training.distribution import Distribution, OneProcess, Spread, Sums
from deepsharp.core.training.feeds import Feed, feeds_for
from deepsharp.core.training.scaling import (
    LossScaleSetting,
    check_loss_scale,
    check_setting,
    loss_scale_for,
)
from deepsharp.core.training.trainer import Trainer, check_parts, check_sides

__all__ = ["FitOptions", "Report", "Run", "fit"]


def _whole(name: str, value: object, least: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"FitOptions: {name} must be a whole number, not {value!r}")
    if value < least:
        raise ValueError(f"FitOptions: {name} must be {least} or more, not {value!r}")
    return int(value)


@dataclass
class FitOptions:
    """How a run goes. Options hold the light engine unless they name another; `distributed`
    spreads the run over processes (deepsharp-distributed's `DataParallel`); `loss_scale`
    ("auto": dynamic under mixed_float16, none otherwise; "dynamic"; a number; a `LossScale`;
    None) scales the loss for the way back (`deepsharp.core.training.scaling`).

    `checkpoint_dir`: where the run writes checkpoints, every `checkpoint_every` epochs — every
    epoch when `checkpoint_every` is left 0 — keeping the latest `checkpoint_keep`."""

    seed: int
    engine: Engine | str | None = None
    epochs: int = 200
    batch_size: int = 32
    patience: int = 10
    restore_best: bool = True
    checkpoint_dir: str | os.PathLike[str] | None = None
    checkpoint_every: int = 0
    checkpoint_keep: int = 1
    progress: bool | None = None
    distributed: Spread | None = None
    loss_scale: LossScaleSetting = "auto"

    def __post_init__(self) -> None:
        self.seed = _whole("seed", self.seed, -(2**63))
        check_spec(self.engine, "FitOptions: engine")
        for name in ("epochs", "batch_size", "patience", "checkpoint_keep"):
            setattr(self, name, _whole(name, getattr(self, name), 1))
        self.checkpoint_every = _whole("checkpoint_every", self.checkpoint_every, 0)
        if not isinstance(self.restore_best, bool):
            raise TypeError(f"FitOptions: restore_best is True or False, not {self.restore_best!r}")
        if self.progress is not None and not isinstance(self.progress, bool):
            raise TypeError(f"FitOptions: progress is True, False or None, not {self.progress!r}")
        if self.checkpoint_dir is not None and not isinstance(
            self.checkpoint_dir, (str, os.PathLike)
        ):
            raise TypeError(f"FitOptions: checkpoint_dir is a path, not {self.checkpoint_dir!r}")
        if self.checkpoint_every and self.checkpoint_dir is None:
            raise ValueError("FitOptions: checkpoint_every needs a checkpoint_dir to write into")
        if self.checkpoint_dir is not None and not self.checkpoint_every:
            self.checkpoint_every = 1  # a folder given is a folder to write into: every epoch
        if self.distributed is not None and not isinstance(self.distributed, Spread):
            raise TypeError(
                f"FitOptions: distributed says how the run is spread over processes (such as "
                f"DataParallel()), not "
                f"{self.distributed!r}"
            )
        check_setting(self.loss_scale, "FitOptions")


@dataclass
class Report:
    """What a run did: its epochs, its best epoch, and its measures on the test rows."""

    epochs_run: int
    best_epoch: int
    history: list[EpochRecord]
    measures: dict[str, float]
    engine: EngineIdentity
    test_rows: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    skipped_steps: int = 0

    def __str__(self) -> str:
        lines = [
            f"deepsharp run on {self.engine}: {self.epochs_run} epochs in {self.seconds:.2f} s, "
            f"best epoch {self.best_epoch}",
            "",
            f"{'epoch':>6}  {'loss':>9}  {'validation':>10}  {'seconds':>8}",
        ]
        shown = self.history if len(self.history) <= 12 else self.history[:5] + self.history[-6:]
        for index, record in enumerate(shown):
            if len(self.history) > 12 and index == 5:
                lines.append(f"{'...':>6}")
            mark = "  <- best" if record.epoch == self.best_epoch else ""
            lines.append(
                f"{record.epoch:>6}  {record.loss:>9.5f}  {record.validation_loss:>10.5f}  "
                f"{record.seconds:>8.3f}{mark}"
            )
        lines.append("")
        lines.append(f"on the {self.test_rows} test rows:")
        for name, value in self.measures.items():
            lines.append(f"  {name:<10} {value:.4f}")
        if self.skipped_steps:
            lines.append(f"{self.skipped_steps} steps skipped (gradients not finite)")
        lines.extend(self.notes)
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike[str]) -> None:
        """Draw the training and validation loss per epoch into an image file (needs matplotlib)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError(
                "report.plot needs matplotlib: pip install 'deepsharp[plot]'"
            ) from None
        epochs = [r.epoch for r in self.history]
        figure, axes = plt.subplots(figsize=(6, 4))
        axes.plot(epochs, [r.loss for r in self.history], label="training loss")
        axes.plot(epochs, [r.validation_loss for r in self.history], label="validation loss")
        axes.axvline(
            self.best_epoch, color="grey", linestyle=":", label=f"best epoch ({self.best_epoch})"
        )
        axes.set_xlabel("epoch")
        axes.set_ylabel("loss")
        axes.set_title(f"deepsharp run on {self.engine}")
        axes.legend()
        figure.tight_layout()
        figure.savefig(os.fspath(path))
        plt.close(figure)


@dataclass
class Run:
    """A finished run: `run.trained` predicts rows, `run.report` says how it went."""

    trained: TrainedNetwork
    report: Report

    def __str__(self) -> str:
        return str(self.report)


EpochFunction = Callable[[EpochRecord], Any]


def fit(
    pipeline: Any,
    data: Any,
    network: Network,
    loss: Loss,
    optimizer: Optimizer,
    options: FitOptions,
    resume_from: str | os.PathLike[str] | Checkpoint | None = None,
    test_rows: Any = None,
    callbacks: Sequence[Callback | EpochFunction] = (),
    on_epoch: EpochFunction | None = None,
) -> Run:
    """Train `network` on `data` as `options` say, and measure it on the test rows.

    `data`: rows of named columns (a list of mappings, a DataFrame) for `pipeline` to read;
    arrays `(x, y)` taken as they are (`pipeline` None, or one of no columns that sets the
    split); or a `Source`. `test_rows`, when given, are the test rows (of the same form), and the
    data is split into training and validation only (in the pipeline's proportions).
    `callbacks`: `Callback`s, or functions called with each epoch's `EpochRecord` (`on_epoch`
    is one more). `resume_from` goes on from a checkpoint (a file, a folder's latest, or a
    `Checkpoint`) taken by the same run on the same engine; it ends bit for bit where the
    uninterrupted run does.
    """
    began = time.perf_counter()
    check_parts(network, loss, optimizer, "fit")
    if not isinstance(options, FitOptions):
        raise TypeError(f"fit: options must be FitOptions, not {described(options)}")
    engine = make_engine(options.engine)
    distribution = (options.distributed or OneProcess()).for_run()
    checkpoint = _checkpoint(resume_from, engine, optimizer, options, distribution)
    parts = _callbacks(options, [*callbacks, *([on_epoch] if on_epoch is not None else [])])
    streams = Streams(options.seed)
    feeds = feeds_for(pipeline, data, network, loss, streams, test_rows)
    if checkpoint is not None and checkpoint.network != network.to_json():
        raise CheckpointMismatchError(
            f"the checkpoint {checkpoint.path or ''} is of another network "
            f"({checkpoint.network}); this run trains {network.to_json()}"
        )
    try:
        with Trainer(
            network, loss, optimizer, engine, streams=streams, loss_scale=options.loss_scale
        ) as trainer:
            run = RunState(trainer, options, distribution, parts)
            if checkpoint is not None:
                run.resume(checkpoint)
            distribution.start(trainer)
            if checkpoint is None:  # the slots it starts from may be another process's now
                trainer.snapshot(run.best)
            for part in parts:
                part.on_run_start(run)
            while run.epoch < options.epochs and not run.stop:
                record = _epoch(run, feeds.train, feeds.validation)
                run.end_epoch(record)
                for part in parts:
                    part.on_epoch_end(run, record)
            for part in parts:
                part.on_run_end(run)
            test = _evaluate(run, feeds.test)
    finally:
        for part in parts:
            part.close()
    measures = {"loss": test.mean_loss}
    if loss.measures_accuracy:
        measures["accuracy"] = test.accuracy
    report = Report(
        epochs_run=len(run.history),
        best_epoch=run.best_epoch,
        history=run.history,
        measures=measures,
        engine=engine.identity,
        test_rows=test.rows,
        seconds=time.perf_counter() - began,
        skipped_steps=trainer.skipped_steps,
    )
    distribution.finish()
    return Run(TrainedNetwork(network, loss, feeds.pipeline), report)


def _callbacks(options: FitOptions, given: Sequence[Callback | EpochFunction]) -> list[Callback]:
    """Early stopping, checkpoints, progress, then the user's own, in that order."""
    parts: list[Callback] = [EarlyStopping(options.patience, options.restore_best)]
    if options.checkpoint_every:
        assert options.checkpoint_dir is not None
        parts.append(
            CheckpointWriter(
                options.checkpoint_dir, options.checkpoint_every, options.checkpoint_keep
            )
        )
    parts.append(ProgressBar(options.progress))
    parts.extend(c if isinstance(c, Callback) else EachEpoch(c) for c in given)
    return parts


def _checkpoint(
    resume_from: str | os.PathLike[str] | Checkpoint | None,
    engine: Engine,
    optimizer: Optimizer,
    options: FitOptions,
    distribution: Distribution,
) -> Checkpoint | None:
    """The checkpoint to resume from, refused (naming both sides) before anything is read or
    restored when it was taken on another engine, optimizer, seed, loss scale or world size."""
    if resume_from is None:
        return None
    checkpoint = (
        resume_from if isinstance(resume_from, Checkpoint) else Checkpoint.load(resume_from)
    )
    where = f"the checkpoint {checkpoint.path}" if checkpoint.path else "the checkpoint"
    if checkpoint.engine != engine.identity:
        raise EngineMismatchError(
            f"{where} was taken on the engine {checkpoint.engine}; this run's engine is "
            f"{engine.identity}. A run goes on only on an engine of the same name, version, "
            "device and precision: resume there, or start the run afresh"
        )
    check_sides(checkpoint.trainer, optimizer, options.seed, where)
    scale = loss_scale_for(options.loss_scale, str(engine.identity.precision))
    check_loss_scale(checkpoint.trainer.hooks, scale, where)
    distribution.check(checkpoint.distribution, where)
    return checkpoint


def _epoch(run: RunState, train: Feed, validation: Feed) -> EpochRecord:
    """One pass over the training rows in a fresh order, then the validation loss."""
    started = time.perf_counter()
    trainer, distribution, epoch = run.trainer, run.distribution, run.epoch + 1
    sums = Sums()
    batches = train.batches(run.options.batch_size, trainer.streams.order, distribution.share)
    for step, batch in enumerate(batches, start=1):
        value = trainer.step(batch.features, batch.targets, batch.share)
        if not distribution.all_finite(value):
            _diverged(run, f"the loss turned {value} at epoch {epoch}, step {step}")
        sums.add(value, len(batch))
    judged = _evaluate(run, validation)
    if not math.isfinite(judged.mean_loss):
        _diverged(run, f"the validation loss turned {judged.mean_loss} at epoch {epoch} (its end)")
    train_loss = distribution.combine(sums).mean_loss
    return EpochRecord(epoch, train_loss, judged.mean_loss, time.perf_counter() - started)


def _diverged(run: RunState, what: str) -> None:
    """Put back the best epoch's slots (or those the run started from), then stop the run."""
    run.trainer.restore(run.best)
    kept = f"epoch {run.best_epoch}'s (the best)" if run.best_epoch else "those it started from"
    optimizer = run.trainer.optimizer
    rate = optimizer.config().get("learning_rate")
    lower = (
        f"try a smaller learning rate than {type(optimizer).__name__}'s {rate:g} (say "
        f"{rate / 10:g})"
        if isinstance(rate, (int, float))
        else "try a smaller learning rate"
    )
    raise TrainingDivergedError(
        f"{what}: the training diverged. The network holds the slots of {kept}. To go on, "
        f"{lower}, or look for huge or broken values in the features (scale them)"
    )


def _evaluate(run: RunState, feed: Feed) -> Sums:
    """The loss (and the rows predicted right) over a part of the rows, every process's."""
    trainer, loss = run.trainer, run.trainer.loss
    sums = Sums()
    for batch in feed.batches(run.options.batch_size, None, run.distribution.share):
        if len(batch) == 0:
            continue
        value, predicted = trainer.evaluate(batch.features, batch.targets)
        right = int(loss.correct(predicted, batch.targets).sum()) if loss.measures_accuracy else 0
        sums.add(value, len(batch), right)
    return run.distribution.combine(sums)

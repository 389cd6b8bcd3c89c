"""A run: data in; a trained network and its report out.

`fit` makes the data's feeds (the rows split from the run's seed, the pipeline learned on the
training rows), then loops over epochs: a pass over the training rows in a fresh order (each
step's rows weighted where the run weighs them, each step followed by the callbacks'
`on_batch_end`), the validation loss and metrics, then every callback — early stopping,
checkpoints, progress, the user's own. At the end the best epoch's slots are back and the test
rows are measured. The loop asks the trainer for everything on the engine (steps, evaluations,
snapshots, checkpoint state) and the distribution for everything about processes; it touches no
engine tensor itself.
"""

from __future__ import annotations

import math
import numbers
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.comparing.shadow import Shadow, ShadowChecks
from deepsharp.core.engine import Engine, make_engine
from deepsharp.core.engine.registry import check_spec
from deepsharp.core.errors import (
    CheckpointMismatchError,
    ConfigurationError,
    DeepSharpWarning,
    EngineMismatchError,
    TrainingDivergedError,
    described,
    listed,
    outside,
)
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Network, own_copy
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
    checked_state,
    warn_of_unnamed_state,
)
from deepsharp.core.training.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.training.checks import check_parts, warn_of_weights_unread
from deepsharp.core.training.distribution import OneProcess, Spread, Sums
from deepsharp.core.training.feeds import Batch, Feed, Feeds, check_classes, feeds_for
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.measuring import measured_part, measures_of
from deepsharp.core.training.metrics import (
    MONITORED,
    carried,
    check_metric_names,
    check_metrics_fit,
    check_monitor,
    known_again,
)
from deepsharp.core.training.report import Report, Run, run_notes
from deepsharp.core.training.resuming import check_run, first_difference, run_record
from deepsharp.core.training.scaling import (
    LossScaleSetting,
    check_loss_scale,
    check_setting,
    loss_scale_for,
)
from deepsharp.core.training.state import check_sides, optimizer_record
from deepsharp.core.training.trainer import Trainer
from deepsharp.core.training.weights import ClassWeights, check_products, class_weights_for

__all__ = ["FitOptions", "Report", "Run", "fit"]  # Report and Run live in .report


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
    epoch when `checkpoint_every` is left 0 — keeping the latest `checkpoint_keep`.

    `metrics`: what the run measures besides its loss, on the validation rows each epoch and on
    the test rows at the end (`deepsharp.core.training.metrics`: "accuracy", "auc", "f1",
    "precision", "recall" and their "_macro" forms, "mae", "mse", "rmse", "r2").
    `monitor`: what judges each epoch — which is the best (kept, and put back at the end with
    `restore_best`) and whether early stopping's `patience` ran out: "validation_loss", or one
    of `metrics` (more is better but for "mae", "mse" and "rmse"; an epoch whose metric is NaN
    is never the best, but the first stands until an epoch is better).
    `accumulate`: batches a step takes (gradient accumulation): each update applies the
    gradients of `accumulate` batches of `batch_size` rows, taken one after the other.
    `compile` (True by default): each kind of batch's step is traced once and replayed as a
    flat plan after, with the same bits (`deepsharp.core.training.compiled`); False runs every
    step as recorded. The report says which ran, and why a step could not be compiled."""

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
    shadow: Shadow | None = None
    metrics: Sequence[str] = ()
    monitor: str = MONITORED
    accumulate: int = 1
    compile: bool = True

    def __getstate__(self) -> dict[str, Any]:  # its metrics of one's own go with a copy
        return {**vars(self), "_carried": carried(self.metrics)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        known_again(state.pop("_carried", {}))
        vars(self).update(state)

    def __post_init__(self) -> None:
        self.seed = _whole("seed", self.seed, -(2**63))
        if self.seed >= 2**63:  # the generator keeps 64 bits: 2**64 would be seed 0's run again
            raise ValueError(
                f"FitOptions: seed is a 64-bit whole number, -2**63 .. 2**63 - 1, not {self.seed}"
            )
        check_spec(self.engine, "FitOptions: engine")
        for name in ("epochs", "batch_size", "patience", "checkpoint_keep", "accumulate"):
            setattr(self, name, _whole(name, getattr(self, name), 1))
        self.checkpoint_every = _whole("checkpoint_every", self.checkpoint_every, 0)
        if not isinstance(self.compile, bool):
            raise TypeError(f"FitOptions: compile is True or False, not {self.compile!r}")
        if not isinstance(self.restore_best, bool):
            raise TypeError(f"FitOptions: restore_best is True or False, not {self.restore_best!r}")
        if self.progress is not None and not isinstance(self.progress, bool):
            raise TypeError(f"FitOptions: progress is True, False or None, not {self.progress!r}")
        if self.checkpoint_dir is not None and not isinstance(
            self.checkpoint_dir, (str, os.PathLike)
        ):
            raise TypeError(f"FitOptions: checkpoint_dir is a path, not {self.checkpoint_dir!r}")
        if self.checkpoint_dir is not None and not os.fspath(self.checkpoint_dir):
            raise ValueError(
                "FitOptions: checkpoint_dir is empty ('' would write checkpoints into the working "
                "folder): name a folder, or None for no checkpoints"
            )
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
        self.metrics = check_metric_names(self.metrics, "FitOptions")
        self.monitor = check_monitor(self.monitor, self.metrics, "FitOptions")
        if self.shadow is not None and not isinstance(self.shadow, Shadow):
            raise TypeError(
                f"FitOptions: shadow is a Shadow (such as Shadow(every=100, engine='light')), "
                f"not {self.shadow!r}"
            )


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
    hooks: Sequence[StepHook] = (),
    class_weight: Mapping[int, float] | None = None,
    sample_weight: Any = None,
    validation_rows: Any = None,
) -> Run:
    """Train `network` on `data` as `options` say, and measure it on the test rows.

    `data`: rows of named columns (a list of mappings, a DataFrame) for `pipeline` to read;
    arrays `(x, y)` taken as they are (`pipeline` None, or one of no columns that sets the
    split); or a `Source`. `test_rows`, when given, are the test rows (of the same form), and the
    data is split into training and validation only (in the pipeline's proportions);
    `validation_rows` (of the same form: a scan too), the rows that judge each epoch (early
    stopping, the best epoch), and the data is then split into training and test only (all
    training rows, where both are given).
    `callbacks`: `Callback`s, or functions called with each epoch's `EpochRecord` (`on_epoch`
    is one more). `hooks`: `StepHook`s every step runs between the way back and the update
    (after a distributed run's sum and the loss scale). `class_weight` (a weight a class of
    the target) and `sample_weight` (a weight a row of arrays) weigh the training rows
    (`deepsharp.core.training.weights`). `resume_from` goes on from a checkpoint (a file, a
    folder's latest, or a `Checkpoint`) taken by the same run on the same engine; it ends bit
    for bit where the uninterrupted run does.
    """
    began = time.perf_counter()
    check_parts(network, loss, optimizer, "fit")
    if not isinstance(options, FitOptions):
        raise TypeError(f"fit: options must be FitOptions, not {described(options)}")
    callbacks, hooks = listed(callbacks, "callbacks", "fit"), listed(hooks, "hooks", "fit")
    engine = make_engine(options.engine)
    checkpoint = _checkpoint(resume_from, engine, optimizer, options)
    parts = _callbacks(options, [*callbacks, *([on_epoch] if on_epoch is not None else [])])
    streams = Streams(options.seed)
    shadow = ShadowChecks(options.shadow, engine) if options.shadow is not None else None
    feeds = feeds_for(
        pipeline, data, network, loss, streams, test_rows, sample_weight, validation_rows
    )
    if checkpoint is not None and checkpoint.network != network.to_json():
        raise CheckpointMismatchError(
            f"the checkpoint {checkpoint.path or ''} is of another network than this run "
            f"trains: {first_difference(checkpoint.network, network.to_json())} (there: the "
            "checkpoint's; here: this run's): resume with the network it was taken with, or "
            "start the run afresh"
        )
    check_classes(network, loss, feeds.pipeline)
    check_metrics_fit(options.metrics, loss, network.outputs)
    if sample_weight is not None or class_weight is not None:
        warn_of_weights_unread(loss)
    labels = getattr(feeds.pipeline, "classes", None) if class_weight is not None else None
    weights = class_weights_for(class_weight, loss, network.outputs, _targets(feeds.train), labels)
    if weights is not None and sample_weight is not None:
        check_products(weights, _batches(feeds.train))
    made: dict[str, Any] = {}  # what the run is made of, where checkpoints keep it
    if checkpoint is not None or options.checkpoint_every:
        made = run_record(
            loss, options.batch_size, options.accumulate, weights, feeds, options.metrics, engine
        )
        optimizer_record(optimizer)  # what checkpoints will hold of it: refused now, not later
        network.to_json()  # and of the network (a layer's config() of NumPy numbers: trial X)
        warn_of_unnamed_state([*hooks, *parts])
    if checkpoint is not None:
        check_run(checkpoint.run, made, checkpoint.callbacks, parts, _where(checkpoint))
    distribution = (options.distributed or OneProcess()).for_run()
    if checkpoint is not None:
        distribution.check(checkpoint.distribution, _where(checkpoint))
    try:
        with Trainer(
            network,
            loss,
            optimizer,
            engine,
            streams=streams,
            hooks=hooks,
            loss_scale=options.loss_scale,
            accumulate=options.accumulate,
            compile=options.compile,
        ) as trainer:
            run = RunState(trainer, options, distribution, parts)
            for hook in trainer.hooks:  # what checkpoints will hold: refused now, not later
                if hook.name and options.checkpoint_every:
                    checked_state(hook, "step hook")
            run.class_weights = weights
            run.record = made
            if checkpoint is not None:
                run.resume(checkpoint)
            distribution.check_settings(_run_settings(options, weights, feeds))
            distribution.check_data(options.seed, feeds)
            distribution.start(trainer)
            _check_last_batch(network, feeds.train, size_of(options), distribution.world_size)
            if checkpoint is None:  # the slots it starts from may be another process's now
                trainer.snapshot(run.best)
            for part in parts:
                part.on_run_start(run)
            while run.epoch < options.epochs and not run.stop:
                record = _epoch(run, feeds.train, feeds.validation, shadow)
                run.end_epoch(record)
                for part in parts:
                    part.on_epoch_end(run, record)
                distribution.check_replicas(trainer, f"in epoch {record.epoch} (its steps, or "
                                            "a callback at its end)")  # fmt: skip
                run.stop = distribution.any_process(run.stop)  # one process's stop is all's
            for part in parts:
                part.on_run_end(run)
            distribution.check_replicas(trainer, "at the run's end (a callback's on_run_end)")
            test, figures = _evaluate(run, feeds.test)
    finally:
        for part in parts:
            part.close()
    report = Report(
        epochs_run=len(run.history),
        best_epoch=run.best_epoch,
        history=run.history,
        measures=measures_of(loss, test, figures),
        engine=engine.identity,
        test_rows=test.rows,
        seconds=time.perf_counter() - began,
        skipped_steps=trainer.skipped_steps,
        shadow=[] if shadow is None else shadow.checks,
        steps=trainer.compiled.record(),
        measured_on=feeds.test_said,
        processes=distribution.world_size,
        resumed_at=0 if checkpoint is None else checkpoint.epoch,
        notes=run_notes(run, options),
    )
    distribution.finish()
    # The network, loss and pipeline as this run left them: the same Network or Pipeline
    # given to another fit trains (learns) again in place, and this run's predictions keep
    # the slots and statistics it made (trial PK), and its layers' and loss's settings (trial
    # NB). The network's copy shares its host arrays (`Network.kept_copy`).
    kept = TrainedNetwork(network.kept_copy(), own_copy(loss), own_copy(feeds.pipeline))
    return Run(kept, report)


def _batches(feed: Feed) -> Iterator[Batch]:
    """The training rows in order, a large batch at a time."""
    return feed.batches(4096, None, lambda count: (0, count))


def _targets(feed: Feed) -> Iterator[NDArray[Any]]:
    """The training targets, a batch at a time (what class weights are checked against)."""
    for batch in _batches(feed):
        yield batch.targets


def _run_settings(
    options: FitOptions, weights: ClassWeights | None, feeds: Feeds
) -> dict[str, str]:
    """What every process of a run must be given alike beside its trainer's settings, in
    words: how batches are cut and ordered, how long the run goes, what it weighs and judges
    (a process of another batch size takes its share of other batches; of other epochs, it
    waits at a sum the others never reach)."""
    return {
        "batch sizes": f"{options.batch_size} a batch, accumulating {options.accumulate}",
        "epochs": str(options.epochs),
        "early stopping": f"patience {options.patience}, restore_best {options.restore_best}, "
        f"monitor {options.monitor}",
        "class weights": "none" if weights is None else repr(weights.weights.tolist()),
        "metrics": repr(list(options.metrics)),
        # Rank 0 alone writes: a folder given to another alone wrote nothing (trial DS).
        "checkpoints": f"every {options.checkpoint_every} epochs (0: none), keeping "
        f"{options.checkpoint_keep}",
        "scan buffers": repr(getattr(feeds.train, "buffer_rows", None)),
    }


def _where(checkpoint: Checkpoint) -> str:
    return f"the checkpoint {checkpoint.path}" if checkpoint.path else "the checkpoint"


def _check_names(made: list[Callback]) -> None:
    """Refuse callbacks whose names would key two states alike in a checkpoint: two of one name,
    or one named as fit's own (its state replaced theirs, and a resumed run went otherwise);
    and a state a checkpoint could not hold, before the first epoch rather than after it."""
    seen: dict[str, Callback] = {}
    for callback in made:
        name = callback.name
        if not name:
            continue
        if not isinstance(name, str):
            raise ConfigurationError(
                f"fit: the callback {type(callback).__name__}'s name is text, not {name!r}"
            )
        if name in ("early_stopping", "checkpoints"):
            own = (
                "FitOptions(patience=..., restore_best=...)"
                if name == "early_stopping"
                else ("FitOptions(checkpoint_dir=..., checkpoint_every=...)")
            )
            raise ConfigurationError(
                f"fit: the callback {type(callback).__name__} is named {name!r}, the name of "
                f"fit's own, which {own} sets: give it a name of its own (or leave it out "
                "and set those options)"
            )
        if name in seen:
            raise ConfigurationError(
                f"fit: two callbacks are named {name!r} ({type(seen[name]).__name__} and "
                f"{type(callback).__name__}): checkpoints keep each state by its name; give "
                "each a name of its own"
            )
        seen[name] = callback
        checked_state(callback)


def _callbacks(options: FitOptions, given: Sequence[Callback | EpochFunction]) -> list[Callback]:
    """Early stopping, the user's callbacks that keep a state in checkpoints (a `name`:
    ReduceOnPlateau), checkpoints, progress, then the user's others. A checkpoint is written
    once every callback whose state it holds has had the epoch (it holds their decisions of
    that epoch: a rate ReduceOnPlateau lowered), and before the others, which find it written."""
    for callback in given:
        if isinstance(callback, type):
            raise TypeError(
                f"fit: callbacks holds the class {callback.__name__}, not a callback: make one, "
                f"{callback.__name__}(...)"
            )
        if not (isinstance(callback, Callback) or callable(callback)):
            raise TypeError(
                f"fit: a callback is a Callback or a function of an epoch's record, not "
                f"{callback!r}"
            )
    made = [c if isinstance(c, Callback) else EachEpoch(c) for c in given]
    _check_names(made)
    parts: list[Callback] = [EarlyStopping(options.patience, options.restore_best, options.monitor)]
    parts.extend(c for c in made if c.name)
    if options.checkpoint_every:
        assert options.checkpoint_dir is not None
        parts.append(
            CheckpointWriter(
                options.checkpoint_dir, options.checkpoint_every, options.checkpoint_keep
            )
        )
    parts.append(ProgressBar(options.progress))
    parts.extend(c for c in made if not c.name)
    return parts


def _checkpoint(
    resume_from: str | os.PathLike[str] | Checkpoint | None,
    engine: Engine,
    optimizer: Optimizer,
    options: FitOptions,
) -> Checkpoint | None:
    """The checkpoint to resume from, refused (naming both sides) before anything is read or
    restored when it was taken on another engine, optimizer, seed or loss scale (another world
    size is the run's distribution's to refuse, once it has joined its processes)."""
    if resume_from is None:
        return None
    if not isinstance(resume_from, (str, os.PathLike, Checkpoint)):
        raise TypeError(
            f"fit: resume_from is a checkpoint's file, a folder of them (its latest) or a "
            f"Checkpoint, not {described(resume_from)}"
        )
    checkpoint = (
        resume_from if isinstance(resume_from, Checkpoint) else Checkpoint.load(resume_from)
    )
    where = _where(checkpoint)
    if checkpoint.engine != engine.identity:
        raise EngineMismatchError(
            f"{where} was taken on the engine {checkpoint.engine}; this run's engine is "
            f"{engine.identity}. A run goes on only on an engine of the same name, version, "
            "device and precision: resume there, or start the run afresh"
        )
    check_sides(checkpoint.trainer, optimizer, options.seed, where)
    scale = loss_scale_for(options.loss_scale, str(engine.identity.precision))
    check_loss_scale(checkpoint.trainer.hooks, scale, where)
    if checkpoint.epoch > options.epochs:
        warnings.warn(
            f"{where} was taken after epoch {checkpoint.epoch}, past this run's "
            f"epochs={options.epochs}: nothing is trained, and the run ends where the "
            f"checkpoint is (its report of {checkpoint.epoch} epochs); give epochs above "
            f"{checkpoint.epoch} to train on",
            DeepSharpWarning,
            stacklevel=outside(),
        )
    return checkpoint


def _epoch(
    run: RunState, train: Feed, validation: Feed, shadow: ShadowChecks | None = None
) -> EpochRecord:
    """One pass over the training rows in a fresh order, then the validation loss and metrics.
    Under gradient accumulation a step takes `accumulate` batches' rows."""
    started = time.perf_counter()
    trainer, distribution, epoch = run.trainer, run.distribution, run.epoch + 1
    sums = Sums()
    size = size_of(run.options)
    batches = train.batches(size, trainer.streams.order, distribution.share)
    if trainer.network.whole_batch:
        batches = _no_lone_last_row(batches)
    skipped, step, run.cut_short = trainer.skipped_steps, 0, 0
    # A callback of one's own may end the run after a step, on one process: every process then
    # ends it there (asked only where one may: the built-in callbacks end runs between epochs).
    # Whether one may is agreed among the processes first: a callback given to one process
    # alone (a logger on rank 0) asks there, and every process must ask with it.
    own = any(type(part).on_batch_end is not Callback.on_batch_end for part in run.callbacks)
    stops = distribution.any_process(own)
    for step, batch in enumerate(batches, start=1):
        if shadow is not None:
            shadow.before_step(trainer, batch.features, batch.targets, epoch, step)
        weights = _weights(run.class_weights, batch)
        updated = trainer.held.state.steps > 0  # whether any update came before this loss
        value = trainer.step(batch.features, batch.targets, batch.share, weights)
        if not updated and run.first_loss is None:  # the loss of the slots it started from
            run.first_loss = value
        if not distribution.all_finite(value):
            whole = distribution.batch_loss(value)  # (a share's was quoted, finite: trial DS)
            _diverged(run, f"the loss turned {whole} at epoch {epoch}, step {step}", updated)
        sums.add(value, len(batch))
        for part in run.callbacks:
            part.on_batch_end(run, step, value)
        if stops:
            run.stop = distribution.any_process(run.stop)
        if run.stop:  # a callback ended the run after this step: the epoch ends here, and
            # where rows were left (the order is drawn before the first batch) it is cut short
            run.cut_short = step if next(batches, None) is not None else 0
            break
    if step and trainer.skipped_steps - skipped == step:
        scale = trainer.loss_scale
        why = (
            "by the run's step hooks"
            if scale is None
            else f"their gradients not finite under the loss scale {scale!r}, "
            + (
                f"now {scale.scale:g} (multiplied by {scale.backoff:g} at each skipped step): "
                "a scale still too large for the half format goes on down, but where the "
                "gradients overflow at any scale the run is diverging — a learning rate too "
                "large, or values too large for the half format (scale them)"
                if scale.dynamic
                else "a scale too large for the half format overflows every step: give a "
                'smaller one, or loss_scale="dynamic"'
            )
        )
        warnings.warn(
            f"every step of epoch {epoch} ({step} of {step}) was skipped, so the epoch learnt "
            f"nothing: {why}",
            DeepSharpWarning,
            stacklevel=outside(),
        )
    judged, figures = _evaluate(run, validation)
    if not math.isfinite(judged.mean_loss):
        _diverged(run, f"the validation loss turned {judged.mean_loss} at epoch {epoch} (its end)")
    train_loss = distribution.combine(sums).mean_loss
    return EpochRecord(epoch, train_loss, judged.mean_loss, time.perf_counter() - started, figures)


def size_of(options: FitOptions) -> int:
    """The rows a training step takes: the batch size, times the batches it accumulates."""
    return options.batch_size * options.accumulate


def _check_last_batch(network: Network, train: Any, size: int, world: int) -> None:
    """Refuse, before the first step, training rows whose last batch would leave a process no
    rows where the network's BatchNorm sums its statistics over every process's (the step
    refused it after an epoch's work)."""
    rows = len(train) if hasattr(train, "__len__") else 0
    last = rows % size
    if world < 2 or not network.whole_batch or not 0 < last < world:
        return
    near = sorted(range(max(world, size - 8), size + 9), key=lambda b: (abs(b - size), b))
    fits = [b for b in near if not 0 < rows % b < world]
    raise ConfigurationError(
        f"the {rows} training rows leave a last batch of {last} row{'s' * (last > 1)} in steps "
        f"of {size} over {world} processes, and this network's BatchNorm sums its statistics "
        f"over every process's rows: each process needs a row of every batch; give a batch "
        f"size that leaves the last batch {world} rows or more, or none"
        + (f" (near this one: {', '.join(map(str, fits[:4]))})" if fits else "")
        + f", or leave out {last} row{'s' * (last > 1)}"
    )


def _no_lone_last_row(batches: Iterator[Batch]) -> Iterator[Batch]:
    """The batches, the last one joined to the one before where the rows leave it one row
    alone: a layer of the batch's statistics (BatchNorm) cannot train on one row, and the run,
    not the user, chose that batch. Where a batch is shared among processes, as it is."""
    given = iter(batches)
    current, following = next(given, None), next(given, None)
    while current is not None:
        after = next(given, None) if following is not None else None
        if (
            following is not None
            and after is None
            and len(following) == 1
            and following.share == (0, 1, 1)
            and current.share[:2] == (0, current.share[2])
        ):
            yield _joined(current, following)
            return
        yield current
        current, following = following, after


def _joined(one: Batch, other: Batch) -> Batch:
    count = len(one) + len(other)
    weights = (
        None
        if one.weights is None or other.weights is None
        else np.concatenate([one.weights, other.weights])
    )
    return Batch(
        tuple(np.concatenate([a, b]) for a, b in zip(one.features, other.features)),
        np.concatenate([one.targets, other.targets]),
        (0, count, count),
        weights,
    )


def _weights(class_weights: ClassWeights | None, batch: Batch) -> NDArray[np.float32] | None:
    """A batch's rows' weights: their class's times their own, where the run weighs them."""
    if class_weights is None or len(batch) == 0:
        return batch.weights
    by_class = class_weights.of(batch.targets)  # (rows,), or (rows, places) of a sequence
    if batch.weights is None:
        return by_class
    own = batch.weights  # a weight a row (N,), or a place (N, L) where by_class is too
    return by_class * (
        own if own.ndim == by_class.ndim else own.reshape(-1, *(1,) * (by_class.ndim - 1))
    )


def _diverged(run: RunState, what: str, updated: bool = True) -> None:
    """Put back the best epoch's slots (or those the run started from), then stop the run.
    `updated`: whether any update came before the loss that diverged (before the first, the
    learning rate cannot be the cause: the batch's values or the precision's range are)."""
    run.trainer.restore(run.best)
    kept = (
        f"the slots of epoch {run.best_epoch} (the best)"
        if run.best_epoch
        else "the slots it started from"
    )
    if not updated:
        precision = str(run.trainer.engine.identity.precision)
        narrow = (
            f"; at {precision}, a value beyond float16's range (65,504) overflows: scale the "
            "features, or train at mixed_bfloat16 or float32"
            if precision == "mixed_float16"
            else ""
        )
        raise TrainingDivergedError(
            f"{what}, before any update (the loss of the slots the run started from): not the "
            "learning rate. Look for huge or broken values in the batch, its features or its "
            f"targets (scale them){narrow}, or, with a layer, rule or engine of your own, at "
            "its arithmetic (deepsharp.core.compare on this batch names the first operation "
            f"past its bound). The network holds {kept}"
        )
    huge = [
        (loss, record.epoch)
        for record in run.history
        for loss in (record.loss, record.validation_loss)
        if math.isfinite(loss) and abs(loss) >= HUGE_LOSS
    ]
    optimizer, state = run.trainer.optimizer, run.trainer.state
    rate = None if state is None else float(optimizer.rate(state))  # a schedule's, a plateau's
    given = optimizer.learning_rate
    at = "" if isinstance(given, numbers.Real) and rate == given else ", the rate it ended at"
    lower = (
        f"try a smaller learning rate than {type(optimizer).__name__}'s {rate:g}{at} (say "
        f"{rate / 10:g})"
        if rate is not None and math.isfinite(rate)
        else "try a smaller learning rate"
    )
    if huge:  # near float32's range: steps too large carried the loss there, or the values
        loss, epoch = max(huge)  # are that large (the loss before any update, where it is
        scale = (  # known, tells one from the other where it was huge already)
            "scale the targets (a number target: subtract its mean, divide by its spread), the "
            "features or the rows' weights"
        )
        start = run.first_loss  # None on a resumed run
        if start is not None and not (math.isfinite(start) and abs(start) < HUGE_LOSS):
            raise TrainingDivergedError(
                f"{what}: the training diverged. The network holds {kept}. The loss was "
                f"already {loss:.3g} at epoch {epoch}, near float32's largest value (3.4e38), "
                "where a gradient's square or a sum overflows whatever the learning rate: "
                f"{scale} (it was {start:.3g} before any update)"
            )
        since = "" if start is None else f", from {start:.3g} before any update"
        raise TrainingDivergedError(
            f"{what}: the training diverged. The network holds {kept}. The loss reached "
            f"{loss:.3g} at epoch {epoch}{since}, near float32's largest value (3.4e38), where "
            f"a gradient's square or a sum overflows. To go on, {lower} (steps too large carry "
            f"a loss there), or {scale} (values that large do too)"
        )
    raise TrainingDivergedError(
        f"{what}: the training diverged. The network holds {kept}. To go on, "
        f"{lower}, or look for huge or broken values in the features or the targets (scale "
        "them)"
    )


HUGE_LOSS = 1e30
"""A loss this large is near float32's range: what diverges then is the values, not the rate."""


def _evaluate(run: RunState, feed: Feed) -> tuple[Sums, dict[str, float]]:
    """The loss (and the rows predicted right) over a part of the rows, every process's, and
    the run's metrics of every process's predictions."""
    trainer = run.trainer
    batches = (
        (*trainer.measured(batch.features, batch.targets), batch.targets)
        for batch in feed.batches(run.options.batch_size, None, run.distribution.share)
        if len(batch)
    )
    return measured_part(
        batches, trainer.loss, run.options.metrics, trainer.network.outputs, run.distribution
    )

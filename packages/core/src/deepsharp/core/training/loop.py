"""A run: rows in; a trained network and its report out.

The run splits the rows (shuffled from its seed), learns the pipeline's statistics on the
training rows, trains on the engine, judges each epoch by the validation rows, stops early
when they stop improving, restores the best epoch's slots, and measures the test rows.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.engine import Engine, EngineIdentity, Handle, make_engine
from deepsharp.core.errors import (
    DataError,
    EngineMismatchError,
    ShapeError,
    TrainingDivergedError,
)
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Optimizer
from deepsharp.core.random import Streams
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.training.trainer import Trainer

__all__ = ["FitOptions", "Report", "Run", "fit"]


@dataclass
class FitOptions:
    """How a run goes. Options hold the light engine unless they name another."""

    seed: int
    engine: Engine | str | None = None
    epochs: int = 200
    batch_size: int = 32
    patience: int = 10
    restore_best: bool = True
    checkpoint_dir: str | os.PathLike[str] | None = None
    checkpoint_every: int = 0
    progress: bool | None = None

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.patience < 1:
            raise ValueError("FitOptions needs epochs, batch_size and patience of at least 1")
        if self.checkpoint_every < 0:
            raise ValueError("checkpoint_every counts epochs: 0 (never) or more")
        if self.checkpoint_every and self.checkpoint_dir is None:
            raise ValueError("checkpoint_every needs a checkpoint_dir to write into")


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
    """A finished run: `run.trained` answers rows, `run.report` says how it went."""

    trained: TrainedNetwork
    report: Report

    def __str__(self) -> str:
        return str(self.report)


def _take(rows: Any, indices: NDArray[np.int64]) -> Any:
    if type(rows).__module__.startswith("pandas"):
        return rows.iloc[indices]
    return [rows[int(i)] for i in indices]


def _count(rows: Any) -> int:
    return len(rows)


class _Data:
    """The features and answers of one part of the rows, shaped for the network."""

    def __init__(self, pipeline: Pipeline, rows: Any, loss: Loss, inputs: tuple[int, ...] | None):
        features = pipeline.features(rows)
        if inputs is not None and features.shape[1:] != inputs:
            if features[0].size != math.prod(inputs):
                raise ShapeError(
                    f"the pipeline makes {features.shape[1]} features a row; the network takes "
                    f"rows of shape {inputs}"
                )
            features = features.reshape(features.shape[0], *inputs)
        self.features = features
        self.answers = pipeline.answers(rows)
        self.loss = loss

    def __len__(self) -> int:
        return int(self.features.shape[0])


def _progress(enabled: bool | None, total: int, start: int) -> Any:
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(total, start)
    return tqdm(total=total, initial=start, unit="epoch", leave=False, file=sys.stderr)


class _Lines:
    """Progress as plain lines, where tqdm is not installed."""

    def __init__(self, total: int, start: int) -> None:
        self.total, self.done = total, start

    def update(self, count: int) -> None:
        self.done += count

    def set_postfix(self, **values: Any) -> None:
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        print(f"epoch {self.done}/{self.total}: {shown}", file=sys.stderr)

    def close(self) -> None:
        pass


def fit(
    pipeline: Pipeline,
    rows: Any,
    network: Network,
    loss: Loss,
    optimizer: Optimizer,
    options: FitOptions,
    resume_from: str | os.PathLike[str] | Checkpoint | None = None,
    test_rows: Any = None,
    on_epoch: Callable[[EpochRecord], None] | None = None,
) -> Run:
    """Train `network` on `rows` as `options` say, and measure it on the test rows.

    `test_rows`, when given, are the test rows and `rows` are split into training and
    validation only (in the pipeline's proportions). `resume_from` goes on from a checkpoint
    taken on the same engine; it ends bit for bit where the uninterrupted run does.
    """
    began = time.perf_counter()
    engine = make_engine(options.engine)
    checkpoint = _checkpoint(resume_from, engine)
    streams = Streams(options.seed)

    train_rows, validation_rows, test_part = _split(pipeline, rows, test_rows, streams.split)
    pipeline.learn(train_rows)
    train = _Data(pipeline, train_rows, loss, network.inputs)
    if network.inputs is None:
        network.build(tuple(train.features.shape[1:]))
    validation = _Data(pipeline, validation_rows, loss, network.inputs)
    test = _Data(pipeline, test_part, loss, network.inputs)

    trainer = Trainer(network, loss, optimizer, engine, streams=streams)
    trainer.start(tuple(train.features.shape[1:]))
    slots = list(trainer.bound.tensors.values())
    best = [engine.copy(t.handle) for t in slots]
    history: list[EpochRecord] = []
    best_epoch, best_loss, waited, first_epoch = 0, math.inf, 0, 0
    if checkpoint is not None:
        first_epoch = checkpoint.epoch
        best_epoch, best_loss, waited = (
            checkpoint.best_epoch,
            checkpoint.best_loss,
            checkpoint.waited,
        )
        history = list(checkpoint.history)
        _restore(engine, trainer, checkpoint, best)
        streams.restore(checkpoint.generator)

    bar = _progress(options.progress, options.epochs, first_epoch)
    try:
        stopped = waited >= options.patience
        epoch = first_epoch
        while epoch < options.epochs and not stopped:
            started = time.perf_counter()
            train_loss = _epoch(trainer, train, options.batch_size, epoch + 1)
            validation_loss = _evaluate(trainer, validation, options.batch_size)
            epoch += 1
            record = EpochRecord(epoch, train_loss, validation_loss, time.perf_counter() - started)
            history.append(record)
            if validation_loss < best_loss:
                best_loss, best_epoch, waited = validation_loss, epoch, 0
                for keep, slot in zip(best, slots):
                    engine.assign(keep, slot.handle)
            else:
                waited += 1
                stopped = waited >= options.patience
            if options.checkpoint_every and epoch % options.checkpoint_every == 0:
                assert options.checkpoint_dir is not None
                _save_checkpoint(
                    options.checkpoint_dir,
                    engine,
                    trainer,
                    best,
                    streams,
                    history,
                    best_epoch,
                    best_loss,
                    waited,
                    epoch,
                )
            if on_epoch is not None:
                on_epoch(record)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{train_loss:.4f}", validation=f"{validation_loss:.4f}")
        if options.restore_best and best_epoch > 0:
            for keep, slot in zip(best, slots):
                engine.assign(slot.handle, keep)
        measures = _measures(trainer, test, options.batch_size)
    finally:
        if bar is not None:
            bar.close()
        trainer.close()
    report = Report(
        epochs_run=len(history),
        best_epoch=best_epoch,
        history=history,
        measures=measures,
        engine=engine.identity,
        test_rows=len(test),
        seconds=time.perf_counter() - began,
    )
    return Run(TrainedNetwork(network, loss, pipeline), report)


def _checkpoint(
    resume_from: str | os.PathLike[str] | Checkpoint | None, engine: Engine
) -> Checkpoint | None:
    if resume_from is None:
        return None
    checkpoint = (
        resume_from if isinstance(resume_from, Checkpoint) else Checkpoint.load(resume_from)
    )
    if checkpoint.engine != engine.identity:
        where = f" ({checkpoint.path})" if checkpoint.path else ""
        raise EngineMismatchError(
            f"the checkpoint{where} was taken on the engine {checkpoint.engine}; this run's "
            f"engine is {engine.identity}. A run goes on only on an engine of the same name, "
            "version, device and precision: resume there, or start the run afresh"
        )
    return checkpoint


def _split(pipeline: Pipeline, rows: Any, test_rows: Any, generator: Any) -> tuple[Any, Any, Any]:
    count = _count(rows)
    if count == 0:
        raise DataError(
            "no rows: fit needs rows to learn from (a list of mappings, a DataFrame, or read_csv's rows)"
        )
    if test_rows is None:
        train, validation, test = pipeline.partition(count, generator.permutation(count))
        return _take(rows, train), _take(rows, validation), _take(rows, test)
    order = generator.permutation(count)
    share, held = pipeline.split_fractions
    validation_count = math.floor(count * held / (share + held))
    if validation_count < 1 or validation_count >= count:
        raise DataError(f"{count} rows are too few to hold back validation rows: give more rows")
    return _take(rows, order[validation_count:]), _take(rows, order[:validation_count]), test_rows


def _epoch(trainer: Trainer, data: _Data, batch_size: int, epoch: int) -> float:
    """One pass over the training rows in a fresh order; their mean loss."""
    order = trainer.streams.order.permutation(len(data))
    total = 0.0
    for step, start in enumerate(range(0, len(data), batch_size), start=1):
        rows = order[start : start + batch_size]
        value = trainer.step(data.features[rows], data.answers[rows])
        if not math.isfinite(value):
            raise TrainingDivergedError(
                f"the loss turned {value} at epoch {epoch}, step {step}: lower the learning "
                "rate, or look for huge or broken values in the features"
            )
        total += value * len(rows)
    return total / len(data)


def _evaluate(trainer: Trainer, data: _Data, batch_size: int) -> float:
    total = 0.0
    for start in range(0, len(data), batch_size):
        value, _ = trainer.evaluate(
            data.features[start : start + batch_size], data.answers[start : start + batch_size]
        )
        total += value * min(batch_size, len(data) - start)
    return total / len(data)


def _measures(trainer: Trainer, data: _Data, batch_size: int) -> dict[str, float]:
    total, right = 0.0, 0
    for start in range(0, len(data), batch_size):
        answers = data.answers[start : start + batch_size]
        value, answered = trainer.evaluate(data.features[start : start + batch_size], answers)
        total += value * len(answers)
        if trainer.loss.measures_accuracy:
            right += int(trainer.loss.correct(answered, np.asarray(answers)).sum())
    measures = {"loss": total / len(data)}
    if trainer.loss.measures_accuracy:
        measures["accuracy"] = right / len(data)
    return measures


def _save_checkpoint(
    folder: str | os.PathLike[str],
    engine: Engine,
    trainer: Trainer,
    best: Sequence[Handle],
    streams: Streams,
    history: list[EpochRecord],
    best_epoch: int,
    best_loss: float,
    waited: int,
    epoch: int,
) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    names = list(trainer.bound.tensors)
    assert trainer.state is not None
    checkpoint = Checkpoint(
        epoch=epoch,
        engine=engine.identity,
        slots=trainer.network.slots,
        best_slots={name: engine.get(handle) for name, handle in zip(names, best)},
        memory={
            kind: {name: engine.get(handle) for name, handle in zip(names, handles)}
            for kind, handles in trainer.state.memory.items()
        },
        optimizer_steps=trainer.state.steps,
        generator=streams.state,
        history=history,
        best_epoch=best_epoch,
        best_loss=best_loss,
        waited=waited,
        network=trainer.network.to_json(),
    )
    checkpoint.save(Checkpoint.path_in(folder))


def _restore(engine: Engine, trainer: Trainer, checkpoint: Checkpoint, best: list[Handle]) -> None:
    from deepsharp.core.errors import FileFormatError

    names = list(trainer.bound.tensors)
    if checkpoint.network and checkpoint.network != trainer.network.to_json():
        raise FileFormatError(
            f"the checkpoint {checkpoint.path or ''} is of another network "
            f"({checkpoint.network}); this run trains {trainer.network.to_json()}"
        )
    assert trainer.state is not None

    def put_into(handle: Handle, value: NDArray[np.float32], what: str) -> None:
        if tuple(value.shape) != engine.shape(handle):
            raise FileFormatError(
                f"checkpoint: {what} has shape {value.shape}, expected {engine.shape(handle)}"
            )
        engine.assign(handle, engine.put(value))

    for name, tensor in trainer.bound.tensors.items():
        put_into(tensor.handle, checkpoint.slots[name], f"slot {name!r}")
    for name, handle in zip(names, best):
        put_into(handle, checkpoint.best_slots[name], f"best slot {name!r}")
    for kind, handles in trainer.state.memory.items():
        for name, handle in zip(names, handles):
            put_into(handle, checkpoint.memory[kind][name], f"{kind} memory of {name!r}")
    trainer.state.steps = checkpoint.optimizer_steps

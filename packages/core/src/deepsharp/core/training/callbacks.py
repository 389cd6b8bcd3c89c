"""Callbacks: what the loop runs after every batch and every epoch — early stopping,
checkpoints, progress, a learning rate that drops when the validation loss stops improving
(`ReduceOnPlateau`), and the user's own — and `RunState`, the run as they see it.

A callback subclasses `Callback` and overrides what it needs; a plain function handed to `fit`
(`callbacks=[f]`) is called with each epoch's `EpochRecord`. A callback with a `name` keeps its
state in every checkpoint (`state`, `restore`), so a resumed run goes on where it stopped.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepsharp.core.errors import (
    ConfigurationError,
    DeepSharpWarning,
    FileFormatError,
    StateError,
    outside,
)
from deepsharp.core.files import read_metadata
from deepsharp.core.nn.losses import loss_from_json
from deepsharp.core.reals import brief, is_real, is_whole
from deepsharp.core.training.checkpoint import Checkpoint, EpochRecord
from deepsharp.core.training.distribution import Distribution
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.metrics import METRICS, MONITORED, check_monitor, lower_is_better
from deepsharp.core.training.resuming import loss_record
from deepsharp.core.training.state import Snapshot
from deepsharp.core.training.trainer import Trainer
from deepsharp.core.training.weights import ClassWeights

if TYPE_CHECKING:
    from deepsharp.core.training.loop import FitOptions

try:
    import fcntl
except ImportError:  # not on Windows: checkpoint folders are not locked there
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "Callback",
    "CheckpointWriter",
    "EachEpoch",
    "EarlyStopping",
    "ProgressBar",
    "ReduceOnPlateau",
    "RunState",
]

# What an interrupted atomic write of one of our checkpoints leaves: `.<name>.<random>.tmp`.
_STALE = re.compile(r"\.checkpoint(-[0-9]+)?\.safetensors\..+\.tmp")


class RunState:
    """The run as callbacks see it: the trainer, the options, the epochs done and their
    history, the best epoch so far (its slots kept as a snapshot on the engine), and `stop`."""

    def __init__(
        self,
        trainer: Trainer,
        options: FitOptions,
        distribution: Distribution,
        callbacks: list[Callback],
    ) -> None:
        self.trainer = trainer
        self.options = options
        self.distribution = distribution
        self.callbacks = callbacks
        self.epoch = 0
        self.history: list[EpochRecord] = []
        self.best_epoch = 0
        self.best_standing = math.inf
        """The best epoch's standing (`standing`): lower is better."""
        self.best: Snapshot = trainer.snapshot()  # the slots it started from, until an epoch
        self.stop = False
        self.stopped_by = ""
        self.cut_short = 0
        """The step after which a callback's stop ended the last epoch before its rows did (0:
        it ran to its end): no checkpoint holds a cut epoch (`CheckpointWriter`)."""
        self.first_loss: float | None = None
        """The loss of the slots the run started from (its first step's, before any update):
        what a diverged run's message tells the learning rate from the values by."""
        self.class_weights: ClassWeights | None = None
        """Each class's weight in the training steps (fit's class_weight), or None."""
        self.record: dict[str, Any] = {}
        """What the run is made of beyond the trainer, kept in its checkpoints
        (`deepsharp.core.training.resuming`)."""

    @property
    def writes(self) -> bool:
        """Whether this process writes files (one of a distributed run's does)."""
        return self.distribution.writes

    def end_epoch(self, record: EpochRecord) -> None:
        """Record an epoch; keep its slots when it is the best so far (by its validation loss,
        or the metric `FitOptions(monitor=...)` names)."""
        self.epoch = record.epoch
        self.history.append(record)
        standing = self.standing(record)
        # The first epoch stands until one is better: a metric NaN at every epoch (AUC on
        # validation rows of one class) left epoch 0, which no checkpoint may hold (trial EV).
        if standing < self.best_standing or not self.best_epoch:
            self.best_standing, self.best_epoch = standing, record.epoch
            self.trainer.snapshot(self.best)

    def standing(self, record: EpochRecord) -> float:
        """An epoch's standing by `FitOptions(monitor=...)` (`standing`): an epoch whose
        standing is infinite is never the best, but the first, until an epoch is better."""
        return standing(self.options.monitor, record)

    def checkpoint(self) -> Checkpoint:
        """Everything the run needs to go on from here."""
        best = self.trainer.host(self.best)
        return Checkpoint(
            epoch=self.epoch,
            engine=self.trainer.engine.identity,
            trainer=self.trainer.export_state(),
            best_slots=best[0],
            best_buffers=best[1],
            history=list(self.history),
            best_epoch=self.best_epoch,
            network=self.trainer.network.to_json(),
            callbacks={c.name: checked_state(c) for c in self.callbacks if c.name},
            distribution=self.distribution.state(),
            run=self._recorded(),
        )

    def _recorded(self) -> dict[str, Any]:
        """What the run is made of (as it began: a resumed run is checked against it), and its
        loss as it is now, as a callback may have set it ("loss_now": a resumed run takes it
        up). Trial CK6: a label smoothing set after epoch 1 was in no checkpoint, and a run
        resumed after it went on without it, silently; a review: recorded as the run's own, it
        refused the resume of a run whose callback sets it again each epoch."""
        if not self.record:
            return self.record
        return {**self.record, "loss_now": loss_record(self.trainer.loss)}

    def _loss_as_taken(self, recorded: Any, where: str) -> None:
        """The loss's settings (or the loss itself, another kind a callback put in its place)
        as the checkpoint was taken with them."""
        loss = self.trainer.loss
        if not isinstance(recorded, dict) or recorded == loss_record(loss):
            return
        try:
            if recorded.get("kind") == type(loss).__name__:
                for name, value in recorded.get("config", {}).items():
                    setattr(loss, name, value)  # (checked as the constructor checks it)
            else:
                self.trainer.loss = loss_from_json(recorded)
        except (TypeError, ValueError) as error:
            raise FileFormatError(
                f"{where}: its loss as it was taken cannot be made: {error}"
            ) from None

    def resume(self, checkpoint: Checkpoint) -> None:
        """Go on from a checkpoint (checked against this run first: nothing changes if refused)."""
        where = f"the checkpoint {checkpoint.path or ''}".rstrip()
        before = self.trainer.snapshot()  # put back where a callback refuses its state: the
        try:  # network was left holding the checkpoint's slots (trial HG)
            self.trainer.load_state(checkpoint.trainer, where)
            self.best = self.trainer.snapshot_of(checkpoint.best_slots, checkpoint.best_buffers)
            named = {c.name: c for c in self.callbacks if c.name}
            for name, state in checkpoint.callbacks.items():
                if name in named:
                    try:
                        named[name].restore(state)
                    except FileFormatError as error:  # named with the file it is in
                        said = str(error).removeprefix("checkpoint: ")
                        raise FileFormatError(f"{where}: {said}") from None
        except BaseException:
            self.trainer.restore(before)
            raise
        self._loss_as_taken((checkpoint.run or {}).get("loss_now"), where)
        self.epoch = checkpoint.epoch
        self.history = list(checkpoint.history)
        self.best_epoch = checkpoint.best_epoch
        self.best_standing = self.standing(checkpoint.history[checkpoint.best_epoch - 1])


def standing(monitor: str, record: EpochRecord) -> float:
    """An epoch's standing by `monitor`, lower is better: its validation loss, or the metric
    named (negated where more is better); infinity where it is NaN (AUC on rows of one class)."""
    value = record.validation_loss if monitor == MONITORED else record.metrics[monitor]
    if math.isnan(value):
        return math.inf
    return value if lower_is_better(monitor) else -value


def check_monitored(monitor: str, run: RunState, who: str) -> None:
    """Refuse (ConfigurationError) a `monitor` the run does not measure, naming the fix."""
    if monitor != MONITORED and monitor not in run.options.metrics:
        raise ConfigurationError(
            f"{who} watches {monitor!r}, a metric this run does not measure: add it to "
            f"FitOptions(metrics=(...)), or watch 'validation_loss'"
        )


class Callback:
    """Runs at the run's start, after every batch and every epoch, and at its end; `close`
    runs always."""

    name = ""
    """Keys its state in checkpoints; empty for a callback that keeps none."""

    def on_run_start(self, run: RunState) -> None:
        """Before the first epoch (after a resumed run's state is restored)."""

    def on_batch_end(self, run: RunState, batch: int, loss: float) -> None:
        """After each training step: `batch` counts the epoch's steps from 1, `loss` is the
        step's (this process's rows' under a distributed run). Reading the slots here costs
        transfers every step. Set `run.stop = True` to end the run after this step (the epoch
        ends there, judged on the validation rows as any epoch is; cut short, it is written
        into no checkpoint: a resumed run trains it again from its start)."""

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        """After each epoch, with its figures (set `run.stop = True` to end the run)."""

    def on_run_end(self, run: RunState) -> None:
        """After the last epoch, before the test rows are measured (not when a run fails)."""

    def close(self) -> None:
        """After the run, whether it ended well or not."""

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back what `state` gave; FileFormatError where it cannot be."""


def warn_of_unnamed_state(parts: list[Any]) -> None:
    """Warn of a callback or step hook that keeps a state of its own (`state()` its class's)
    and has no `name`, under which checkpoints keep it: a resumed run started it anew, silently
    (trial X)."""
    for part in parts:
        base = Callback if isinstance(part, Callback) else StepHook
        if isinstance(part, base) and type(part).state is not base.state and not part.name:
            kind = "callback" if base is Callback else "step hook"
            warnings.warn(
                f"the {kind} {type(part).__name__} has a state() and no name: checkpoints keep "
                "a state under its name, so a resumed run starts it anew; give it a name "
                "(name = '...', a class attribute)",
                DeepSharpWarning,
                stacklevel=outside(),
            )


def checked_state(callback: Callback | StepHook, what: str = "callback") -> dict[str, Any]:
    """A named callback's (step hook's) `state()`, refused (ConfigurationError naming it)
    unless it is what a checkpoint can hold: JSON values, numbers finite (a NumPy scalar, inf
    or NaN stopped the run at its first checkpoint with json's own error, naming nothing)."""
    state = callback.state()
    try:
        json.dumps(state, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ConfigurationError(
            f"the {what} {callback.name!r} ({type(callback).__name__}): its state() must be "
            f"JSON values for checkpoints to hold it (text, finite numbers, lists, mappings; "
            f"float(x) for a NumPy number, None for what is not finite): {error}"
        ) from None
    if not isinstance(state, dict):
        raise ConfigurationError(
            f"the {what} {callback.name!r} ({type(callback).__name__}): its state() must be a "
            f"dict, not {type(state).__name__}"
        )
    return state


class EachEpoch(Callback):
    """A function of one argument, called with each epoch's `EpochRecord`."""

    def __init__(self, function: Callable[[EpochRecord], Any]) -> None:
        if not callable(function):
            raise TypeError(f"a callback is a Callback or a function of an epoch, not {function!r}")
        self.function = function

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        self.function(record)


class EarlyStopping(Callback):
    """Stops the run once `patience` epochs go by without a better epoch (by its validation
    loss, or the metric `monitor` names: `RunState.standing`), and (with `restore_best`) puts
    back the best epoch's slots at its end."""

    name = "early_stopping"

    def __init__(self, patience: int, restore_best: bool = True, monitor: str = MONITORED) -> None:
        self.patience = patience
        self.restore_best = restore_best
        self.monitor = monitor
        self.waited = 0

    def on_run_start(self, run: RunState) -> None:
        self._judge(run)

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        self.waited = 0 if run.best_epoch == record.epoch else self.waited + 1
        self._judge(run)

    def _judge(self, run: RunState) -> None:
        if self.waited >= self.patience:
            run.stop, run.stopped_by = True, self.name

    def on_run_end(self, run: RunState) -> None:
        if self.restore_best and run.best_epoch > 0:
            run.trainer.restore(run.best)

    def state(self) -> dict[str, Any]:
        settings: dict[str, Any] = {"patience": self.patience, "restore_best": self.restore_best}
        if self.monitor != MONITORED:  # (a checkpoint of a run by the validation loss says none)
            settings["monitor"] = self.monitor
        return {"waited": self.waited, "settings": settings}

    def restore(self, state: Mapping[str, Any]) -> None:
        waited = state.get("waited")
        if not isinstance(waited, int) or isinstance(waited, bool) or waited < 0:
            raise FileFormatError(f"checkpoint: early stopping's 'waited' is {waited!r}")
        if waited > self.patience:  # a run stops once it waits its patience (taken before)
            raise FileFormatError(
                f"checkpoint: early stopping's 'waited' is {waited}, past its patience of "
                f"{self.patience}: no run writes that"
            )
        self.waited = waited


class ReduceOnPlateau(Callback):
    """Multiplies the learning rate by `factor` once `patience` epochs go by without a
    validation loss better than the best by more than `min_delta` (Keras's
    ReduceLROnPlateau), then waits `patience` epochs again; never below `min_rate` (a rate
    already there stays). `monitor` names one of the run's metrics to watch instead of the
    validation loss, as `FitOptions(monitor=...)` does (more is better but for "mae", "mse"
    and "rmse"; an epoch whose metric is NaN is no better). Give it to `fit` (`callbacks=[ReduceOnPlateau()]`); it works with a
    number or a schedule as the optimizer's rate (a schedule's rates are then all multiplied).
    The factor it has put on the rate lives in the optimizer's state, kept in checkpoints with
    its own count: a resumed run goes on as the uninterrupted one does."""

    name = "reduce_on_plateau"

    def __init__(
        self,
        factor: float = 0.5,
        patience: int = 5,
        min_delta: float = 0.0,
        min_rate: float = 0.0,
        monitor: str = MONITORED,
    ) -> None:
        if not isinstance(monitor, str):
            raise TypeError(
                f"ReduceOnPlateau: monitor is 'validation_loss' or one of the run's metrics, "
                f"not {monitor!r}"
            )
        check_monitor(monitor, list(METRICS), "ReduceOnPlateau")  # a name's hint (a review)
        for what, value in (("factor", factor), ("min_delta", min_delta), ("min_rate", min_rate)):
            if not is_real(value):
                raise TypeError(f"ReduceOnPlateau: {what} must be a number, not {value!r}")
        if not 0.0 < factor < 1.0:
            raise ValueError(f"ReduceOnPlateau: factor must lie between 0 and 1, not {factor!r}")
        if not is_whole(patience) or patience < 1:
            raise ValueError(
                f"ReduceOnPlateau: patience is a whole number from 1, not {patience!r}"
            )
        if not (math.isfinite(min_delta) and min_delta >= 0):
            raise ValueError(f"ReduceOnPlateau: min_delta must be 0 or more, not {min_delta!r}")
        if not (math.isfinite(min_rate) and min_rate >= 0):
            raise ValueError(f"ReduceOnPlateau: min_rate must be 0 or more, not {min_rate!r}")
        self.factor = float(factor)
        self.patience = int(patience)
        self.min_delta = float(min_delta)
        self.min_rate = float(min_rate)
        self.monitor = monitor
        self.best = math.inf
        self.waited = 0
        self._resumed = False

    def __repr__(self) -> str:
        return (
            f"ReduceOnPlateau(factor={self.factor!r}, patience={self.patience!r}, "
            f"min_delta={self.min_delta!r}, min_rate={self.min_rate!r}"
            + ("" if self.monitor == MONITORED else f", monitor={self.monitor!r}")
            + ")"
        )

    def on_run_start(self, run: RunState) -> None:
        """A run starts from no best loss, as Keras's does, unless it resumes a checkpoint's
        (the same callback given to a second fit is the same run again)."""
        check_monitored(self.monitor, run, "ReduceOnPlateau")
        if not self._resumed:
            self.best, self.waited = math.inf, 0
        self._resumed = False

    def close(self) -> None:
        self._resumed = False  # a resume refused after its restore leaves nothing behind

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        value = standing(self.monitor, record)
        if value < self.best - self.min_delta:
            self.best, self.waited = value, 0
            return
        self.waited += 1
        if self.waited < self.patience:
            return
        self.waited = 0
        state = run.trainer.state
        assert state is not None
        rate = run.trainer.optimizer.rate(state)
        if rate <= self.min_rate:
            return
        lowered = max(rate * self.factor, self.min_rate)
        state.rate_scale *= lowered / rate

    def state(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "factor": self.factor,
            "patience": self.patience,
            "min_delta": self.min_delta,
            "min_rate": self.min_rate,
        }
        if self.monitor != MONITORED:  # (a checkpoint of one by the validation loss says none)
            settings["monitor"] = self.monitor
        best = self.best if math.isfinite(self.best) else None
        return {"best": best, "waited": self.waited, "settings": settings}

    def restore(self, state: Mapping[str, Any]) -> None:
        best, waited = state.get("best"), state.get("waited")
        if best is not None and not (
            isinstance(best, (int, float)) and not isinstance(best, bool) and math.isfinite(best)
        ):
            raise FileFormatError(f"checkpoint: ReduceOnPlateau's 'best' is {best!r}")
        if not isinstance(waited, int) or isinstance(waited, bool) or waited < 0:
            raise FileFormatError(f"checkpoint: ReduceOnPlateau's 'waited' is {waited!r}")
        self.best = math.inf if best is None else float(best)
        self.waited = waited
        self._resumed = True  # until the run ends: the next fit starts afresh (`close`)


class CheckpointWriter(Callback):
    """Writes a checkpoint every `every` epochs into `folder`, each named by its epoch, and keeps
    the latest `keep` of them. Only the process that writes (`run.writes`) does.

    The folder is the run's alone while it runs (a lock: a second live run is refused), and a
    run prunes only its own checkpoints: each records the run it belongs to (`run`, kept by a
    run resumed from it), so another run's checkpoints in the folder are left as they are."""

    name = "checkpoints"

    def __init__(self, folder: str | os.PathLike[str], every: int, keep: int = 1) -> None:
        self.folder = Path(folder)
        self.every = every
        self.keep = keep
        self.run = ""
        # Which files are this run's, read once a file (their stat says when one changed): a
        # header read at each write for every file of the folder made a long run's writes
        # quadratic (trial Q: epochs 501-1,000 took 3 times epochs 1-500's time).
        self._owners: dict[Path, tuple[tuple[int, int, int], bool]] = {}
        """Which run the checkpoints belong to: drawn at its start, kept when it is resumed."""
        self.lock: FolderLock | None = None

    def restore(self, state: Mapping[str, Any]) -> None:
        run = state.get("run", "")
        if not ((isinstance(run, str) and _RUN.fullmatch(run)) or run == ""):
            raise FileFormatError(f"checkpoint: the run it belongs to is {brief(run)}")
        self.run = run
        self._owners.clear()

    def state(self) -> dict[str, Any]:
        return {"run": self.run}

    def on_run_start(self, run: RunState) -> None:
        if not run.writes:
            return
        self.lock = prepare_folder(self.folder)
        resumed = bool(self.run)
        self.run = self.run or secrets.token_hex(8)
        self._owners.clear()
        found = Checkpoint.in_folder(self.folder)
        later = [epoch for epoch, path in found if epoch > run.epoch and self._own(path)]
        if resumed and later:  # they went unsaid (trial CB)
            shown = f"{later[0]}" if len(later) == 1 else f"{later[0]}-{later[-1]}"
            warnings.warn(
                f"resumed at epoch {run.epoch}: checkpoint_dir {os.fspath(self.folder)!r} holds "
                f"this run's checkpoints of later epochs ({shown}), of the line it now leaves; "
                "they are removed as it writes its next checkpoint (copy them elsewhere to keep "
                "them)",
                DeepSharpWarning,
                stacklevel=outside(),
            )
        others = [epoch for epoch, path in found if not self._own(path)]
        if others and not resumed:
            shown = f"{others[0]}" if len(others) == 1 else f"{others[0]}-{others[-1]}"
            warnings.warn(
                f"checkpoint_dir {os.fspath(self.folder)!r} holds checkpoints of another run "
                f"(epochs {shown}): this run leaves them, but writes over any of an epoch it "
                "reaches; to go on with that run, resume from it (resume_from=the folder), "
                "else name another folder",
                DeepSharpWarning,
                stacklevel=outside(),
            )

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        if run.cut_short:  # its steps left are not kept: a resumed run does it whole (trial R)
            if run.writes:
                self._cut(run, record.epoch)
            return
        if run.writes and record.epoch % self.every == 0:
            run.checkpoint().save(Checkpoint.path_in(self.folder, record.epoch))
            self._prune(record.epoch)

    def _cut(self, run: RunState, epoch: int) -> None:
        """Say that a stop cut `epoch` short, and where a resumed run would go on from."""
        kept = [e for e, path in Checkpoint.in_folder(self.folder) if e < epoch and self._own(path)]
        warnings.warn(
            f"the run stopped after step {run.cut_short} of epoch {epoch}, before its end: a "
            f"checkpoint holds whole epochs, so none was written for epoch {epoch}; "
            + (
                f"resume_from={os.fspath(self.folder)!r} goes on from epoch {kept[-1]}'s and "
                f"trains epoch {epoch} again from its start"
                if kept
                else "no checkpoint holds an epoch of this run yet: resuming would start afresh"
            )
            + " (stop at an epoch's end, in on_epoch_end, to lose no steps)",
            DeepSharpWarning,
            stacklevel=outside(),
        )

    def close(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def _prune(self, written: int) -> None:
        """Keep this run's `keep` latest up to the one just written; any of its own of a later
        epoch is of a line it abandoned (it resumed from before it) and goes too. Other runs'
        checkpoints are left."""
        own = [
            (epoch, path) for epoch, path in Checkpoint.in_folder(self.folder) if self._own(path)
        ]
        kept = set([path for epoch, path in own if epoch <= written][-self.keep :])
        for _, path in own:
            if path not in kept:
                path.unlink(missing_ok=True)
                self._owners.pop(path, None)

    def _own(self, path: Path) -> bool:
        """Whether the checkpoint at `path` belongs to this run (read from its header alone, once
        for each version of the file)."""
        try:
            found = path.stat()
        except OSError:
            return False
        stamp = (found.st_mtime_ns, found.st_size, found.st_ino)
        known = self._owners.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            metadata = read_metadata(path, "checkpoint")
            state = json.loads(metadata.get("state", "{}"))
            own = bool(state["callbacks"][self.name]["run"] == self.run)
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            own = False
        self._owners[path] = (stamp, own)
        return own


_RUN = re.compile(r"[0-9a-f]{16}")


class FolderLock:
    """A checkpoint folder held by one live run: an exclusive lock on the folder itself, which
    the system lets go when the run ends, however it ends (where the file system has locks)."""

    def __init__(self, folder: Path) -> None:
        self.descriptor: int | None = None
        if fcntl is None:
            return
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise StateError(
                f"checkpoint_dir {os.fspath(folder)!r} is in use by another run (one under way, "
                "in this process or another, writes its checkpoints there): give each run a "
                "folder of its own, or wait for that run to end"
            ) from None
        except OSError:  # a file system without locks (some network ones): no lock to hold
            os.close(descriptor)
            return
        self.descriptor = descriptor

    def release(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)  # closing the descriptor lets the lock go
            self.descriptor = None


def prepare_folder(folder: Path) -> FolderLock:
    """Make the checkpoint folder (or find it), check it takes files, hold it for this run, and
    remove what killed writes of our checkpoints left there: before the first epoch, not after
    many. A folder another live run holds is refused (StateError)."""
    shown = os.fspath(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(
            f"checkpoint_dir {shown!r} is a file, not a folder: name a folder "
            "(it is made if it does not exist)"
        )
    if folder.is_symlink() and not folder.exists():  # a link to nothing, or a loop of links
        raise FileNotFoundError(
            f"checkpoint_dir {shown!r} is a symbolic link to {os.readlink(folder)!r}, which leads "
            "to no folder: make the folder it names, or name another"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # a folder we cannot write into fails here
            pass
    except OSError as error:  # said of the folder, not of a temporary file's name
        raise type(error)(
            f"checkpoint_dir {shown!r}: cannot write into it: {error.strerror or error}"
        ) from None
    lock = FolderLock(folder)  # from here no other live run writes here: its leftovers are dead
    for name in os.listdir(folder):
        if _STALE.fullmatch(name):
            (folder / name).unlink(missing_ok=True)
    return lock


class ProgressBar(Callback):
    """A progress bar (tqdm, or plain lines without it) on a terminal, or when asked: plain
    lines where the standard error is no terminal (a log file keeps each epoch's figures, where
    a bar's frames would be overwritten)."""

    def __init__(self, enabled: bool | None) -> None:
        self.enabled = enabled
        self.bar: Any = None

    def on_run_start(self, run: RunState) -> None:
        shown = sys.stderr.isatty() if self.enabled is None else self.enabled
        if not (shown and run.writes):
            return
        total, start = run.options.epochs, run.epoch
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is None or not sys.stderr.isatty():
            self.bar = _Lines(total, start)
            return
        self.bar = tqdm(total=total, initial=start, unit="epoch", leave=False, file=sys.stderr)

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(
                loss=f"{record.loss:.4f}", validation=f"{record.validation_loss:.4f}"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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

"""What a finished run gives back: the trained network and the report of how the run went —
its epochs (losses and validation metrics), its best epoch, its measures on the test rows —
readable as text and drawn as curves."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from deepsharp.core.comparing.shadow import ShadowCheck, shadow_lines
from deepsharp.core.engine import EngineIdentity
from deepsharp.core.plotting import image_kind, new_figure
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.checkpoint import EpochRecord
from deepsharp.core.training.compiled import StepsRun

if TYPE_CHECKING:
    from deepsharp.core.training.callbacks import RunState
    from deepsharp.core.training.loop import FitOptions

__all__ = ["Report", "Run", "run_notes"]


@dataclass
class Report:
    """What a run did: its epochs (each one's losses and validation metrics), its best epoch,
    and its measures on the test rows (the loss, the accuracy for losses of classes, and the
    run's metrics)."""

    epochs_run: int
    best_epoch: int
    history: list[EpochRecord]
    measures: dict[str, float]
    engine: EngineIdentity
    test_rows: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    skipped_steps: int = 0
    shadow: list[ShadowCheck] = field(default_factory=list)
    """The shadow checks (`FitOptions(shadow=...)`), in order: each one's worst ratio."""
    steps: StepsRun | None = None
    """How the run's steps ran: replayed from compiled plans or as recorded, and why a step
    could not be compiled (`FitOptions(compile=...)`)."""
    measured_on: str = "test rows"
    """What the measures were taken on: the run's test rows, or what its caller says
    (a scikit-learn estimator measures every row it was fit on)."""
    processes: int = 1
    """How many processes took the run's steps (data-parallel: each its share of a batch)."""
    resumed_at: int = 0
    """The epoch the run was resumed at (0: it started afresh): its history holds the epochs
    before it, which took no part of `seconds`."""

    def __repr__(self) -> str:
        """A line (what a notebook shows of a cell's last value; `str` is the whole report):
        the dataclass's own grew with every epoch's record, 25 KB after 200 (trial NB)."""
        measured = ", ".join(f"{name}={value:.4g}" for name, value in self.measures.items())
        return (
            f"Report({self.epochs_run} epochs on {self.engine}, best epoch {self.best_epoch}"
            + (f", {measured}" if measured else "")
            + ")"
        )

    @property
    def metric_names(self) -> list[str]:
        """The metrics the history holds, in the order the run took them."""
        return list(self.history[0].metrics) if self.history else []

    def __str__(self) -> str:
        names = self.metric_names
        took = f"{self.epochs_run} epoch{'' if self.epochs_run == 1 else 's'}"
        if self.resumed_at:  # the time is this call's alone (was "30 epochs in 1.20 s": trial CB)
            ran = self.epochs_run - self.resumed_at
            took += f" (resumed at epoch {self.resumed_at}: {ran} of them in {self.seconds:.2f} s)"
        else:
            took += f" in {self.seconds:.2f} s"
        lines = [
            f"deepsharp run on {self.engine}"
            + (f", data-parallel over {self.processes} processes" if self.processes > 1 else "")
            + f": {took}, best epoch {self.best_epoch}",
            "",
            f"{'epoch':>6}  {'loss':>9}  {'validation':>10}"
            + "".join(f"  {name:>{max(9, len(name))}}" for name in names)
            + f"  {'seconds':>8}",
        ]
        for record in _shown(self.history, self.best_epoch):
            if record is None:
                lines.append(f"{'...':>6}")
                continue
            mark = "  <- best" if record.epoch == self.best_epoch else ""
            figures = "".join(
                f"  {_figure(record.metrics.get(name, math.nan), 4):>{max(9, len(name))}}"
                for name in names
            )
            lines.append(
                f"{record.epoch:>6}  {_figure(record.loss, 5):>9}  "
                f"{_figure(record.validation_loss, 5):>10}{figures}  {record.seconds:>8.3f}{mark}"
            )
        lines.append("")
        lines.append(f"on the {self.test_rows} {self.measured_on}:")
        width = max([10, *(len(name) for name in self.measures)])
        for name, value in self.measures.items():
            lines.append(f"  {name:<{width}} {_figure(value, 4)}")
        if self.skipped_steps:
            lines.append(f"{self.skipped_steps} steps skipped (gradients not finite)")
        lines.extend(shadow_lines(self.shadow))
        if self.steps is not None:
            lines.extend(self.steps.lines())
        lines.extend(self.notes)
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike[str]) -> None:
        """Draw the training and validation loss per epoch into an image file (needs
        matplotlib), and beside them the validation metrics, where the run took some. The file
        is `path` itself, of the kind its suffix names (PNG where it has none); a folder or a
        kind matplotlib cannot draw is refused before anything is drawn (`plotting`)."""
        kind = image_kind(path, "report.plot")
        from matplotlib.ticker import MaxNLocator

        names = self.metric_names
        epochs = [r.epoch for r in self.history]
        figure = new_figure(figsize=(11 if names else 6, 4))
        panels = figure.subplots(1, 2 if names else 1)
        losses = panels[0] if names else panels
        # One epoch's curves are points: drawn as markers (a line of one point shows nothing).
        marker = "o" if len(epochs) == 1 else None
        losses.plot(epochs, [r.loss for r in self.history], marker=marker, label="training loss")
        losses.plot(
            epochs,
            [r.validation_loss for r in self.history],
            marker=marker,
            label="validation loss",
        )
        for axes in [losses, panels[1]] if names else [losses]:
            axes.axvline(
                self.best_epoch,
                color="grey",
                linestyle=":",
                label=f"best epoch ({self.best_epoch})",
            )
            axes.set_xlabel("epoch")
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # no epoch 1.5
            if len(epochs) == 1:  # its own tick alone (the locator found 0.95, 1.00, 1.05)
                axes.set_xticks(epochs)
            axes.legend()
        losses.set_ylabel("loss")
        losses.set_title(f"deepsharp run on {self.engine}")
        if names:
            for name in names:
                values = [r.metrics.get(name, math.nan) for r in self.history]
                panels[1].plot(epochs, values, marker=marker, label=name)
            panels[1].set_ylabel("validation metrics")
            panels[1].set_title("metrics on the validation rows")
            panels[1].legend()
        figure.tight_layout()
        figure.savefig(os.fspath(path), format=kind)


def _shown(history: list[EpochRecord], best: int) -> list[EpochRecord | None]:
    """The epochs a report's table shows (None: a gap): all of 12 or fewer; else the first 5,
    the best (a run stopped early restores it: it fell in the gap, trial P2) and the last 6."""
    if len(history) <= 12:
        return list(history)
    first, last = history[:5], history[-6:]
    kept = [r for r in history if r.epoch == best and r not in first and r not in last]
    made: list[EpochRecord | None] = [*first]
    for record in kept:
        if record.epoch > first[-1].epoch + 1:
            made.append(None)
        made.append(record)
    if last[0].epoch > made[-1].epoch + 1:  # type: ignore[union-attr]
        made.append(None)
    return [*made, *last]


def _figure(value: float, places: int) -> str:
    """A figure of the report: `places` decimals, or 4 significant digits where those would
    show a small figure as 0 (a regression's losses on targets near 1e-4 read 0.0000: trial
    P2) or a large one too wide."""
    if not math.isfinite(value) or value == 0 or 10.0**-places <= abs(value) < 1e6:
        return f"{value:.{places}f}"
    return f"{value:.4g}"


def run_notes(run: RunState, options: FitOptions) -> list[str]:
    """What a report says beside its table: the measures' slots where they are not the best
    epoch's, an epoch a callback cut short, a monitor that never had a value (trial P2)."""
    history, best, cut_short = run.history, run.best_epoch, run.cut_short
    restored, monitor = options.restore_best, options.monitor
    notes = []
    if cut_short and history:
        notes.append(
            f"(epoch {history[-1].epoch} ran {cut_short} steps: a callback stopped the run "
            "after them, and its figures are of those steps)"
        )
    if history and all(math.isnan(r.metrics.get(monitor, 0.0)) for r in history):
        notes.append(
            f"(monitor={monitor!r} had no value at any epoch (NaN: validation rows of one "
            "class, say), so the first epoch stood as the best)"
        )
    if not restored and history and best != history[-1].epoch:
        notes.append(
            f"(the measures are of the last epoch's slots, epoch {history[-1].epoch}, not the "
            f"best's: restore_best=False)"
        )
    return notes


@dataclass
class Run:
    """A finished run: `run.trained` predicts rows, `run.report` says how it went."""

    trained: TrainedNetwork
    report: Report

    def __str__(self) -> str:
        return str(self.report)

    def __repr__(self) -> str:
        return f"Run({self.trained!r}, {self.report!r})"

"""Metrics: what a run measures besides its loss, each epoch on the validation rows (into
`report.history`) and at the end on the test rows (into `report.measures`).

`FitOptions(metrics=("accuracy", "auc", "f1"))` names them; each fits some tasks (a loss's
`task`): the classification metrics a `BinaryCrossEntropy` of one output ("binary") or a
`CrossEntropy` ("classes"), the regression metrics a `MeanSquaredError`, `MeanAbsoluteError` or
`Huber` ("regression"). Each is computed in float64 on the host from every row's prediction (the
loss's link applied: probabilities) and target, as scikit-learn computes it. The targets are as
the network learns them (`Loss.targets`): numbers float32, so a target past 2**24 is measured at
float32's places (1.23e8 to within 4), as its prediction, itself float32, is:

- `accuracy`: the rows predicted right (probability 0.5 or more is class 1; the most probable
  class), `accuracy_score`;
- `auc`: the area under the ROC curve, `roc_auc_score` (ties shared); for classes the mean of
  each class's one-against-the-rest area (multi_class="ovr", average="macro") over the classes
  the rows hold; NaN where the rows hold one class only;
- `precision`, `recall`, `f1`: of class 1 for binary (average="binary"), the mean over the
  classes for classes (average="macro"); `precision_macro`, `recall_macro`, `f1_macro`: the
  mean over the classes for both (the classes the targets or the predictions hold); 0 where a
  class is never predicted (zero_division=0);
- a class at every position of a sequence (`CrossEntropy` over (N, L) targets): each position
  a row of the classification metrics, as the loss takes them;
- `mae`, `mse`, `rmse`, `r2`: `mean_absolute_error`, `mean_squared_error`,
  `root_mean_squared_error`, `r2_score`, each output's averaged (multioutput="uniform_average";
  R² of a constant target is 1 when predicted exactly, else 0; of one row NaN).
"""

from __future__ import annotations

import difflib
import math
import numbers
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.errors import ConfigurationError

__all__ = [
    "LOWER_IS_BETTER",
    "METRICS",
    "MONITORED",
    "Metric",
    "carried",
    "check_metric_names",
    "known_again",
    "lower_is_better",
    "register_metric",
    "check_metrics_fit",
    "check_monitor",
    "measure",
]

Array = NDArray[Any]
CLASSIFYING = ("binary", "classes")


@dataclass(frozen=True)
class Metric:
    """A measure of predictions against targets, for the tasks it fits ("binary", "classes",
    "regression"). `compute(predictions, targets, task)`: the figure, from every row's
    prediction (float64, the loss's link applied: probabilities) and target (as the network
    learns them: class ids, 0/1, numbers), as the built-in ones take them. `lower_is_better`:
    what judges an epoch by it (`monitor=`) takes less as better. One's own is registered with
    `register_metric`, then named in `FitOptions(metrics=...)` as the built-in ones are."""

    name: str
    tasks: tuple[str, ...]
    compute: Callable[[Array, Array, str], float]
    """(predictions, targets, task) -> the figure."""
    lower_is_better: bool = False


def _labels(predictions: Array, targets: Array, task: str) -> tuple[Array, Array]:
    """The classes predicted and the true ones, one a row (binary: one output)."""
    if task == "binary":
        return (predictions[:, 0] >= 0.5).astype(np.int64), (targets[:, 0] >= 0.5).astype(np.int64)
    return predictions.argmax(axis=1), targets.reshape(-1).astype(np.int64)


def _accuracy(predictions: Array, targets: Array, task: str) -> float:
    if task == "binary":  # every output of a row right (a row of several 0/1 outputs)
        return float(np.mean(np.all((predictions >= 0.5) == (targets >= 0.5), axis=1)))
    predicted, true = _labels(predictions, targets, task)
    return float(np.mean(predicted == true))


def _ranks(values: Array) -> Array:
    """The ranks of values from 1, ties sharing the mean of theirs."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    ranks = np.empty(len(values), np.float64)
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    stops = np.r_[starts[1:], len(values)]
    # Each run of ties its mean rank, spread over the run at once (a loop over the distinct
    # scores took 6 times scikit-learn's time on 200,000 rows of 10 classes: trial L).
    ranks[order] = np.repeat((starts + 1 + stops) / 2.0, stops - starts)
    return ranks


def _binary_auc(scores: Array, positive: Array) -> float:
    """The ROC curve's area: the chance a positive row scores above a negative one (ties
    counted half), by the Mann-Whitney rank sum."""
    positives = int(positive.sum())
    negatives = len(positive) - positives
    if positives == 0 or negatives == 0:
        return math.nan
    ranks = _ranks(np.asarray(scores, np.float64))
    return float(
        (ranks[positive].sum() - positives * (positives + 1) / 2) / (positives * negatives)
    )


def _auc(predictions: Array, targets: Array, task: str) -> float:
    if task == "binary":
        return _binary_auc(predictions[:, 0], targets[:, 0] >= 0.5)
    true = targets.reshape(-1).astype(np.int64)
    present = np.unique(true)
    if len(present) < 2:
        return math.nan
    return float(np.mean([_binary_auc(predictions[:, c], true == c) for c in present]))


def _counts(predicted: Array, true: Array, label: int) -> tuple[int, int, int]:
    """True positives, predicted positives and actual positives of one class."""
    hit = int(np.sum((predicted == label) & (true == label)))
    return hit, int(np.sum(predicted == label)), int(np.sum(true == label))


def _scores(hit: int, predicted: int, actual: int) -> tuple[float, float, float]:
    """Precision, recall and F1 of one class (0 where a division has nothing to divide)."""
    precision = hit / predicted if predicted else 0.0
    recall = hit / actual if actual else 0.0
    f1 = 2 * hit / (predicted + actual) if predicted + actual else 0.0
    return precision, recall, f1


def _per_class(which: int, macro: bool) -> Callable[[Array, Array, str], float]:
    """Precision (0), recall (1) or F1 (2): of class 1 for binary unless `macro`, else the mean
    over the classes the targets or predictions hold."""

    def compute(predictions: Array, targets: Array, task: str) -> float:
        predicted, true = _labels(predictions, targets, task)
        if task == "binary" and not macro:
            return _scores(*_counts(predicted, true, 1))[which]
        labels = np.union1d(predicted, true)
        return float(np.mean([_scores(*_counts(predicted, true, int(c)))[which] for c in labels]))

    return compute


def _errors(predictions: Array, targets: Array) -> Array:
    return np.asarray(predictions, np.float64) - np.asarray(targets, np.float64).reshape(
        predictions.shape
    )


def _mae(predictions: Array, targets: Array, task: str) -> float:
    return float(np.mean(np.mean(np.abs(_errors(predictions, targets)), axis=0)))


def _mse(predictions: Array, targets: Array, task: str) -> float:
    return float(np.mean(np.mean(_errors(predictions, targets) ** 2, axis=0)))


def _rmse(predictions: Array, targets: Array, task: str) -> float:
    return float(np.mean(np.sqrt(np.mean(_errors(predictions, targets) ** 2, axis=0))))


def _r2(predictions: Array, targets: Array, task: str) -> float:
    if predictions.shape[0] < 2:  # not defined (scikit-learn: NaN, with a warning)
        return math.nan
    true = np.asarray(targets, np.float64).reshape(predictions.shape)
    residual = np.sum(_errors(predictions, targets) ** 2, axis=0)
    spread = np.sum((true - true.mean(axis=0)) ** 2, axis=0)
    scores = np.where(
        spread > 0, 1.0 - residual / np.where(spread > 0, spread, 1.0), (residual == 0) * 1.0
    )
    return float(np.mean(scores))


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric("accuracy", CLASSIFYING, _accuracy),
        Metric("auc", CLASSIFYING, _auc),
        Metric("precision", CLASSIFYING, _per_class(0, macro=False)),
        Metric("recall", CLASSIFYING, _per_class(1, macro=False)),
        Metric("f1", CLASSIFYING, _per_class(2, macro=False)),
        Metric("precision_macro", CLASSIFYING, _per_class(0, macro=True)),
        Metric("recall_macro", CLASSIFYING, _per_class(1, macro=True)),
        Metric("f1_macro", CLASSIFYING, _per_class(2, macro=True)),
        Metric("mae", ("regression",), _mae, lower_is_better=True),
        Metric("mse", ("regression",), _mse, lower_is_better=True),
        Metric("rmse", ("regression",), _rmse, lower_is_better=True),
        Metric("r2", ("regression",), _r2),
    )
}
"""Every metric a run can take, by name (deepsharp's, and those registered)."""

BUILT_IN = frozenset(METRICS)

TASKS = ("binary", "classes", "regression")

REPORTED = ("loss", "validation_loss", "validation", "epoch", "seconds", "learning_rate")
"""The figures a run reports of its own, which no metric of one's own may be named."""


def register_metric(metric: Metric) -> Metric:
    """Make a metric of one's own known by its name, to `FitOptions(metrics=...)`, `monitor=`,
    `evaluate` and `deepsharp evaluate --metrics` (with `--import` of the module that registers
    it): a figure a run measures on the validation rows each epoch and on the test rows, as the
    built-in ones (trial EX4: there was no way to). Register it where the module that defines it
    is imported — each process of a run, and the one that resumes its checkpoint, must know it.
    The same metric registered again is taken; another of a name already known is refused."""
    if not isinstance(metric, Metric):
        raise TypeError(
            f"register_metric takes a Metric(name, tasks, compute), not {type(metric).__name__}"
        )
    if not isinstance(metric.name, str) or not metric.name.isidentifier():
        raise ValueError(
            f"register_metric: a metric's name is a word of letters, digits and _ (it is a "
            f"column of the report), not {metric.name!r}"
        )
    tasks = tuple(metric.tasks) if isinstance(metric.tasks, (list, tuple)) else ()
    if not tasks or any(task not in TASKS for task in tasks):
        raise ValueError(
            f"register_metric: {metric.name!r}'s tasks are some of {', '.join(map(repr, TASKS))}, "
            f"not {metric.tasks!r}"
        )
    if not callable(metric.compute):
        raise TypeError(f"register_metric: {metric.name!r}'s compute must be callable")
    if metric.name in REPORTED:
        raise ValueError(
            f"register_metric: {metric.name!r} names a figure every run reports already (its "
            f"report's {', '.join(REPORTED)}): give yours another name"
        )
    known = METRICS.get(metric.name)
    if known is not None and metric.name not in BUILT_IN and _same_source(known, metric):
        known = metric  # the same definition made again: a notebook's cell run again
    if known is not None and known != metric:
        kind = "deepsharp's own" if metric.name in BUILT_IN else "another registered"
        raise ValueError(
            f"register_metric: {metric.name!r} is {kind} metric: give yours another name"
        )
    METRICS[metric.name] = metric
    return metric


def _same_source(one: Metric, other: Metric) -> bool:
    """Whether two metrics are one definition made twice: the same settings and a compute of
    the same module and name (trial D6: the guide's cell run again was refused)."""

    def source(metric: Metric) -> tuple[Any, ...]:
        compute = metric.compute
        return (
            tuple(metric.tasks),
            metric.lower_is_better,
            getattr(compute, "__module__", None),
            getattr(compute, "__qualname__", None),
        )

    return source(one) == source(other) and source(one)[3] is not None


def carried(names: Sequence[str]) -> dict[str, bytes]:
    """The metrics of one's own among `names` that a copy of the options carries to another
    process, pickled (those that pickle: a compute at a module's top level), so that it knows
    them there (trial SK6: a search's worker processes, handed the names alone, knew none)."""
    found = {}
    for name in names:
        metric = METRICS.get(name)
        if metric is None or name in BUILT_IN:
            continue
        try:
            found[name] = pickle.dumps(metric)
        except Exception:  # (a lambda's: the process it goes to must register it itself)
            continue
    return found


def known_again(held: Mapping[str, bytes]) -> None:
    """The carried metrics (`carried`) registered where they are not known yet: each unpickled
    only there (a copy in the process that registered it makes nothing again: a review found a
    compute of functools.partial refused as another metric), and one whose module cannot be
    imported here left unknown — a run that measures it says so, predicting needs none."""
    for name, pickled in held.items():
        if name in METRICS:
            continue
        try:
            register_metric(pickle.loads(pickled))
        except Exception:  # (its module, or the script that defined it, is not here)
            continue


def lower_is_better(name: str) -> bool:
    """Whether an epoch is better for having less of `name` (the validation loss, or a metric)."""
    if name == MONITORED:
        return True
    metric = METRICS.get(name)
    return metric is not None and metric.lower_is_better


MONITORED = "validation_loss"
"""What judges each epoch by default (early stopping, the best epoch): the validation loss."""

LOWER_IS_BETTER = frozenset({MONITORED, "mae", "mse", "rmse"})
"""What an epoch is better for having less of, of deepsharp's own (`lower_is_better` asks of
any)."""


def check_monitor(monitor: object, metrics: Sequence[str], where: str) -> str:
    """What judges each epoch: the validation loss, or one of the run's metrics (refused,
    naming the fix, where the run does not measure it)."""
    if not isinstance(monitor, str):
        raise TypeError(
            f"{where}: monitor names what judges each epoch, 'validation_loss' or one of the "
            f"run's metrics, not {monitor!r}"
        )
    if monitor == MONITORED or monitor in metrics:
        return monitor
    if monitor in METRICS:
        raise ValueError(  # (its tasks said: the hint led a regression to AUC, trial G)
            f"{where}: monitor={monitor!r} judges each epoch by a metric the run does not "
            f"measure: add it to metrics={tuple([*metrics, monitor])!r} (it measures "
            f"{' or '.join(METRICS[monitor].tasks)} predictions), or monitor another"
        )
    close = difflib.get_close_matches(monitor.lower(), [MONITORED, *METRICS], n=2, cutoff=0.5)
    if not close and "loss" in monitor.lower():  # "loss", "val_loss": no close match (trial EV)
        close = [MONITORED]
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    raise ValueError(
        f"{where}: monitor is 'validation_loss' or one of the run's metrics, not {monitor!r}{hint}"
    )


def check_metric_names(names: object, where: str) -> tuple[str, ...]:
    """The metrics asked for, as a tuple of known names (each once, in order); an unknown one is
    refused naming the close names (ValueError), a string alone taken as one name."""
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, (list, tuple)):
        raise TypeError(
            f"{where}: metrics is a tuple of names such as ('accuracy', 'auc'), not {names!r}"
        )
    found: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{where}: a metric is named by a string, not {name!r}")
        if name not in METRICS:
            close = difflib.get_close_matches(name.lower(), list(METRICS), n=3, cutoff=0.5)
            hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
            raise ValueError(
                f"{where}: unknown metric {name!r}{hint}; the metrics are {', '.join(METRICS)} "
                "(one of one's own is registered first: register_metric(Metric(...)))"
            )
        if name not in found:
            found.append(name)
    return tuple(found)


def check_metrics_fit(names: Sequence[str], loss: Any, outputs: int) -> None:
    """Refuse metrics that do not fit the loss's task (AUC for a regression), or a binary
    metric of classes for a network of several binary outputs (ConfigurationError naming what
    fits)."""
    task = getattr(loss, "task", None)
    for name in names:
        metric = METRICS.get(name)
        if metric is None:  # named where it was registered, run where it is not (trial SK6)
            raise ConfigurationError(
                f"the metric {name!r} is not known in this process: a metric of one's own is "
                "registered (register_metric) in every process that measures it — where the "
                "module that registers it is imported (a worker process, a resumed run)"
            )
        if task is None:
            raise ConfigurationError(
                f"the metric {name!r} needs to know what {loss!r} predicts, and it does not say: "
                "give the loss a task ('binary', 'classes' or 'regression'), or ask for no metrics"
            )
        if task not in metric.tasks:
            fitting = [m for m, found in METRICS.items() if task in found.tasks]
            raise ConfigurationError(
                f"the metric {name!r} measures {' or '.join(metric.tasks)} predictions, and "
                f"{loss!r} is a {task} loss: for it ask for {', '.join(map(repr, fitting))}"
            )
        if task == "binary" and outputs > 1 and name != "accuracy":
            raise ConfigurationError(
                f"the metric {name!r} measures one binary output, and the network has {outputs} "
                "outputs: ask for 'accuracy' (every output of a row right), or train one output"
            )


def measure(
    names: Sequence[str], task: str, predictions: Array, targets: Array
) -> dict[str, float]:
    """Each named metric of these predictions (the link applied) against their targets: NaN
    for each where there are none, or where one is NaN (a class it does not name would count
    as class 0)."""
    if len(predictions) == 0:
        return {name: math.nan for name in names}
    predictions, targets = np.asarray(predictions, np.float64), np.asarray(targets)
    if np.isnan(predictions).any():
        return {name: math.nan for name in names}
    if task == "classes" and targets.ndim == 2 and targets.shape[1] > 1:
        # A class at every position of a sequence (targets (N, L), predictions (N, L·C)): each
        # position a row, as the loss takes them.
        targets = targets.reshape(-1)
        predictions = predictions.reshape(len(targets), -1)
    return {name: _computed(METRICS[name], predictions, targets, task) for name in names}


def _computed(metric: Metric, predictions: Array, targets: Array, task: str) -> float:
    """A metric's figure, as a float: one of one's own that raises, or gives no number, is
    named (its figure goes into the report and the checkpoints)."""
    if metric.name in BUILT_IN:
        return metric.compute(predictions, targets, task)
    try:
        value = metric.compute(predictions, targets, task)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"it gave {type(value).__name__} {value!r}, not a number")
        return float(value)
    except Exception as error:
        raise ConfigurationError(
            f"the metric {metric.name!r} (registered) failed on predictions "
            f"{predictions.shape} and targets {np.shape(targets)}: {type(error).__name__}: "
            f"{error}; its compute(predictions, targets, task) gives one number"
        ) from error

"""Rows' weights: how much each training row counts in the loss a step minimises.

`fit(..., class_weight={0: 1.0, 1: 4.0})` weighs each row by its target's class (for a
`CrossEntropy`, or a `BinaryCrossEntropy` of one output: classes 0 and 1; a class not named
weighs 1, as in Keras); `fit(None, (x, y), ..., sample_weight=w)` gives each row a weight of its
own (arrays only: the weights travel with the rows through the split), or each place of a
sequence where the targets are a class at every position (`(N, L)`). Given both, a row's
weight is their product. The loss is weighted as Keras weighs it (the mean of weight·loss, see
`deepsharp.core.nn.losses`); only the training steps are weighted: the validation loss, which
judges the epochs, and the measures on the test rows are of the rows as they are.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.values import label, label_lookup
from deepsharp.core.errors import ConfigurationError, DataError
from deepsharp.core.nn.losses import Loss

__all__ = ["ClassWeights", "check_products", "class_weights_for"]


class ClassWeights:
    """Each class's weight (`weights[c]` for class c; 1 for a class not named)."""

    def __init__(self, weights: NDArray[np.float32], task: str) -> None:
        self.weights = weights
        self.task = task

    def of(self, targets: NDArray[Any]) -> NDArray[np.float32]:
        """The weight of each row of a batch, from its target (as the loss takes targets)."""
        classes = targets[:, 0] if self.task == "binary" else targets
        return self.weights[np.asarray(classes, np.int64)]  # a weight a place of a sequence


def class_weights_for(
    class_weight: object,
    loss: Loss,
    outputs: int,
    training_targets: Iterable[NDArray[Any]],
    labels: Sequence[str] | None = None,
) -> ClassWeights | None:
    """The class weights of a run, checked against its loss and its training targets: a
    mapping from class index to a finite weight of 0 or more, for a loss of classes, naming
    classes the training targets hold (DataError naming those they lack). Where the pipeline
    read the target's `labels`, a class is keyed by its label too ("spam", "3")."""
    if class_weight is None:
        return None
    if not isinstance(class_weight, Mapping):
        raise TypeError(
            f"fit: class_weight maps each class to its weight, such as {{0: 1.0, 1: 4.0}}, not "
            f"{class_weight!r}"
        )
    if labels is not None:
        class_weight = _by_index(class_weight, list(labels))
    task = loss.task
    if task not in ("binary", "classes") or (task == "binary" and outputs != 1):
        what = "a regression" if task == "regression" else "no loss of classes"
        raise ConfigurationError(
            f"fit: class_weight weighs rows by their class, and {loss!r} is {what} with "
            f"{outputs} output(s): class weights need CrossEntropy() or a BinaryCrossEntropy() "
            "of one output; weigh rows with sample_weight instead"
        )
    count = 2 if task == "binary" else outputs
    weights = np.ones(count, np.float32)
    for key, value in class_weight.items():
        if isinstance(key, bool) or not isinstance(key, numbers.Integral):
            raise TypeError(f"fit: class_weight's keys are class indices, not {key!r}")
        if not 0 <= int(key) < count:
            raise DataError(
                f"fit: class_weight names class {key!r}, and {loss!r} with {outputs} output(s) "
                f"has classes 0..{count - 1}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(float(value))
            or float(value) < 0
            or float(value) > float(np.finfo(np.float32).max)
        ):
            raise ValueError(
                f"fit: class_weight[{key!r}] must be a finite float32 number of 0 or more (at "
                f"most 3.4e38), not {value!r}"
            )
        weights[int(key)] = float(value)
    held: set[int] = set()
    for targets in training_targets:
        classes = targets[:, 0] if task == "binary" else targets.reshape(-1)
        held.update(int(c) for c in np.unique(np.asarray(classes, np.int64)))
    lacking = sorted(int(key) for key in class_weight if int(key) not in held)
    if lacking:
        raise DataError(
            f"fit: class_weight names class(es) {', '.join(map(str, lacking))} that the training "
            f"targets lack (they hold {', '.join(map(str, sorted(held)))}): name the classes "
            "the targets hold (check the targets, or the split)"
        )
    if held and not any(weights[c] for c in held if c < count):
        raise DataError(
            f"fit: class_weight weighs every class the training targets hold "
            f"({', '.join(map(str, sorted(held)))}) zero, so no step would learn anything; "
            "give the classes to learn from a weight above 0"
        )
    return ClassWeights(weights, task)


def check_products(class_weights: ClassWeights, batches: Iterable[Any]) -> None:
    """Where rows weigh by their class and by their own weight: refused before the first step
    where a product is beyond float32 (each factor finite, the product inf: the step would
    refuse it mid-run, naming a weight nobody gave) or where every product is zero (each
    factor weighs some rows, together none: the run would train nothing and report it)."""
    weighed = False
    for batch in batches:
        own = batch.weights
        if own is None or len(batch) == 0:
            continue
        by_class = class_weights.of(batch.targets)
        own = own if own.ndim == by_class.ndim else own.reshape(-1, *(1,) * (by_class.ndim - 1))
        with np.errstate(over="ignore"):
            product = by_class * own
        if not np.isfinite(product).all():
            place = tuple(int(i) for i in np.argwhere(~np.isfinite(product))[0])
            raise DataError(
                f"fit: class_weight times sample_weight is beyond float32 (3.4e38) for a "
                f"training row: its class weighs {float(by_class[place]):g} and the row "
                f"{float(own[place]):g}; scale one of them down (only their ratios matter to "
                "what is learned, with the learning rate)"
            )
        weighed = weighed or bool(np.any(product))
    if not weighed:
        raise DataError(
            "fit: class_weight times sample_weight is zero for every training row (each row's "
            "class or its own weight is 0), so no step would learn anything; give the rows to "
            "learn from a weight above 0 in both"
        )


def _by_index(class_weight: Mapping[Any, Any], labels: list[str]) -> dict[Any, Any]:
    """Class weights keyed by the target's labels (as the rows hold them) or by the classes'
    places among the labels, as class indices. A whole number that is one label's text and
    another class's index ({1: 0.0} where the labels are "1", "2", "3") is refused: which
    class it weighs is the user's to say."""
    lookup = label_lookup(labels)
    shown = ", ".join(f"{name!r} (class {i})" for i, name in enumerate(labels))
    made: dict[Any, Any] = {}
    for key, value in class_weight.items():
        named = lookup.get(label(key)) if not isinstance(key, bool) else None
        index = int(key) if isinstance(key, numbers.Integral) and not isinstance(key, bool) else -1
        if 0 <= index < len(labels):
            if named is not None and named != index:
                raise DataError(
                    f"fit: class_weight's key {key!r} is the label {labels[named]!r} (class "
                    f"{named}) and the index of class {index}: key each weight by its label "
                    f"as text, {{{labels[named]!r}: ...}} (the target's labels: {shown})"
                )
            made[index] = value
        elif named is not None:
            made[named] = value
        else:
            raise DataError(
                f"fit: class_weight names {key!r}, which is no label of the target: its labels "
                f"are {shown}; key each weight by its label or its class index"
            )
    return made

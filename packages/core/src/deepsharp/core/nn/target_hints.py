"""What a refusal of targets advises: the last layer the targets ask for (class indices past
the outputs, one target a row for several outputs) — or, for the rows a trained network is
evaluated on (`of_a_trained_network`), no other last layer, which it cannot take."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from numpy.typing import NDArray

__all__ = ["classes_refusal", "of_a_trained_network", "one_a_row", "outputs_wanted"]

_TRAINED = contextvars.ContextVar("deepsharp_targets_of_a_trained_network", default=False)


@contextmanager
def of_a_trained_network() -> Iterator[None]:
    """Targets checked against a trained network (`TrainedNetwork.evaluate`'s rows): a
    refusal advises no other last layer, which a trained network cannot take (a review)."""
    token = _TRAINED.set(True)
    try:
        yield
    finally:
        _TRAINED.reset(token)


def outputs_wanted(low: int, high: int, classes: int) -> str:
    """Where class indices reach past the network's outputs, the outputs they ask for (trial
    PT), and, where they run 1..classes, that indices count from 0 (review); nothing for an
    index far past any count of outputs (one stray label). For a trained network's rows, what
    it was trained on."""
    if _TRAINED.get():
        said = f": the network gives {classes} outputs, a class each, and these rows hold others"
        if low >= 1 and high == classes:  # (the hint the review saw lost)
            said += "; as they count from 1, give them from 0 (y - 1)"
        return said
    if low < 0 or high >= max(1024, 16 * classes):
        return ""
    said = (
        f": the targets reach {high}, so end the network in Dense({high + 1}) (an output a class)"
    )
    if low >= 1 and high == classes:
        said += f", or, as they count from 1, give them from 0 (y - 1) to keep Dense({classes})"
    return said


def one_a_row(array: NDArray[np.float32], outputs: int) -> str:
    """Where one target a row met a network of several outputs, the two ways on (the message
    named neither: trial PT, class indices under BinaryCrossEntropy and Dense(10))."""
    if array.ndim != 1 or outputs < 2 or _TRAINED.get():
        return ""
    said = "; the targets are one a row: end the network in Dense(1)"
    with np.errstate(invalid="ignore"):
        classes = bool(
            array.size
            and np.all(array == np.round(array))
            and array.min() >= 0
            and array.max() < outputs
        )
    if classes:
        said += (
            f", or, as they are class indices (0..{int(array.max())}), train with "
            "CrossEntropy(), which takes an output a class"
        )
    return said


def classes_refusal(
    outputs: int, task: str | None, classes: list[str] | None, loss: str = "its loss"
) -> str | None:
    """Why a network of `outputs` outputs under a loss of `task` cannot be trained on (or serve)
    a target of these classes, or None: a loss of one output a class needs as many outputs as
    classes (with more, predictions gave chances to classes the target does not have, under no
    label), a binary one a target of two classes and one output."""
    if classes is None or task not in ("classes", "binary"):
        return None
    shown = ", ".join(map(repr, classes[:5])) + (", ..." if len(classes) > 5 else "")
    if task == "classes" and outputs != len(classes):
        return (
            f"the network gives {outputs} output{'s' if outputs != 1 else ''} a row, and the "
            f"pipeline's target has {len(classes)} classes ({shown}), which {loss} takes one "
            f"output each: end the network in Dense({len(classes)})"
        )
    if task == "binary" and (len(classes) > 2 or outputs != 1):
        return (
            f"the pipeline's target has {len(classes)} classes ({shown}) and the network "
            f"{outputs} output{'s' if outputs != 1 else ''} a row, which a binary loss takes as "
            "the chance of a target's second class: two classes and one output"
        )
    return None

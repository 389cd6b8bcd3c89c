"""Losses. Each carries the network's *link*: what turns its outputs into answers."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Engine, Handle
from deepsharp.core.errors import ShapeError

__all__ = [
    "LOSSES",
    "BinaryCrossEntropy",
    "CrossEntropy",
    "Loss",
    "MeanSquaredError",
    "loss_from_json",
]

LOSSES: dict[str, type[Loss]] = {}


class Loss:
    """How far a batch's outputs are from its answers (a single value), and the link."""

    kind: ClassVar[str] = "Loss"
    measures_accuracy: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        LOSSES[cls.__name__] = cls

    def value(self, outputs: Tensor, answers: Tensor) -> Tensor:
        raise NotImplementedError

    def link(self, engine: Engine, outputs: Handle) -> Handle:
        """Outputs to answers, on the engine (no gradient)."""
        return outputs

    def answers(self, answers: Any, outputs: int) -> NDArray[Any]:
        """Answers as this loss takes them: checked, and in the dtype the engine is given."""
        raise NotImplementedError

    def correct(self, answered: NDArray[Any], answers: NDArray[Any]) -> NDArray[np.bool_]:
        """Which rows were answered right (for losses that measure accuracy)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{self.kind}()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(self.kind)


def _float_answers(loss: Loss, answers: Any, outputs: int) -> NDArray[np.float32]:
    array = np.asarray(answers, dtype=np.float32)
    if array.ndim == 1 and outputs == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape[1] != outputs:
        raise ShapeError(
            f"{loss.kind}: answers of shape {np.shape(answers)} do not match the network's "
            f"outputs (N, {outputs}); give one answer per output per row"
        )
    return np.ascontiguousarray(array)


class BinaryCrossEntropy(Loss):
    """Two classes, answers 0 or 1; the network's outputs are logits and the link is sigmoid."""

    measures_accuracy = True

    def value(self, outputs: Tensor, answers: Tensor) -> Tensor:
        _same(self, outputs, answers)
        return ops.binary_cross_entropy(outputs, answers)

    def link(self, engine: Engine, outputs: Handle) -> Handle:
        return engine.sigmoid(outputs)

    def answers(self, answers: Any, outputs: int) -> NDArray[Any]:
        return _float_answers(self, answers, outputs)

    def correct(self, answered: NDArray[Any], answers: NDArray[Any]) -> NDArray[np.bool_]:
        return np.asarray(((answered >= 0.5) == (answers >= 0.5)).all(axis=1))


class CrossEntropy(Loss):
    """One class of many; answers are class indices (N,); the link is softmax."""

    measures_accuracy = True

    def value(self, outputs: Tensor, answers: Tensor) -> Tensor:
        if answers.shape != (outputs.shape[0],):
            raise ShapeError(
                f"CrossEntropy: answers of shape {answers.shape} for outputs of shape "
                f"{outputs.shape}: give one class index per row, shape ({outputs.shape[0]},)"
            )
        chosen = ops.one_hot(answers, outputs.shape[1]) * ops.log_softmax(outputs)
        return ops.neg(ops.sum(chosen) / float(outputs.shape[0]))

    def link(self, engine: Engine, outputs: Handle) -> Handle:
        last = (len(engine.shape(outputs)) - 1,)
        shifted = engine.sub(outputs, engine.max(outputs, last, True))
        exps = engine.exp(shifted)
        return engine.div(exps, engine.sum(exps, last, True))

    def answers(self, answers: Any, outputs: int) -> NDArray[Any]:
        array = np.asarray(answers)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 1:
            raise ShapeError(
                f"CrossEntropy: answers of shape {array.shape}: give one class index per row, shape (N,)"
            )
        if array.dtype.kind == "f":
            if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
                raise ShapeError("CrossEntropy: answers must be whole class indices")
        indices = array.astype(np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= outputs):
            raise ShapeError(
                f"CrossEntropy: class indices must lie in 0..{outputs - 1} for {outputs} outputs, "
                f"found {int(indices.min())}..{int(indices.max())}"
            )
        return indices

    def correct(self, answered: NDArray[Any], answers: NDArray[Any]) -> NDArray[np.bool_]:
        return np.asarray(answered.argmax(axis=1) == answers.reshape(-1))


class MeanSquaredError(Loss):
    """The mean of (output - answer)**2 over every element; the link is the identity."""

    def value(self, outputs: Tensor, answers: Tensor) -> Tensor:
        _same(self, outputs, answers)
        difference = outputs - answers
        return ops.mean(difference * difference)

    def answers(self, answers: Any, outputs: int) -> NDArray[Any]:
        return _float_answers(self, answers, outputs)


def _same(loss: Loss, outputs: Tensor, answers: Tensor) -> None:
    if outputs.shape != answers.shape:
        raise ShapeError(
            f"{loss.kind}: outputs of shape {outputs.shape} and answers of shape "
            f"{answers.shape} differ; give one answer per output per row"
        )


def loss_from_json(data: Any) -> Loss:
    if not isinstance(data, dict) or data.get("kind") not in LOSSES:
        raise ValueError(f"unknown loss {data!r}; known: {', '.join(sorted(LOSSES))}")
    return LOSSES[data["kind"]]()

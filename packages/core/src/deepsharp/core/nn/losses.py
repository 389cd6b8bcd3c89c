"""Losses. Each carries the network's *link*: what turns its outputs into predictions.

A loss compares the network's outputs with the *targets* (what the rows should give) and gives
one value; its link turns outputs into *predictions* (a sigmoid's probability, a softmax's).
The cross entropies take logits by default, as PyTorch's do; `from_logits=False` takes the
probabilities of a network that ends in `Sigmoid()` or `Softmax()`, as Keras's do.

Rows may be weighted (`weights`: one number a row, from a run's `class_weight` or
`sample_weight`): the loss is then the mean of weight·loss over every value, as Keras weighs
it (the weights are not renormalised: a batch of weight-2 rows has twice the loss).

A loss of one's own subclasses `Loss`: `value(outputs, targets, weights=None)` written with the
operations of `deepsharp.core.autodiff.functions` (each rule nudge-checked, so its gradient
needs no writing), ending in `weighted_mean(terms, weights)`; `targets(targets, outputs)` (for
float targets, `float_targets(self, targets, outputs)`); `task` ("binary", "classes",
"regression" or None) says which of a run's metrics fit it.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.edits import Checked, Edited
from deepsharp.core.engine import Engine, Handle
from deepsharp.core.errors import (
    ConfigurationError,
    DataError,
    DeepSharpWarning,
    ShapeError,
    json_values,
    outside,
)
from deepsharp.core.kinds import Kinds, warn_unrecorded
from deepsharp.core.nn.target_hints import one_a_row, outputs_wanted

if TYPE_CHECKING:
    from deepsharp.core.nn.network import Network

__all__ = [
    "LOSSES",
    "BinaryCrossEntropy",
    "CrossEntropy",
    "Huber",
    "Loss",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "float_targets",
    "loss_from_json",
    "weighted_mean",
]

LOSSES: Kinds[Loss] = Kinds("loss")
EPSILON = 1e-7  # probabilities are clipped to [EPSILON, 1 - EPSILON] before their log (Keras's)


class Loss(Edited):
    """How far a batch's outputs are from its targets (a single value), and the link."""

    kind: ClassVar[str] = "Loss"
    key: ClassVar[str] = "Loss"
    measures_accuracy: ClassVar[bool] = False
    task: ClassVar[str | None] = None
    """What the network predicts: "binary" (0 or 1 an output), "classes" (one of many),
    "regression" (numbers), or None (a loss of one's own that says not): which metrics fit."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__
        cls.key = LOSSES.add(cls)

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        """The loss of a batch: one value, recorded (its gradient flows back to the outputs).
        `weights`: one number a row (shape (rows,)), or None for every row weighing 1."""
        raise NotImplementedError(
            f"{type(self).__name__}: a Loss of one's own writes value(self, outputs, targets, "
            "weights=None), giving one number: weighted_mean(terms, weights) of each value's "
            "terms"
        )

    def link(self, engine: Engine, outputs: Handle) -> Handle:
        """Outputs to predictions, on the engine (no gradient)."""
        return outputs

    def counted(self, outputs: Tensor) -> Tensor | None:
        """The positions this loss counts, where it takes a value at each position of a
        sequence and the outputs carry a padding mask (an `Embedding`'s): the mask, (rows,
        positions), 1 at a position counted and 0 at padding, which weighs 0 in the loss. None:
        every value counts. A run measures its validation and test rows at the positions
        counted alone (their loss the mean over them)."""
        return None

    def predictions(self, engine: Engine, outputs: Handle, rows: int, width: int) -> Handle:
        """A batch's outputs as predictions, on the engine: the link applied to them as they are
        (a softmax over the last axis: each position's, for a sequence), then each row's
        `width` predictions in one line (rows, width). Every door that predicts goes through
        here."""
        return engine.reshape(self.link(engine, outputs), (rows, width))

    def targets(self, targets: Any, outputs: int) -> NDArray[Any]:
        """Targets as this loss takes them: checked, and in the dtype the engine is given."""
        raise NotImplementedError(
            f"{type(self).__name__}: a Loss of one's own writes targets(self, targets, outputs): "
            "return float_targets(self, targets, outputs) for numbers, one an output a row "
            "(from deepsharp.core.nn.losses)"
        )

    def correct(self, predictions: NDArray[Any], targets: NDArray[Any]) -> NDArray[np.bool_]:
        """Which rows were predicted right (for losses that measure accuracy)."""
        raise NotImplementedError(
            f"{type(self).__name__}: measures_accuracy is set, so it writes correct(self, "
            "predictions, targets), a bool a row"
        )

    def check_network(self, network: Network) -> None:
        """Refuse a network this loss does not fit (ConfigurationError saying the ways out)."""

    def check_training_targets(self, targets: NDArray[Any]) -> None:
        """Warn about training targets that are likely a mistake (all of one class)."""

    def config(self) -> dict[str, Any]:
        """The constructor's arguments, as JSON values (what a trained file records)."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{self.kind}({args})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, Loss)
            and other.config() == self.config()
        )

    def __hash__(self) -> int:
        return hash((self.key, tuple(sorted(self.config().items()))))


def weighted_mean(terms: Tensor, weights: Tensor | None) -> Tensor:
    """The mean of a batch's terms (rows first), each row's times its weight where weights are
    given: Keras's weighting, sum(weight·term) / the number of terms."""
    if weights is None:
        return ops.mean(terms)
    if weights.shape != (terms.shape[0],):
        raise ShapeError(
            f"weights of shape {weights.shape} for a batch of {terms.shape[0]} rows: give one "
            "weight a row"
        )
    per_row = ops.reshape(weights, (terms.shape[0],) + (1,) * (len(terms.shape) - 1))
    return ops.mean(ops.mul(terms, per_row))


def float_targets(
    loss: Loss, targets: Any, outputs: int, finite: bool = True
) -> NDArray[np.float32]:
    """Targets that are numbers, one an output a row: float32 (rows, outputs), checked finite
    (`finite=False`: by the caller, whose own check of the values finds what is not)."""
    if type(targets) is np.ndarray and targets.dtype == np.float32:
        array = targets  # as a batcher hands them: nothing to cast (a few us of a step)
    else:
        _refuse_complex(loss, targets)
        try:
            with np.errstate(over="ignore"):  # beyond float32 becomes inf: named below as given
                array = np.asarray(targets, dtype=np.float32)
        except (TypeError, ValueError):
            raise _not_numbers(loss, targets) from None
    if array.ndim == 1 and outputs == 1:
        array = array.reshape(-1, 1)
    if array.ndim > 2 and math.prod(array.shape[1:]) == outputs:
        raise ShapeError(
            f"{loss.kind}: targets of shape {np.shape(targets)}: give each row's targets flat, "
            f"(N, {outputs}), in the order of the network's outputs for the row "
            "(targets.reshape(len(targets), -1) where they are laid out as the outputs are)"
        )
    if array.ndim != 2 or array.shape[1] != outputs:
        raise ShapeError(
            f"{loss.kind}: targets of shape {np.shape(targets)} do not match the network's "
            f"outputs (N, {outputs}); give one target per output per row{one_a_row(array, outputs)}"
        )
    with np.errstate(invalid="ignore"):  # inf + -inf: NaN, named below, not warned of
        total = array.sum(dtype=np.float64)
    if finite and not math.isfinite(total):  # one pass; float64 cannot
        _not_finite(loss, array, targets)  # overflow here
    return np.ascontiguousarray(array)


def _not_finite(loss: Loss, array: NDArray[np.float32], given: Any = None) -> None:
    """Raise naming the first target that is not finite, where one is not: as it was `given`
    where the cast to float32 made it so (1e40 is not infinity to whoever wrote it)."""
    if not np.isfinite(array).all():
        i, k = (int(v) for v in np.argwhere(~np.isfinite(array))[0])
        value, beyond = float(array[i, k]), ""
        try:
            wide = np.asarray(given, dtype=np.float64).reshape(array.shape)
        except (TypeError, ValueError):
            wide = None
        if wide is not None and math.isfinite(wide[i, k]):
            value, beyond = float(wide[i, k]), ", beyond float32's range (±3.4e38)"
        raise DataError(
            f"{loss.kind}: row {i + 1}, output {k + 1} (each counting from 1): the target is "
            f"{value!r}{beyond}; every target must be a finite float32 number"
        )


def _from_logits(kind: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{kind}: from_logits is True or False, not {value!r}")
    return value


def _number(
    kind: str, name: str, value: object, low: float, high: float | None = None, above: bool = False
) -> float:
    """A loss's setting: a finite number from `low` (`above` it, where `above`; and below
    `high`, where given), refused with a message naming the loss and the setting."""
    wanted = f"a finite number {'above' if above else 'from'} {low:g}" + (
        f" below {high:g}" if high is not None else ""
    )
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{kind}: {name} must be {wanted}, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < low or (above and number == low):
        raise ValueError(f"{kind}: {name} must be {wanted}, not {value!r}")
    if high is not None and number >= high:
        raise ValueError(f"{kind}: {name} must be {wanted}, not {value!r}")
    return number


def _positive(kind: str, name: str, value: object) -> float:
    return _number(kind, name, value, 0.0, above=True)


class BinaryCrossEntropy(Loss):
    """Two classes, targets 0 or 1. From logits (the default) its link is the sigmoid; with
    from_logits=False it takes probabilities (a network ending in Sigmoid()) and its link is
    the identity.

    `pos_weight`: the positive targets' terms weighed that many times (PyTorch's and
    TensorFlow's `pos_weight`: (1 - y)·z + (1 + (p - 1)·y)·log(1 + e^-z) from logits z), for
    classes seen rarely. `label_smoothing` ε: targets pulled towards ½, y·(1 - ε) + ε/2, as
    Keras does."""

    measures_accuracy = True
    task = "binary"
    from_logits = Checked(lambda loss, value: _from_logits(type(loss).__name__, value))
    pos_weight = Checked(
        lambda loss, value: (
            None if value is None else _positive(type(loss).__name__, "pos_weight", value)
        )
    )
    label_smoothing = Checked(
        lambda loss, value: _number(type(loss).__name__, "label_smoothing", value, 0.0, 1.0)
    )

    def __init__(
        self,
        from_logits: bool = True,
        *,
        pos_weight: float | None = None,
        label_smoothing: float = 0.0,
    ) -> None:
        self.from_logits = from_logits
        self.pos_weight = pos_weight
        self.label_smoothing = label_smoothing

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        outputs = _same(self, outputs, targets)
        logits = outputs
        if not self.from_logits:
            # log(p / (1 - p)), p clipped: the same value as -(y log p + (1 - y) log(1 - p)).
            logits = ops.log(ops.maximum(outputs, EPSILON)) - ops.log(
                ops.maximum(ops.sub(1.0, outputs), EPSILON)
            )
        if self.label_smoothing:
            smoothing = self.label_smoothing
            targets = ops.add(ops.mul(targets, 1.0 - smoothing), 0.5 * smoothing)
        if self.pos_weight is None and weights is None:
            return ops.binary_cross_entropy(logits, targets)
        if self.pos_weight is None:
            terms = ops.binary_cross_entropy_terms(logits, targets)
        else:
            terms = _pos_weighted_terms(logits, targets, self.pos_weight)
        return weighted_mean(terms, weights)

    def link(self, engine: Engine, outputs: Handle) -> Handle:
        return engine.sigmoid(outputs) if self.from_logits else outputs

    def targets(self, targets: Any, outputs: int) -> NDArray[Any]:
        array = float_targets(self, targets, outputs, finite=False)
        if np.count_nonzero(array * (array - 1.0)):  # 0 exactly where a target is 0 or 1 (NaN
            _not_finite(self, array, targets)  # and infinity are neither)
            wrong = (array != 0.0) & (array != 1.0)
            i, k = (int(v) for v in np.argwhere(wrong)[0])
            raise DataError(
                f"BinaryCrossEntropy takes targets 0 and 1; row {i + 1} (counting from 1), "
                f"output {k} holds {float(array[i, k])!r}: for more classes use CrossEntropy() "
                "with class indices"
                + (
                    "; for soft targets between 0 and 1 give 0 and 1 with "
                    "BinaryCrossEntropy(label_smoothing=...)"
                    if 0.0 < float(array[i, k]) < 1.0
                    else ""
                )
            )
        return array

    def correct(self, predictions: NDArray[Any], targets: NDArray[Any]) -> NDArray[np.bool_]:
        return np.asarray(((predictions >= 0.5) == (targets >= 0.5)).all(axis=1))

    def check_network(self, network: Network) -> None:
        if self.from_logits and network.ends_in == "sigmoid":
            raise ConfigurationError(
                "the network ends in a sigmoid, and BinaryCrossEntropy() takes logits (it applies "
                "the sigmoid itself): the sigmoid would be applied twice. Either drop the final "
                "Sigmoid() (or activation='sigmoid'; the loss's link still makes the predictions "
                "probabilities), or give "
                "BinaryCrossEntropy(from_logits=False) to take the network's probabilities"
            )

    def check_training_targets(self, targets: NDArray[Any]) -> None:
        values = np.unique(np.asarray(targets))
        if values.size == 1:
            warnings.warn(
                f"every training target is {float(values[0]):g}: a network learns to predict "
                "that one class whatever the features (its loss goes to 0); give rows of both "
                "classes",
                DeepSharpWarning,
                stacklevel=outside(),
            )

    def config(self) -> dict[str, Any]:
        found: dict[str, Any] = {} if self.from_logits else {"from_logits": False}
        if self.pos_weight is not None:
            found["pos_weight"] = self.pos_weight
        if self.label_smoothing:
            found["label_smoothing"] = self.label_smoothing
        return found


def _pos_weighted_terms(z: Tensor, y: Tensor, pos_weight: float) -> Tensor:
    """Each value's binary cross entropy with its positive part weighed `pos_weight` times:
    (1 - y)·z + (1 + (p - 1)·y)·softplus(-z), softplus(-z) = max(-z, 0) + log(1 + e^-|z|)
    (no overflow, no cancellation: TensorFlow's weighted_cross_entropy_with_logits)."""
    softplus = ops.relu(ops.neg(z)) + ops.log1p(ops.exp(ops.neg(ops.abs(z))))
    weight = ops.add(ops.mul(y, pos_weight - 1.0), 1.0)
    return ops.mul(ops.sub(1.0, y), z) + ops.mul(weight, softplus)


def _refuse_complex(loss: Loss, targets: Any) -> None:
    """A DataError for complex targets (a cast to real drops every imaginary part, warning at
    most)."""
    try:
        complex_ = np.iscomplexobj(targets)
    except (TypeError, ValueError):
        return  # not an array of numbers: the caller says so
    if complex_:
        raise DataError(
            f"{loss.kind}: the targets are complex numbers; a loss takes real ones: give their "
            "real and imaginary parts as targets of their own (and as many outputs), or their "
            "magnitudes, np.abs(y)"
        )


def _not_numbers(loss: Loss, targets: Any) -> DataError:
    """Targets that are not numbers (labels such as 'yes' and 'no'): what they are, and how to
    make them what the loss takes."""
    values = np.asarray(targets, dtype=object).ravel()
    seen = sorted(dict.fromkeys(str(v) for v in values[:1000]))[:3]
    found = ", ".join(repr(v) for v in seen)
    if isinstance(loss, BinaryCrossEntropy):
        way = (
            f"make them 0 and 1 first, e.g. y = (labels == {seen[-1]!r}).astype('float32'), "
            "or read them "
            "with a pipeline's .target(name, kind='binary'), which maps two labels to 0 and 1"
        )
    elif isinstance(loss, CrossEntropy):
        way = (
            "make them class indices 0 .. classes - 1 first (e.g. with numpy.unique(labels, "
            "return_inverse=True)), or read them with a pipeline's .target(name, kind='classes')"
        )
    else:
        way = "make them numbers first"
    return DataError(
        f"{loss.kind} takes targets that are numbers, not labels such as {found}: {way}"
    )


ONE_OUTPUT = (
    "the network gives one output a row, and CrossEntropy picks one class of several: with one "
    "class every row is right and the loss is 0 whatever the slots. For two classes give one "
    "output with BinaryCrossEntropy(), or as many outputs as classes (Dense(classes)) with "
    "CrossEntropy()"
)


def _one_output(targets: Any) -> str:
    """ONE_OUTPUT, or where the targets hold more than two classes, how many (it advised
    two classes' ways for seven: trial CL)."""
    try:
        classes = len(np.unique(np.asarray(targets)))
    except (TypeError, ValueError):
        return ONE_OUTPUT
    if classes <= 2:
        return ONE_OUTPUT
    return (
        f"the network gives one output a row, and the targets hold {classes} classes: "
        f"CrossEntropy takes an output for each, so end the network in Dense({classes}) (a "
        "function making it for the command line's --network is given outputs= where it takes "
        "that parameter)"
    )


class CrossEntropy(Loss):
    """One class of many; targets are class indices (N,). From logits (the default) its link is
    the softmax; with from_logits=False it takes probabilities (a network ending in Softmax())
    and its link is the identity.

    `label_smoothing` ε: the one-hot targets pulled towards the uniform, t·(1 - ε) + ε/C for C
    classes, as Keras does."""

    measures_accuracy = True
    task = "classes"
    from_logits = BinaryCrossEntropy.from_logits
    label_smoothing = BinaryCrossEntropy.label_smoothing

    def __init__(self, from_logits: bool = True, *, label_smoothing: float = 0.0) -> None:
        self.from_logits = from_logits
        self.label_smoothing = label_smoothing

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        rows = outputs.shape[0]
        if outputs.ndim == 3 and targets.shape == outputs.shape[:2]:
            # A sequence: a class at every position, each position a row of the mean, and
            # padding its mask marks (`counted`) weighing 0, as a weight of 0 does: the mean
            # over every place (Keras's weighting, not divided by the weights' sum), so that
            # the parts of an accumulated step and the shares of a data-parallel one add up to
            # the whole batch's (a mean over each part's own positions counted did not: trials
            # RV, SQ; the figures measured count the positions counted alone: `measuring`).
            positions = outputs.shape[1]
            counted = self.counted(outputs)
            outputs = ops.reshape(outputs, (rows * positions, outputs.shape[2]))
            targets = ops.reshape(targets, (rows * positions,))
            if weights is not None and weights.shape == (rows, positions):  # a weight a place
                weights = ops.reshape(weights, (rows * positions,))
            elif weights is not None:
                spread = ops.broadcast_to(ops.reshape(weights, (rows, 1)), (rows, positions))
                weights = ops.reshape(spread, (rows * positions,))
            if counted is not None:  # (1 at every place: the same bits as no mask)
                places = ops.reshape(counted, (rows * positions,))
                weights = places if weights is None else ops.mul(weights, places)
        elif outputs.ndim == 3:
            raise ShapeError(
                f"CrossEntropy: the network gives a class at each of {outputs.shape[1]} "
                f"positions (outputs (N, {outputs.shape[1]}, {outputs.shape[2]})), and the "
                f"targets are of shape (N{''.join(f', {s}' for s in targets.shape[1:])},): give "
                f"one class index a position, shape (N, {outputs.shape[1]})"
            )
        elif targets.shape != (rows,):
            raise ShapeError(
                f"CrossEntropy: targets of shape {targets.shape} for outputs of shape "
                f"{outputs.shape}: give one class index per row, shape ({rows},), or one per "
                "position of a sequence"
            )
        return self._value(outputs, targets, weights)

    def _value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None) -> Tensor:
        """The mean loss of rows of classes (N, C), each row's times its weight."""
        rows = outputs.shape[0]
        logits = outputs if self.from_logits else ops.log(ops.maximum(outputs, EPSILON))
        classes = outputs.shape[1]
        wanted = ops.one_hot(targets, classes)
        if self.label_smoothing:
            smoothing = self.label_smoothing
            wanted = ops.add(ops.mul(wanted, 1.0 - smoothing), smoothing / classes)
        if weights is not None:
            # A row's targets times its weight: the rule's mean of -sum(t·log_softmax) is then
            # sum(weight·loss) / rows, and its way back weighs each row's gradient alike.
            if weights.shape != (outputs.shape[0],):
                raise ShapeError(
                    f"weights of shape {weights.shape} for a batch of {rows} rows: give one "
                    "weight a row"
                )
            wanted = ops.mul(wanted, ops.reshape(weights, (outputs.shape[0], 1)))
        # log_softmax(log p) = log(p / sum(p)): Keras's renormalisation of probabilities.
        return ops.cross_entropy(logits, wanted)

    def counted(self, outputs: Tensor) -> Tensor | None:
        mask = outputs.mask
        if outputs.ndim != 3 or mask is None or mask.shape != outputs.shape[:2]:
            return None
        return mask

    def link(self, engine: Engine, outputs: Handle) -> Handle:
        if not self.from_logits:
            return outputs
        last = (len(engine.shape(outputs)) - 1,)
        shifted = engine.sub(outputs, engine.max(outputs, last, True))
        exps = engine.exp(shifted)
        return engine.div(exps, engine.sum(exps, last, True))

    def targets(self, targets: Any, outputs: int) -> NDArray[Any]:
        """Class indices, one a row (N,) — or, for a network that gives a class at every
        position of a sequence (rows of (L, classes)), one a position (N, L)."""
        if outputs == 1:
            raise ConfigurationError(_one_output(targets))
        array = np.asarray(targets)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        classes = outputs
        if array.ndim == 2 and array.shape[1] == outputs > 1:
            raise DataError(
                f"CrossEntropy: targets of shape {array.shape}, one value for each of the "
                f"network's {outputs} outputs, look one-hot (or a row of probabilities): "
                "CrossEntropy takes one class index a row, shape (N,): give y.argmax(axis=1)"
            )
        if array.ndim == 2 and array.shape[1] > 1:
            if outputs % array.shape[1]:
                raise ShapeError(
                    f"CrossEntropy: targets of shape {array.shape} (a class at each of "
                    f"{array.shape[1]} positions) for {outputs} outputs a row, which make no "
                    "whole count of classes a position"
                )
            classes = outputs // array.shape[1]
        elif array.ndim != 1:
            raise ShapeError(
                f"CrossEntropy: targets of shape {array.shape}: give one class index per row, "
                "shape (N,), or one per position of a sequence, (N, L)"
            )
        if array.dtype.kind not in "iub":
            _refuse_complex(self, array)
            try:
                whole = np.asarray(array, dtype=np.float64)
            except (TypeError, ValueError):
                raise _not_numbers(self, array) from None
            if not np.all(np.isfinite(whole)) or np.any(whole != np.round(whole)):
                raise DataError("CrossEntropy: targets must be whole class indices")
            array = whole
        if array.size and (array.min() < 0 or array.max() >= classes):
            # (read before the cast to int64: 2**64 - 1 was said as -1, 1e20 as -2**63: trial E2)
            low, high = (_shown_index(v) for v in (array.min(), array.max()))
            ignored = (  # PyTorch's habit (trial SQ)
                "; -100 is PyTorch's ignore_index, which CrossEntropy does not take: give "
                "padded positions any class (0) — the padding an Embedding marks weighs 0 — or "
                "weigh places 0 with sample_weight"
                if array.min() == -100
                else outputs_wanted(low, high, classes)
            )
            raise ShapeError(
                f"CrossEntropy: class indices must lie in 0..{classes - 1} for {classes} "
                f"classes, found {low}..{high}{ignored}"
            )
        return array.astype(np.int64)

    def correct(self, predictions: NDArray[Any], targets: NDArray[Any]) -> NDArray[Any]:
        """Each row right (its class the likeliest) — for a sequence, the fraction of its
        positions right."""
        if targets.ndim == 2 and targets.shape[1] > 1:
            rows, positions = targets.shape
            chosen = predictions.reshape(rows, positions, -1).argmax(axis=2)
            return np.asarray((chosen == targets).mean(axis=1))
        return np.asarray(predictions.argmax(axis=1) == targets.reshape(-1))

    def check_network(self, network: Network) -> None:
        if network.built and network.outputs == 1:
            raise ConfigurationError(ONE_OUTPUT)
        if self.from_logits and network.ends_in == "softmax":
            raise ConfigurationError(
                "the network ends in a softmax, and CrossEntropy() takes logits (it applies the "
                "softmax itself): the softmax would be applied twice. Either drop the final "
                "Softmax() (or activation='softmax'; the loss's link still makes the predictions "
                "probabilities), or give "
                "CrossEntropy(from_logits=False) to take the network's probabilities"
            )

    def check_training_targets(self, targets: NDArray[Any]) -> None:
        if np.unique(np.asarray(targets)).size == 1:
            warnings.warn(
                "every training target is one class: a network learns to predict it whatever "
                "the features; give rows of several classes",
                DeepSharpWarning,
                stacklevel=outside(),
            )

    def config(self) -> dict[str, Any]:
        found: dict[str, Any] = {} if self.from_logits else {"from_logits": False}
        if self.label_smoothing:
            found["label_smoothing"] = self.label_smoothing
        return found


class MeanSquaredError(Loss):
    """The mean of (output - target)**2 over every element; the link is the identity."""

    task = "regression"

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        outputs = _same(self, outputs, targets)
        difference = outputs - targets
        return weighted_mean(difference * difference, weights)

    def targets(self, targets: Any, outputs: int) -> NDArray[Any]:
        return float_targets(self, targets, outputs)


class MeanAbsoluteError(Loss):
    """The mean of |output - target| over every element (Keras's and PyTorch's L1 loss); the
    link is the identity. Less pulled by outliers than the squared error."""

    task = "regression"

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        outputs = _same(self, outputs, targets)
        return weighted_mean(ops.abs(outputs - targets), weights)

    def targets(self, targets: Any, outputs: int) -> NDArray[Any]:
        return float_targets(self, targets, outputs)


class Huber(Loss):
    """The squared error near the target, the absolute error far from it (Keras's Huber):
    for d = output - target, d²/2 where |d| <= delta, else delta·(|d| - delta/2); the mean over
    every element. The link is the identity."""

    task = "regression"
    delta = Checked(lambda loss, value: _positive(type(loss).__name__, "delta", value))

    def __init__(self, delta: float = 1.0) -> None:
        self.delta = delta

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        outputs = _same(self, outputs, targets)
        size = ops.abs(outputs - targets)
        linear = ops.relu(ops.sub(size, self.delta))  # |d| - delta beyond delta, else 0
        quadratic = size - linear  # min(|d|, delta)
        terms = ops.mul(quadratic * quadratic, 0.5) + ops.mul(linear, self.delta)
        return weighted_mean(terms, weights)

    def targets(self, targets: Any, outputs: int) -> NDArray[Any]:
        return float_targets(self, targets, outputs)

    def config(self) -> dict[str, Any]:
        return {"delta": self.delta}


def _same(loss: Loss, outputs: Tensor, targets: Tensor) -> Tensor:
    """The outputs laid out as the targets are: a network whose rows give more than a line of
    values (a sequence's (N, L, D)) is compared flat, (N, L·D), its values in order, as its
    targets are given (`float_targets`)."""
    rows = outputs.shape[0]
    if outputs.ndim > 2 and targets.shape == (rows, math.prod(outputs.shape[1:])):
        outputs = ops.reshape(outputs, targets.shape)
    if outputs.shape != targets.shape:
        raise ShapeError(
            f"{loss.kind}: outputs of shape {outputs.shape} and targets of shape "
            f"{targets.shape} differ; give one target per output per row"
        )
    return outputs


def loss_from_json(data: Any) -> Loss:
    """A loss from what a trained file records ({"kind": ..., "config": {...}}); only losses
    already imported are made."""
    cls = LOSSES.get(data.get("kind")) if isinstance(data, dict) else None
    if cls is None:
        raise ValueError(LOSSES.unknown(data.get("kind") if isinstance(data, dict) else data))
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise ValueError(f"loss {data['kind']!r}: its config must be a mapping, not {config!r}")
    try:
        return cls(**config)
    except TypeError as error:
        raise ValueError(f"loss {data['kind']!r}: bad config {config!r} ({error})") from None


def loss_to_json(loss: Loss) -> dict[str, Any]:
    """The loss as a file records it: its kind and its settings, JSON values (else a
    ConfigurationError naming the loss: a NumPy number in a config() of one's own stopped a
    run at its first checkpoint, and `save`, with json's own error)."""
    config = json_values(loss.config(), f"the loss {type(loss).__name__}: its config()")
    warn_unrecorded(loss, Loss, "loss", config)
    return {"kind": loss.key, "config": config}


def _shown_index(value: Any) -> Any:
    """A class index as given (a whole float as an int, its exact value)."""
    return int(value) if isinstance(value, (np.integer, np.bool_)) else int(float(value))

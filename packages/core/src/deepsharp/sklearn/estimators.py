"""A deepsharp network as a scikit-learn estimator: `NetworkClassifier` and `NetworkRegressor`.

Each `fit` is `deepsharp.core.fit(None, (x, y), ...)` on the arrays scikit-learn hands it: the
rows are split into training and validation (a `validation` fraction, for early stopping), the
network trains from the options' seed, and the best epoch's slots are kept. `fit(X, y,
sample_weight=w)` weighs each row in the training steps' loss (as core `fit` does: the mean of
weight·loss; the validation loss judging the epochs, and `report_`, weigh every row alike). A
row of weight k is not that row given k times (there would be more steps), which is the one
check of scikit-learn's the estimators fail by design, as its own MLPs do. The estimator's
parameters are never changed by `fit`: the network, loss and optimizer are copied (or the
network built) afresh at each fit, so `clone`, `GridSearchCV` and `cross_val_score` see
estimators that do not share a run. The optimizer's settings are nested parameters:
`set_params(optimizer__learning_rate=0.01)`, `GridSearchCV(..., {"optimizer__learning_rate":
[...]})`.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError:  # pragma: no cover - the extra is missing
    raise ImportError(
        "deepsharp.sklearn needs scikit-learn (1.6 or later), which is not installed: "
        "pip install 'deepsharp[sklearn]' (or scikit-learn)"
    ) from None

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    CrossEntropy,
    DataError,
    Engine,
    FitOptions,
    Loss,
    MeanAbsoluteError,
    MeanSquaredError,
    Network,
    Optimizer,
    Pipeline,
    Report,
    Rescaling,
    Schedule,
    TrainedNetwork,
    fit,
)
from deepsharp.core.errors import ShapeError, described
from deepsharp.core.nn.default import (
    built,
    default_network,
    rescaled,
    standardised,
    targets_scale,
)

__all__ = ["NetworkClassifier", "NetworkRegressor"]

NetworkBuilder = Callable[..., Network]
"""A function that makes a fresh network: called with `outputs=` (how many values a row must
get) where it takes a parameter of that name, else with nothing."""

_NESTED = "optimizer__"

SCALE_FREE = (MeanSquaredError, MeanAbsoluteError)
"""The losses whose minimum follows the targets through any scale and offset: the default
network learns their targets standardised (another loss's, as they are)."""


class _NetworkEstimator(BaseEstimator):  # type: ignore[misc]  # scikit-learn has no types
    """What the classifier and the regressor share: their parameters, a run, predictions."""

    trained_: TrainedNetwork  # fitted attributes: set by a fit that succeeded
    report_: Report

    def __init__(
        self,
        network: Network | NetworkBuilder | None = None,
        loss: Loss | None = None,
        optimizer: Optimizer | None = None,
        options: FitOptions | None = None,
        epochs: int | None = None,
        engine: Engine | str | None = None,
        validation: float = 0.15,
        random_state: int | None = None,
    ) -> None:
        self.network = network
        self.loss = loss
        self.optimizer = optimizer
        self.options = options
        self.epochs = epochs
        self.engine = engine
        self.validation = validation
        self.random_state = random_state

    # --- parameters -------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The estimator's parameters; with `deep`, the optimizer's settings too, each as
        `optimizer__<setting>` (those `set_params` and `GridSearchCV` take)."""
        params: dict[str, Any] = super().get_params(deep=False)
        if deep and (self.optimizer is None or isinstance(self.optimizer, (Optimizer, _Refused))):
            settings = self._made_of()[1]
            params.update({f"{_NESTED}{name}": value for name, value in settings.items()})
        return params

    def set_params(self, **params: Any) -> Any:
        """Set parameters, `optimizer__<setting>` among them: the optimizer is made again, of
        its kind, with that setting changed (the default `Adam()` when none is given). A name
        no parameter has is refused before anything is set; a setting the optimizer refuses
        (Adam's beta1=1.0) is refused by `fit`, as scikit-learn's estimators check their
        parameters there (a search scores that candidate NaN and goes on)."""
        nested = {
            key[len(_NESTED) :]: params.pop(key) for key in list(params) if key.startswith(_NESTED)
        }
        for key in params:
            if "__" in key:
                raise ValueError(
                    f"invalid parameter {key!r} for {type(self).__name__}: the nested parameters "
                    f"are the optimizer's ({_NESTED}learning_rate, ...); the seed is "
                    "random_state; give a network builder its settings with "
                    "functools.partial(builder, ...)"
                )
        if nested:
            optimizer = params.get("optimizer", self.optimizer)
            shown = type(self)(**{**self.get_params(deep=False), "optimizer": optimizer})
            kind, settings = shown._made_of()
            unknown = sorted(set(nested) - set(settings))
            if unknown:
                raise ValueError(
                    f"invalid parameter {_NESTED}{unknown[0]} for {type(self).__name__}: its "
                    f"optimizer {kind.__name__} takes {', '.join(sorted(settings))}"
                )
        super().set_params(**params)
        if nested:
            kind, settings = self._made_of()
            try:
                self.optimizer = kind(**{**settings, **nested})
            except (TypeError, ValueError) as error:
                refused: Any = _Refused(kind, {**settings, **nested}, error)
                self.optimizer = refused
        return self

    def _made_of(self) -> tuple[type[Optimizer], dict[str, Any]]:
        """The optimizer's kind and settings (of one a setting refused, as it was asked)."""
        if isinstance(self.optimizer, _Refused):
            return self.optimizer.kind, dict(self.optimizer.settings)
        optimizer = self._optimizer()
        return type(optimizer), _settings(optimizer)

    def _optimizer(self) -> Optimizer:
        if self.optimizer is None:
            return Adam()
        if isinstance(self.optimizer, _Refused):
            raise self.optimizer.error
        if not isinstance(self.optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: optimizer must be an Optimizer such as Adam(0.01), or "
                f"None (Adam()), not {described(self.optimizer)}"
            )
        return self.optimizer

    def _options(self) -> FitOptions:
        """The run's options: `options` (seed 0, no progress bar, when None) with `epochs` and
        `engine` in place of theirs where given."""
        options = self.options if self.options is not None else FitOptions(seed=0, progress=False)
        if not isinstance(options, FitOptions):
            raise TypeError(
                f"{type(self).__name__}: options must be FitOptions, not {described(options)}"
            )
        changes: dict[str, Any] = {}
        if self.epochs is not None:
            changes["epochs"] = self.epochs
        if self.engine is not None:
            changes["engine"] = self.engine
        if self.random_state is not None:
            seed = self.random_state
            if isinstance(seed, np.random.RandomState):  # scikit-learn's convention: each fit
                seed = int(seed.randint(0, 2**63 - 1, dtype=np.int64))  # draws its seed from it
            whole = not isinstance(seed, bool) and isinstance(seed, numbers.Integral)
            if not whole or not 0 <= seed < 2**63:
                raise ValueError(
                    f"{type(self).__name__}: random_state is the run's seed, a whole number "
                    f"from 0 to 2**63 - 1, a numpy RandomState its seed is drawn from, or None "
                    f"(the options' seed, 0 by default), not {seed!r}"
                )
            changes["seed"] = int(seed)
        return dataclasses.replace(options, **changes) if changes else options

    def _network(self, outputs: int) -> Network:
        """A network for this fit: a copy of the one given, one the builder makes, or the
        default one."""
        given = self.network
        if given is None:
            return self._default_network(outputs)
        if isinstance(given, Network):
            return copy.deepcopy(given)
        if not callable(given):
            raise TypeError(
                f"{type(self).__name__}: network must be a Network, a function that makes one, "
                f"or None (the default network), not {described(given)}"
            )
        made = built(given, outputs)
        if not isinstance(made, Network):
            raise TypeError(
                f"{type(self).__name__}: the network builder {given!r} gave "
                f"{described(made)}, not a Network"
            )
        return made

    def _default_network(self, outputs: int) -> Network:
        return default_network(outputs)

    def _check_outputs(
        self, network: Network, features: int, outputs: int, loss: Loss, classes: int
    ) -> None:
        """Refuse a network whose rows' outputs are not the `outputs` the targets ask for (a
        classifier's network of 5 outputs for 2 classes trained, then predicted classes past
        `classes_`). Where the network cannot be built for the rows, fit says why."""
        if not network.built:
            try:
                unknown = any(spec.shape is None for spec in network.input_specs)
                network.build((features,) if unknown else None)
            except ShapeError:
                return
        if network.outputs == outputs:
            return
        if isinstance(self, NetworkClassifier):
            asked = f"{classes} classes with {described(loss)}, which takes " + (
                "one output a row (the chance of the second)"
                if outputs == 1
                else f"{outputs} outputs a row (one a class)"
            )
        else:
            asked = f"targets of {outputs} value{'s' if outputs > 1 else ''} a row"
        raise ValueError(
            f"{type(self).__name__}: the network gives {network.outputs} "
            f"value{'s' if network.outputs > 1 else ''} a row, and {asked}: end it in "
            f"Dense({outputs}), or give a builder that takes outputs= (it is called with "
            f"outputs={outputs})"
        )

    # --- a run ----------------------------------------------------------------------------
    def _run(
        self,
        x: NDArray[np.float32],
        targets: NDArray[Any],
        loss: Loss,
        outputs: int,
        sample_weight: Any,
        classes: int = 0,
    ) -> dict[str, Any]:
        """Train on (x, targets), holding `validation` of the rows back for early stopping; the
        report's measures are taken on every row given. `sample_weight` (one weight a row, one
        number for every row as scikit-learn's estimators take it, or None) weighs the training
        steps' loss, as core `fit` weighs it. Returns the fitted attributes (`trained_`,
        `report_`, the engine it ran on) and sets none: `fit` sets them all once the run
        succeeded, so a fit that fails leaves the estimator as it was."""
        if isinstance(sample_weight, (bool, np.bool_)):  # was "weights of shape ()"
            raise TypeError(
                f"{type(self).__name__}.fit: sample_weight={sample_weight!r} is a bool, not a "
                "weight: give one number a row (or one number for every row), or leave it None"
            )
        if isinstance(sample_weight, (numbers.Real, np.number)):
            sample_weight = np.full(len(x), sample_weight)
        validation = self.validation
        if isinstance(validation, (bool, np.bool_)) or not isinstance(validation, numbers.Real):
            raise TypeError(
                f"{type(self).__name__}: validation is a fraction of the rows (0.15), not "
                f"{validation!r}"
            )
        validation = float(validation)  # a NumPy float32 as a Python float
        if not 0 < validation < 1:
            raise ValueError(
                f"{type(self).__name__}: validation is a fraction of the rows between 0 and 1 "
                f"(they judge each epoch for early stopping), not {validation!r}"
            )
        split = Pipeline().split(train=1 - validation, validation=validation)
        count = len(x)
        try:
            split.partition(count, np.arange(count), test=False)
        except DataError:
            raise ValueError(
                f"{type(self).__name__}: too few rows to hold {validation:g} of them back for "
                f"validation: got {count} sample{'' if count == 1 else 's'}; give more rows, or "
                "a larger validation fraction"
            ) from None
        options = self._options()
        network = self._network(outputs)
        self._check_outputs(network, x.shape[1], outputs, loss, classes)
        rows = self._named(x)
        run = fit(
            split,
            (rows, targets),
            network,
            copy.deepcopy(loss),
            copy.deepcopy(self._optimizer()),
            options,
            test_rows=(rows, targets),
            sample_weight=sample_weight,
        )
        run.report.measured_on = "rows fit was given (its training and validation rows)"
        # predict serves on the engine this run trained on, whatever set_params sets later
        return {"trained_": run.trained, "report_": run.report, "_engine_": options.engine}

    def _named(self, x: NDArray[np.float32]) -> Any:
        """The rows as core `fit` takes them: where the estimator was handed a DataFrame (its
        `feature_names_in_`), a frame of those columns, so that `trained_` reads a frame by
        its columns' names as this estimator does (it read any frame by place, a frame of
        columns in another order served silently wrong: trial S); else the array."""
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            return x
        import pandas  # (scikit-learn found names: the rows were a frame)

        return pandas.DataFrame(x, columns=list(names), copy=False)

    def _fit_all(self, fitting: Callable[[], dict[str, Any]]) -> Any:
        """Run `fitting` (it returns the fitted attributes, setting none) and set what it
        returns once it succeeded. A fit that fails (a setting refused, too few rows, a run
        that raises) leaves the estimator as it was: fitted by the earlier fit, or not fitted,
        never the new labels' `classes_` beside the earlier network (scikit-learn's
        validate_data sets `n_features_in_` as it checks: put back too)."""
        before = {name: value for name, value in vars(self).items() if _fitted_name(name)}
        try:
            fitted = fitting()
        except BaseException:
            for name in [name for name in vars(self) if _fitted_name(name)]:
                delattr(self, name)
            for name, value in before.items():
                setattr(self, name, value)
            raise
        for name, value in fitted.items():
            setattr(self, name, value)
        return self

    def _outputs(self, X: Any) -> NDArray[np.float64]:
        """What the trained network gives for the rows of X (the loss's link applied), served
        on the run's engine."""
        check_is_fitted(self)
        x = validate_data(self, X, reset=False, dtype=np.float32)
        # the engine the fit ran on (one pickled before it was kept: the parameters')
        engine = vars(self)["_engine_"] if "_engine_" in vars(self) else self._options().engine
        predictions = self.trained_.predict(x, engine)
        return predictions.astype(np.float64)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False  # one seed, one run, bit for bit
        return tags


class NetworkClassifier(ClassifierMixin, _NetworkEstimator):  # type: ignore[misc]
    """A network that predicts one class per row, for scikit-learn.

    `network`: a `Network` (copied at each fit; its slots, if it has any, are where training
    starts), a function that makes one (given `outputs=`, the number of classes, where it
    takes that parameter), or None: `Dense(32), ReLU, Dense(classes)`. `loss`: `CrossEntropy()`
    (the default) or, for two classes, `BinaryCrossEntropy()` with a network of one output.
    `optimizer`: `Adam()` unless given; its settings are the nested parameters
    `optimizer__<setting>`. `options`: the run's `FitOptions` (seed 0 and no progress bar when
    None); `epochs`, `engine` and `random_state` (the seed), where given, take the place of
    theirs. `validation`: the
    fraction of the rows held back to judge each epoch (early stopping). `fit` takes each
    row's weight in the training loss, `sample_weight` (also through a `Pipeline`:
    `fit(X, y, networkclassifier__sample_weight=w)`).

    After `fit`: `classes_` (the labels, sorted), `n_features_in_`, `trained_` (the
    `TrainedNetwork`: save it to serve it without scikit-learn) and `report_` (the run's
    report; its measures are taken on every row `fit` was given), set once the run succeeded
    (a fit that fails leaves the estimator as it was). `predict` and `predict_proba` serve on
    the engine the fit ran on: parameters set after it change the next fit alone.
    """

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> NetworkClassifier:
        """Train on the rows of X (numbers, (N, features)) and their labels y (any labels);
        `sample_weight`, where given, is each row's weight in the training loss (N numbers of 0
        or more, not all zero; one number weighs every row alike). A fit that fails leaves the
        estimator as it was before it."""
        return self._fit_all(lambda: self._fit_labels(X, y, sample_weight))  # type: ignore[no-any-return]

    def _fit_labels(self, X: Any, y: Any, sample_weight: Any) -> dict[str, Any]:
        x, labels = validate_data(self, X, y, dtype=np.float32)
        check_classification_targets(labels)
        classes, indices = np.unique(labels, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"NetworkClassifier needs rows of at least 2 classes to learn from; y holds one "
                f"class ({getattr(classes[0], 'item', lambda: classes[0])()!r})"
            )
        loss = CrossEntropy() if self.loss is None else self.loss
        if isinstance(loss, BinaryCrossEntropy):
            if len(classes) != 2:
                raise ValueError(
                    f"NetworkClassifier: BinaryCrossEntropy takes 2 classes, and y holds "
                    f"{len(classes)}; leave loss as None (CrossEntropy()) for several classes"
                )
            binary = indices.astype(np.float32)[:, None]
            return {**self._run(x, binary, loss, 1, sample_weight, 2), "classes_": classes}
        if not isinstance(loss, CrossEntropy):
            raise ValueError(
                f"NetworkClassifier trains with CrossEntropy() or BinaryCrossEntropy(), not "
                f"{described(loss)}; to predict numbers, use NetworkRegressor"
            )
        targets = indices.astype(np.int64)
        fitted = self._run(x, targets, loss, len(classes), sample_weight, len(classes))
        return {**fitted, "classes_": classes}

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Each row's chance of each class, in the order of `classes_` (shape (N, classes))."""
        chances = self._outputs(X)
        if isinstance(self.trained_.loss, BinaryCrossEntropy):
            return np.hstack([1.0 - chances, chances])
        # float32 softmax rows sum to 1 within float32's rounding (7e-8 off), which
        # np.random.choice(p=row) refuses: each row divided by its float64 sum
        return chances / chances.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]

    def predict(self, X: Any) -> NDArray[Any]:
        """Each row's likeliest class (one of `classes_`)."""
        chances = self.predict_proba(X)  # first: unfitted, it says so
        return self.classes_[np.argmax(chances, axis=1)]  # type: ignore[no-any-return]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class NetworkRegressor(RegressorMixin, _NetworkEstimator):  # type: ignore[misc]
    """A network that predicts numbers, one or several per row, for scikit-learn.

    The parameters are `NetworkClassifier`'s; the default loss is `MeanSquaredError()` and the
    default network `Dense(32), ReLU, Dense(targets)` and a `Rescaling`: it learns the targets
    standardised, each column by its own spread and mean (each weighs alike in the loss,
    whatever its units), and the Rescaling, the identity while it trains, then takes their
    spread and mean, so that `predict` (and `trained_`) give the targets' own scale; `report_`
    measures the standardised targets. Predictions are float32 numbers: targets of a small
    spread on a large offset (1e8 plus a signal of 2) keep about 7 significant digits of it;
    subtract the offset first. A network given is trained on the targets as they are, and so
    is the default network under a loss other than `MeanSquaredError` and `MeanAbsoluteError`
    (`Huber`'s delta is in the targets' units; a loss of one's own may need them as they are,
    counts for a Poisson loss): scale large or small ones (`TransformedTargetRegressor` with a
    `StandardScaler`)

    After `fit`: `n_features_in_`, `n_outputs_`, `trained_` and `report_`.
    """

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> NetworkRegressor:
        """Train on the rows of X (numbers, (N, features)) and their targets y: (N,) numbers,
        or (N, targets) for several a row; `sample_weight` as `NetworkClassifier.fit` takes it.
        A fit that fails leaves the estimator as it was before it."""
        return self._fit_all(lambda: self._fit_targets(X, y, sample_weight))  # type: ignore[no-any-return]

    def _fit_targets(self, X: Any, y: Any, sample_weight: Any) -> dict[str, Any]:
        x, targets = validate_data(self, X, y, dtype=np.float32, y_numeric=True, multi_output=True)
        loss = MeanSquaredError() if self.loss is None else self.loss
        if isinstance(loss, (BinaryCrossEntropy, CrossEntropy)):
            raise ValueError(
                f"NetworkRegressor predicts numbers, and {described(loss)} is a loss for "
                "classes: use NetworkClassifier, or leave loss as None (MeanSquaredError())"
            )
        # float64 here: fit rounds them to float32, naming a target beyond its range as given
        columns = np.asarray(targets, dtype=np.float64).reshape(len(x), -1)
        outputs = columns.shape[1]
        shape = {"n_outputs_": outputs, "_one_target_": np.ndim(targets) == 1}
        if self.network is not None or not isinstance(loss, SCALE_FREE):
            # A network given is trained as it is; so are the targets of a loss whose minimum
            # moves with their scale (trial SK6: a Poisson loss of one's own, its link exp, was
            # taken of the targets standardised and predicted 12.06 for a mean of 2.93; Huber's
            # delta was of standard deviations, not of the targets' units).
            return {**self._run(x, columns, loss, outputs, sample_weight), **shape}
        # The default network learns the targets standardised, a column at a time (each column
        # weighs alike in the loss, whatever its units, and the gradients are of a size the
        # optimizer's settings suit), then ends in a Rescaling to their spread and mean.
        loss.targets(columns, outputs)  # refused as fit refuses them (float32's range)
        spread, mean = targets_scale(columns)
        fitted = self._run(x, standardised(columns, spread, mean), loss, outputs, sample_weight)
        rescaled(fitted["trained_"].network, spread, mean)
        shown = ", ".join(f"(y - {m:.15g}) / {s:.15g}" for m, s in zip(mean, spread))
        fitted["report_"].notes.append(  # (its figures read as the targets' own: trial P2)
            f"(its losses and measures are of the targets standardised, {shown}; predict gives "
            "the targets in their own units)"
        )
        return {**fitted, **shape}

    def _default_network(self, outputs: int) -> Network:
        """`Dense(32), ReLU, Dense(targets)`, then a `Rescaling`: the identity while it trains
        on the targets standardised, their spread and mean once trained."""
        return default_network(outputs, Rescaling())

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Each row's predicted numbers: (N,) where fit was given one target a row, else
        (N, targets)."""
        predictions = self._outputs(X)
        return predictions[:, 0] if self._one_target_ else predictions

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


def _fitted_name(name: str) -> bool:
    """Whether an attribute is one a fit sets (`classes_`, `n_features_in_`, `_engine_`)."""
    return name.endswith("_") and not name.startswith("__")


def _settings(optimizer: Optimizer) -> dict[str, Any]:
    """An optimizer's settings as its constructor takes them: its config, with a schedule of
    the learning rate as the schedule itself (the config records it as a mapping, which the
    constructor refuses: a grid over another setting failed on the rate it left alone), and
    every other setting its constructor takes where the config leaves it out at its default:
    as the optimizer holds it, else that default (clipping None when off, SGD's nesterov False:
    a grid over them was refused, as settings the optimizer does not take: trial S)."""
    settings = optimizer.config()
    if isinstance(getattr(optimizer, "learning_rate", None), Schedule):
        settings["learning_rate"] = optimizer.learning_rate
    try:
        taken = inspect.signature(type(optimizer)).parameters
    except (TypeError, ValueError):  # no signature to read: the config as it is
        return settings
    for name, parameter in taken.items():
        if name in settings or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if hasattr(optimizer, name):
            settings[name] = getattr(optimizer, name)
        elif parameter.default is not parameter.empty:
            settings[name] = parameter.default
    return settings


class _Refused:
    """An optimizer `set_params` could not make (a setting it refuses), kept as it was asked:
    `fit` raises its error, as scikit-learn's estimators check their parameters there."""

    def __init__(self, kind: type[Optimizer], settings: dict[str, Any], error: Exception) -> None:
        self.kind, self.settings, self.error = kind, settings, error

    def __repr__(self) -> str:
        said = ", ".join(f"{name}={value!r}" for name, value in self.settings.items())
        return f"{self.kind.__name__}({said}) (refused: {self.error})"

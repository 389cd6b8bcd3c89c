"""Pieces of one's own — a loss, an optimizer, a schedule, a step hook — and what deepsharp
does with them where they are written short of what it needs (trial AI: each test failed
before its change)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    ConfigurationError,
    DeepSharpWarning,
    Dense,
    FitOptions,
    Layer,
    Loss,
    MeanSquaredError,
    Network,
    Optimizer,
    Schedule,
    ShapeError,
    StepHook,
    Tensor,
    TrainedNetwork,
    fit,
)
from deepsharp.core.engine import fused
from deepsharp.core.nn.losses import float_targets, weighted_mean
from deepsharp.core.nn.optimizers.base import learning_rate_setting


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 3)).astype(np.float32)
    return x, (x @ np.array([1.0, -2.0, 0.5], np.float32)).reshape(-1, 1)


def _fit(loss: Any = None, optimizer: Any = None, **extra: Any) -> Any:
    options = FitOptions(seed=1, epochs=2, batch_size=8, progress=False, **extra.pop("opts", {}))
    network = extra.pop("network", None) or Network([Dense(1)])
    return fit(None, _data(), network, loss or MeanSquaredError(),
               optimizer or Adam(0.01), options, **extra)  # fmt: skip


class Shifted(Loss):
    """Squared error whose link adds `shift`, without a config() of its own."""

    task = "regression"

    def __init__(self, shift: float = 0.0) -> None:
        self.shift = shift

    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        d = outputs - targets
        return weighted_mean(d * d, weights)

    def targets(self, targets: Any, outputs: int) -> Any:
        return float_targets(self, targets, outputs)


class Halving(Schedule):
    def rate(self, step: int) -> float:
        return 0.1 / 2 ** (step // 2)

    def config(self) -> dict[str, Any]:
        return {}


class Plain(Optimizer):
    """An optimizer of one's own as its docstring describes it: its rate read through
    `self.rate(state)`, no count of its updates of its own, no clipping settings."""

    def __init__(self, learning_rate: Any = 0.1, momentum: float = 0.0) -> None:
        self.learning_rate = learning_rate_setting("Plain", learning_rate)
        self.momentum = momentum
        self.asked: list[int] = []

    def update(self, engine: Any, slots: Any, grads: Any, state: Any) -> None:
        self.asked.append(state.steps)
        rate = self.rate(state)
        fused.decay_update(engine, grads, factor=rate)  # grads times the rate, in place
        for slot, grad in zip(slots, grads):
            engine.assign(slot, engine.sub(slot, grad))

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.rate_config(), "momentum": self.momentum}


def test_a_loss_of_one_s_own_whose_settings_no_config_records_warns_at_save(
    tmp_path: Path,
) -> None:
    """Before: Shifted(100.0) saved without a word and loaded as Shifted(), its predictions
    100 lower, silently."""
    run = _fit(Shifted(100.0))
    with pytest.warns(DeepSharpWarning, match=r"Shifted takes shift and records none of them"):
        run.trained.save(tmp_path / "shifted.safetensors")
    assert isinstance(TrainedNetwork.load(tmp_path / "shifted.safetensors").loss, Shifted)


class Times(Layer):
    def __init__(self, k: float = 3.0, name: str | None = None) -> None:
        super().__init__(name)
        self.k = k

    def forward(self, x: Tensor, slots: Any, context: Any) -> Tensor:
        return x * self.k


def test_a_layer_of_one_s_own_whose_settings_no_config_records_warns_at_save(
    tmp_path: Path,
) -> None:
    """Before (trial DX): Times(5.0) saved without a word and loaded as Times(3.0), its
    predictions other values, silently (a loss in its place warned)."""
    x, y = _data()
    run = fit(None, (x, y), Network([Times(5.0), Dense(1)]), MeanSquaredError(), Adam(0.01),
              FitOptions(seed=1, epochs=1, progress=False))  # fmt: skip
    with pytest.warns(DeepSharpWarning, match=r"the layer Times takes k and records none of th"):
        run.trained.save(tmp_path / "times.safetensors")
    with warnings.catch_warnings():  # once a kind
        warnings.simplefilter("error")
        run.trained.save(tmp_path / "again.safetensors")
        run.trained.network.save(tmp_path / "network.safetensors")


def test_an_optimizer_of_one_s_own_is_counted_so_its_schedule_moves_on() -> None:
    """Before: an optimizer that did not count its updates itself (as its docstring did not
    ask) left state.steps at 0: its schedule's rate never moved."""
    optimizer = Plain(Halving())
    _fit(optimizer=optimizer)
    assert optimizer.asked[:4] == [0, 1, 2, 3]


def test_an_estimator_tunes_an_optimizer_of_one_s_own_that_takes_no_clipping() -> None:
    """Before (a change of this round): get_params offered optimizer__clip_norm for every
    optimizer, and set_params made one whose constructor takes no clip_norm: every fit failed."""
    pytest.importorskip("sklearn")
    from deepsharp.sklearn import NetworkRegressor

    model = NetworkRegressor(optimizer=Plain(0.01), epochs=2)
    assert sorted(k for k in model.get_params() if k.startswith("optimizer__")) == [
        "optimizer__learning_rate",
        "optimizer__momentum",
    ]
    x, y = _data()
    model.set_params(optimizer__learning_rate=0.02).fit(x, y[:, 0])
    assert isinstance(model.optimizer, Plain) and model.optimizer.learning_rate == 0.02


class Counting(StepHook):
    name = "counting"

    def __init__(self) -> None:
        self.seen = np.int64(0)

    def state(self) -> dict[str, Any]:
        return {"seen": self.seen}


class NumpyConfig(Shifted):
    def config(self) -> dict[str, Any]:
        return {"shift": np.float32(self.shift)}


def test_what_a_checkpoint_cannot_hold_of_a_hook_or_a_loss_is_refused_before_a_step(
    tmp_path: Path,
) -> None:
    """Before: a step hook's NumPy state, and a loss's NumPy config(), stopped the run at its
    first checkpoint (a loss's: and its save) with json's own 'not JSON serializable'."""
    with pytest.raises(ConfigurationError, match=r"step hook 'counting' \(Counting\): .* JSON"):
        _fit(hooks=[Counting()], opts={"checkpoint_dir": tmp_path / "a"})
    with pytest.raises(ConfigurationError, match=r"loss NumpyConfig: its config\(\) must be JSON"):
        _fit(NumpyConfig(1.0), opts={"checkpoint_dir": tmp_path / "b"})
    run = _fit(Shifted(0.0))
    with pytest.raises(ConfigurationError, match=r"loss NumpyConfig"):
        TrainedNetwork(run.trained.network, NumpyConfig(1.0), run.trained.pipeline).save(
            tmp_path / "c.safetensors"
        )
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())


class Terms(Shifted):
    def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
        d = outputs - targets
        return d * d  # the mean forgotten


class DropLast(StepHook):
    def gradients(self, trainer: Any, grads: Any) -> Any:
        return list(grads)[:-1]


def test_a_loss_of_many_values_or_a_hook_of_other_gradients_is_refused_before_the_update() -> None:
    """Before: a value() of (rows, 1) raised NumPy's 'only 0-dimensional arrays can be
    converted' after the update was applied; a hook returning a gradient short raised NumPy's
    broadcast error inside the optimizer."""
    network = Network([Dense(1)])
    with pytest.raises(ShapeError, match=r"Terms: value\(\) gave \(8, 1\), where one number"):
        fit(None, _data(), network, Terms(), Adam(0.01), FitOptions(seed=1, epochs=1,
            batch_size=8, progress=False))  # fmt: skip
    with pytest.raises(
        ConfigurationError, match=r"DropLast: gradients\(\) gave 1 gradients; .* \(2,"
    ):
        _fit(hooks=[DropLast()])


def test_a_method_left_unwritten_is_named_with_what_to_write() -> None:
    """Before: a bare NotImplementedError, its message empty."""

    class NoTargets(Loss):
        def value(self, outputs: Tensor, targets: Tensor, weights: Tensor | None = None) -> Tensor:
            return weighted_mean(outputs - targets, weights)

    class NoUpdate(Optimizer):
        def config(self) -> dict[str, Any]:
            return {}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError, match=r"NoTargets: .* return float_targets"):
            _fit(NoTargets())
        with pytest.raises(NotImplementedError, match=r"NoUpdate: .* writes update\(self"):
            _fit(optimizer=NoUpdate())
    with pytest.raises(TypeError, match=r"the optimizer must be an Optimizer, not 'adam'"):
        _fit(optimizer="adam")


# --- rules, hooks, optimizers and engines of one's own that break their promises (trial XP) ---


def test_a_rule_of_one_s_own_may_not_take_the_name_of_one_of_deepsharp_s() -> None:
    """Before: registering a rule named 'tanh' replaced deepsharp's in every Tanh of the
    process, silently."""
    from deepsharp.core.autodiff.tensor import RULES, Rule, register

    built_in = RULES["tanh"]

    class MyTanh(Rule):
        name = "tanh"

    with pytest.raises(ValueError, match=r"named 'tanh', the name of deepsharp's own rule"):
        register(MyTanh)
    assert RULES["tanh"] is built_in


def _layer_of(rule_name: str) -> Layer:
    from deepsharp.core.autodiff import functions as ops
    from deepsharp.core.autodiff.tensor import RULES

    class Ruled(Layer):
        def build(self, shape: Any) -> Any:
            self.slot("s", shape, "ones")
            return shape

        def forward(self, x: Tensor, slots: Any, context: Any) -> Tensor:
            return ops.apply(RULES[rule_name], (x, slots["s"]))

    return Ruled()


def test_what_a_rule_of_one_s_own_gives_is_checked_naming_the_rule() -> None:
    """Before: a backward of one gradient for two inputs left a slot untrained, silently; a
    gradient of another shape was an IndexError deep in the engine; a forward giving a handle
    alone was 'too many values to unpack'."""
    from deepsharp.core.autodiff.tensor import Rule, register

    @register
    class ShortBack(Rule):
        name = "test_short_back"

        def forward(self, engine: Any, x: Any, s: Any) -> Any:
            return engine.mul(x, s), None

        def backward(self, engine: Any, node: Any, grad: Any) -> Any:
            return (engine.mul(grad, node.inputs[1].handle),)  # s's part forgotten

    @register
    class WrongShape(Rule):
        name = "test_wrong_shape"

        def forward(self, engine: Any, x: Any, s: Any) -> Any:
            return engine.mul(x, s), None

        def backward(self, engine: Any, node: Any, grad: Any) -> Any:
            return None, engine.sum(grad, (0, 1))  # the slot's, of shape () for (3,)

    @register
    class BareForward(Rule):
        name = "test_bare_forward"

        def forward(self, engine: Any, x: Any, s: Any) -> Any:
            return engine.mul(x, s)

    for name, error, said in [
        ("test_short_back", ValueError, r"'test_short_back': its backward gave 1 gradients for"),
        ("test_wrong_shape", ValueError, r"towards input 1 has shape \(\), and that input has"),
        ("test_bare_forward", TypeError, r"'test_bare_forward': its forward gave .*not the pair"),
    ]:
        with pytest.raises(error, match=said):
            _fit(network=Network([_layer_of(name), Dense(1)]))


def test_a_hook_s_gradients_of_another_shape_are_named_with_the_slot() -> None:
    """Before: a broadcast error of NumPy's in the optimizer's update, naming neither."""

    class Summed(StepHook):
        def gradients(self, trainer: Any, grads: Any) -> Any:
            engine = trainer.engine
            return [engine.sum(g, tuple(range(len(engine.shape(g))))) for g in grads]

    with pytest.raises(ConfigurationError, match=r"Summed: gradients\(\) gave the slot 'dense.w"):
        _fit(hooks=[Summed()])


class Rebinds(Optimizer):
    """An update that binds new values to names: it changes no slot."""

    def __init__(self, learning_rate: Any = 0.1) -> None:
        self.learning_rate = learning_rate_setting("Rebinds", learning_rate)

    def update(self, engine: Any, slots: Any, grads: Any, state: Any) -> None:
        slots = [engine.sub(s, engine.mul(g, self.rate(state))) for s, g in zip(slots, grads)]

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.rate_config()}


class Delayed(Schedule):
    """A rate of 0 for the first `hold` updates, then `initial`."""

    def __init__(self, initial: float = 0.01, hold: int = 3) -> None:
        self.initial, self.hold = initial, hold

    def rate(self, step: int) -> float:
        return 0.0 if step < self.hold else self.initial

    def config(self) -> dict[str, Any]:
        return {"initial": self.initial, "hold": self.hold}


class MyAdam(Adam):
    """Deepsharp's update, under a class of one's own."""


def test_an_optimizer_that_changes_no_slot_is_warned_of_and_one_that_does_is_not() -> None:
    """Before: the run ended as a run of skipped steps ends, and nothing was said. Not warned
    of (trial FP): a rate held at 0 for a while, deepsharp's own update in a subclass."""
    options = FitOptions(seed=1, epochs=3, batch_size=8, progress=False)
    with pytest.warns(DeepSharpWarning, match=r"Rebinds changed no slot in 10 updates at a rate"):
        fit(None, _data(), Network([Dense(1)]), MeanSquaredError(), Rebinds(), options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(optimizer=Plain(0.01))
        _fit(optimizer=Plain(Delayed(0.01, 12)))  # 10 steps at 0: its rate, not its update
        _fit(optimizer=MyAdam(Delayed(0.01, 3)))


def test_an_engine_without_an_identity_is_refused_saying_what_it_needs() -> None:
    """Before: AttributeError: 'NoneType' object has no attribute 'precision'."""
    from deepsharp.engines.light import LightEngine

    class NoIdentity(LightEngine):
        name = "noid"
        identity = None  # type: ignore[assignment]

    with pytest.raises(ConfigurationError, match=r"'noid' has no identity: a run takes its"):
        _fit(opts={"engine": NoIdentity()})


def test_rules_of_one_s_own_that_were_fine_before_the_checks_still_are() -> None:
    """Trial FP: a backward leaving off a trailing number input's gradient, a forward giving
    its pair as a list, a backward giving a generator: each ran before the checks, and was
    refused by their first form."""
    from deepsharp.core.autodiff.tensor import Rule, register

    @register
    class ScaledBy(Rule):
        name = "test_scaled_by_number"

        def forward(self, engine: Any, x: Any, s: Any) -> Any:
            return [engine.mul(x, s), None]  # a list of two

        def backward(self, engine: Any, node: Any, grad: Any) -> Any:
            return (g for g in (engine.mul(grad, node.inputs[1].handle), None))

    from deepsharp.core.autodiff import functions as ops
    from deepsharp.core.autodiff.tensor import RULES

    class Twice(Layer):
        def forward(self, x: Tensor, slots: Any, context: Any) -> Tensor:
            halved = ops.apply(RULES["test_scaled_by_number"], (x, Tensor.put(x.engine, 0.5)))
            return ops.apply(RULES["test_number_last"], (halved, 4.0))

    @register
    class NumberLast(Rule):
        name = "test_number_last"

        def forward(self, engine: Any, x: Any, k: float) -> Any:
            return engine.mul(x, k), None

        def backward(self, engine: Any, node: Any, grad: Any) -> Any:
            return (engine.mul(grad, node.inputs[1]),)  # the number's left off

    _fit(network=Network([Twice(), Dense(1)]))

"""What a compiled step's plan is keyed by, and what it may not bake in (trial C): a layer put in
an attribute in place of another, a setting of a loss the loss holds, a class's own setting,
a dict setting in another order, a list changed in place and assigned again — each read by the
next step; a branch a layer draws from the pass's generator runs as recorded; a plan captured
as one graph (whose outputs its next replay rewrites) hands a hook of one's own gradients of
its own. Each, compiled, gives the bits of the run as recorded."""

from __future__ import annotations

import collections
import copy
import functools
import gc
import sys
from typing import Any

import numpy as np
from core_helpers import titanic_shaped
from test_compiled_state import Counts, _alike, _run

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Dense,
    Dropout,
    Layer,
    LeakyRelu,
    Loss,
    Network,
    Relu,
    StepHook,
    Trainer,
)
from deepsharp.core.autodiff import functions as ops
from deepsharp.engines.light import LightEngine


class _Holds(Layer):
    """Applies the layer it holds in an attribute (no slots of its own)."""

    def __init__(self, inner: Layer, name: str | None = None) -> None:
        super().__init__(name)
        self.inner = inner

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return self.inner.forward(x, {}, context)


def test_a_layer_put_in_an_attribute_in_place_of_another_is_read_by_the_next_step() -> None:
    """Failed before: the key held the sum of the layers' counts of assignments, and putting
    LeakyRelu(0.9) in place of one whose slope was set once brought the sum back to the plan
    traced with the slope 0.3: the run trained with 0.3, silently."""

    def change(step: int, trainer: Trainer) -> None:
        holder = trainer.network.layers[1]
        if step == 2:
            holder.inner.slope = 0.3
        if step == 3:
            holder.inner = LeakyRelu(0.9)

    make = lambda: Network([Dense(8), _Holds(LeakyRelu(0.1)), Dense(1)], inputs=14)  # noqa: E731
    assert _alike(make, change) == (3, ())


class _Blend(Loss):
    """A loss of one's own wrapping a BinaryCrossEntropy it holds."""

    task = "binary"

    def __init__(self) -> None:
        self.inner = BinaryCrossEntropy()

    def value(self, outputs: Any, targets: Any, weights: Any = None) -> Any:
        return ops.mul(self.inner.value(outputs, targets, weights), 0.5)

    def targets(self, targets: Any, outputs: int) -> Any:
        return self.inner.targets(targets, outputs)

    def link(self, engine: Any, outputs: Any) -> Any:
        return self.inner.link(engine, outputs)


def test_a_setting_of_a_loss_the_loss_holds_is_read_by_the_next_step() -> None:
    """Failed before: the key read the loss's own count of assignments alone; label_smoothing
    set on the BinaryCrossEntropy a loss of one's own holds was never seen."""

    def smooth(step: int, trainer: Trainer) -> None:
        if step == 2:
            trainer.loss.inner.label_smoothing = 0.4  # type: ignore[attr-defined]

    make = lambda: Network([Dense(8), Relu(), Dense(1)], inputs=14)  # noqa: E731
    assert _alike(make, smooth, _Blend) == (2, ())


class _Scale(Layer):
    factor = 1.0  # a setting its class holds, read as self.factor

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return ops.mul(x, self.factor)


def test_a_setting_a_layer_s_class_holds_assigned_between_steps_is_read() -> None:
    """Failed before: `_Scale.factor = 5.0` between steps was baked in the plan traced with
    1.0 (the key counted assignments to objects alone)."""

    def change(step: int, trainer: Trainer) -> None:
        if step == 0:
            _Scale.factor = 1.0
        if step == 2:
            _Scale.factor = 5.0

    make = lambda: Network([Dense(8), _Scale(), Dense(1)], inputs=14)  # noqa: E731
    try:
        assert _alike(make, change) == (2, ())
    finally:
        _Scale.factor = 1.0


class _Mix(Layer):
    """Adds x times each coefficient of a dict setting, in the dict's order."""

    def __init__(self, coefficients: dict[str, float], name: str | None = None) -> None:
        super().__init__(name)
        self.coefficients = coefficients

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        out = None
        for c in self.coefficients.values():
            term = ops.mul(x, c)
            out = term if out is None else ops.add(out, term)
        return out


def test_a_dict_in_another_order_and_a_list_changed_in_place_and_assigned_are_read() -> None:
    """Failed before: a dict setting assigned with the same items in another order was no
    change (its keys compared as a set), and a list changed in place and then assigned to say
    so (`layer.c = layer.c`) was no change (the same object): both replayed the old order or
    values. A dict of a key 1 and one of a key 1.0 are two settings."""
    first = {"a": 0.1, "b": 1e8, "c": -1e8}

    def reorder(step: int, trainer: Trainer) -> None:
        if step == 2:
            trainer.network.layers[1].coefficients = {"b": 1e8, "c": -1e8, "a": 0.1}

    make = lambda: Network([Dense(8), _Mix(dict(first)), Dense(1)], inputs=14)  # noqa: E731
    compiled, recorded = _run(make, True, reorder), _run(make, False, reorder)
    assert compiled[:2] == recorded[:2]
    assert compiled[0][2] != _run(make, True)[0][2]  # the order changes this run's bits

    class _Listed(_Mix):
        def forward(self, x: Any, slots: Any, context: Any) -> Any:
            return ops.mul(x, float(sum(self.coefficients["all"])))

    def in_place(step: int, trainer: Trainer) -> None:
        layer = trainer.network.layers[1]
        if step == 2:
            layer.coefficients["all"].append(2.0)
            layer.coefficients = layer.coefficients  # assigned again: says it changed
        if step == 3:
            held = layer.coefficients
            held["all"].append(1.0)
            layer.coefficients = held

    made = lambda: Network([Dense(8), _Listed({"all": [1.0]}), Dense(1)], inputs=14)  # noqa: E731
    assert _alike(made, in_place) == (3, ())
    layer = _Mix({1: 0.5})  # type: ignore[dict-item]
    before = vars(layer)["_edits"]
    layer.coefficients = {1: 0.5}  # type: ignore[dict-item]
    assert vars(layer)["_edits"] == before  # the same setting
    layer.coefficients = {1.0: 0.5}  # type: ignore[dict-item]
    assert vars(layer)["_edits"] == before + 1


class _MaybeSkips(Layer):
    """Stochastic depth: its block skipped on a draw from the pass's generator."""

    def build(self, shape: Any) -> Any:
        return self.sublayer("block", Dense(8), shape)

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        if context.training and context.generator is not None:
            if context.generator.uniform(1)[0] < 0.5:
                return x
        return ops.add(x, self.call("block", x, slots, context))


def test_a_branch_drawn_from_the_pass_s_generator_runs_as_recorded_and_says_why() -> None:
    """Failed before: the plan replayed the traced step's branch on every step (the draw was
    on the host, out of the plan's sight), and said nothing."""
    make = lambda: Network([Dense(8), Relu(), _MaybeSkips(), Dense(1)], inputs=14)  # noqa: E731
    made, why = _alike(make)
    assert made == 0
    assert any("drew from a random generator" in line for line in why)


class _Graphs(LightEngine):
    """The light engine capturing a plan as a graph does on a card: its outputs are the
    graph's own, rewritten by each replay (the torch engine's CUDA graphs)."""

    graphs = True

    def graph_plan(self, plan: Any, inputs: Any) -> Any:
        held: list[Any] = []

        def replay(*given: Any) -> Any:
            loss, grads = plan(*given)
            if not held:
                held.extend([self.copy(loss), [self.copy(g) for g in grads]])
            else:
                self.assign(held[0], loss)
                for mine, grad in zip(held[1], grads):
                    self.assign(mine, grad)
            return held[0], held[1]

        return replay


class _KeepsLast(StepHook):
    """A hook of one's own that keeps a step's gradients for the next (as a gradient average
    or a noise-scale estimate does) and reads the last step's at each."""

    def __init__(self) -> None:
        self.kept: list[Any] | None = None
        self.seen: list[bytes] = []

    def gradients(self, trainer: Any, grads: Any) -> Any:
        if self.kept is not None:
            self.seen.append(b"".join(trainer.engine.get(g).tobytes() for g in self.kept))
        self.kept = list(grads)
        return grads


def test_a_graphed_plan_hands_a_hook_of_one_s_own_gradients_of_its_own() -> None:
    """Failed before: a plan captured as one graph handed back the graph's own gradients, and
    a hook that kept them saw them rewritten by the next replay."""
    rows, targets = titanic_shaped()
    seen = []
    for engine in (_Graphs(), LightEngine()):
        hook = _KeepsLast()
        network = Network([Dense(8), Relu(), Dense(1)], inputs=14)
        with Trainer(network, BinaryCrossEntropy(), Adam(0.05), engine=engine, seed=0) as trainer:
            trainer.hooks.append(hook)
            for step in range(5):
                trainer.step(rows * (1 + step), targets)
            assert trainer.compiled.replayed == 4
        seen.append(hook.seen)
    assert seen[0] == seen[1]
    assert len(set(seen[0])) == 4
    assert np.isfinite(np.frombuffer(seen[0][0], np.float32)).all()


def test_a_class_setting_of_an_installed_layer_package_and_odd_class_values_are_read(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """Failed before (a review): a layer class of a package installed under site-packages was
    no class of one's own until a snapshot had named its package, so the first step's key left
    its class settings out, and `factor = 5.0` assigned later was never read; a class value
    that raises on any look (a lazy proxy), or a Decimal('sNaN'), made every step raise."""
    from decimal import Decimal

    site = tmp_path / "site-packages" / "mylayers"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(
        "from deepsharp.core import Layer\n"
        "from deepsharp.core.autodiff import functions as ops\n"
        "class Proxy:\n"
        "    def __getattribute__(self, name):\n"
        "        raise RuntimeError('no look')\n"
        "class Scale(Layer):\n"
        "    factor = 1.0\n"
        "    odd = None\n"
        "    def forward(self, x, slots, context):\n"
        "        return ops.mul(x, self.factor)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    import mylayers

    mylayers.Scale.lazy = mylayers.Proxy()
    mylayers.Scale.odd = Decimal("sNaN")

    def change(step: int, trainer: Trainer) -> None:
        mylayers.Scale.factor = 5.0 if step >= 2 else 1.0

    make = lambda: Network([Dense(8), mylayers.Scale(), Dense(1)], inputs=14)  # noqa: E731
    try:
        assert _alike(make, change) == (2, ())
    finally:  # nothing left that raises on a look (a later test walks gc's objects: a review)
        del mylayers.Scale.lazy, mylayers.Scale.odd
        sys.modules.pop("mylayers", None)
        gc.collect()


def test_a_setting_deleted_between_steps_is_read_by_the_next_step() -> None:
    """Failed before (a review): `del layer.factor` (its class's default read in its place)
    counted no change, and the plan traced with the deleted value was replayed."""

    def forget(step: int, trainer: Trainer) -> None:
        layer = trainer.network.layers[1]
        if step == 0:
            layer.factor = 3.0
        if step == 2:
            del layer.factor

    make = lambda: Network([Dense(8), _Scale(), Dense(1)], inputs=14)  # noqa: E731
    assert _alike(make, forget) == (2, ())  # the first trace read 3.0; the deletion, 1.0


# --- trial C2 ------------------------------------------------------------------------------------


class _Block:
    """A callable helper of one's own holding a Dropout."""

    def __init__(self) -> None:
        self.drop = Dropout(0.5)

    def __call__(self, x: Any, slots: Any, context: Any) -> Any:
        return self.drop.forward(x, slots, context)


class _UsesBlock(Layer):
    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.block = _Block()
        self.through = functools.partial(self.block.drop.forward)  # (a partial reaches it too)

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return self.block(x, slots, context)


class _CountsInAList(Layer):
    """Holds a counting layer in a collections.UserList (of one's own: not a list)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.held = collections.UserList([Counts()])

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return self.held[0].forward(x, slots, context)


class _Peeks(Layer):
    """Picks a branch from a copy of the pass's generator."""

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        if context.training and copy.copy(context.generator).uniform(1)[0] < 0.5:
            return ops.mul(x, 0.0)
        return x


class _Options:
    scale = 1.0


class _Configured(Layer):
    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.options = _Options()
        self.sign = 0.0

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return ops.add(ops.mul(x, self.options.scale), self.sign)


def test_what_a_second_trial_found_a_plan_baked_in() -> None:
    """Failed before (trial C2): a Dropout reached through a callable helper (or a partial), a
    counting layer in a UserList, a branch from a copy of the pass's generator, an object of
    one's own changed and assigned again, a setting from 0.0 to -0.0: each replayed the traced
    step's, silently."""

    def stop_dropping(step: int, trainer: Trainer) -> None:
        if step == 2:
            trainer.network.layers[1].block.drop.rate = 0.0

    assert (
        _alike(lambda: Network([Dense(8), _UsesBlock(), Dense(1)], inputs=14), stop_dropping)[0]
        == 2
    )
    made, why = _alike(lambda: Network([Dense(8), _CountsInAList(), Dense(1)], inputs=14))
    assert made == 0 and why
    made, why = _alike(lambda: Network([Dense(8), _Peeks(), Dense(1)], inputs=14))
    assert made == 0 and any("or a copy of it" in line for line in why)

    def reconfigure(step: int, trainer: Trainer) -> None:
        layer = trainer.network.layers[1]
        if step == 2:
            layer.options.scale = 3.0
            layer.options = layer.options  # assigned again, as the guide says
        if step == 3:
            layer.sign = -0.0

    assert (
        _alike(lambda: Network([Dense(8), _Configured(), Dense(1)], inputs=14), reconfigure)[0] == 3
    )

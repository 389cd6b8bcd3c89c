"""Recurrent layers: LSTM and GRU over sequences (N, L, D), their way back checked by nudging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.contracts.reference import Float64Engine
from deepsharp.core import (
    GRU,
    LSTM,
    Adam,
    BinaryCrossEntropy,
    Dense,
    Input,
    Layer,
    MeanSquaredError,
    Network,
    ShapeError,
    Tensor,
    Trainer,
)
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Recording
from deepsharp.core.engine import Engine
from deepsharp.core.nn.layer import Pass
from deepsharp.core.random import Generator

Arrays = dict[str, np.ndarray]
KINDS = [LSTM, GRU]


def _values(layer: Layer, rows: np.ndarray, seed: int) -> Arrays:
    """Slot values for `layer` built for these rows, drawn as a run draws them."""
    layer.built_for(rows.shape[1:])
    generator = Generator(seed)
    return {name: spec.initial(generator).astype(np.float64) for name, spec in layer.specs.items()}


def _loss(layer: Layer, engine: Engine, values: Arrays, rows: np.ndarray, aim: np.ndarray) -> Any:
    """sum(layer(rows) * aim) on `engine`, recorded towards the slots and the rows."""
    slots = {name: Tensor.put(engine, value) for name, value in values.items()}
    given = Tensor.put(engine, rows)
    wanted = [*slots.values(), given]
    with Recording(wanted) as recording:
        out = layer.forward(given, slots, Pass(engine, True, None))
        total = ops.sum(out * Tensor.put(engine, aim))
        grads = recording.gradients(total, wanted)
    return float(engine.get(total.handle)), [np.asarray(engine.get(g)) for g in grads]


def _worst_nudge_error(layer: Layer, values: Arrays, rows: np.ndarray) -> float:
    """The largest |way back - nudged| / (1e-7 + 1e-5 |nudged|) over every slot value and row
    value, on the float64 reference (central differences, step 1e-6): at most 1 for a right
    way back."""
    engine = Float64Engine()
    aim = np.random.default_rng(7).standard_normal((rows.shape[0], *(layer.output_shape or ())))
    _, by_rule = _loss(layer, engine, values, rows, aim)
    inputs = [*values.values(), rows]
    worst = 0.0
    for index, (value, got) in enumerate(zip(inputs, by_rule, strict=True)):
        for place in np.ndindex(value.shape):
            moved = []
            for step in (1e-6, -1e-6):
                nudged = [v.copy() for v in inputs]
                nudged[index][place] += step
                named = dict(zip(values, nudged[:-1], strict=True))
                moved.append(_loss(layer, engine, named, nudged[-1], aim)[0])
            nudge = (moved[0] - moved[1]) / 2e-6
            worst = max(worst, abs(float(got[place]) - nudge) / (1e-7 + 1e-5 * abs(nudge)))
    return worst


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
@pytest.mark.parametrize("sequences", [False, True], ids=["last", "sequences"])
def test_the_way_back_through_every_slot_and_position_agrees_with_nudging(
    kind: type[LSTM] | type[GRU], sequences: bool
) -> None:
    rows = np.random.default_rng(3).standard_normal((2, 3, 2))
    layer = kind(2, return_sequences=sequences)
    values = _values(layer, rows, 4)
    assert _worst_nudge_error(layer, values, rows) <= 1.0


def test_a_planted_wrong_gate_is_caught_by_the_nudging() -> None:
    """The check can fail: an LSTM whose output is squared, its way back told it is multiplied
    by a constant (half the gradient it should send)."""

    class Squared(LSTM):
        def forward(self, x: Tensor, slots: Any, context: Pass) -> Tensor:
            out = super().forward(x, slots, context)
            return out * ops.detached(out)

    rows = np.random.default_rng(3).standard_normal((2, 3, 2))
    layer = Squared(2)
    assert _worst_nudge_error(layer, _values(layer, rows, 4), rows) > 1.0


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_slots_have_pytorch_s_shapes_and_the_output_its_shape(kind: type[LSTM]) -> None:
    gates = 4 if kind is LSTM else 3
    last = Network([kind(5)], inputs=(7, 3))
    every = Network([kind(5, return_sequences=True, name="seq")], inputs=(7, 3))
    name = kind.kind.lower()
    assert {n: s.shape for n, s in last.specs.items()} == {
        f"{name}.weight_ih": (gates * 5, 3),
        f"{name}.weight_hh": (gates * 5, 5),
        f"{name}.bias_ih": (gates * 5,),
        f"{name}.bias_hh": (gates * 5,),
    }
    assert last.output_shape == (5,) and every.output_shape == (7, 5)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_first_values_are_pytorch_s_unless_an_initialiser_is_named(kind: type[LSTM]) -> None:
    network = Network([kind(16)], inputs=(4, 3))
    network.initialize(Generator(0))
    for value in network.slots.values():
        assert np.abs(value).max() <= 0.25 and np.abs(value).max() > 0.2  # ±1/sqrt(16)
    named = Network([kind(16, init="glorot_uniform")], inputs=(4, 3))
    named.initialize(Generator(0))
    slots = named.slots
    name = kind.kind.lower()
    assert not slots[f"{name}.bias_ih"].any() and not slots[f"{name}.bias_hh"].any()
    assert np.abs(slots[f"{name}.weight_ih"]).max() > 0.25


@pytest.mark.parametrize(
    ("shape", "said"),
    [(5, r"rows of shape \(5,\)"), ((2, 3, 4), r"rows of shape \(2, 3, 4\)")],
)
@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_a_sequence_of_the_wrong_rank_is_refused_naming_the_layer(
    kind: type[LSTM], shape: Any, said: str
) -> None:
    with pytest.raises(ShapeError, match=rf"layer '{kind.kind.lower()}' .*takes sequences "):
        Network([kind(4)], inputs=shape)
    with pytest.raises(ShapeError, match=said):
        kind(4)(Input(shape))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: LSTM(0), "LSTM: units must be a positive whole number, not 0"),
        (lambda: GRU(2.5), "GRU: units must be a positive whole number, not 2.5"),
        (lambda: LSTM(4, return_sequences=1), "return_sequences is True or False, not 1"),
        (lambda: GRU(4, init="glorot"), None),
        (lambda: LSTM(4, init="orthogonal"), "LSTM: no initialiser 'orthogonal'"),
    ],
)
def test_arguments_are_checked_where_the_layer_is_made(make: Any, said: str | None) -> None:
    if said is None:
        make()  # an alias of glorot_uniform
        return
    with pytest.raises(ValueError, match=said):
        make()


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_a_saved_recurrent_network_loads_and_predicts_the_same_bits(
    kind: type[LSTM], tmp_path: Path
) -> None:
    network = Network([kind(6, return_sequences=True), kind(3), Dense(1)], inputs=(5, 2))
    network.initialize(Generator(1))
    network.save(tmp_path / "n.safetensors")
    again = Network.load(tmp_path / "n.safetensors")
    assert repr(again) == repr(network)
    rows = np.random.default_rng(2).standard_normal((40, 5, 2)).astype(np.float32)
    loss = MeanSquaredError()
    assert again.predict(rows, loss).tobytes() == network.predict(rows, loss).tobytes()


def _remembering(seed: int, count: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Sequences whose answer is the sign of their first value, under noise that follows it:
    a layer must carry it through every later position."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((count, 8, 2)).astype(np.float32)
    return rows, (rows[:, 0, :1] > 0).astype(np.float32)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_a_recurrent_layer_learns_to_carry_its_first_position_to_the_end(
    kind: type[LSTM],
) -> None:
    rows, aims = _remembering(5)
    network = Network([kind(8), Dense(1)], inputs=(8, 2))
    with Trainer(network, BinaryCrossEntropy(), Adam(0.01), seed=6) as trainer:
        for _ in range(150):
            trainer.step(rows, aims)
    tests, answers = _remembering(7)
    chances = network.predict(tests, BinaryCrossEntropy())
    assert ((chances > 0.5) == (answers > 0.5)).mean() > 0.95

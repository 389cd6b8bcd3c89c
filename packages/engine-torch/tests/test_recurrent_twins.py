"""LSTM and GRU take their weights from torch.nn.LSTM and torch.nn.GRU (batch_first, one layer)
and give their outputs and gradients, on every CPU engine, within the engine precision's
tolerance of the PyTorch twin run in float64; and they keep the layer harness's promises on the
torch engine at every precision (on a card too, where one is usable)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deepsharp.core import GRU, LSTM, Layer, Tensor, make_engine  # noqa: E402
from deepsharp.core.autodiff import functions as ops  # noqa: E402
from deepsharp.core.autodiff.tensor import Recording  # noqa: E402
from deepsharp.core.nn.layer import Pass  # noqa: E402
from deepsharp.core.nn.testing import check_layer  # noqa: E402

SLOTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
ENGINES = ("light", "light:float32", "torch:cpu", "torch:cpu:strict") + (
    ("torch:cuda:0", "torch:cuda:0:strict") if torch.cuda.is_available() else ()
)
TOLERANCE = 1e-5
"""Relative to the twin's float64 values (the largest of them, or 1): strict and float32 alike."""

TWINS = {LSTM: torch.nn.LSTM, GRU: torch.nn.GRU}


def _twin(kind: type[Layer], rows: np.ndarray, units: int, sequences: bool, aim_seed: int) -> Any:
    """The PyTorch twin in float64: its slots, its output and its gradients towards its slots
    and the rows, for the loss sum(output * aim)."""
    torch.manual_seed(aim_seed)
    twin = TWINS[kind](rows.shape[2], units, batch_first=True).double()
    given = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
    every, _ = twin(given)
    out = every if sequences else every[:, -1]
    aim = np.random.default_rng(aim_seed).standard_normal(tuple(out.shape))
    (out * torch.tensor(aim)).sum().backward()
    slots = {name: getattr(twin, f"{name}_l0").detach().numpy().copy() for name in SLOTS}
    grads = [getattr(twin, f"{name}_l0").grad.numpy() for name in SLOTS] + [given.grad.numpy()]
    return slots, out.detach().numpy(), aim, grads


def _ours(
    layer: Layer, spec: str, slots: dict[str, np.ndarray], rows: np.ndarray, aim: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    engine = make_engine(spec)
    layer.built_for(rows.shape[1:])
    tensors = {name: Tensor.put(engine, value.astype(np.float32)) for name, value in slots.items()}
    given = Tensor.put(engine, rows.astype(np.float32))
    wanted = [*(tensors[name] for name in SLOTS), given]
    with Recording(wanted) as recording:
        out = layer.forward(given, tensors, Pass(engine, True, None))
        total = ops.sum(out * Tensor.put(engine, aim.astype(np.float32)))
        grads = recording.gradients(total, wanted)
    return np.asarray(engine.get(out.handle)), [np.asarray(engine.get(g)) for g in grads]


def _off(got: np.ndarray, want: np.ndarray) -> float:
    """How far got lies from want, relative to want's largest value (or 1)."""
    return float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("spec", ENGINES)
@pytest.mark.parametrize("sequences", [False, True], ids=["last", "sequences"])
@pytest.mark.parametrize("kind", [LSTM, GRU], ids=lambda kind: kind.kind)
def test_weights_from_pytorch_give_pytorch_s_outputs_and_gradients(
    kind: type[Layer], sequences: bool, spec: str
) -> None:
    rows = np.random.default_rng(11).standard_normal((6, 12, 5))
    slots, want, aim, want_grads = _twin(kind, rows, 7, sequences, 12)
    got, grads = _ours(kind(7, return_sequences=sequences), spec, slots, rows, aim)  # type: ignore[call-arg]
    assert got.shape == want.shape
    assert _off(got, want) <= TOLERANCE
    for name, mine, theirs in zip((*SLOTS, "rows"), grads, want_grads, strict=True):
        assert mine.shape == theirs.shape, name
        assert _off(mine, theirs) <= TOLERANCE, (name, _off(mine, theirs))


def test_a_planted_swap_of_two_gates_is_caught() -> None:
    """The comparison can fail: PyTorch's LSTM weights with the rows of f and g swapped."""
    rows = np.random.default_rng(11).standard_normal((6, 12, 5))
    slots, want, aim, _ = _twin(LSTM, rows, 7, False, 12)
    swapped = {}
    for name, value in slots.items():
        i, f, g, o = np.split(value, 4)
        swapped[name] = np.concatenate([i, g, f, o])
    got, _ = _ours(LSTM(7), "light", swapped, rows, aim)
    assert _off(got, want) > 100 * TOLERANCE


@pytest.mark.parametrize("sequences", [False, True], ids=["last", "sequences"])
@pytest.mark.parametrize("kind", [LSTM, GRU], ids=lambda kind: kind.kind)
def test_the_layer_harness_holds_on_the_torch_engine(kind: type[Layer], sequences: bool) -> None:
    engines = ["torch:cpu", "torch:cpu:strict", "torch:cpu:mixed_bfloat16"]
    if torch.cuda.is_available():
        engines += ["torch:cuda:0", "torch:cuda:0:mixed_float16", "torch:cuda:0:mixed_bfloat16"]
    found = check_layer(kind(3, return_sequences=sequences), (4, 2), engines=engines)  # type: ignore[call-arg]
    assert found.nudge_ratio <= 1.0 and set(found.engine_ratios) == set(engines)


RUNS = [(0, 12), (0, 5), (7, 5), (3, 9), (0, 1), (11, 1)]
"""Each row's tokens (start, count) among its 12 places: padded at its end, at its start, at
both, or not at all."""


def _masked_twin(kind: type[Layer], rows: np.ndarray, units: int) -> Any:
    """The PyTorch twin in float64 run on each row's tokens alone: its last state is what the
    padded row's must be, and the padding's places get no gradient."""
    torch.manual_seed(5)
    twin = TWINS[kind](rows.shape[2], units, batch_first=True).double()
    given = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
    last = torch.stack(
        [twin(given[n : n + 1, s : s + c])[0][0, -1] for n, (s, c) in enumerate(RUNS)]
    )
    aim = np.random.default_rng(6).standard_normal(tuple(last.shape))
    (last * torch.tensor(aim)).sum().backward()
    slots = {name: getattr(twin, f"{name}_l0").detach().numpy().copy() for name in SLOTS}
    grads = [getattr(twin, f"{name}_l0").grad.numpy() for name in SLOTS] + [given.grad.numpy()]
    return slots, last.detach().numpy(), aim, grads


@pytest.mark.parametrize("spec", (*ENGINES, "torch:cpu:mixed_bfloat16"))
@pytest.mark.parametrize("kind", [LSTM, GRU], ids=lambda kind: kind.kind)
def test_a_padded_row_s_last_state_is_its_tokens_alone(kind: type[Layer], spec: str) -> None:
    """Failed before (trial RN): the layers read the padding an Embedding's mask marks as
    tokens. Now each row's last state and gradients are those of its tokens alone, as
    PyTorch's twin run on them gives (what pack_padded_sequence does for rows padded at their
    end): on torch:cpu in oneDNN's kernel over each row turned to start at its tokens."""
    rows = np.random.default_rng(4).standard_normal((len(RUNS), 12, 3))
    mask = np.zeros((len(RUNS), 12), np.float32)
    for n, (start, count) in enumerate(RUNS):
        mask[n, start : start + count] = 1
    slots, want, aim, want_grads = _masked_twin(kind, rows, 4)
    engine = make_engine(spec)
    layer = kind(4)
    layer.built_for(rows.shape[1:])
    tensors = {name: Tensor.put(engine, value.astype(np.float32)) for name, value in slots.items()}
    given = Tensor.put(engine, rows.astype(np.float32))
    given.mask = Tensor.put(engine, mask)
    wanted = [*(tensors[name] for name in SLOTS), given]
    with Recording(wanted) as recording:
        out = layer.forward(given, tensors, Pass(engine, True, None))
        total = ops.sum(out * Tensor.put(engine, aim.astype(np.float32)))
        grads = recording.gradients(total, wanted)
    tolerance = 2e-2 if "mixed" in spec else TOLERANCE
    assert _off(np.asarray(engine.get(out.handle)), want) <= tolerance
    for name, mine, theirs in zip((*SLOTS, "rows"), grads, want_grads, strict=True):
        assert _off(np.asarray(engine.get(mine)), theirs) <= tolerance, name


def _both_last(kind: type[Layer], out: Any, h: Any) -> Any:
    """A bidirectional PyTorch twin's last states, forward's then reverse's: (N, 2·units)."""
    last = h[0] if kind is LSTM else h
    return torch.cat([last[0], last[1]], -1)


@pytest.mark.parametrize("spec", ("light", "light:float32", "torch:cpu", "torch:cpu:strict"))
@pytest.mark.parametrize("masked", [False, True], ids=["whole", "padded"])
@pytest.mark.parametrize("kind", [LSTM, GRU], ids=lambda kind: kind.kind)
def test_both_directions_are_pytorch_s_bidirectional_layer(
    kind: type[Layer], masked: bool, spec: str
) -> None:
    """`bidirectional=True` takes nn.LSTM(bidirectional=True)'s weights (the `_reverse` ones
    too) and gives its h_n, both directions side by side; over padded rows, what the twin gives
    each row's tokens alone (the reverse direction starts at a row's last token)."""
    rows = np.random.default_rng(8).standard_normal((len(RUNS), 12, 3))
    torch.manual_seed(9)
    twin = TWINS[kind](3, 4, batch_first=True, bidirectional=True).double()
    given = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
    runs = RUNS if masked else [(0, 12)] * len(RUNS)
    last = torch.cat(
        [_both_last(kind, *twin(given[n : n + 1, s : s + c])) for n, (s, c) in enumerate(runs)]
    )
    aim = np.random.default_rng(10).standard_normal(tuple(last.shape))
    (last * torch.tensor(aim)).sum().backward()
    names = [*SLOTS, *(f"{name}_reverse" for name in SLOTS)]
    slots = {
        name: getattr(
            twin, name.replace("_reverse", "_l0_reverse") if "reverse" in name else f"{name}_l0"
        )
        for name in names
    }
    engine = make_engine(spec)
    layer = kind(4, bidirectional=True)
    layer.built_for(rows.shape[1:])
    tensors = {
        n: Tensor.put(engine, v.detach().numpy().astype(np.float32)) for n, v in slots.items()
    }
    x = Tensor.put(engine, rows.astype(np.float32))
    if masked:
        mask = np.zeros((len(RUNS), 12), np.float32)
        for n, (start, count) in enumerate(RUNS):
            mask[n, start : start + count] = 1
        x.mask = Tensor.put(engine, mask)
    wanted = [*(tensors[name] for name in names), x]
    with Recording(wanted) as recording:
        out = layer.forward(x, tensors, Pass(engine, True, None))
        total = ops.sum(out * Tensor.put(engine, aim.astype(np.float32)))
        grads = recording.gradients(total, wanted)
    assert _off(np.asarray(engine.get(out.handle)), last.detach().numpy()) <= TOLERANCE
    theirs = [slots[name].grad.numpy() for name in names] + [given.grad.numpy()]
    for name, mine, want in zip((*names, "rows"), grads, theirs, strict=True):
        assert _off(np.asarray(engine.get(mine)), want) <= TOLERANCE, name

"""The torch engine's fast paths give what their references in primitives give, at each
precision, and the engine offers each with the reference's signature."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "tests"))

from engine_helpers import PrimitivesOnly, offers, trains_alike  # noqa: E402

from deepsharp.core import Adam, AdamW  # noqa: E402
from deepsharp.core.engine import fused  # noqa: E402
from deepsharp.engines.torch import TorchEngine  # noqa: E402

OFFERED = {"conv2d_bias", "conv2d_weight_bias_grad", "relu_back", "matmul_bias"}
OFFERED |= {"sgd_update", "adam_update", "decay_update"}
OFFERED |= {"batch_matmul", "add_rows", "erf", "maxpool2d_pair", "maxpool2d_pair_back"}
OFFERED |= {"put_checked"}  # a step's batch: copied and checked in libtorch
OFFERED |= {"lstm_cell", "lstm_cell_back"}  # an LSTM position: a few libtorch calls at float32
OFFERED |= {"layer_norm", "layer_norm_back"}  # LayerNorm each way: libtorch's kernels
OFFERED |= {"gelu", "gelu_back"}  # GELU each way: libtorch's kernels, padded to whole vector passes
OFFERED |= {"binary_cross_entropy_terms"}  # softplus(z) - z·y: three libtorch calls for seven


@pytest.fixture(scope="module", params=["float32", "strict"])
def engine(request: pytest.FixtureRequest) -> TorchEngine:
    return TorchEngine.on_cpu(request.param)


SEQUENCE = {"lstm_sequence", "lstm_sequence_back"}
SEQUENCE |= {"lstm_masked_sequence", "lstm_masked_sequence_back"}  # turned to each row's tokens
"""oneDNN's LSTM over a whole sequence: offered at float32 on the processor only."""


def test_it_offers_its_fast_paths_with_the_references_signatures(engine: TorchEngine) -> None:
    offered = OFFERED | (SEQUENCE if engine.precision == "float32" else set())
    for name, reference in fused.FAST_PATHS.items():
        assert offers(engine, name) == (name in offered), name
        if name in offered:
            wanted = list(inspect.signature(reference).parameters.values())[1:]
            own = list(inspect.signature(getattr(engine, name)).parameters.values())
            assert [(p.name, p.kind) for p in own] == [(p.name, p.kind) for p in wanted]


def _pair(engine: TorchEngine, name: str, *args: Any, **kw: Any) -> tuple[Any, Any]:
    handles = [engine.put(a) if isinstance(a, np.ndarray) else a for a in args]
    return getattr(fused, name)(engine, *handles, **kw), fused.FAST_PATHS[name](
        engine, *handles, **kw
    )


def _close(engine: TorchEngine, own: Any, reference: Any, terms: int) -> None:
    got, want = engine.get(own).astype(np.float64), engine.get(reference).astype(np.float64)
    factor = 4.0 if engine.precision == "strict" else 2 * terms + 2.0
    assert got.shape == want.shape
    assert (np.abs(got - want) <= factor * 2.0**-24 * np.abs(want) + 1e-6).all()


@pytest.mark.parametrize("stride, padding", [(1, ((1, 1), (1, 1))), (2, ((0, 1), (1, 0)))])
def test_convolution_fast_paths(engine: TorchEngine, stride: int, padding: Any) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    own, reference = _pair(engine, "conv2d_bias", x, w, bias, stride, padding)
    _close(engine, own, reference, 19)
    gy = rng.standard_normal(tuple(own.shape)).astype(np.float32)
    own_pair, reference_pair = _pair(
        engine, "conv2d_weight_bias_grad", x, gy, (3, 3), stride, padding
    )
    for got, want in zip(own_pair, reference_pair, strict=True):
        _close(engine, got, want, 3 * gy.shape[2] * gy.shape[3])


def test_relu_back(engine: TorchEngine) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    x[0, :3] = 0.0
    own, reference = _pair(engine, "relu_back", x, rng.standard_normal((5, 7)).astype(np.float32))
    assert engine.get(own).tobytes() == engine.get(reference).tobytes()


def test_binary_cross_entropy_terms_are_softplus_less_the_product_within_the_value_tolerance(
    engine: TorchEngine,
) -> None:
    rng = np.random.default_rng(4)
    z = np.asarray(rng.standard_normal((64, 3)) * 30, np.float32)
    y = np.asarray(rng.choice([0.0, 1.0, 0.05, 0.95], (64, 3)), np.float32)
    own, reference = _pair(engine, "binary_cross_entropy_terms", z, y)
    exact = np.maximum(z, 0.0) - z.astype(np.float64) * y + np.log1p(np.exp(-np.abs(z)))
    for got in (engine.get(own), engine.get(reference)):
        assert got.dtype == np.float32
        assert (np.abs(got - exact) <= 1e-5 + 1.3e-6 * np.abs(exact)).all()
    logits, targets = torch.from_numpy(z), torch.from_numpy(y)
    want = torch.nn.functional.softplus(logits) - logits * targets
    assert engine.get(own).tobytes() == want.numpy().tobytes()
    # a target that is not a tensor of the logits' shape and type: the reference's calls
    half, reference = _pair(engine, "binary_cross_entropy_terms", z, 0.5)
    assert engine.get(half).tobytes() == engine.get(reference).tobytes()


def test_a_mixed_precision_s_binary_cross_entropy_terms_take_half_logits_widened() -> None:
    engine = TorchEngine.on_cpu("mixed_bfloat16")
    z = torch.tensor([[-3.0], [0.5], [7.0]], dtype=torch.bfloat16)
    y = torch.tensor([[0.0], [1.0], [1.0]])
    got = engine.get(fused.binary_cross_entropy_terms(engine, z, y))
    wide = fused.FAST_PATHS["binary_cross_entropy_terms"](engine, z.float(), y)
    assert got.dtype == np.float32
    assert np.allclose(got, engine.get(wide), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("optimizer", [Adam(0.01), AdamW(0.01, 0.1)])
def test_its_fast_paths_train_as_its_primitives_alone(engine: TorchEngine, optimizer: Any) -> None:
    trains_alike(engine, PrimitivesOnly(engine), optimizer)


@pytest.mark.parametrize("first", [True, False], ids=["first-position", "later"])
def test_an_lstm_position_is_libtorch_s_own_at_float32_and_the_reference_elsewhere(
    engine: TorchEngine, first: bool
) -> None:
    """At float32 a few fused libtorch calls within float32's reach of the reference; at strict
    the reference itself, to the bit (its totals are the strict engine's)."""
    rng = np.random.default_rng(3)
    rows, units = 5, 4
    shaped = [(rows, 4 * units), (rows, units), (rows, units), (4 * units, units)]
    share, state, cell, weights = (rng.standard_normal(s).astype(np.float32) for s in shaped)
    given = [share, None if first else state, None if first else cell, weights]
    forward = _pair(engine, "lstm_cell", *given)
    dh, dc = rng.standard_normal((2, rows, units)).astype(np.float32)
    saved = forward[1][2:]  # the reference's gates and tanh(c)
    back = _pair(engine, "lstm_cell_back", dh, None if first else dc, *saved, given[2])
    for own, reference in (*zip(*forward, strict=True), *zip(*back, strict=True)):
        assert (own is None) == (reference is None)
        if own is None:
            continue
        if engine.precision == "strict":
            assert engine.get(own).tobytes() == engine.get(reference).tobytes()
        else:
            _close(engine, own, reference, 4 * units)


def test_a_position_s_layer_norm_is_the_same_bits_alone_and_in_company(engine: TorchEngine) -> None:
    """Each position is normalised on its own: its output and its gradient are the same bits
    whatever positions share its call (a row served alone is answered as in a batch)."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((300, 40)) * 3 + 1).astype(np.float32)
    grad = rng.standard_normal((300, 40)).astype(np.float32)
    scale, shift = (rng.standard_normal(40).astype(np.float32) for _ in range(2))
    s, b = engine.put(scale), engine.put(shift)
    every = engine.get(engine.layer_norm(engine.put(x), s, b, 1e-5))
    back = engine.get(engine.layer_norm_back(engine.put(x), s, engine.put(grad), 1e-5)[0])
    for start, count in ((0, 1), (7, 3), (100, 150)):
        rows = slice(start, start + count)
        alone = engine.get(engine.layer_norm(engine.put(x[rows]), s, b, 1e-5))
        assert alone.tobytes() == every[rows].tobytes(), (start, count)
        alone = engine.get(
            engine.layer_norm_back(engine.put(x[rows]), s, engine.put(grad[rows]), 1e-5)[0]
        )
        assert alone.tobytes() == back[rows].tobytes(), (start, count)


@pytest.mark.parametrize("shape", [(32, 14, 16), (64, 2_048, 10), (2_048, 128, 384), (5, 7, 1)])
def test_a_dense_layer_s_product_and_bias_in_one_call_is_the_reference_s_total(
    engine: TorchEngine, shape: tuple[int, int, int]
) -> None:
    """addmm at float32 (the bias one more term of each total; a narrow right-hand side padded
    as the product's is); strict adds the bias after its float64 product: the reference's bits."""
    rows, inner, columns = shape
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, inner)).astype(np.float32)
    w = rng.standard_normal((inner, columns)).astype(np.float32)
    bias = rng.standard_normal(columns).astype(np.float32)
    for stored, transpose_b in ((w, False), (np.ascontiguousarray(w.T), True)):
        own, reference = _pair(engine, "matmul_bias", x, stored, bias, transpose_b)
        assert tuple(own.shape) == (rows, columns) and own.is_contiguous()
        if engine.precision == "strict":
            assert engine.get(own).tobytes() == engine.get(reference).tobytes()
        else:
            _close(engine, own, reference, inner + 1)


def test_layer_norm_s_way_back_reads_the_forward_s_means_while_its_input_is_unchanged(
    engine: TorchEngine,
) -> None:
    if engine.precision == "strict":
        pytest.skip("strict runs LayerNorm's reference, which keeps nothing")
    rng = np.random.default_rng(9)
    x = engine.put((rng.standard_normal((64, 32)) * 2 + 1).astype(np.float32))
    scale, shift, grad = (
        engine.put(rng.standard_normal(s).astype(np.float32)) for s in (32, 32, (64, 32))
    )
    engine.layer_norm(x, scale, shift, 1e-5)
    assert id(x) in engine._layer_norms.kept
    kept = [engine.get(g) for g in engine.layer_norm_back(x, scale, grad, 1e-5)]
    again = engine.put(engine.get(x))  # the same values, never normalised: made again
    made = [engine.get(g) for g in engine.layer_norm_back(again, scale, grad, 1e-5)]
    assert [k.tobytes() for k in kept] == [m.tobytes() for m in made]
    x.mul_(3.0)  # changed in place: the kept means no longer hold
    changed = [engine.get(g) for g in engine.layer_norm_back(x, scale, grad, 1e-5)]
    fresh = [
        engine.get(g) for g in engine.layer_norm_back(engine.put(engine.get(x)), scale, grad, 1e-5)
    ]
    assert [c.tobytes() for c in changed] == [f.tobytes() for f in fresh]
    key = id(x)
    del x
    assert key not in engine._layer_norms.kept  # gone with its input


def test_a_subclass_s_own_whole_sequence_method_is_the_one_called() -> None:
    """Failed before (trial UX): the engine set its sequence fast paths on each instance, so
    a subclass's own `lstm_sequence_back` (a test engine's planted fault) was never called."""
    calls: list[str] = []

    class Counting(TorchEngine):
        def lstm_sequence_back(self, *args: Any) -> Any:
            calls.append("back")
            return self._lstm_sequence_back(*args)

    engine = Counting("cpu")
    if not offers(engine, "lstm_sequence"):
        pytest.skip("this torch has no oneDNN LSTM: the positions run")
    rng = np.random.default_rng(3)
    x = engine.put(rng.standard_normal((2, 3, 4)).astype(np.float32))
    w_ih, w_hh = (engine.put(rng.standard_normal((8, n)).astype(np.float32)) for n in (4, 2))
    bias = engine.put(rng.standard_normal(8).astype(np.float32))
    states = fused.lstm_sequence(engine, x, w_ih, w_hh, bias)
    fused.lstm_sequence_back(engine, states, None, x, w_ih, w_hh, bias, states)
    assert calls == ["back"]

"""Fast paths: each fused operation has a reference in primitives, the core calls it through
`deepsharp.core.engine.fused`, and an engine's own version (light's here) gives what the
reference gives. An engine of primitives alone trains as the light engine does."""

from __future__ import annotations

import gc
import inspect
import math
import warnings
from typing import Any

import numpy as np
import pytest
from engine_helpers import PrimitivesOnly, offers, trains_alike

from deepsharp.core import SGD, Adam, AdamW, Engine
from deepsharp.core.engine import fused
from deepsharp.engines.light import LightEngine, ReferenceEngine

U = 2.0**-24
PADDINGS = [((1, 1), (1, 1)), ((0, 1), (1, 0))]

FAST_PATH_NAMES = {
    "batch_matmul",
    "add_rows",
    "erf",
    "maxpool2d_pair",
    "maxpool2d_pair_back",
    "conv2d_bias",
    "conv2d_weight_bias_grad",
    "matmul_bias",
    "relu_back",
    "binary_cross_entropy_terms",
    "sgd_update",
    "adam_update",
    "decay_update",
    "parts",
}

FAST_PATH_NAMES |= {"clip_norm", "global_clip_norm"}  # gradient clipping (test_clipping.py too)
FAST_PATH_NAMES |= {"lstm_cell", "lstm_cell_back"}  # an LSTM's position (test_recurrent.py)
SEQUENCE = {"lstm_sequence", "lstm_sequence_back"}
SEQUENCE |= {"lstm_masked_sequence", "lstm_masked_sequence_back"}  # a padded one
"""A whole LSTM sequence each way (with a padding mask too): for an engine with a fused kernel for it (the torch engine's
oneDNN). Light leaves them out: its positions keep their gates for the way back, where the
sequence's reference would make them again."""
FAST_PATH_NAMES |= SEQUENCE
NOT_ON_LIGHT = SEQUENCE | {"binary_cross_entropy_terms"}
"""What light leaves to the references: the LSTM's sequences, and the binary cross entropy's
terms, whose reference is NumPy's calls already (the same calls in place measured no faster on
a Titanic step; where light's own would call NumPy, a subclass's exp would not be asked)."""
FAST_PATH_NAMES |= {"gelu", "gelu_back"}  # GELU each way (the contract: test_layer_operations)
FAST_PATH_NAMES |= {"layer_norm", "layer_norm_back"}  # LayerNorm (contract: test_normalization)
FAST_PATH_NAMES |= {"put_checked"}  # a step's batch put and checked (the compiled step's issue)


def test_a_checked_put_keeps_a_handed_over_batch_and_copies_one_that_is_not() -> None:
    engine = LightEngine()
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    kept, finite = engine.put_checked(rows, owned=True)
    assert kept is rows and finite and engine.counters.transfers_in == 1
    copied, _ = engine.put_checked(rows)
    assert copied is not rows and not np.shares_memory(copied, rows)
    wide, _ = engine.put_checked(rows.astype(np.float64), owned=True)  # made anew: float32
    assert wide.dtype == np.float32 and engine.counters.transfers_in == 3
    rows[1, 2] = np.nan
    assert fused.put_checked(engine, rows)[1] is False
    assert fused.put_checked_reference(engine, rows)[1] is False


def test_every_fast_path_has_a_reference_and_light_offers_each_with_its_signature() -> None:
    assert set(fused.FAST_PATHS) == FAST_PATH_NAMES
    engine = LightEngine()
    for name, reference in fused.FAST_PATHS.items():
        assert offers(engine, name) == (name not in NOT_ON_LIGHT), name
        if name in NOT_ON_LIGHT:
            continue
        wanted = list(inspect.signature(reference).parameters.values())[1:]  # less the engine
        own = list(inspect.signature(getattr(engine, name)).parameters.values())
        assert [(p.name, p.kind) for p in own] == [(p.name, p.kind) for p in wanted], name


def test_the_protocol_is_the_primitives_alone() -> None:
    primitives = PrimitivesOnly(LightEngine())
    assert isinstance(primitives, Engine)
    for name in FAST_PATH_NAMES:
        assert not offers(primitives, name)
        assert not hasattr(Engine, name)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _within_totals(engine: LightEngine, got: Any, exact: Any, magnitude: Any, terms: int) -> None:
    factor = 3.0 if engine.precision == "strict" else terms + 1.0
    assert got.dtype == np.float32 and got.shape == exact.shape
    assert (np.abs(got - exact) <= factor * U * magnitude).all()


def _conv64(x: Any, w: Any, stride: int, padding: Any) -> Any:
    """The convolution in float64, by windows (the reference of the references)."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), padding[0], padding[1]])
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    return np.einsum("nchwij,fcij->nfhw", windows, w.astype(np.float64))


@pytest.mark.parametrize("precision", ["strict", "float32"])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("padding", PADDINGS)
def test_convolution_fast_paths_give_what_their_references_give(
    precision: str, stride: int, padding: Any
) -> None:
    engine, rng = LightEngine(precision), _rng(1)
    x = rng.standard_normal((3, 2, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    exact = _conv64(x, w, stride, padding) + bias.reshape(1, 4, 1, 1)
    magnitude = _conv64(np.abs(x), np.abs(w), stride, padding) + np.abs(bias).reshape(1, 4, 1, 1)
    own = fused.conv2d_bias(engine, x, w, bias, stride, padding)
    reference = fused.FAST_PATHS["conv2d_bias"](engine, x, w, bias, stride, padding)
    for got in (own, reference):
        _within_totals(engine, got, exact, magnitude, 2 * 9 + 1)
    gy = rng.standard_normal(own.shape).astype(np.float32)
    own_pair = fused.conv2d_weight_bias_grad(engine, x, gy, (3, 3), stride, padding)
    reference_pair = fused.FAST_PATHS["conv2d_weight_bias_grad"](
        engine, x, gy, (3, 3), stride, padding
    )
    places = 3 * own.shape[2] * own.shape[3]
    for got, want in zip(own_pair, reference_pair, strict=True):
        exact_sum = want.astype(np.float64)
        assert got.shape == want.shape
        # both within the bound of the same total: within twice it of each other
        factor = 3.0 if precision == "strict" else places + 1.0
        bound = 2 * factor * U * np.abs(exact_sum) + 1e-5
        assert (np.abs(got - exact_sum) <= bound).all()
    assert np.array_equal(own_pair[0], engine.conv2d_weight_grad(x, gy, (3, 3), stride, padding))


def test_relu_back_gives_what_its_reference_gives() -> None:
    engine, rng = LightEngine(), _rng(2)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    x[0, :3] = 0.0
    grad = rng.standard_normal((5, 7)).astype(np.float32)
    own = fused.relu_back(engine, x, grad)
    assert np.array_equal(own, fused.FAST_PATHS["relu_back"](engine, x, grad))
    assert np.array_equal(own, np.where(x > 0, grad, 0.0))


@pytest.mark.parametrize("precision", ["strict", "float32", "mixed_bfloat16"])
@pytest.mark.parametrize("shape", [(32, 1), (3, 5, 7), (), (200_000,)])
def test_binary_cross_entropy_terms_give_the_reference_s_bits(
    precision: str, shape: tuple[int, ...]
) -> None:
    # Light runs the reference: the calls the loss made before it had a fast path (a run's
    # loss keeps its bits), through the dispatch.
    engine, rng = LightEngine(precision, threads=2), _rng(3)
    z = np.asarray(rng.standard_normal(shape) * 30, np.float32)
    y = np.asarray(rng.choice([0.0, 1.0, 0.05, 0.95], shape), np.float32)
    own = fused.binary_cross_entropy_terms(engine, z, y)
    reference = fused.FAST_PATHS["binary_cross_entropy_terms"](engine, z, y)
    assert own.dtype == np.float32 and own.shape == shape
    assert np.array_equal(own.view(np.int32), reference.view(np.int32))
    exact = np.maximum(z, 0.0) - z.astype(np.float64) * y + np.log1p(np.exp(-np.abs(z)))
    assert (np.abs(own - exact) <= 1e-5 + 1.3e-6 * np.abs(exact) + 4 * U * np.abs(z)).all()
    # a target that is not an array of the logits' shape and type: the reference's calls
    half = fused.binary_cross_entropy_terms(engine, z, 0.5)
    assert np.array_equal(half, fused.FAST_PATHS["binary_cross_entropy_terms"](engine, z, 0.5))


SHAPES = [(14, 16), (16,), (16, 1), (1,)]


def _laid_out(engine: Any, rng: np.random.Generator, scale: float = 1.0) -> list[Any]:
    """Values laid out as the core lays out slots: the parts of one flat tensor."""
    flat = (rng.standard_normal(sum(int(np.prod(s)) for s in SHAPES)) * scale).astype(np.float32)
    return fused.parts(engine, engine.put(flat), SHAPES)


def _values(engine: Any, handles: list[Any]) -> list[Any]:
    return [engine.get(handle).astype(np.float64) for handle in handles]


@pytest.mark.parametrize("update", ["sgd_update", "adam_update", "decay_update"])
def test_optimizer_updates_give_what_their_references_give(update: str) -> None:
    engine = LightEngine()
    settings: dict[str, dict[str, float]] = {
        "sgd_update": {"learning_rate": 0.1, "momentum": 0.9},
        "adam_update": {"step_size": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7},
        "decay_update": {"factor": 0.996},
    }
    memories = {"sgd_update": 1, "adam_update": 2, "decay_update": 0}[update]
    results = []
    for run in (getattr(fused, update), fused.FAST_PATHS[update]):
        rng = _rng(3)
        slots, grads = _laid_out(engine, rng), _laid_out(engine, rng)
        memory = [_laid_out(engine, rng, 0.1) for _ in range(memories)]
        if update == "adam_update":
            memory[1] = [engine.abs(second) for second in memory[1]]
        groups = [slots] if update == "decay_update" else [slots, grads, *memory]
        run(engine, *groups, **settings[update])
        results.append([_values(engine, group) for group in groups])
    for own, reference in zip(*results, strict=True):
        for got, want in zip(own, reference, strict=True):
            assert (np.abs(got - want) <= 1e-5 + 1.3e-6 * np.abs(want)).all()


def test_parts_are_consecutive_parts_of_the_flat_tensor() -> None:
    engine = LightEngine()
    flat = np.arange(14 * 16 + 16 + 16 + 1, dtype=np.float32)
    own = fused.parts(engine, flat, SHAPES)
    reference = fused.FAST_PATHS["parts"](engine, flat, SHAPES)
    start = 0
    for got, want, shape in zip(own, reference, SHAPES, strict=True):
        count = int(np.prod(shape))
        assert got.shape == shape and np.array_equal(got, want)
        assert np.array_equal(got.ravel(), flat[start : start + count])
        start += count


@pytest.mark.parametrize("optimizer", [SGD(0.05, momentum=0.9), Adam(0.01), AdamW(0.01, 0.1)])
def test_an_engine_of_primitives_alone_trains_as_the_light_engine(optimizer: Any) -> None:
    trains_alike(LightEngine(), PrimitivesOnly(LightEngine()), optimizer)


# --- the operations networks as graphs need ---------------------------------------------------

ENGINES = {
    "light": LightEngine,
    "light:float32": lambda: LightEngine("float32"),
    "primitives only": lambda: PrimitivesOnly(LightEngine()),
}
"""Each new fast path runs its own (light's) and its reference (an engine of primitives alone)."""


def _factor(engine: Any, terms: Any) -> Any:
    precision = getattr(engine, "precision", "strict")
    return 3.0 if precision == "strict" else np.maximum(np.asarray(terms, np.float64) + 1.0, 3.0)


@pytest.mark.parametrize("name", list(ENGINES))
@pytest.mark.parametrize(
    ("lead", "transpose_a", "transpose_b"),
    [
        ((), False, False),
        ((3,), False, True),
        ((2, 3), True, False),
        ((2, 1, 2), True, True),
        ((0, 2), False, False),
    ],
)
def test_batch_matmul_multiplies_each_stack_within_the_totals_bound(
    name: str, lead: tuple[int, ...], transpose_a: bool, transpose_b: bool
) -> None:
    engine, rng = ENGINES[name](), _rng(5)
    a = rng.standard_normal((*lead, 4, 7)).astype(np.float32)
    b = rng.standard_normal((*lead, 7, 5)).astype(np.float32)
    stored_a = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if transpose_a else a
    stored_b = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if transpose_b else b
    got = engine.get(
        fused.batch_matmul(
            engine, engine.put(stored_a), engine.put(stored_b), transpose_a, transpose_b
        )
    )
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    magnitude = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.dtype == np.float32 and got.shape == (*lead, 4, 5)
    assert (np.abs(got - exact) <= _factor(engine, 7) * U * magnitude).all()


def _rows_added(values: Any, ids: Any, rows: int) -> tuple[Any, Any, Any]:
    """out[ids[i]] += values[i] in float64, its Σ|terms| and how many values each row gets."""
    flat_ids = ids.reshape(-1)
    flat = values.reshape(flat_ids.size, math.prod(values.shape[ids.ndim :])).astype(np.float64)
    exact, magnitude = np.zeros((rows, flat.shape[1])), np.zeros((rows, flat.shape[1]))
    np.add.at(exact, flat_ids, flat)
    np.add.at(magnitude, flat_ids, np.abs(flat))
    count = np.bincount(flat_ids, minlength=rows)[:, None] * np.ones_like(exact)
    shape = (rows, *values.shape[ids.ndim :])
    return exact.reshape(shape), magnitude.reshape(shape), count.reshape(shape)


@pytest.mark.parametrize("name", list(ENGINES))
@pytest.mark.parametrize(
    ("ids_shape", "row_shape", "rows"),
    [((9,), (4,), 6), ((3, 5), (2,), 4), ((4,), (), 10), ((2, 3), (2, 3), 3), ((0,), (4,), 5)],
)
def test_add_rows_adds_each_value_into_the_row_its_index_names(
    name: str, ids_shape: tuple[int, ...], row_shape: tuple[int, ...], rows: int
) -> None:
    engine, rng = ENGINES[name](), _rng(6)
    ids = rng.integers(0, rows, ids_shape).astype(np.int64)  # repeats, and rows named by none
    values = rng.standard_normal((*ids_shape, *row_shape)).astype(np.float32)
    got = engine.get(fused.add_rows(engine, engine.put(values), engine.put(ids), rows))
    exact, magnitude, count = _rows_added(values, ids, rows)
    assert got.dtype == np.float32 and got.shape == (rows, *row_shape)
    assert (np.abs(got - exact) <= _factor(engine, count) * U * magnitude).all()


@pytest.mark.parametrize("name", ["light", "primitives only"])
def test_add_rows_on_strict_rounds_each_total_once(name: str) -> None:
    """1 and then 4,095 terms of just over half an ulp of 1 into one row: added in float32 in
    order they stray 4,095 units; a strict total is within one rounding of the exact one."""
    engine = ENGINES[name]()
    values = np.full((4096, 2), np.float32(2.0**-24 * (1.0 + 2.0**-10)), np.float32)
    values[0] = 1.0
    ids = np.zeros(4096, np.int64)
    got = engine.get(fused.add_rows(engine, engine.put(values), engine.put(ids), 3))
    exact, magnitude, _ = _rows_added(values, ids, 3)
    assert (np.abs(got - exact) <= U * magnitude).all() and (got[1:] == 0).all()


def test_add_rows_gives_the_same_bits_every_time() -> None:
    engine, rng = LightEngine("float32"), _rng(7)
    ids = rng.integers(0, 50, (64, 32)).astype(np.int64)
    values = rng.standard_normal((64, 32, 16)).astype(np.float32)
    first, again = (fused.add_rows(engine, values, ids, 50) for _ in range(2))
    assert first.tobytes() == again.tobytes()


def _erf64(x: Any) -> Any:
    return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))


ERF_VALUES = np.concatenate(
    [np.linspace(-6.0, 6.0, 4001), [0.0, -0.0, 1e-30, -1e-30, 1e-8, 0.46875, 4.0, 30.0, -30.0]]
)


def test_erf_reference_is_abramowitz_and_stegun_7_1_26_within_its_bound() -> None:
    """In float64 the reference strays at most 1.5e-7 (the formula's own bound)."""
    got = fused.FAST_PATHS["erf"](ReferenceEngine(), ERF_VALUES.copy())
    assert np.abs(got - _erf64(ERF_VALUES)).max() <= 1.5e-7


@pytest.mark.parametrize("name", list(ENGINES))
def test_erf_within_the_value_tolerance(name: str) -> None:
    engine = ENGINES[name]()
    x = ERF_VALUES.astype(np.float32).reshape(-1, 5)  # a value's place in a table is no matter
    got = engine.get(fused.erf(engine, engine.put(x)))
    exact = _erf64(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert (np.abs(got - exact) <= 1e-5 + 1.3e-6 * np.abs(exact)).all()


def test_light_erf_is_the_float64_value_rounded_once() -> None:
    """Cody's rational approximations in float64, rounded once to float32: within half an ulp
    (and a hair: float64's own error)."""
    x = np.concatenate([ERF_VALUES, _rng(8).standard_normal(10_000) * 3]).astype(np.float32)
    got = LightEngine().erf(x)
    exact = _erf64(x)
    assert (np.abs(got - exact) <= 0.5001 * np.spacing(np.abs(exact).astype(np.float32))).all()
    wide = ReferenceEngine().erf(x.astype(np.float64))  # in float64: within 1e-15
    assert np.abs(wide - exact).max() <= 1e-15


def _first_maxima(x: Any, pool: tuple[int, int]) -> tuple[Any, Any]:
    """Each (ph, pw) window's maximum and the place of its first maximum, counted row by row."""
    n, c, h, w = x.shape
    ph, pw = pool
    oh, ow = h // ph, w // pw
    windows = x[:, :, : oh * ph, : ow * pw].reshape(n, c, oh, ph, ow, pw)
    windows = windows.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, ph * pw)
    selection = windows.argmax(axis=-1).astype(np.int64)
    return np.take_along_axis(windows, selection[..., None], -1)[..., 0], selection


POOLS = [(2, 3), (3, 2), (1, 4), (4, 1), (2, 2), (3, 3), (1, 1)]


@pytest.mark.parametrize("name", list(ENGINES))
@pytest.mark.parametrize("pool", POOLS)
def test_maxpool2d_pair_selects_each_windows_first_maximum_and_sends_it_the_gradient(
    name: str, pool: tuple[int, int]
) -> None:
    engine, rng = ENGINES[name](), _rng(9)
    x = np.round(rng.standard_normal((2, 3, 7, 8)) * 2).astype(np.float32)  # many ties
    maxima, selection = fused.maxpool2d_pair(engine, engine.put(x), pool)
    want_maxima, want_selection = _first_maxima(x, pool)
    assert engine.get(maxima).tobytes() == want_maxima.tobytes()
    got_selection = engine.get(selection)
    assert got_selection.dtype == np.int64 and np.array_equal(got_selection, want_selection)
    gy = rng.standard_normal(want_maxima.shape).astype(np.float32)
    back = engine.get(fused.maxpool2d_pair_back(engine, engine.put(gy), selection, (7, 8), pool))
    n, c, oh, ow = gy.shape
    spread = np.zeros((n, c, oh, ow, pool[0] * pool[1]), np.float32)
    np.put_along_axis(spread, want_selection[..., None], gy[..., None], -1)
    expected = np.zeros(x.shape, np.float32)
    expected[:, :, : oh * pool[0], : ow * pool[1]] = (
        spread.reshape(n, c, oh, ow, *pool)
        .transpose(0, 1, 2, 4, 3, 5)
        .reshape(n, c, oh * pool[0], ow * pool[1])
    )
    assert back.tobytes() == expected.tobytes()


@pytest.mark.parametrize("precision", ["strict", "float32"])
def test_light_s_gelu_keeps_its_erf_for_the_way_back_with_the_reference_s_bits(
    precision: str,
) -> None:
    """Light's erf is its costly pass: its GELU keeps 1 + erf(x/√2) for the way back while x
    lives, which must give the bits the reference's way back makes again."""
    engine = LightEngine(precision=precision)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 33)) * 4).astype(np.float32)
    grad = rng.standard_normal((64, 33)).astype(np.float32)
    forward = engine.gelu(x)
    assert forward.tobytes() == fused.gelu_reference(engine, x).tobytes()
    assert len(engine._gelu_kept) == 1
    back = engine.gelu_back(x, grad)
    assert back.tobytes() == fused.gelu_back_reference(engine, x, grad).tobytes()
    alone = LightEngine(precision=precision).gelu_back(x, grad)  # nothing kept: made again
    assert alone.tobytes() == back.tobytes()
    del x
    gc.collect()
    assert not engine._gelu_kept


def test_a_prediction_of_infinities_of_both_signs_warns_of_nothing() -> None:
    """Failed before (trial NU): the float64 total of inf and -inf warned from NumPy."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not fused.all_finite(np.array([np.inf, -np.inf], np.float32))

"""The light engine at precision float32: NumPy's own float32 kernels (sgemm, pairwise sums) for
products, sums and convolutions. What it keeps (totals within their float32 bound, runs that
repeat bit for bit, the samples' accuracy, checkpoints that know it) and what it is named by.
The whole contract runs on it in the nox `tests` session (`--engine light:float32`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from core_helpers import fit_titanic

from deepsharp.core import EngineMismatchError, FitOptions, make_engine
from deepsharp.core.engine import EngineIdentity, fused
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.samples import digits, titanic
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.engines.light import LightEngine, from_spec

FAST = "light:float32"


def test_named_by_spec_and_carried_in_the_identity() -> None:
    engine = make_engine(FAST)
    assert isinstance(engine, LightEngine) and engine.precision == "float32"
    assert engine.identity == EngineIdentity("light", f"numpy {np.__version__}", "cpu", "float32")
    assert str(engine.identity).endswith("on cpu (float32)")
    assert make_engine("light").identity.precision == "strict"  # the default adds in float64
    assert make_engine("light:strict").identity == make_engine("light").identity
    assert LightEngine("float32").identity == engine.identity
    assert EngineIdentity.from_json(engine.identity.to_json()) == engine.identity
    assert "float32" in repr(engine)


def test_an_unknown_precision_is_refused_naming_those_it_offers() -> None:
    with pytest.raises(ValueError, match=r"no precision 'float16'.*offers 'strict', 'float32'"):
        LightEngine("float16")
    with pytest.raises(
        EngineUnavailableError,
        match=r"did you mean 'float32' or 'mixed_float16'\? The light engine offers strict "
        r"\(light:strict\), float32 \(light:float32\)",
    ):
        from_spec("float16")


def test_the_old_name_is_refused_with_the_new_one() -> None:
    with pytest.raises(
        EngineUnavailableError, match="now the precision 'float32': use light:float32"
    ):
        make_engine("light:float32-totals")


def test_its_totals_are_numpys_own() -> None:
    # The products a hand-written NumPy network computes, to the bit.
    rng = np.random.default_rng(0)
    engine = LightEngine("float32")
    a, b = rng.standard_normal((64, 300), np.float32), rng.standard_normal((300, 10), np.float32)
    assert engine.matmul(a, b).tobytes() == np.matmul(a, b).tobytes()
    assert engine.sum(a, (0,)).tobytes() == a.sum(axis=0).tobytes()
    # and they are float32 totals: not the float64 ones rounded once
    wide = LightEngine().matmul(a, b)
    assert wide.dtype == engine.matmul(a, b).dtype == np.float32
    assert not np.array_equal(wide, engine.matmul(a, b))


def _within_float32_bound(got: np.ndarray, want: np.ndarray, terms: int) -> None:
    """|got - want| <= (terms + 1)u·|want| + a floor: float32 totals of `terms` terms."""
    assert got.shape == want.shape and got.dtype == np.float32
    bound = (terms + 1) * 2.0**-24 * (np.abs(want) + 1.0)
    assert (np.abs(got.astype(np.float64) - want) <= bound).all()


@pytest.mark.parametrize("stride, padding", [(1, ((1, 1), (1, 1))), (2, ((0, 1), (1, 0)))])
def test_every_float32_total_agrees_with_the_float64_one(
    stride: int, padding: tuple[tuple[int, int], tuple[int, int]]
) -> None:
    rng = np.random.default_rng(1)
    fast, wide = LightEngine("float32"), LightEngine()
    tall = rng.standard_normal((40, 700), np.float32)  # a dense layer's rows
    grads = rng.standard_normal((40, 10), np.float32)
    # the weight gradient: the tall product x^T @ g, formed the other way round
    _within_float32_bound(fast.matmul(tall, grads, True), wide.matmul(tall, grads, True), 40)
    _within_float32_bound(fast.matmul(grads, grads, False, True), grads @ grads.T, 10)
    _within_float32_bound(fast.mean(tall, (0,)), wide.mean(tall, (0,)), 40)
    x = rng.standard_normal((3, 2, 9, 8), np.float32)
    w, bias = rng.standard_normal((4, 2, 3, 3), np.float32), rng.standard_normal(4, np.float32)
    out = fused.conv2d_bias(wide, x, w, bias, stride, padding)
    _within_float32_bound(fused.conv2d_bias(fast, x, w, bias, stride, padding), out, 19)
    gy = rng.standard_normal(out.shape, np.float32)
    got = fused.conv2d_weight_bias_grad(fast, x, gy, (3, 3), stride, padding)
    want = fused.conv2d_weight_bias_grad(wide, x, gy, (3, 3), stride, padding)
    places = 3 * out.shape[2] * out.shape[3]
    _within_float32_bound(got[0], want[0], places)
    _within_float32_bound(got[1], want[1], places)
    image = (x.shape[2], x.shape[3])
    _within_float32_bound(
        fast.conv2d_fold(gy, w, image, stride, padding),
        wide.conv2d_fold(gy, w, image, stride, padding),
        4 * 9,
    )


def test_a_run_repeats_bit_for_bit() -> None:
    first, second = (titanic.run(engine=FAST, seed=5, progress=False) for _ in range(2))
    other = titanic.run(engine=FAST, seed=6, progress=False)
    losses = [
        [(e.loss, e.validation_loss) for e in run.report.history] for run in (first, second, other)
    ]
    assert losses[0] == losses[1] and first.report.measures == second.report.measures
    assert losses[0] != losses[2]  # what is compared does tell runs apart


@pytest.mark.once  # the samples' runs: the same on every Python
def test_the_samples_reach_their_goals() -> None:
    run = titanic.run(engine=FAST, progress=False)
    assert run.report.engine.precision == "float32"
    assert run.report.measures["accuracy"] >= 0.78
    assert digits.run(engine=FAST, progress=False).report.measures["accuracy"] >= 0.95


def test_its_checkpoint_refuses_the_strict_engine(tmp_path: Path) -> None:
    titanic.run(FAST, 1, epochs=1, progress=False, checkpoint_dir=tmp_path, checkpoint_every=1)
    assert Checkpoint.load(Checkpoint.path_in(tmp_path)).engine.precision == "float32"
    with pytest.raises(EngineMismatchError, match="float32"):
        fit_titanic(
            FitOptions(engine="light", seed=1, epochs=2, progress=False),
            resume_from=Checkpoint.path_in(tmp_path),
        )


@pytest.mark.parametrize("spec", ["light", "light:float32", "light:mixed_bfloat16"])
def test_a_python_number_beside_a_whole_total_stays_the_engine_s_float(spec: str) -> None:
    """Before: under NumPy 1.26 (the oldest supported) a whole sum (a float32 scalar) divided by
    the rows' count, 64.0, came back float64, as did 0.0 - it and it + 1: a loss in float64, and
    a compiled step that could not keep it (every conv and transformer sample ran as recorded,
    'the step gives back a value it did not make'). Now the number is the engine's float first,
    as NumPy 2 takes it."""
    engine = make_engine(spec)
    total = engine.sum(engine.put(np.arange(6, dtype=np.float32).reshape(2, 3)), (0, 1))
    for made in (
        engine.div(total, 64.0),
        engine.sub(0.0, total),
        engine.add(total, 1),
        engine.mul(3, total),
        engine.div(engine.put(np.float32(0.1)), 0.1),
    ):
        assert np.asarray(made).dtype == np.float32, (spec, type(made))
    # The number is rounded to float32 first, as NEP 50 has it: 0.1f / 0.1f is exactly 1.
    assert float(engine.get(engine.div(engine.put(np.float32(0.1)), 0.1))) == 1.0


@pytest.mark.parametrize("size", [1, 4095, 4096, 5000, 173_056, 173_056 + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_bound_on_the_vector_loop_gives_numpys_scalar_bits(size: int, dtype: type) -> None:
    """ReLU and the sigmoid's cap take NumPy's maximum and minimum against a row of their bound
    (NumPy 2.4's scalar loop took 2.5x as long): each value's bits as the scalar loop's, NaN
    (of any payload), signed zeros, infinities and subnormal values included, at every length
    around the row's."""
    from deepsharp.engines.light._clamp import bounded

    rng = np.random.default_rng(size)
    special = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 88.0, 89.0])
    x = rng.standard_normal(size).astype(dtype) * 100
    x[rng.integers(0, size, min(size, 64))] = rng.choice(special, min(size, 64))
    x[x.size // 2 :: 97] = np.frombuffer(
        np.array([0x7FC0_0123] * 4, np.uint32).tobytes(), np.float32
    )[0]
    bits = np.uint32 if dtype is np.float32 else np.uint64
    for function, bound in ((np.maximum, 0.0), (np.minimum, 88.0)):
        want = function(x, dtype(bound))
        got = bounded(function, x, bound, np.empty_like(x))
        assert np.array_equal(got.view(bits), want.view(bits))
        inplace = x.copy()
        assert bounded(function, inplace, bound, inplace) is inplace
        assert np.array_equal(inplace.view(bits), want.view(bits))
    engine = LightEngine("float32")
    if dtype is np.float32:
        assert np.array_equal(engine.relu(x).view(bits), np.maximum(x, dtype(0)).view(bits))

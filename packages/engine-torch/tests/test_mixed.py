"""The torch engine at precision mixed_bfloat16 (and, on a card, mixed_float16): products and
convolutions read bfloat16 inputs and add in float32 in libtorch's half kernels, their outputs
kept in bfloat16; every other operation reads such a handle exactly and gives float32, but the
moves, ReLU, its way back, max-pooling and a bias's addition. What it is named by, the bits it
gives, what runs on it (the samples, a run that repeats, checkpoints that know it). The whole
contract runs on it in the nox `torch` session (`--engine torch:cpu:mixed_bfloat16`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import torch

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Conv2D,
    CrossEntropy,
    Dense,
    EngineMismatchError,
    FitOptions,
    Flatten,
    Network,
    Relu,
    Trainer,
    fit,
    make_engine,
)
from deepsharp.core.engine import EngineIdentity, describe_engine, fused
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.random import Generator
from deepsharp.core.samples import digits, titanic
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.engines.torch import TorchEngine
from deepsharp.engines.torch._totals import SMALL

MIXED = "torch:cpu:mixed_bfloat16"
BF16 = torch.bfloat16


@pytest.fixture(scope="module")
def engine() -> TorchEngine:
    made = make_engine(MIXED)
    assert isinstance(made, TorchEngine)
    return made


def rounded(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x).to(BF16)


def test_named_by_spec_and_carried_in_the_identity(engine: TorchEngine) -> None:
    assert engine.precision == "mixed_bfloat16"
    assert engine.identity == EngineIdentity("torch", torch.__version__, "cpu", "mixed_bfloat16")
    assert TorchEngine.on_cpu("mixed_bfloat16").identity == engine.identity
    assert TorchEngine("cpu", "mixed_bfloat16").identity == engine.identity
    assert "mixed_bfloat16" in describe_engine("torch").precisions
    assert "mixed_bfloat16" in repr(engine)


def test_float16_is_for_cards_and_the_processor_is_told_what_to_use() -> None:
    for make in (
        lambda: make_engine("torch:cpu:mixed_float16"),
        lambda: TorchEngine.on_cpu("mixed_float16"),
    ):
        with pytest.raises(EngineUnavailableError) as refused:
            make()
        said = str(refused.value)
        assert "NVIDIA cards only" in said
        assert "torch:cpu:mixed_bfloat16" in said and "light:mixed_float16" in said


def test_a_large_product_is_libtorchs_bfloat16_product_kept_in_bfloat16(
    engine: TorchEngine,
) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((128, 512), np.float32), rng.standard_normal((512, 64), np.float32)
    assert 128 * 512 * 64 >= SMALL
    handle = engine.matmul(engine.put(a), engine.put(b))
    assert handle.dtype == BF16  # kept in the half format for the next operation
    want = torch.mm(rounded(a), rounded(b))
    assert handle.view(torch.int16).equal(want.view(torch.int16))
    got = engine.get(handle)
    assert got.dtype == np.float32 and got.tobytes() == want.float().numpy().tobytes()
    # a weight gradient's product, x.T @ grad (x stored as it is), formed as (grad.T @ x).T and
    # laid out in float32 for the optimizer: in one pass, or (a large one) moved in bfloat16
    # first, then widened; the same values
    gradient = engine.matmul(engine.put(a), handle, True, False)
    assert gradient.dtype == torch.float32 and gradient.is_contiguous()
    assert gradient.equal(torch.mm(want.t(), rounded(a)).t().float())
    x, grads = rng.standard_normal((128, 1024), np.float32), rng.standard_normal((128, 256))
    large = engine.matmul(engine.put(x), engine.put(grads.astype(np.float32)), True, False)
    assert large.dtype == torch.float32 and large.is_contiguous() and large.shape == (1024, 256)
    assert large.equal(torch.mm(rounded(grads.astype(np.float32)).t(), rounded(x)).t().float())


def test_a_float32_tensor_is_converted_once_while_it_is_unchanged(engine: TorchEngine) -> None:
    rng = np.random.default_rng(9)
    x = engine.put(rng.standard_normal((256, 512), np.float32))
    w = engine.put(rng.standard_normal((512, 512), np.float32))
    first = engine.matmul(x, w)
    totals = engine.totals
    kept = totals._half(w)  # type: ignore[attr-defined]
    assert totals._half(w) is kept  # type: ignore[attr-defined]
    engine.assign(w, engine.put(rng.standard_normal((512, 512), np.float32)))  # changed in place
    assert totals._half(w) is not kept  # type: ignore[attr-defined]
    second = engine.matmul(x, w)
    assert not second.equal(first)
    assert second.equal(torch.mm(x.to(BF16), w.to(BF16)))
    held = len(totals._halves)  # type: ignore[attr-defined]
    del x, w
    assert len(totals._halves) == held - 2  # type: ignore[attr-defined]


def test_a_small_product_is_a_float32_product_of_bfloat16_inputs_kept_in_bfloat16(
    engine: TorchEngine,
) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((32, 14), np.float32), rng.standard_normal((14, 16), np.float32)
    handle = engine.matmul(engine.put(a), engine.put(b))
    want = torch.mm(rounded(a).float(), rounded(b).float()).to(BF16)
    assert handle.dtype == BF16 and handle.view(torch.int16).equal(want.view(torch.int16))
    grads = rng.standard_normal((32, 16), np.float32)
    gradient = engine.matmul(engine.put(a), engine.put(grads), True, False)
    assert gradient.dtype == torch.float32  # a weight gradient: bfloat16 values, in float32
    assert gradient.equal(gradient.to(BF16).float())


def test_a_row_gets_the_same_arithmetic_alone_and_in_a_large_batch(engine: TorchEngine) -> None:
    """A row alone takes the small products' path (libtorch's float32 kernels on bfloat16
    inputs), among 1,024 rows the half kernels': both round the inputs and the output to
    bfloat16 and add in float32, in other orders. Before, the small path kept its outputs in
    float32: no output had the same bits (up to 0.03 apart on predictions near 12)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    assert 512 * 64 < SMALL <= 1024 * 512 * 64
    among = engine.get(engine.matmul(engine.put(a), engine.put(b)))[:64]
    alone = np.concatenate([engine.get(engine.matmul(engine.put(a[i : i + 1]), engine.put(b)))
                            for i in range(64)])  # fmt: skip
    assert np.mean(alone == among) > 0.999
    # where the float32 totals' last bits differ, the bfloat16 outputs by one unit at most
    assert np.all(np.abs(alone - among) <= 2.0**-7 * np.abs(among))
    network = Network([Dense(256), Relu(), Dense(1)], inputs=512)
    network.initialize(Generator(1))
    x = (rng.standard_normal((2048, 512)) * 3).astype(np.float32)
    loss = BinaryCrossEntropy()
    many = network.predict(x, loss, engine)[:100]
    few = np.concatenate([network.predict(x[i : i + 1], loss, engine) for i in range(100)])
    assert np.mean(few == many) >= 0.99


def test_convolutions_read_bfloat16_and_keep_it(engine: TorchEngine) -> None:
    rng = np.random.default_rng(2)
    x, w = (
        rng.standard_normal((16, 3, 20, 20), np.float32),
        rng.standard_normal((8, 3, 3, 3), np.float32),
    )
    bias = rng.standard_normal(8, np.float32)
    same = ((1, 1), (1, 1))
    out = fused.conv2d_bias(engine, engine.put(x), engine.put(w), engine.put(bias), 1, same)
    assert out.dtype == BF16
    want = torch.nn.functional.conv2d(rounded(x), rounded(w), rounded(bias), padding=1)
    assert out.view(torch.int16).equal(want.view(torch.int16))
    gy = rng.standard_normal((16, 8, 20, 20), np.float32)
    weights, biases = fused.conv2d_weight_bias_grad(
        engine, engine.put(x), engine.put(gy), (3, 3), 1, same
    )
    assert weights.dtype == BF16 and weights.shape == (8, 3, 3, 3)
    # the biases' gradient is a sum: float32, of gy as it was
    assert biases.dtype == torch.float32
    assert biases.equal(torch.sum(torch.from_numpy(gy), (0, 2, 3)))
    folded = engine.conv2d_fold(engine.put(gy), engine.put(w), (20, 20), 1, same)
    assert folded.dtype == BF16 and folded.shape == (16, 3, 20, 20)


def test_other_operations_read_half_handles_exactly_and_give_float32(engine: TorchEngine) -> None:
    rng = np.random.default_rng(3)
    values = rng.standard_normal((64, 256), np.float32)
    half = rounded(values)  # what a product leaves
    wide = half.float()
    for name in ("exp", "log1p", "tanh", "sigmoid", "neg", "abs", "sqrt", "softplus"):
        source = half.abs() if name in ("log1p", "sqrt") else half
        got = getattr(engine, name)(source)
        want = getattr(engine, name)(source.float())
        assert got.dtype == torch.float32 and got.equal(want), name
    for name in ("sub", "mul", "div", "maximum"):
        got = getattr(engine, name)(half, 0.5)
        assert got.dtype == torch.float32 and got.equal(getattr(engine, name)(wide, 0.5)), name
    total = engine.sum(half, (0,))
    assert total.dtype == torch.float32 and total.equal(torch.sum(wide, 0))
    assert engine.get(half).tobytes() == wide.numpy().tobytes()


def test_selections_and_a_bias_keep_the_half_format(engine: TorchEngine) -> None:
    rng = np.random.default_rng(4)
    half = rounded(rng.standard_normal((64, 256), np.float32))
    bias = torch.from_numpy(rng.standard_normal(256, np.float32))
    added = engine.add(half, bias)
    # the bias in bfloat16, added in float32, rounded once to bfloat16
    assert added.dtype == BF16 and added.equal((half.float() + bias.to(BF16).float()).to(BF16))
    assert engine.relu(half).dtype == BF16
    assert fused.relu_back(engine, engine.relu(half), half).dtype == BF16
    assert engine.reshape(half, (128, 128)).dtype == BF16
    assert engine.max(half, (1,), True).dtype == BF16
    # but two half tensors, or a scalar, are not a bias: float32
    assert engine.add(half, half).dtype == torch.float32
    assert engine.add(half, 1.0).dtype == torch.float32


def test_adam_applies_bfloat16_gradients_in_float32(engine: TorchEngine) -> None:
    rng = np.random.default_rng(5)
    slot = torch.from_numpy(rng.standard_normal(100, np.float32))
    grad = rounded(rng.standard_normal(100, np.float32))
    firsts, seconds = torch.zeros(100), torch.zeros(100)
    mirror = [slot.clone(), torch.zeros(100), torch.zeros(100)]
    settings = {"step_size": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}
    engine.adam_update([slot], [grad], [firsts], [seconds], **settings)
    float32 = TorchEngine.on_cpu()
    float32.adam_update([mirror[0]], [grad.float()], [mirror[1]], [mirror[2]], **settings)
    assert slot.dtype == torch.float32 and slot.equal(mirror[0]) and seconds.equal(mirror[2])


def _dense_steps(spec: str) -> list[float]:
    rng = np.random.default_rng(6)
    network = Network([Dense(256), Relu(), Dense(256), Relu(), Dense(10)], inputs=128)
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=spec, seed=0)
    return [
        trainer.step(rng.standard_normal((128, 128), np.float32), rng.integers(0, 10, 128))
        for _ in range(4)
    ]


def _conv_steps(spec: str) -> list[float]:
    rng = np.random.default_rng(7)
    network = Network([Conv2D(16, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 28, 28))
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=spec, seed=0)
    return [
        trainer.step(rng.random((64, 1, 28, 28), np.float32), rng.integers(0, 10, 64))
        for _ in range(3)
    ]


@pytest.mark.parametrize("steps", [_dense_steps, _conv_steps])
def test_a_mixed_run_is_the_same_run_again_and_close_to_float32(steps: object) -> None:
    assert callable(steps)
    mixed = steps(MIXED)
    assert mixed == steps(MIXED)  # bit for bit
    float32 = steps("torch:cpu")
    assert mixed != float32  # it does compute in bfloat16
    assert np.allclose(mixed, float32, rtol=0.02)


def test_nothing_it_makes_records_autograd(engine: TorchEngine) -> None:
    rng = np.random.default_rng(8)
    network = Network([Dense(256), Relu(), Dense(10)], inputs=300)
    with Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0) as trainer:
        trainer.step(rng.standard_normal((256, 300), np.float32), rng.integers(0, 10, 256))
        for tensor in trainer.bound.tensors.values():
            assert not tensor.handle.requires_grad and tensor.handle.grad_fn is None
            assert tensor.handle.dtype == torch.float32  # slots stay float32


@pytest.mark.parametrize(("sample", "gap"), [(titanic, 0.01), (digits, 0.01)])
def test_the_samples_reach_their_float32_accuracy_within_one_point(
    sample: object, gap: float
) -> None:
    run = sample.run  # type: ignore[attr-defined]
    mixed, float32 = run(engine=MIXED, progress=False), run(engine="torch:cpu", progress=False)
    assert mixed.report.engine.precision == "mixed_bfloat16"
    assert mixed.report.skipped_steps == 0  # bfloat16 needs no loss scale
    assert mixed.report.measures["accuracy"] >= float32.report.measures["accuracy"] - gap


def test_its_checkpoint_refuses_another_precision_and_resumes_bit_for_bit(tmp_path: Path) -> None:
    options = {"progress": False, "checkpoint_dir": tmp_path, "checkpoint_every": 1}
    whole = titanic.run(MIXED, 1, epochs=3, progress=False)
    titanic.run(MIXED, 1, epochs=2, **options)
    assert Checkpoint.load(Checkpoint.path_in(tmp_path)).engine.precision == "mixed_bfloat16"
    arguments = (
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.001),
    )
    for other in ("torch:cpu", "light:mixed_bfloat16"):
        with pytest.raises(EngineMismatchError, match="mixed_bfloat16"):
            fit(
                *arguments,
                FitOptions(engine=other, seed=1, epochs=3, progress=False),
                resume_from=Checkpoint.path_in(tmp_path),
            )
    resumed = fit(
        *arguments,
        FitOptions(engine=MIXED, seed=1, epochs=3, progress=False),
        resume_from=Checkpoint.path_in(tmp_path),
    )
    assert [r.loss for r in resumed.report.history] == [r.loss for r in whole.report.history]
    for name, value in whole.trained.network.slots.items():
        assert resumed.trained.network.slots[name].tobytes() == value.tobytes()


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((256, 32, 26, 26), (0, 2, 3)), ((512, 48, 40), (0, 2)), ((4096, 1024), (0,))],
)
def test_a_large_half_tensors_sum_is_a_float32_total(
    engine: TorchEngine, shape: tuple[int, ...], axes: tuple[int, ...]
) -> None:
    # along the rows first where the last axis is summed (a block of images at a time: each
    # row's total the bits it has summed in the whole tensor), else a block of images (rows) at
    # a time, the totals added in float32
    rng = np.random.default_rng(10)
    half = rounded(rng.standard_normal(shape, np.float32))
    got = engine.sum(half, axes)
    assert got.dtype == torch.float32
    inner = tuple(a for a in axes if a != 0)
    if half.dim() - 1 in inner:
        whole = torch.sum(torch.sum(half, inner, True, dtype=torch.float32), axes)
        assert torch.equal(got, whole)
    kept = engine.sum(half, axes, keepdims=True)
    assert kept.shape == half.sum(axes, keepdim=True).shape
    assert torch.equal(kept.reshape(got.shape), got)
    wide = half.double()
    ref, terms = wide.sum(axes), wide.abs().sum(axes)
    count = half.numel() // got.numel()
    assert ((got.double() - ref).abs() <= (count + 1) * 2.0**-24 * terms).all()
    mean = engine.mean(half, axes)
    assert ((mean.double() - ref / count).abs() <= (count + 1) * 2.0**-24 * terms / count).all()


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((3, 1 << 19), (0, 1)), ((3, 1, 1 << 19), (0, 1, 2)), ((2, 2, 1 << 18), (0, 1, 2))],
)
def test_a_half_sum_of_one_total_an_entry_keeps_the_whole_tensor_s_bits_on_two_threads(
    engine: TorchEngine, shape: tuple[int, ...], axes: tuple[int, ...]
) -> None:
    """Failed before (trial DA), 2 or 3 times in 5: summed a block of the first axis at a time,
    an entry that is one total made a block of one total, which libtorch splits among its
    threads, where it gives each thread whole totals in the whole tensor's sum."""
    rng = np.random.default_rng(0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for _ in range(8):
            half = rounded(rng.standard_normal(shape, np.float32))
            inner = tuple(a for a in axes if a != 0)
            whole = torch.sum(torch.sum(half, inner, True, dtype=torch.float32), axes)
            assert torch.equal(engine.sum(half, axes), whole)
    finally:
        torch.set_num_threads(before)


def test_an_lstm_runs_in_onednn_s_float32_kernel_on_inputs_rounded_to_bfloat16(
    engine: TorchEngine,
) -> None:
    """Before: the positions ran the reference a dozen widening calls each, their products in
    the half kernels: the benchmarks' LSTM step took 24 ms against float32's 4.9 (4.75 times
    autocast's). The float32 kernel reads x and the weights rounded to bfloat16 (the bias
    float32); the way back of its own states reads what the forward kept, states of any other
    making are made again: the same bits either way."""
    from deepsharp.engines.torch import _recurrent

    if not _recurrent.available(torch):
        pytest.skip("this torch has no oneDNN LSTM kernel")
    rng = np.random.default_rng(4)
    rows, length, features, units = 3, 5, 4, 6
    arrays = [
        rng.standard_normal(shape).astype(np.float32)
        for shape in ((rows, length, features), (4 * units, features), (4 * units, units))
    ]
    bias = rng.standard_normal(4 * units).astype(np.float32)
    x, w_ih, w_hh, b = (engine.put(a) for a in (*arrays, bias))
    states = fused.lstm_sequence(engine, x, w_ih, w_hh, b)
    half = [torch.from_numpy(a).to(BF16).float() for a in arrays]
    want = _recurrent.forward(torch, *half, torch.from_numpy(bias))
    assert states.dtype == torch.float32 and torch.equal(states, want)
    grads = engine.put(rng.standard_normal((rows, length, units)).astype(np.float32))
    kept = fused.lstm_sequence_back(engine, grads, None, x, w_ih, w_hh, b, states)
    again = engine.put(engine.get(states))  # no kept workspace: the forward made again
    made = fused.lstm_sequence_back(engine, grads, None, x, w_ih, w_hh, b, again)
    assert all(torch.equal(k, m) for k, m in zip(kept, made, strict=True))


@pytest.mark.parametrize("turned", [True, False])
@pytest.mark.parametrize("shape", [(512, 256, 128), (256, 1024, 10), (300, 64, 200)])
def test_a_weight_gradient_either_way_is_a_half_product_laid_out_in_rows_in_float32(
    turned: bool, shape: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Formed as PyTorch's Linear forms it and laid out (processors with AMX), or as it stands
    (wide enough ones, without AMX): float32 totals of the half values rounded to the half
    format, as the half kernels give them, in rows, in float32."""
    from deepsharp.engines.torch import _halfgrads

    TorchEngine.on_cpu("mixed_bfloat16")  # binds torch
    monkeypatch.setattr(_halfgrads, "TURNED", turned)
    rows, inner, columns = shape
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.standard_normal((rows, inner)).astype(np.float32)).bfloat16()
    grad = torch.from_numpy(rng.standard_normal((rows, columns)).astype(np.float32)).bfloat16()
    got = _halfgrads.weight_gradient(x, grad)
    assert got.dtype == torch.float32 and got.is_contiguous() and got.shape == (inner, columns)
    a, b = x.double().numpy(), grad.double().numpy()
    exact, size = a.T @ b, np.abs(a).T @ np.abs(b)
    totals = (rows + 1) * 2.0**-24 * size
    assert (
        np.abs(got.double().numpy() - exact) <= totals + 2.0**-8 * (np.abs(exact) + totals)
    ).all()

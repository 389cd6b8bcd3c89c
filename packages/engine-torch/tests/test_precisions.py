"""The torch engine's precisions: `float32` (the default: libtorch's own kernels for products,
sums and convolutions, as PyTorch runs them) and `strict`. What float32 keeps (libtorch's own
bits, runs that repeat bit for bit on one thread count, checkpoints that know it) and what each
is named by. The whole contract runs on both in the nox `torch` session."""

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
from deepsharp.core.engine import EngineIdentity, fused
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.samples import titanic
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.engines.torch import TorchEngine, from_spec

FAST = "torch:cpu"


def test_float32_is_the_default_named_by_spec_and_carried_in_the_identity() -> None:
    engine = make_engine(FAST)
    assert isinstance(engine, TorchEngine) and engine.precision == "float32"
    assert engine.identity == EngineIdentity("torch", torch.__version__, "cpu", "float32")
    assert str(engine.identity).endswith("on cpu (float32)")
    for same in ("torch", "torch:cpu:float32", "torch:CPU"):
        assert make_engine(same).identity == engine.identity
    assert TorchEngine.on_cpu().identity == engine.identity
    assert EngineIdentity.from_json(engine.identity.to_json()) == engine.identity


def test_strict_is_named_by_spec_and_carried_in_the_identity() -> None:
    engine = make_engine("torch:cpu:strict")
    assert engine.identity == EngineIdentity("torch", torch.__version__, "cpu", "strict")
    assert TorchEngine.on_cpu("strict").identity == engine.identity
    assert from_spec("strict").identity == engine.identity  # torch:strict = torch:cpu:strict


def test_an_unknown_precision_is_refused_naming_those_it_offers() -> None:
    with pytest.raises(ValueError, match=r"no precision 'float16'.*offers 'float32', 'strict'"):
        TorchEngine.on_cpu("float16")
    with pytest.raises(EngineUnavailableError, match="precision"):
        make_engine("torch:cpu:float16")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("torch:cpu:float32-totals", "use torch:cpu:float32 (or torch:cpu, its default)"),
        ("torch:cuda:0:float32-totals", "use torch:cuda:0:float32 (or torch:cuda:0, its default)"),
    ],
)
def test_the_old_names_are_refused_with_the_new_ones(old: str, new: str) -> None:
    with pytest.raises(EngineUnavailableError) as refused:
        make_engine(old)
    assert new in str(refused.value)


def test_its_totals_are_libtorchs_own() -> None:
    # The same kernels PyTorch runs: its products and convolutions agree with torch's to the bit.
    rng = np.random.default_rng(0)
    engine = TorchEngine.on_cpu()
    a, b = rng.standard_normal((64, 300), np.float32), rng.standard_normal((300, 10), np.float32)
    got = engine.get(engine.matmul(engine.put(a), engine.put(b)))
    assert got.tobytes() == torch.mm(torch.from_numpy(a), torch.from_numpy(b)).numpy().tobytes()
    x = rng.standard_normal((8, 2, 12, 12), np.float32)
    w, bias = rng.standard_normal((4, 2, 3, 3), np.float32), rng.standard_normal(4, np.float32)
    got = engine.get(
        fused.conv2d_bias(engine, engine.put(x), engine.put(w), engine.put(bias), 1, ((1, 1),) * 2)
    )
    want = torch.nn.functional.conv2d(*map(torch.from_numpy, (x, w, bias)), padding=1)
    assert got.tobytes() == want.numpy().tobytes()


def _conv_losses() -> list[float]:
    rng = np.random.default_rng(3)
    network = Network([Conv2D(8, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 28, 28))
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=FAST, seed=0)
    return [
        trainer.step(rng.random((32, 1, 28, 28), np.float32), rng.integers(0, 10, 32))
        for _ in range(5)
    ]


def test_a_run_repeats_bit_for_bit_on_one_thread_count() -> None:
    assert _conv_losses() == _conv_losses()


def test_the_titanic_sample_reaches_078() -> None:
    run = titanic.run(engine=FAST, progress=False)
    assert run.report.engine.precision == "float32"
    assert run.report.measures["accuracy"] >= 0.78


def test_its_checkpoint_refuses_the_strict_engine(tmp_path: Path) -> None:
    titanic.run(FAST, 1, epochs=1, progress=False, checkpoint_dir=tmp_path, checkpoint_every=1)
    assert Checkpoint.load(Checkpoint.path_in(tmp_path)).engine.precision == "float32"
    with pytest.raises(EngineMismatchError, match="float32"):
        fit(
            titanic.pipeline(),
            titanic.rows(),
            titanic.network(),
            BinaryCrossEntropy(),
            Adam(0.001),
            FitOptions(engine="torch:cpu:strict", seed=1, epochs=2, progress=False),
            resume_from=Checkpoint.path_in(tmp_path),
        )

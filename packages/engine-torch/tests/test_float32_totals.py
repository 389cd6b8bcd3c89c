"""The torch engine with float32 totals: libtorch's own kernels for products, sums and
convolutions, as PyTorch runs them. What it keeps (libtorch's own bits, runs that repeat bit for
bit on one thread count, checkpoints that know it) and what it is named by. The whole contract
runs on it in the nox `torch` session (`--engine torch:cpu:float32-totals`)."""

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
from deepsharp.core.engine import EngineIdentity
from deepsharp.core.samples import titanic
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.engines.torch import TorchEngine, from_spec

FAST = "torch:cpu:float32-totals"


def test_named_by_spec_and_carried_in_the_identity() -> None:
    engine = make_engine(FAST)
    assert isinstance(engine, TorchEngine) and engine.totals == "float32"
    assert engine.identity == EngineIdentity("torch", torch.__version__, "cpu", "float32")
    assert str(engine.identity).endswith("on cpu (float32)")
    assert make_engine("torch:cpu").identity.precision == "strict"  # the default adds in float64
    assert from_spec("cpu:float32-totals").totals == "float32"
    assert EngineIdentity.from_json(engine.identity.to_json()) == engine.identity


def test_an_unknown_way_of_adding_is_refused() -> None:
    with pytest.raises(ValueError, match="'float64' or 'float32', not 'float16'"):
        TorchEngine.on_cpu(totals="float16")


def test_its_totals_are_libtorchs_own() -> None:
    # The same kernels PyTorch runs: its products and convolutions agree with torch's to the bit.
    rng = np.random.default_rng(0)
    engine = TorchEngine.on_cpu("float32")
    a, b = rng.standard_normal((64, 300), np.float32), rng.standard_normal((300, 10), np.float32)
    got = engine.get(engine.matmul(engine.put(a), engine.put(b)))
    assert got.tobytes() == torch.mm(torch.from_numpy(a), torch.from_numpy(b)).numpy().tobytes()
    x = rng.standard_normal((8, 2, 12, 12), np.float32)
    w, bias = rng.standard_normal((4, 2, 3, 3), np.float32), rng.standard_normal(4, np.float32)
    got = engine.get(
        engine.conv2d(engine.put(x), engine.put(w), 1, ((1, 1), (1, 1)), engine.put(bias))
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


def test_its_checkpoint_refuses_an_engine_with_float64_totals(tmp_path: Path) -> None:
    titanic.run(FAST, 1, epochs=1, progress=False, checkpoint_dir=tmp_path, checkpoint_every=1)
    assert Checkpoint.load(Checkpoint.path_in(tmp_path)).engine.precision == "float32"
    with pytest.raises(EngineMismatchError, match="float32"):
        fit(
            titanic.pipeline(),
            titanic.rows(),
            titanic.network(),
            BinaryCrossEntropy(),
            Adam(0.001),
            FitOptions(engine="torch:cpu", seed=1, epochs=2, progress=False),
            resume_from=Checkpoint.path_in(tmp_path),
        )

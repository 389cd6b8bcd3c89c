"""Extensions of one's own written the wrong way are said plainly, where they are, when they are
(trial X: a user writing layers, optimizers, callbacks and hooks): an optimizer binding slots
anew, an optimizer keeping state a checkpoint cannot hold, a callback or hook with a state and no
name, a layer's config() of NumPy numbers, a layer whose forward gives another shape than its
build said or a NumPy array, and `deepsharp compare` of a file of layers of one's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    Callback,
    ConfigurationError,
    CrossEntropy,
    DeepSharpWarning,
    Dense,
    FitOptions,
    Layer,
    MeanSquaredError,
    Network,
    Optimizer,
    Relu,
    ShapeError,
    StepHook,
    fit,
)
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.nn.optimizers.base import learning_rate_setting

RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 4)).astype(np.float32)
Y = (X @ np.arange(1, 5.0, dtype=np.float32))[:, None]


def _fit(optimizer: Any = None, network: Any = None, **options: Any) -> Any:
    return fit(
        None,
        (X, Y),
        network or Network([Dense(8), Relu(), Dense(1)]),
        MeanSquaredError(),
        optimizer or Adam(0.01),
        FitOptions(seed=0, epochs=2, progress=False, **options),
    )


class _Rebinds(Optimizer):
    def __init__(self) -> None:
        self.learning_rate = learning_rate_setting("_Rebinds", 0.05)

    def update(self, engine: Any, slots: Any, grads: Any, state: Any) -> None:
        for i, (slot, grad) in enumerate(zip(slots, grads)):
            slots[i] = engine.sub(slot, engine.mul(grad, self.rate(state)))

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.rate_config()}


def test_an_optimizer_binding_a_slot_anew_is_refused_at_its_first_update() -> None:
    """Failed before: `slots[i] = ...` changed no slot (the run learned nothing, every epoch
    the same loss, silently) and put another value in the trainer's own list of slots."""
    with pytest.raises(TypeError, match=r"_Rebinds.update: slots\[0\] = \.\.\. binds a new value"):
        _fit(_Rebinds())


class _Counts(Optimizer):
    def __init__(self) -> None:
        self.learning_rate = learning_rate_setting("_Counts", 0.05)
        self.t = 0

    def update(self, engine: Any, slots: Any, grads: Any, state: Any) -> None:
        self.t += 1
        for slot, grad in zip(slots, grads):
            engine.assign(slot, engine.sub(slot, engine.mul(grad, self.rate(state) / self.t)))

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.rate_config()}


class _Unnamed(Callback):
    def __init__(self) -> None:
        self.epochs = 0

    def on_epoch_end(self, run: Any, record: Any) -> None:
        self.epochs += 1

    def state(self) -> dict[str, Any]:
        return {"epochs": self.epochs}


class _UnnamedHook(StepHook):
    def state(self) -> dict[str, Any]:
        return {"t": 1}


def test_state_a_checkpoint_cannot_hold_is_warned_of(tmp_path: Path) -> None:
    """Failed before: an optimizer's count kept on itself, a callback's and a hook's state
    without a name, were each lost on resume, silently (a resumed run ended at another loss)."""
    with pytest.warns(DeepSharpWarning, match=r"optimizer _Counts changed its attribute\(s\) 't'"):
        _fit(_Counts(), checkpoint_dir=tmp_path / "a")
    with pytest.warns(DeepSharpWarning) as said:
        fit(
            None,
            (X, Y),
            Network([Dense(1)]),
            MeanSquaredError(),
            Adam(0.01),
            FitOptions(seed=0, epochs=1, progress=False, checkpoint_dir=tmp_path / "b"),
            callbacks=[_Unnamed()],
            hooks=[_UnnamedHook()],
        )
    lines = [str(w.message) for w in said]
    assert any("callback _Unnamed has a state() and no name" in line for line in lines)
    assert any("step hook _UnnamedHook has a state() and no name" in line for line in lines)


class _Scaled(Layer):
    def __init__(self, scale: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        self.scale = scale

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return ops.mul(x, self.scale)

    def config(self) -> dict[str, Any]:
        return {"scale": np.float32(self.scale)}


def test_a_layer_config_of_numpy_numbers_is_refused_before_the_run_naming_the_layer(
    tmp_path: Path,
) -> None:
    """Failed before: json's 'Object of type float32 is not JSON serializable', naming neither
    the layer nor the setting, at the first checkpoint (an epoch's training later) or at save."""
    network = Network([_Scaled(2.0), Dense(1)], inputs=4)
    with pytest.raises(
        ConfigurationError, match=r"layer '_scaled' \(_Scaled\(.*its settings \(config\(\)\)"
    ):
        _fit(network=network, checkpoint_dir=tmp_path)
    run = _fit(network=Network([_Scaled(2.0), Dense(1)], inputs=4))
    with pytest.raises(ConfigurationError, match=r"_Scaled.*float\(x\) for a NumPy number"):
        run.trained.save(tmp_path / "t.safetensors")


class _Doubles(Layer):
    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return ops.concatenate([x, x], -1)  # its build (the default) said rows of x's shape


class _GivesNumPy(Layer):
    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return np.zeros(3)


def test_a_layer_giving_another_shape_than_its_build_or_numpy_is_named() -> None:
    """Failed before: the next Dense was blamed ('affine: shapes ... do not fit'), or as the
    last layer an epoch trained on the wrong outputs before NumPy's reshape error; a NumPy
    array was given advice for two outputs."""
    said = r"_doubles.*gives rows of shape \(\d+,\), and its build said"
    with pytest.raises(ShapeError, match=said):
        _fit(network=Network([Dense(3), _Doubles(), Dense(1)], inputs=4))
    classes = (X[:, 0] > 0).astype(np.int64)
    with pytest.raises(ShapeError, match=said):
        fit(None, (X, classes), Network([Dense(2), _Doubles()], inputs=4), CrossEntropy(),
            Adam(0.01), FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip
    with pytest.raises(
        ConfigurationError,
        match=r"numpy.ndarray .*not with numpy.s arrays, whose values leave the engine",
    ):
        _fit(network=Network([Dense(3), _GivesNumPy(), Dense(1)], inputs=4))


def test_compare_reads_a_file_of_layers_of_one_s_own_with_import(tmp_path: Path) -> None:
    """Failed before: `deepsharp compare` had no --import (argparse refused it), and its
    refusal of the file's kind of layer said to give one."""
    (tmp_path / "own_layers_x.py").write_text(
        "from deepsharp.core import Layer\n"
        "from deepsharp.core.autodiff import functions as ops\n"
        "class Half(Layer):\n"
        "    def forward(self, x, slots, context):\n"
        "        return ops.mul(x, 0.5)\n"
    )
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "a,b,c,d,y\n"
        + "".join(",".join(f"{v:.3f}" for v in (*x, y)) + "\n" for x, y in zip(X, Y[:, 0]))
    )
    script = (
        "import own_layers_x\n"
        "from deepsharp.core import Adam, Dense, FitOptions, MeanSquaredError, Network, "
        "Pipeline, fit, read_csv\n"
        "pipeline = Pipeline().number('a').number('b').number('c').number('d')"
        ".target('y', kind='number')\n"
        "run = fit(pipeline, read_csv('rows.csv'), Network([Dense(3), own_layers_x.Half(), "
        "Dense(1)]), MeanSquaredError(), Adam(0.01), FitOptions(seed=0, epochs=1, "
        "progress=False))\n"
        "run.trained.save('own.safetensors')\n"
    )
    path = os.pathsep.join(sys.path)
    env = {**os.environ, "PYTHONPATH": path}
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True)
    compare = [sys.executable, "-m", "deepsharp.core.cli", "compare", "own.safetensors",
               "rows.csv", "--engines", "light", "light:float32"]  # fmt: skip
    refused = subprocess.run(compare, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "--import own_layers_x" in refused.stderr
    done = subprocess.run(
        [*compare, "--import", "own_layers_x"], cwd=tmp_path, env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Half" in done.stdout or "half" in done.stdout


class _StepsInPlace(Optimizer):
    """Updates each slot with `slots[i] -= step` (the slot changed in place, then put back)."""

    def __init__(self) -> None:
        self.learning_rate = learning_rate_setting("_StepsInPlace", 0.05)

    def update(self, engine: Any, slots: Any, grads: Any, state: Any) -> None:
        self.first = getattr(self, "first", None) or len(slots)  # a value made at its first
        together = slots + []  # noqa: RUF005 (a list's ways: slots + [...], slots.copy())
        assert together == slots.copy()
        for i, grad in enumerate(grads):
            slots[i] -= np.float32(self.rate(state)) * grad

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.rate_config()}


class _Shows(Layer):
    def __init__(self, limit: float = float("inf"), name: str | None = None) -> None:
        super().__init__(name)
        self.limit = limit

    def forward(self, x: Any, slots: Any, context: Any) -> Any:
        return x

    def config(self) -> dict[str, Any]:
        return {"limit": self.limit}


def test_what_the_review_found_these_checks_refused_or_kept(tmp_path: Path) -> None:
    """Failed before (a review of these checks): `slots[i] -= step` (in place on the light
    engine) was refused as binding a new value; a closed trainer kept the slots it handed an
    optimizer of one's own; a layer's config() of infinity (JSON's Infinity, as files held it)
    was refused; an attribute an optimizer makes at its first update warned; a torch tensor
    from a forward was called NumPy's and named 'Tensor'."""
    import warnings

    from deepsharp.core import Trainer

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeepSharpWarning)
        run = _fit(_StepsInPlace(), checkpoint_dir=tmp_path / "a")
    assert run.report.history[-1].loss < run.report.history[0].loss
    trainer = Trainer(Network([Dense(1)], inputs=4), MeanSquaredError(), _StepsInPlace())
    trainer.step(X, Y)
    assert trainer._handed is not None
    trainer.close()
    assert trainer._handed is None
    shown = _fit(network=Network([_Shows(), Dense(1)], inputs=4), checkpoint_dir=tmp_path / "b")
    shown.trained.save(tmp_path / "inf.safetensors")
    torch = pytest.importorskip("torch")

    class _GivesTorch(Layer):
        def forward(self, x: Any, slots: Any, context: Any) -> Any:
            return torch.zeros(3)

    with pytest.raises(ConfigurationError, match=r"gave torch.Tensor .*not with torch's arrays"):
        _fit(network=Network([Dense(3), _GivesTorch(), Dense(1)], inputs=4))

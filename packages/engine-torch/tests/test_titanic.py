"""The Titanic sample on torch:cpu, networks crossing engines, and checkpoints that refuse to."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from deepsharp.core import Adam, BinaryCrossEntropy, EngineMismatchError, FitOptions, Run, fit
from deepsharp.core.cli import main
from deepsharp.core.samples import titanic
from deepsharp.core.training.checkpoint import Checkpoint


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    specs = ("light", "torch:cpu", "torch:cpu:strict")
    return {spec: titanic.run(engine=spec, progress=False) for spec in specs}


@pytest.mark.parametrize("spec", ["torch:cpu", "torch:cpu:strict"])
def test_the_sample_reaches_078_on_torch(runs: dict[str, Run], spec: str) -> None:
    report = runs[spec].report
    assert report.engine.name == "torch" and report.engine.device == "cpu"
    assert report.engine.precision == ("strict" if spec.endswith("strict") else "float32")
    assert report.measures["accuracy"] >= 0.78


def test_strict_light_and_torch_runs_end_within_a_few_units_of_float32(
    runs: dict[str, Run],
) -> None:
    # Both add every total in float64, so the same seed gives nearly the same run:
    # docs/performance.md quotes the largest difference (1.2e-7 when measured).
    light = runs["light"].trained.network.slots
    torch = runs["torch:cpu:strict"].trained.network.slots
    largest = max(float(np.abs(light[name] - torch[name]).max()) for name in light)
    assert largest <= 1e-5


@pytest.mark.parametrize(
    ("trained_on", "served_on"), [("light", "torch:cpu"), ("torch:cpu", "light")]
)
def test_a_network_trained_on_one_engine_is_served_on_the_other(
    runs: dict[str, Run], trained_on: str, served_on: str
) -> None:
    rows = titanic.rows()
    trained = runs[trained_on].trained
    here, there = trained.predict(rows, trained_on), trained.predict(rows, served_on)
    assert np.all(np.abs(here - there) <= 1e-5 + 1.3e-6 * np.abs(here))


def test_on_strict_torch_a_row_is_answered_the_same_alone_and_in_any_company(
    runs: dict[str, Run],
) -> None:
    rows = titanic.rows()
    trained = runs["torch:cpu:strict"].trained
    every = trained.predict(rows, "torch:cpu:strict")  # 28 chunks: the later ones replayed
    for index in (0, 33, 890):
        alone = trained.predict([rows[index]], "torch:cpu:strict")
        assert alone.tobytes() == every[index].tobytes()
    order = np.random.default_rng(2).permutation(891)[:100]
    assert trained.predict([rows[i] for i in order], "torch:cpu:strict").tobytes() == (
        every[order].tobytes()
    )


def _fit_titanic(options: FitOptions, resume_from: Path | None = None) -> Run:
    """The Titanic sample's recipe, network, loss and optimizer, fitted with `options`."""
    return fit(
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.001),
        options,
        resume_from=resume_from,
    )


@pytest.mark.parametrize(
    ("taken_on", "resumed_on"), [("torch:cpu", "light"), ("light", "torch:cpu")]
)
def test_a_checkpoint_is_refused_on_the_other_engine_naming_both(
    tmp_path: Path, taken_on: str, resumed_on: str
) -> None:
    _fit_titanic(
        FitOptions(
            seed=1,
            engine=taken_on,
            epochs=1,
            progress=False,
            checkpoint_dir=tmp_path,
            checkpoint_every=1,
        )
    )
    with pytest.raises(EngineMismatchError) as refused:
        _fit_titanic(
            FitOptions(seed=1, engine=resumed_on, epochs=2, progress=False),
            resume_from=Checkpoint.path_in(tmp_path),
        )
    message = str(refused.value)
    assert "torch 2." in message and "light numpy" in message


def test_the_command_line_runs_the_sample_on_torch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "titanic", "--engine", "torch:cpu", "--no-progress"]) == 0
    assert "deepsharp run on torch" in capsys.readouterr().out


@pytest.mark.parametrize("spec", ["torch:cpu", "torch:cpu:strict"])
def test_rows_evaluated_on_torch_give_the_bits_its_run_measured_them_at(spec: str) -> None:
    rows = titanic.rows()
    options = FitOptions(seed=4, epochs=2, engine=spec, progress=False, metrics=("auc",))
    run = fit(titanic.pipeline(), rows[:600], titanic.network(), BinaryCrossEntropy(),
              Adam(0.01), options, test_rows=rows[600:])  # fmt: skip
    assert run.trained.evaluate(rows[600:], spec, metrics=("auc",)) == run.report.measures

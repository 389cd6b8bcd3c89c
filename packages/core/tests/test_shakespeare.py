"""The Shakespeare sample, shortened (a few steps, 16 validation windows, 40 characters drawn):
on one engine a run is the same run again bit for bit, the text it writes included; a run
resumed from its checkpoint ends where the whole run does; `deepsharp sample shakespeare
--steps N` runs it from the command line. The full run's figures are in docs/sequences.md."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from deepsharp.core.cli import main
from deepsharp.core.samples import shakespeare

pytestmark = pytest.mark.once  # the sample's runs: the same on every Python

ENGINE = "light:float32"  # the strict light engine takes ~0.5-1.5 s a step of this network


@pytest.fixture(autouse=True)
def _short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shakespeare, "VALIDATION_WINDOWS", 16)
    monkeypatch.setattr(shakespeare, "STEPS_AN_EPOCH", 2)


def _run(**options: Any) -> Any:
    return shakespeare.run(engine=ENGINE, steps=4, characters=40, progress=False, **options)


@pytest.fixture(scope="module")
def first() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shakespeare, "VALIDATION_WINDOWS", 16)
        patch.setattr(shakespeare, "STEPS_AN_EPOCH", 2)
        return _run()


def _same_bits(one: Any, other: Any) -> None:
    slots, buffers = one.trained.network.values()
    other_slots, other_buffers = other.trained.network.values()
    assert slots.keys() == other_slots.keys() and buffers.keys() == other_buffers.keys()
    for name in slots:
        assert slots[name].tobytes() == other_slots[name].tobytes(), name
    for name in buffers:
        assert buffers[name].tobytes() == other_buffers[name].tobytes(), name


def test_a_short_run_is_the_same_run_again_its_text_included(first: Any) -> None:
    again = _run()
    assert first.report.epochs_run == 2
    _same_bits(first, again)
    assert first.report.notes[-2:] == again.report.notes[-2:]
    assert first.report.notes[-2] == "4 steps; generated:"
    written = first.report.notes[-1]
    assert written.startswith("ROMEO:") and len(written) == len("ROMEO:") + 40
    # Its loss fell from the uniform guess's ln 67 = 4.20 within four steps.
    assert first.report.history[-1].validation_loss < 4.2


def test_a_run_resumed_from_its_checkpoint_ends_where_the_whole_run_does(
    first: Any, tmp_path: Path
) -> None:
    whole = first
    _run(epochs=1, checkpoint_dir=tmp_path)
    resumed = _run(resume_from=tmp_path)
    _same_bits(whole, resumed)
    assert resumed.report.notes[-1] == whole.report.notes[-1]


def test_the_command_line_runs_it_in_steps(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shakespeare, "run", functools.partial(shakespeare.run, characters=40))
    assert main(["sample", "shakespeare", "--engine", ENGINE, "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 steps; generated:" in out and "ROMEO:" in out


def test_steps_are_refused_for_a_sample_counted_in_epochs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sample", "titanic", "--steps", "2"]) != 0
    assert "--steps is for a sample counted in steps (shakespeare)" in capsys.readouterr().err

"""The Shakespeare sample, shortened (a few steps, 16 validation windows, 40 characters drawn):
on one engine a run is the same run again bit for bit, the text it writes included; a run
resumed from its checkpoint ends where the whole run does; `deepsharp sample shakespeare
--steps N` runs it from the command line. The full run's figures are in docs/sequences.md."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from deepsharp.core import (
    Adam,
    ConfigurationError,
    CrossEntropy,
    DataError,
    Dense,
    Embedding,
    FitOptions,
    Input,
    Network,
    Pipeline,
    fit,
)
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


def test_steps_that_do_not_divide_into_epochs_are_not_rounded_to_whole_epochs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: 3 steps with epochs of 2 ran 2 epochs of 2 (--steps 301 ran 600)."""
    run = shakespeare.run(engine=ENGINE, steps=3, characters=4, progress=False)
    assert run.report.epochs_run == 2
    assert "4 steps; generated:" in run.report.notes  # 2 epochs of 2: 3 rounded up to them
    monkeypatch.setattr(shakespeare, "STEPS_AN_EPOCH", 3)
    run = shakespeare.run(engine=ENGINE, steps=4, characters=4, progress=False)
    assert "4 steps; generated:" in run.report.notes  # 2 epochs of 2, not 2 of 3


def _word_model() -> tuple[Pipeline, Network]:
    pipeline = Pipeline().text("context", "words", shakespeare.CONTEXT, vocabulary=400)
    ids = Input(shakespeare.CONTEXT, dtype="int64", name="context")
    return pipeline, Network(inputs=ids, outputs=Dense(400)(Embedding(400, 8)(ids)))


def test_windows_of_words_split_the_text_by_tokens() -> None:
    """Before: the split counted characters and cut the ids there, leaving no word held out
    (an IndexError on any text of words)."""
    pipeline, network = _word_model()
    text = shakespeare.text()[:20_000]
    windows = shakespeare.Windows(text, steps_an_epoch=1)
    options = FitOptions(seed=0, epochs=1, engine=ENGINE, progress=False)
    run = fit(pipeline, windows, network, CrossEntropy(), Adam(0.001), options)
    assert run.report.epochs_run == 1
    said = str(run.report)  # before: "test rows", though they were the validation windows
    assert "on the 16 validation windows (the same as each epoch's" in said, said


def test_a_text_too_short_for_windows_says_how_many_tokens_each_part_holds() -> None:
    pipeline, network = _word_model()
    options = FitOptions(seed=0, epochs=1, engine=ENGINE, progress=False)
    with pytest.raises(DataError, match=r"each part needs 66 tokens or more"):
        fit(pipeline, shakespeare.Windows("to be or not " * 30), network, CrossEntropy(),
            Adam(), options)  # fmt: skip


def test_windows_take_the_pipeline_s_own_text_column_its_name_and_its_length() -> None:
    """Failed before (trial T): Windows learned a column named "context" whatever the pipeline
    named its own ("row 1 has no column 'text' (did you mean 'context'?)", of a row the user
    never gave), and cut windows of 64 whatever its length (a shape error of a (32, 64) batch)."""
    ids = Input(32, dtype="int64", name="text")
    network = Network(inputs=ids, outputs=Dense(67)(Embedding(67, 8)(ids)))
    pipeline = Pipeline().text("text", tokens="characters", length=32, vocabulary=67)
    options = FitOptions(seed=0, epochs=1, engine=ENGINE, progress=False)
    windows = shakespeare.Windows(shakespeare.text()[:5_000], steps_an_epoch=1)
    run = fit(pipeline, windows, network, CrossEntropy(), Adam(0.001), options)
    assert run.report.epochs_run == 1
    numbers = Pipeline().number("text")
    with pytest.raises(ConfigurationError, match=r"a pipeline of one text column.*not one of"):
        fit(numbers, windows, network, CrossEntropy(), Adam(0.001), options)

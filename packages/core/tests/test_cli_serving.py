"""The commands on a saved trained network beside predict: `deepsharp evaluate FILE ROWS.csv`
(measured on rows with their targets, a line a figure — the figures `TrainedNetwork.evaluate`
gives) and `deepsharp generate FILE PROMPT` (a next-token model's text, as `generate` writes
it; `predict` given such a model says so)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    Dense,
    FitOptions,
    MeanSquaredError,
    Network,
    TrainedNetwork,
    fit,
    read_csv,
)
from deepsharp.core.cli import main
from deepsharp.core.samples import data_path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    saved = tmp_path_factory.mktemp("evaluate") / "titanic.safetensors"
    assert main(["sample", "titanic", "--save", str(saved), "--no-progress"]) == 0
    return saved


def test_a_saved_network_is_measured_a_line_a_figure(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    rows = str(data_path("titanic.csv"))
    assert main(["evaluate", str(model), rows, "--metrics", "auc, f1", "--batch-size", "50"]) == 0
    said = capsys.readouterr()
    lines = [line.split() for line in said.out.splitlines()]
    assert [name for name, _ in lines] == ["loss", "accuracy", "auc", "f1"]
    expected = TrainedNetwork.load(model).evaluate(
        read_csv(rows), metrics=("auc", "f1"), batch_size=50
    )
    assert {name: float(value) for name, value in lines} == expected
    assert "titanic.csv" in said.err


def test_what_cannot_be_measured_is_one_line_saying_why(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    rows = data_path("titanic.csv")
    assert main(["evaluate", str(model), str(rows), "--metrics", "r2"]) == 1
    assert "'r2' measures regression predictions" in capsys.readouterr().err
    assert main(["evaluate", str(rows), str(model)]) == 1
    assert "deepsharp evaluate FILE ROWS.csv" in capsys.readouterr().err
    unlabelled = tmp_path / "unlabelled.csv"
    with open(rows, newline="") as source, open(unlabelled, "w", newline="") as out:
        table = list(csv.reader(source))
        at = table[0].index("Survived")
        csv.writer(out).writerows([row[:at] + row[at + 1 :] for row in table])
    assert main(["evaluate", str(model), str(unlabelled)]) == 1
    assert "Survived" in capsys.readouterr().err


def test_a_network_of_arrays_is_sent_to_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.ones((40, 2), np.float32)
    options = FitOptions(seed=0, epochs=1, progress=False)
    run = fit(None, (x, x[:, :1]), Network([Dense(1)]), MeanSquaredError(), Adam(0.1), options)
    run.trained.save(tmp_path / "arrays.safetensors")
    rows = str(data_path("titanic.csv"))
    assert main(["evaluate", str(tmp_path / "arrays.safetensors"), rows]) == 1
    assert ".evaluate((x, y))" in capsys.readouterr().err


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny next-token model (characters, 8 a context), untrained, saved."""
    from deepsharp.core import CrossEntropy, Embedding, Input, Pipeline
    from deepsharp.core.random import Generator

    pipeline = Pipeline().text("context", tokens="characters", length=8, vocabulary=12)
    pipeline.learn([{"context": "abcabcabbadcc"}])
    ids = Input(8, dtype="int64", name="context")
    network = Network(inputs=ids, outputs=Dense(12)(Embedding(12, 4)(ids)))
    network.initialize(Generator(0))
    saved = tmp_path_factory.mktemp("generate") / "writer.safetensors"
    TrainedNetwork(network, CrossEntropy(), pipeline).save(saved)
    return saved


def test_generate_writes_what_generate_writes(
    writer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    options = ["--length", "20", "--temperature", "0.7", "--seed", "3", "--top-k", "2"]
    assert main(["generate", str(writer), "abca", *options]) == 0
    written = capsys.readouterr().out
    expected = TrainedNetwork.load(writer).generate("abca", 20, 0.7, seed=3, top_k=2)
    assert written == expected + "\n" and len(expected) == 24


def test_generate_refuses_a_model_that_writes_no_text_and_predict_points_to_it(
    writer: Path, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["generate", str(model), "hello"]) == 1
    assert "generate draws tokens of a next-token model" in capsys.readouterr().err
    rows = tmp_path / "contexts.csv"
    rows.write_text("context\nabcabcab\n")
    assert main(["predict", str(writer), str(rows)]) == 0
    said = capsys.readouterr().err
    assert f"deepsharp generate {writer} PROMPT" in said
    assert f"deepsharp evaluate {writer} TEXT.txt" in said
    assert main(["predict", str(model), str(data_path("titanic.csv"))]) == 0
    assert "next-token" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["evaluate", "{model}", "{rows}", "--metrics", "aucc"], "unknown metric 'aucc'"),
        (["generate", "{writer}", "ab", "--temperature", "-1"], "temperature is a number from 0"),
        (["generate", "{writer}", "ab", "--temperature", "nan"], "temperature is a number from 0"),
        (["generate", "{writer}", "ab", "--seed", str(2**64)], "seed is a whole number from 0"),
    ],
)
def test_settings_refused_are_one_line_not_a_traceback(
    model: Path,
    writer: Path,
    arguments: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Failed before (trial EV, review): a ValueError's traceback."""
    capsys.readouterr()
    filled = [
        a.format(model=model, writer=writer, rows=data_path("titanic.csv")) for a in arguments
    ]
    assert main(filled) == 1
    err = capsys.readouterr().err
    assert err.startswith("deepsharp: ") and said in err and "Traceback" not in err


def test_text_and_figures_to_a_closed_standard_output_are_refused(
    model: Path, writer: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (review): generate and evaluate printed to a closed standard output (>&-) and
    exited 0, their text lost."""
    import sys

    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["generate", str(writer), "ab", "--length", "3"]) == 1
    assert main(["evaluate", str(model), str(data_path("titanic.csv"))]) == 1
    said = capsys.readouterr().err
    assert said.count("standard output is closed") == 2
    assert "--output" not in said  # (an option only predict takes: trial HC)


def test_a_prompt_s_bytes_that_are_no_utf8_come_back_as_they_were(
    writer: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Before (trial HC): a byte Python read as no UTF-8 came back as the text '\\udcff'."""
    capsysbinary.readouterr()
    assert main(["generate", str(writer), "ab\udcffc", "--length", "0"]) == 0
    assert capsysbinary.readouterr().out == b"ab\xffc\n"


def test_a_text_cut_short_by_a_failure_ends_its_line(
    writer: Path, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    """The text drawn before a failure stays, on a line of its own (a review: it ended with no
    newline, the error's line after it)."""
    import numpy as np

    loaded = TrainedNetwork.load(writer)
    network = loaded.network
    network.set_slots({name: np.full_like(v, 3e38) for name, v in network.slots.items()})
    broken = tmp_path / "broken.safetensors"
    loaded.save(broken)
    capsysbinary.readouterr()
    assert main(["generate", str(broken), "ab", "--length", "3"]) == 1
    said = capsysbinary.readouterr()
    assert said.out == b"ab\n" and b"not all finite" in said.err


def test_a_next_token_model_is_evaluated_on_a_text_file(
    writer: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failed before: the command read the text as CSV rows and refused the model, which has
    no target column; now a text file (or standard input) is its rows, each next token a
    target."""
    import io

    capsys.readouterr()
    text = tmp_path / "held-out.txt"
    text.write_text("abcabcabbadccabcabcabba", encoding="utf-8")
    assert main(["evaluate", str(writer), str(text), "--metrics", "f1"]) == 0
    said = capsys.readouterr()
    expected = TrainedNetwork.load(writer).evaluate(text.read_text(), metrics=("f1",))
    lines = [line.split() for line in said.out.splitlines()]
    assert {name: float(value) for name, value in lines} == expected
    assert f"on the text of {text}" in said.err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.read_bytes())))
    assert main(["evaluate", str(writer), "-"]) == 0
    assert capsys.readouterr().out.split()[1] == repr(expected["loss"])
    # a byte-order mark and CRLF line ends read as Python reads a text file (a review: each
    # was measured as an unknown token)
    plain = "abcab\ncabbad\nccabcabcabba\n"
    text.write_bytes(b"\xef\xbb\xbf" + plain.replace("\n", "\r\n").encode())
    assert main(["evaluate", str(writer), str(text)]) == 0
    assert capsys.readouterr().out.split()[1] == repr(
        TrainedNetwork.load(writer).evaluate(plain)["loss"]
    )
    text.write_bytes(b"abc\xffabcabcabcabc")
    assert main(["evaluate", str(writer), str(text)]) == 1
    assert "is no UTF-8 text (byte 3" in capsys.readouterr().err
    assert main(["evaluate", str(writer), str(tmp_path / "none.txt")]) == 1
    assert "no such text file" in capsys.readouterr().err

"""The command line, as a user runs it."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from deepsharp.core.cli import main
from deepsharp.core.samples import data_path


@pytest.mark.parametrize("command", [[], ["sample"], ["predict"], ["doctor"]])
def test_every_command_has_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--help"])
    assert stopped.value.code == 0
    assert "usage: deepsharp" in capsys.readouterr().out


def test_sample_then_predict_answers_a_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "titanic.safetensors"
    assert main(["sample", "titanic", "--save", str(saved), "--no-progress"]) == 0
    report = capsys.readouterr().out
    assert "accuracy" in report and "Braund, Mr. Owen Harris" in report
    output = tmp_path / "answers.csv"
    assert (
        main(["predict", str(saved), str(data_path("titanic.csv")), "--output", str(output)]) == 0
    )
    with open(output, newline="") as file:
        answers = list(csv.reader(file))
    assert answers[0] == ["Survived"]
    assert len(answers) == 892
    assert all(0.0 <= float(row[0]) <= 1.0 for row in answers[1:])


def test_predict_on_a_missing_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(tmp_path / "none.safetensors"), "rows.csv"]) == 1
    assert "none.safetensors" in capsys.readouterr().err


def test_an_engine_that_is_not_installed_is_refused_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sample", "titanic", "--engine", "nosuch"]) == 1
    assert "nosuch" in capsys.readouterr().err


def test_doctor_lists_the_light_engine_as_usable() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deepsharp.core.cli", "doctor"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "light" in done.stdout and "usable" in done.stdout

"""The command line's arguments checked before any work (trial NU): module names and modules
that fail as they are imported, names given empty or as '-', a --checkpoints folder the run
could not write into, and standard input named as the user named it. Each was a traceback, a
file named '-', or a message naming /dev/stdin or a Python parameter."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from deepsharp.core.cli import main
from deepsharp.core.samples import data_path

ROWS = str(data_path("titanic.csv"))


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "titanic.safetensors"
    assert main(["sample", "titanic", "--save", str(path), "--no-progress"]) == 0
    return path


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    error = capsys.readouterr().err
    assert error.startswith("deepsharp: ") and error.count("\n") == 1, error
    return error


TRAIN = ["train", ROWS, "--target", "Survived", "--no-progress", "--epochs", "1"]


def test_module_names_and_modules_that_fail_as_they_are_imported_are_one_line(
    model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # --import's and --network's modules: the current folder first
    monkeypatch.syspath_prepend(str(tmp_path))  # an engine's module: on the path
    (tmp_path / "boomnow.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "brokennow.py").write_text("def f(:\n")
    out = str(tmp_path / "x.safetensors")
    for argv, said in [
        (["predict", str(model), ROWS, "--import", ""], "--import '': the module is no module"),
        (["predict", str(model), ROWS, "--import", ".foo"], "'.foo': the module is no module"),
        (["predict", str(model), ROWS, "--import", "boomnow"],
         "the module raised RuntimeError('boom') as it was imported"),
        (["predict", str(model), ROWS, "--import", "brokennow"],
         "brokennow.py, line 1: invalid syntax"),
        ([*TRAIN, "--out", out, "--network", ".foo:bar"], "module '.foo' is no module name"),
        (["sample", "titanic", "--engine", ".x:y"], "'.x' is no module name"),
        (["sample", "titanic", "--engine", "boomnow:f"], "raised RuntimeError('boom') as it"),
        (["sample", "titanic", "--engine", "brokennow:f"], "line 1: invalid syntax"),
    ]:  # fmt: skip
        assert main(argv) == 1, argv
        assert said in _said(capsys), argv


def test_names_given_empty_or_as_a_dash_are_refused_or_read_as_standard_output(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "x.safetensors")
    for argv, said in [
        ([*TRAIN, "--out", out, "--checkpoints", ""], "--checkpoints is empty: give its value"),
        ([*TRAIN, "--out", out, "--network", ""], "--network is empty: give its value"),
        (
            ["train", ROWS, "--target", "", "--out", out],
            "--target is empty: give the column to predict",
        ),  # (it said "or leave --target out", which train then refused: trial CL)
        (["sample", "titanic", "--save", "-"], "--save '-': this writes a file, and '-' would"),
        (["export", str(model), "-"], "OUT.onnx '-': this writes a file"),
    ]:
        assert main(argv) == 1, argv
        assert said in _said(capsys), argv
    assert not Path("-").exists()
    assert main(["predict", str(model), ROWS, "--output", "-"]) == 0  # standard output
    assert capsys.readouterr().out.count("\n") == 892


def test_a_checkpoint_folder_the_run_cannot_write_into_is_refused_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "x.safetensors")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    for folder, said in [
        (f"{ROWS}/ck", f"--checkpoints {ROWS}/ck: {ROWS!r} is a file, not a folder"),
        (str(tmp_path / "gone"), "gone: a symbolic link to"),
    ]:
        assert main([*TRAIN, "--out", out, "--checkpoints", folder]) == 1
        said_now = capsys.readouterr()
        assert said in said_now.err and "pipeline" not in said_now.out  # before any work


@pytest.mark.parametrize("named", ["/dev/stdin", "-"])
def test_rows_piped_into_dev_stdin_are_predicted_as_from_their_file(
    model: Path, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: '/dev/stdin' was "the file is empty"; '-' was 'no such CSV file', and `python
    -m deepsharp` no module."""
    assert main(["predict", str(model), ROWS]) == 0
    from_file = capsys.readouterr().out
    with open(ROWS, "rb") as rows:
        cat = subprocess.Popen(["cat"], stdin=rows, stdout=subprocess.PIPE)  # stdin: a pipe
        piped = subprocess.run(
            [sys.executable, "-m", "deepsharp", "predict", str(model), named],
            stdin=cat.stdout,
            capture_output=True,
            text=True,
            timeout=300,
        )
        cat.wait(timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == from_file and from_file.count("\n") == 892


def test_standard_input_is_named_so_in_messages(model: Path) -> None:
    for given, said in [
        (b"", "standard input (ROWS -) is a pipe that nothing was written into"),
        (Path(ROWS).read_bytes().splitlines(keepends=True)[0], "standard input (ROWS -): no row"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "deepsharp", "predict", str(model), "-"],
            input=given, capture_output=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 1 and said in done.stderr.decode(), done.stderr


def test_a_network_file_given_as_the_rows_and_one_row_without_a_target_say_what_to_do(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a network given as the rows was 'not UTF-8 text ... save it as UTF-8 (iconv
    -f latin1 ...)'; one training row without its target had no advice (two or more had)."""
    assert main(["predict", str(model), str(model)]) == 1
    assert "not UTF-8 text but a safetensors file (a network, a trained network" in _said(capsys)
    out = str(tmp_path / "e.safetensors")
    rows = tmp_path / "rows.csv"
    rows.write_text("x,y\n" + "".join(f"{i % 5},{'' if i == 7 else i % 2}\n" for i in range(40)))
    assert main(["train", str(rows), "--target", "y", "--out", out, "--no-progress"]) == 1
    assert "without one: drop it first, or give its target" in _said(capsys)


def test_a_sample_runs_no_longer_than_its_own_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before (trial SA): `sample shakespeare --steps 10 --epochs 3` ran 30 steps, and
    `sample resnet --epochs 40` ten epochs past its schedule's end, though --epochs said 'a
    shorter run'; shakespeare.run(steps=0) trained nothing and generated from that."""
    from deepsharp.core.samples import shakespeare

    for argv, said in [
        (["sample", "shakespeare", "--steps", "10", "--epochs", "3"], "counted in steps: use --"),
        (["sample", "resnet", "--epochs", "31"], "runs 30 epochs (its rate's schedule is made"),
    ]:
        assert main(argv) == 1, argv
        assert said in _said(capsys)
    for steps in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="steps is a whole number of 1 or more"):
            shakespeare.run(steps=steps, progress=False)


def test_a_latin1_csv_holding_json_is_no_safetensors_file_and_stdin_is_told_to_pipe(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial FP: a Latin-1 CSV whose 9th byte opens JSON was called a safetensors file; the
    iconv advice for standard input named 'standard input (ROWS -)' as a file."""
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b'payload\n{"city": "Z\xfcrich"}\n')
    assert main(["predict", str(model), str(latin)]) == 1
    assert "line 2: not UTF-8 text (the byte 0xfc" in _said(capsys)
    with open(latin, "rb") as given:
        done = subprocess.run([sys.executable, "-m", "deepsharp", "predict", str(model), "-"],
                              stdin=given, capture_output=True, timeout=300)  # fmt: skip
    said = done.stderr.decode()
    assert "pipe it through iconv -f latin1 -t utf-8" in said and "> utf8.csv" not in said
    # through a pipe, whose first bytes are gone when the text fails: what it may be, each
    # (trial SV5: gzip was told to iconv from latin1)
    packed = gzip.compress(b"payload\n1\n")
    done = subprocess.run([sys.executable, "-m", "deepsharp", "predict", str(model), "-"],
                          input=packed, capture_output=True, timeout=300)  # fmt: skip
    said = done.stderr.decode()
    assert "compressed, pipe it through gunzip" in said and "UTF-16" in said, said


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (["predict", "MODEL", ROWS], 1),  # before: a BrokenPipeError traceback
        (["sample", "titanic", "--no-progress"], 1),  # before: "deepsharp: standard output
        (["doctor"], 1),  # was closed by its reader (Broken pipe)", where predict said nothing
        # A command writing a file outlives its reader: it ended, the file unwritten (a review)
        (["train", ROWS, "--target", "Survived", "--out", "OUT", "--no-progress"], 0),
        (["sample", "titanic", "--save", "OUT", "--no-progress"], 0),
    ],
)
def test_a_reader_that_has_gone_ends_each_command_quietly(
    model: Path, tmp_path: Path, command: list[str], code: int
) -> None:
    out = tmp_path / "out.safetensors"
    command = [{"MODEL": str(model), "OUT": str(out)}.get(part, part) for part in command]
    child = subprocess.Popen(
        [sys.executable, "-m", "deepsharp.core.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # as `| head` does once it has read enough
    child.wait(timeout=300)
    assert child.returncode == code
    assert child.stderr.read() == ""
    assert out.exists() == (code == 0)

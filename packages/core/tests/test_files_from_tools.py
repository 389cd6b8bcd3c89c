"""Files as other tools write them, read by the command line and the pipeline as their users
mean them (trial CL4: an analyst's files, written by spreadsheets and macOS tools)."""

from __future__ import annotations

import csv
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    CrossEntropy,
    DataError,
    Dense,
    FitOptions,
    Network,
    Pipeline,
    TrainedNetwork,
    fit,
)
from deepsharp.core.cli import main
from deepsharp.core.data.sources import read_csv

SPECIES = "espèce"  # composed (NFC), as typed


def _rows(count: int = 30) -> str:
    lines = [f"Größe,Länge,{SPECIES}"]
    lines += [f"{i % 7},{i % 5 + 0.5},{'ab'[i % 2]}" for i in range(count)]
    return "\n".join(lines) + "\n"


def test_a_target_typed_composed_finds_a_header_written_with_accents_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial CL4): `--target espèce` found no column 'espèce' (did you mean
    'espèce'?) in a file whose header wrote its accents apart (NFD). The file's own spelling is
    kept (a network trained on it serves it); a file of the other form is said to be one."""
    composed, apart = tmp_path / "nfc.csv", tmp_path / "nfd.csv"
    composed.write_text(_rows(), encoding="utf-8")
    apart.write_text(unicodedata.normalize("NFD", _rows()), encoding="utf-8")
    out = tmp_path / "n.ds"
    assert main(["train", str(apart), "--target", SPECIES, "--out", str(out), "--epochs", "1"]) == 0
    assert TrainedNetwork.load(out).pipeline.target_name == unicodedata.normalize("NFD", SPECIES)
    assert main(["predict", str(out), str(apart), "--output", str(tmp_path / "p.csv")]) == 0
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 31
    capsys.readouterr()
    assert main(["predict", str(out), str(composed)]) == 1
    assert "the same letters, in another Unicode form" in capsys.readouterr().err


def test_a_frame_naming_a_column_in_another_unicode_form_is_said_so() -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(
        {unicodedata.normalize("NFD", "Größe"): [1.0, 2.0] * 10, "y": [0, 1] * 10}
    )
    pipeline = Pipeline().number("Größe").target("y")
    with pytest.raises(DataError, match="the same letters, in another Unicode form"):
        fit(pipeline, frame, Network([Dense(2)]), CrossEntropy(), Adam(0.01), FitOptions(seed=0))


def test_excel_s_line_naming_the_comma_is_read_past_and_another_separator_is_said(
    tmp_path: Path,
) -> None:
    """Failed before: Excel's first line 'sep=,' was taken as the header ('line 2: this row has
    3 fields but the header has 2')."""
    path = tmp_path / "excel.csv"
    path.write_text("sep=,\r\na,b,y\r\n1,2,0\r\n3,4,1\r\n", encoding="utf-8-sig")
    assert read_csv(path) == [{"a": "1", "b": "2", "y": "0"}, {"a": "3", "b": "4", "y": "1"}]
    path.write_text("sep=;\na;b;y\n1;2;0\n", encoding="utf-8")
    with pytest.raises(
        DataError, match=r"line 1: Excel's line 'sep=;' says the file is separated by ';'"
    ):
        read_csv(path)
    path.write_text("sep=,\n", encoding="utf-8")  # nothing after it: no header
    with pytest.raises(DataError, match="the file is empty"):
        read_csv(path)


def test_category_values_holding_commas_are_listed_as_csv_quotes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before: three names were listed 'Doe, "Jane", O'Neil, Pat, Smith, John'."""
    path = tmp_path / "who.csv"
    names = ['"Doe, ""Jane"""', '"O\'Neil, Pat"', '"Smith, John"']
    lines = ["size,who,y"] + [f"{i % 7},{names[i % 3]},{i % 2}" for i in range(30)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert (
        main(
            ["train", str(path), "--target", "y", "--out", str(tmp_path / "n.ds"), "--epochs", "1"]
        )
        == 0
    )
    said = capsys.readouterr().out
    assert '3 values ("Doe, ""Jane""", "O\'Neil, Pat", "Smith, John")' in said, said


def test_an_overflow_of_outputs_alone_is_not_blamed_on_the_features() -> None:
    """Before: an output past float32's range, of finite modest features, was said to be huge
    values in the row's features."""
    network = Network([Dense(1)], inputs=1)
    network.set_slots({"dense.weights": np.array([[3e38]]), "dense.bias": np.array([0.0])})
    with pytest.raises(DataError, match=r"or outputs past float32's range, 3\.4e38"):
        network.predict(np.array([[10.0]], np.float32))


def test_predictions_keep_the_columns_named_to_join_them_back_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (trial CL4): predictions could be joined to their rows by order alone, and a
    blank line or a field over several lines moved the rows against the file's lines."""
    rows = tmp_path / "rows.csv"
    lines = ["id,note,size,y"] + [f'{i},"line one\nline {i}",{i % 7},{i % 2}' for i in range(30)]
    rows.write_text("\n\n".join(lines) + "\n", encoding="utf-8")  # blank lines between rows
    out = tmp_path / "n.ds"
    assert main(["train", str(rows), "--target", "y", "--out", str(out), "--epochs", "1"]) == 0
    written = tmp_path / "p.csv"
    assert main(["predict", str(out), str(rows), "--keep", "id", "--keep", "note",
                 "--output", str(written)]) == 0  # fmt: skip
    with open(written, newline="") as handle:
        read = list(csv.reader(handle))
    plain = TrainedNetwork.load(out).predict(read_csv(rows))
    assert read[0] == ["id", "note", "y"]
    assert [row[0] for row in read[1:]] == [str(i) for i in range(30)]
    assert read[5][1] == "line one\nline 4"
    assert [float(row[2]) for row in read[1:]] == plain[:, 0].tolist()
    assert main(["predict", str(out), str(rows), "--keep", "ID"]) == 1
    assert "no column 'ID' (did you mean 'id'?) to keep" in capsys.readouterr().err
    # the target kept beside its prediction: headed apart (trial D6: 'y,y', refused by read_csv)
    assert main(["predict", str(out), str(rows), "--keep", "y", "--output", str(written)]) == 0
    assert [row["y (given)"] for row in read_csv(written)][:3] == ["0", "1", "0"]
    rows.write_text(rows.read_text().replace("id,note,size,y", "y (given),note,size,y"), "utf-8")
    assert main(["predict", str(out), str(rows), "--keep", "y", "--keep", "y (given)",
                 "--output", str(written)]) == 0  # fmt: skip
    assert list(read_csv(written)[0]) == ["y (given)", "y (given) (given)", "y"]


def test_a_field_past_the_longest_over_many_lines_is_said_so(tmp_path: Path) -> None:
    """Before (trial ST5): csv's own 'field larger than field limit (16777216)'."""
    path = tmp_path / "long.csv"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('a,b\n1,"')
        for _ in range(18):
            handle.write("x" * 1_000_000 + "\n")
        handle.write('"\n')
    with pytest.raises(DataError, match=r"line \d+: a field runs past 16,777,216 characters"):
        read_csv(path)
    from deepsharp.core import scan_csv

    with pytest.raises(DataError, match="a field runs past 16,777,216 characters"):
        list(scan_csv(path).parts())

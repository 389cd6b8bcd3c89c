"""Rows served after training read as the training rows were, whichever way they were read, and
what a served value cannot be is said plainly (trial P: a hostile user's rows, from a CSV read by
deepsharp, by pandas and by the command line)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from deepsharp.core import DataError, DeepSharpWarning, Pipeline, scan_csv
from deepsharp.core.cli import main
from deepsharp.core.data.inference import infer_pipeline
from deepsharp.core.data.values import label_lookup
from deepsharp.core.samples import titanic


def _numbers() -> Pipeline:
    rows = [{"a": 1.0, "c": "x", "y": "p"}, {"a": 2.0, "c": "z", "y": "q"}]
    return Pipeline().number("a").category("c").target("y").learn(rows)


def test_a_long_value_is_cut_in_a_message_and_a_huge_whole_number_is_not_infinite() -> None:
    """Failed before: a 5,000-digit field was shown whole (a 5,171-character message), and a
    whole number beyond float64 (-2**1024) was called infinite."""
    pipeline = _numbers()
    with pytest.raises(DataError) as long:
        pipeline.features([{"a": "9" * 5000, "c": "x", "y": "p"}])
    said = str(long.value)
    assert len(said) < 400 and "(5,000 characters)" in said
    assert "beyond float32's range" in said
    with pytest.raises(DataError, match=r"-1797693\d+\.\.\. \(310 characters\) is beyond"):
        pipeline.features([{"a": -(2**1024), "c": "x", "y": "p"}])
    with pytest.raises(DataError, match=r"'a': inf is infinite"):
        pipeline.features([{"a": float("inf"), "c": "x", "y": "p"}])


def test_one_number_written_two_ways_in_a_category_warns_where_the_rows_are_learned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before (trial P): "01" and "1" were two categories read from a CSV as text, and
    one number read by pandas, which took "1"'s one-hot for every "01" row — silently. Now
    learning such values warns, at the caller's line; the command line says it as its own."""
    rows = [
        {"codes": c, "y": y} for c, y in zip(["01", "1", "1.0", "2", "02", "3"] * 10, "ab" * 30)
    ]
    with pytest.warns(
        DeepSharpWarning, match=r"'codes' holds .*two ways \('01' and '1'; '02' and '2'\)"
    ):
        Pipeline().category("codes").target("y").learn(rows)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        Pipeline().category("codes").target("y").learn(rows)
    assert said[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "1" and "1.0" are one label: nothing to say
        Pipeline().category("c").learn([{"c": c} for c in ("1", "1.0", "2")])
    path = tmp_path / "codes.csv"
    path.write_text(
        "codes,x,y\n" + "".join(f"{r['codes']},{i % 7},{r['y']}\n" for i, r in enumerate(rows))
    )
    out = tmp_path / "c.st"
    assert main(["train", str(path), "--target", "y", "--out", str(out), "--epochs", "1"]) == 0
    err = capsys.readouterr().err
    assert "deepsharp: warning: column 'codes' holds values that are one number" in err
    assert "DeepSharpWarning" not in err


def test_a_negative_value_served_to_a_logged_column_says_why_and_what_to_do() -> None:
    """Before (trial P): 'this column takes the logarithm (log=True)', which a user of
    `deepsharp train` (which chose it) never wrote, and nothing to do about it."""
    pipeline = Pipeline().number("fare", log=True).learn([{"fare": v} for v in (0.0, 7.25, 80.0)])
    with pytest.raises(DataError) as refused:
        pipeline.features([{"fare": 3.0}, {"fare": -7.25}])
    said = str(refused.value)
    assert said.startswith("row 2 (counting from 1), column 'fare': found -7.25")
    assert "never negative" in said and "clip the column at 0" in said
    assert ".number('fare', log=False)" in said


def test_rows_lacking_columns_name_every_one_and_what_each_may_mean(tmp_path: Path) -> None:
    """Before (trial P): the first missing column alone, with no word of 'pclass' for 'Pclass'
    (training's own inference said 'did you mean'), from a file, a frame, or rows as dicts."""
    pandas = pytest.importorskip("pandas")
    rows = [{"Pclass": 1, "Sex": "m", "y": "a"}, {"Pclass": 3, "Sex": "f", "y": "b"}]
    pipeline = Pipeline().number("Pclass").category("Sex").target("y").learn(rows)
    path = tmp_path / "lower.csv"
    path.write_text("pclass, Sex,y\n1,m,a\n")
    said = r"no columns 'Pclass' \(did you mean 'pclass'\?\), 'Sex' \(did you mean ' Sex'\?\)"
    with pytest.raises(DataError, match=r"lower.csv: the file has " + said):
        list(scan_csv(path).parts(["Pclass", "Sex"]))  # as deepsharp predict reads a file
    with pytest.raises(DataError, match=r"the DataFrame has " + said):
        pipeline.features(pandas.read_csv(path))
    with pytest.raises(DataError, match=r"row 1 \(counting from 1\) has " + said):
        pipeline.features([{"pclass": 1, " Sex": "m", "y": "a"}])


def test_a_category_s_text_is_composed_as_a_text_column_s_is() -> None:
    """Failed before (trial P): 'café' typed with a combining accent (macOS, an NFD export) was
    an unknown value — all zeros, or an error naming 'café' beside the known 'café'."""
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    learned = Pipeline().category("c", unknown="error").learn([{"c": composed}, {"c": "th"}])
    assert (
        learned.features([{"c": decomposed}]).tolist()
        == learned.features([{"c": composed}]).tolist()
    )
    from_nfd = Pipeline().category("c").learn([{"c": decomposed}, {"c": "th"}])
    assert from_nfd.features([{"c": composed}]).tolist() == [[1.0, 0.0]]
    # a file written before holds the value as it was typed: found by its composed form too
    assert label_lookup([decomposed, "th"])[composed] == 0


def test_the_command_line_s_refusals_say_what_the_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (trial P): train on a Parquet file said 'scan it with scan_parquet(path)', which
    no command does; on four rows, 'split(train=0.7, validation=0.15) needs at least 7 rows',
    a split the command line never named."""
    pyarrow = pytest.importorskip("pyarrow")
    from pyarrow import parquet

    path = tmp_path / "rows.parquet"
    parquet.write_table(pyarrow.table({"x": [1.0, 2.0], "y": ["a", "b"]}), path)
    out = str(tmp_path / "m.st")
    assert main(["train", str(path), "--target", "y", "--out", out]) == 1
    said = capsys.readouterr().err
    assert "a Parquet file" in said and "deepsharp train and compare read CSV" in said
    few = tmp_path / "few.csv"
    few.write_text("x,y\n0.5,a\n2.25,b\n3.5,a\n1.75,b\n")
    assert main(["train", str(few), "--target", "y", "--out", out]) == 1
    assert "(the default split, deepsharp train's) needs at least 7 rows" in capsys.readouterr().err


def test_a_count_on_a_few_rows_is_inferred_as_numbers_not_as_categories() -> None:
    """Failed before (trial P): on the Titanic file's first ten rows SibSp (0, 1, 3) was read as
    three categories, and the 58 rows of the whole file holding 2, 4, 5 or 8 were served all
    zeros, silently. Ten rows a value on average make categories (Pclass on the whole file)."""
    rows = titanic.rows()

    def kinds(inferred: Any) -> dict[Any, str]:
        return {choice.column: choice.kind for choice in inferred.choices}

    assert kinds(infer_pipeline(rows[:10], "Survived"))["SibSp"] == "number"
    whole = kinds(infer_pipeline(rows, "Survived"))
    assert whole["Pclass"] == "category" and whole["SibSp"] == "number"


def test_a_column_of_one_value_is_0_after_its_logarithm_too() -> None:
    """Failed before (trial P): a column of one value is only centred, as the docs say, but
    after log1p the mean of its values rounded away from them: 7.3 gave -4.4e-16, not 0, on a
    pipeline learned whole and on one learned a part at a time."""
    for value in (7.3, 5.0, 0.1):
        rows = [{"d": value}] * 7
        whole = Pipeline().number("d", log=True).learn(rows)
        assert whole.features([{"d": value}]).tolist() == [[0.0]]
        filled = Pipeline().number("d", log=True).learn([*rows, {"d": None}])
        assert filled.features([{"d": value}, {"d": None}]).tolist() == [[0.0], [0.0]]
        parts = Pipeline().number("d", log=True)
        learning = parts.learning(["d"])
        learning.add(rows[:3])
        learning.add(rows[3:])
        learning.finish()
        assert parts.features([{"d": value}]).tolist() == [[0.0]]


def test_a_missing_parquet_file_and_dev_null_are_named_as_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (trial P): 'no such CSV file' of a missing .parquet, and /dev/null 'a character
    device that nothing was written into (is the program that writes into it running?)'."""
    rows = tmp_path / "rows.csv"
    rows.write_text("x,y\n" + "".join(f"{i * 0.37:.2f},{'ab'[i % 2]}\n" for i in range(40)))
    out = str(tmp_path / "m.st")
    assert main(["train", str(rows), "--target", "y", "--out", out, "--epochs", "1"]) == 0
    capsys.readouterr()
    assert main(["predict", out, str(tmp_path / "nothere.parquet")]) == 1
    assert "no such Parquet file" in capsys.readouterr().err
    assert main(["predict", out, os.devnull]) == 1
    assert f"{os.devnull} holds nothing, ever" in capsys.readouterr().err


def test_review_mends_of_the_messages_of_rows() -> None:
    """Failed before (a review): truth values written two ways were said to be one number;
    2,000 missing columns were each looked for and named (8 s, a 34,000-character message);
    "1e400" was infinite; a cut value's length counted its quotes."""
    rows = [{"f": v, "y": y} for v, y in zip(["true", "True", "false"] * 20, "ab" * 30)]
    with pytest.warns(DeepSharpWarning, match=r"one number \(or truth value\) written two ways"):
        Pipeline().category("f").target("y").learn(rows)
    wanted = Pipeline().number("a").learn([{"a": 1.0}, {"a": 2.0}])
    many = [f"c{i}" for i in range(2000)]
    from deepsharp.core.data.sources import lacking

    said = lacking(many, ["a"])
    assert said.count("'c") == 10 and said.endswith("and 1,990 more") and len(said) < 400
    with pytest.raises(DataError, match=r"'1e400' is beyond float32's range"):
        wanted.features([{"a": "1e400"}])
    with pytest.raises(DataError, match=r"\(5,000 characters\)"):
        wanted.features([{"a": "9" * 5000}])


def test_a_number_column_takes_truth_values_as_a_parquet_file_and_its_csv_give_them(
    tmp_path: Path,
) -> None:
    """Failed before (trial D): a Parquet file's bool column declared .number() was taken as 1
    and 0, and the same rows as CSV (pandas writes True and False) were refused."""
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    from deepsharp.core import scan_parquet

    table = pyarrow.table({"b": [True, False, True, None], "y": [0, 1, 0, 1]})
    parquet.write_table(table, tmp_path / "b.parquet")
    (tmp_path / "b.csv").write_text("b,y\nTrue,0\nFalse,1\nTrue,0\n,1\n", encoding="utf-8")

    def features(scan: Any) -> tuple[Pipeline, list[Any]]:
        pipeline = Pipeline().number("b").target("y", kind="classes")
        learning = pipeline.learning(scan.names)
        parts = list(scan.parts())
        for part in parts:
            learning.add(part)
        learning.finish()
        return pipeline, [pipeline.features(part).tolist() for part in parts]

    by_csv, made = features(scan_csv(tmp_path / "b.csv"))
    assert made == features(scan_parquet(tmp_path / "b.parquet"))[1]
    with pytest.raises(DataError, match="expected a number, found 'yes'"):
        by_csv.features([{"b": "yes", "y": 0}])


def test_a_pipeline_s_warnings_name_the_line_that_learned_it() -> None:
    """Failed before (trial N): a flag column holding a value on every row warned one call too
    high (at the top of a script, as 'sys:1'), as did a category too wide."""
    import inspect

    lines = []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        lines.append(inspect.currentframe().f_lineno + 1)  # type: ignore[union-attr]
        Pipeline().flag("f").learn([{"f": "a"}, {"f": "b"}])
        lines.append(inspect.currentframe().f_lineno + 1)  # type: ignore[union-attr]
        Pipeline().category("c").learn([{"c": str(i)} for i in range(150)])
    assert [(w.filename, w.lineno) for w in said] == [(__file__, line) for line in lines]

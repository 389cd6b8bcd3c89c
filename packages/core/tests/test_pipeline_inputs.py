"""A pipeline that feeds several inputs: each column names the input it feeds (`input=`), and
the features are a dict of one array an input, through fit, files, serving, the command line
and scanned files."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Concatenate,
    DataError,
    Dense,
    FileFormatError,
    FitOptions,
    Input,
    Network,
    Pipeline,
    Relu,
    TrainedNetwork,
    fit,
    read_csv,
    scan_csv,
)
from deepsharp.core.cli import main
from deepsharp.core.samples import titanic


def two_inputs() -> Pipeline:
    """Titanic's columns fed to two inputs: the person ("who") and the ticket ("ticket")."""
    return (
        Pipeline()
        .category("Sex", input="who")
        .number("Age", missing_flag=True, input="who")
        .category("Pclass", input="ticket")
        .number("Fare", log=True, input="ticket")
        .flag("Cabin", input="ticket")
        .target("Survived")
    )


def two_input_network() -> Network:
    who, ticket = Input(4, name="who"), Input(5, name="ticket")
    joined = Concatenate()([Dense(8, activation="relu")(who), Dense(8, activation="relu")(ticket)])
    return Network(inputs=[who, ticket], outputs=Dense(1)(joined))


def test_columns_feed_the_inputs_they_name_one_array_an_input() -> None:
    rows = titanic.rows()
    pipe = two_inputs().learn(rows)
    features = pipe.features(rows[:5])
    assert list(features) == ["who", "ticket"]
    assert features["who"].shape == (5, 4) and features["ticket"].shape == (5, 5)
    assert pipe.input_shapes == {"who": (4,), "ticket": (5,)}
    alone = (
        Pipeline()
        .category("Sex")
        .number("Age", missing_flag=True)
        .category("Pclass")
        .number("Fare", log=True)
        .flag("Cabin")
        .target("Survived")
        .learn(rows)
        .features(rows[:5])
    )
    assert np.concatenate([features["who"], features["ticket"]], axis=1).tobytes() == (
        alone.tobytes()
    )


def test_a_pipeline_whose_columns_name_one_input_gives_one_array() -> None:
    rows = titanic.rows()
    pipe = Pipeline().number("Age", input="x").number("Fare", input="x").target("Survived")
    features = pipe.learn(rows).features(rows[:3])
    assert isinstance(features, np.ndarray) and features.shape == (3, 2)
    assert pipe.row_shape == (2,) and pipe.input_shapes is None


def test_a_column_that_names_no_input_beside_columns_that_do_is_refused() -> None:
    with pytest.raises(ValueError, match=r"column 'Fare' names no input.*'Age' feeds 'x'"):
        Pipeline().number("Age", input="x").number("Fare")
    with pytest.raises(ValueError, match=r"column 'Fare' feeds 'x'.*'Age' names no input"):
        Pipeline().number("Age").number("Fare", input="x")
    with pytest.raises(ValueError, match="a name is letters, digits"):
        Pipeline().number("Age", input="my input")


def test_two_texts_on_one_input_are_refused_their_ids_would_overlap() -> None:
    """Before: each text's vocabulary gave ids from 2 up on one input, one id two words."""
    with pytest.raises(ValueError, match="'title' and 'body' both feed the one input"):
        Pipeline().text("title").text("body")
    with pytest.raises(ValueError, match="both feed input 'words'"):
        Pipeline().text("title", input="words").text("body", input="words")
    Pipeline().text("title", input="title").text("body", input="body")  # each its own


def test_the_recipe_records_each_column_s_input_and_reads_it_back() -> None:
    rows = titanic.rows()
    pipe = two_inputs().learn(rows)
    recorded = json.loads(json.dumps(pipe.to_json()))
    assert recorded["version"] == 4
    assert [column.get("input") for column in recorded["columns"]] == [
        "who",
        "who",
        "ticket",
        "ticket",
        "ticket",
    ]
    again = Pipeline.from_json(recorded)
    for name, array in again.features(rows).items():
        assert array.tobytes() == pipe.features(rows)[name].tobytes()
    recorded["columns"][1]["input"] = "no input"
    with pytest.raises(FileFormatError, match=r"columns\[1\].*a name is letters"):
        Pipeline.from_json(recorded)


def test_a_recipe_of_version_3_still_reads() -> None:
    rows = titanic.rows()
    pipe = titanic.pipeline().learn(rows)
    recorded = pipe.to_json()
    recorded["version"] = 3
    again = Pipeline.from_json(recorded).features(rows[:4])
    assert again.tobytes() == pipe.features(rows[:4]).tobytes()


def test_fit_on_rows_feeds_a_network_of_two_inputs_and_its_file_serves_rows(
    tmp_path: Path,
) -> None:
    rows = titanic.rows()
    run = fit(
        two_inputs(),
        rows,
        two_input_network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=3, epochs=15, progress=False),
    )
    assert run.report.measures["accuracy"] > 0.75
    path = tmp_path / "two.safetensors"
    run.trained.save(path)
    again = TrainedNetwork.load(path)
    assert again.predict(rows[:40]).tobytes() == run.trained.predict(rows[:40]).tobytes()


def test_deepsharp_predict_reads_a_csv_for_a_network_of_two_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = titanic.rows()
    run = fit(
        two_inputs(),
        rows,
        two_input_network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=3, epochs=2, progress=False),
    )
    run.trained.save(tmp_path / "two.safetensors")
    assert main(["predict", str(tmp_path / "two.safetensors"), str(titanic_csv())]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Survived" and len(lines) == 892
    got = np.array([float(line) for line in lines[1:]], np.float32)
    assert got.tobytes() == run.trained.predict(rows)[:, 0].tobytes()


def titanic_csv() -> Path:
    from deepsharp.core.samples import data_path

    return data_path("titanic.csv")


def test_a_scanned_file_trains_a_network_of_two_inputs_and_predicts_in_parts(
    tmp_path: Path,
) -> None:
    scan = scan_csv(titanic_csv(), read_rows=100, buffer_rows=128)
    run = fit(
        two_inputs(),
        scan,
        two_input_network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=3, epochs=15, progress=False),
    )
    assert run.report.measures["accuracy"] > 0.75
    parts = np.concatenate(list(run.trained.predict_parts(scan)))
    assert parts.tobytes() == run.trained.predict(read_csv(titanic_csv())).tobytes()


def test_a_pipeline_of_two_inputs_and_a_network_of_one_is_refused_naming_both() -> None:
    with pytest.raises(DataError, match=r"feeds 2 inputs \('who', 'ticket'\).*takes one"):
        fit(
            two_inputs(),
            titanic.rows(),
            Network([Dense(1)]),
            BinaryCrossEntropy(),
            Adam(0.01),
            FitOptions(seed=3, epochs=1, progress=False),
        )


def test_a_pipeline_feeding_inputs_the_network_has_not_is_refused_naming_them() -> None:
    who, other = Input(4, name="who"), Input(5, name="other")
    network = Network(inputs=[who, other], outputs=Dense(1)(Concatenate()([who, other])))
    with pytest.raises(DataError, match=r"lacks 'other' and holds 'ticket'"):
        fit(
            two_inputs(),
            titanic.rows(),
            network,
            BinaryCrossEntropy(),
            Adam(0.01),
            FitOptions(seed=3, epochs=1, progress=False),
        )


def test_a_trained_file_whose_pipeline_and_network_disagree_on_inputs_is_refused(
    tmp_path: Path,
) -> None:
    from deepsharp.core.files import read_safetensors, write_safetensors

    rows = titanic.rows()
    run = fit(
        two_inputs(),
        rows,
        two_input_network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=3, epochs=1, progress=False),
    )
    run.trained.save(tmp_path / "two.safetensors")
    tensors, metadata = read_safetensors(tmp_path / "two.safetensors", "test")
    recipe: dict[str, Any] = json.loads(metadata["pipeline"])
    for column in recipe["columns"][:2]:
        column["input"] = "person"
    metadata["pipeline"] = json.dumps(recipe)
    write_safetensors(tmp_path / "renamed.safetensors", tensors, metadata)
    with pytest.raises(FileFormatError, match=r"feeds the inputs \['person', 'ticket'\].*'who'"):
        TrainedNetwork.load(tmp_path / "renamed.safetensors")
    for column in recipe["columns"]:
        column.pop("input")
    metadata["pipeline"] = json.dumps(recipe)
    write_safetensors(tmp_path / "one.safetensors", tensors, metadata)
    with pytest.raises(FileFormatError, match=r"feeds one input \(9 values.*'who', 'ticket'"):
        TrainedNetwork.load(tmp_path / "one.safetensors")


def test_a_csv_of_a_pipeline_of_two_inputs_reads_its_rows_once(tmp_path: Path) -> None:
    """One column may feed two inputs as two kinds (age as a number and as a flag)."""
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["age", "y"])
        writer.writerows([[str(i % 7) if i % 5 else "", str(i % 2)] for i in range(40)])
    pipe = Pipeline().number("age", input="a").flag("age", input="b").target("y")
    features = pipe.learn(read_csv(path)).features(read_csv(path))
    assert features["a"].shape == (40, 1) and features["b"][:, 0].tolist() == [
        0.0 if i % 5 == 0 else 1.0 for i in range(40)
    ]


def test_a_frame_of_numbers_learned_as_arrays_is_read_by_its_columns_names(
    tmp_path: Path,
) -> None:
    """Failed before (trial PD): fit(None, (frame, y)) kept no names, and a frame of the same
    columns in another order was predicted by place, silently wrong (0.37 apart), before and
    after save/load; one of another column was taken too."""
    pandas = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    x = pandas.DataFrame(
        {"p": rng.normal(size=80), "q": rng.normal(size=80) * 5, 3: rng.integers(0, 4, 80)}
    )
    run = fit(None, (x, (x.p > 0).astype(int)), Network([Dense(4), Relu(), Dense(1)]),
              BinaryCrossEntropy(), Adam(0.01), FitOptions(seed=0, epochs=2, progress=False))  # fmt: skip
    path = tmp_path / "frame.safetensors"
    run.trained.save(path)
    for trained in (run.trained, TrainedNetwork.load(path)):
        assert trained.pipeline.to_json()["arrays"]["names"] == ["p", "q", "3"]
        expected = trained.predict(x)
        np.testing.assert_array_equal(trained.predict(x[[3, "q", "p"]]), expected)
        np.testing.assert_array_equal(trained.predict(x.to_numpy()), expected)  # by place
        with pytest.raises(DataError, match=r"other columns .*\('p', 'q', '3'\): it lacks 'p'; "
                           r"it holds 'r'; give a frame of those columns"):  # fmt: skip
            trained.predict(x.rename(columns={"p": "r"}))
        twice = pandas.DataFrame([[1.0, 2.0, 3.0]], columns=["q", "q", "3"])  # (a review)
        with pytest.raises(DataError, match=r"naming 'q' twice \(as text\)"):
            trained.predict(twice)


def test_a_frame_learned_as_arrays_names_the_row_of_a_missing_or_textual_value() -> None:
    """Failed before (trial PD): a nullable column's pd.NA, and a text, were "DataFrame cannot
    be read as one (float() argument must be ... not 'NAType')", naming no row or column."""
    pandas = pytest.importorskip("pandas")
    y = np.array([0, 1, 0])
    for q, said in (
        (
            pandas.array([1.0, None, 2.0], dtype="Float64"),
            r"feature \[2\] \(each counting from 1\): missing \(nan\)",
        ),
        (
            pandas.array([1, None, 2], dtype="Int64"),
            r"feature \[2\] \(each counting from 1\): missing \(nan\)",
        ),
        (["1", "a", "2"], r"feature \[2\] \(each counting from 1\): 'a' is no number"),
    ):
        x = pandas.DataFrame({"p": [1.0, 2.0, 3.0], "q": q})
        with pytest.raises(DataError, match=r"row 2, " + said):
            fit(None, (x, y), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
                FitOptions(seed=0, epochs=1, progress=False))  # fmt: skip

"""ONNX export of a trained network's pipeline, column by column: what a file does with each
value `predict` takes or refuses (unknown categories, negative logs, values beyond float32, a
label's plain form), and a column kind or naming it cannot write, refused saying what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from export_helpers import session

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    DataError,
    DeepSharpWarning,
    Dense,
    ExportError,
    FitOptions,
    Generator,
    Network,
    Pipeline,
    TrainedNetwork,
    fit,
)
from deepsharp.core.data.columns import ColumnKind


class Shouted(ColumnKind):
    """Text written as the count of its capital letters: a kind of one's own."""

    kind = "shouted"

    def width(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [str(self.name)]

    def write(self, values: Any, out: Any, at: int) -> None:
        out[:, at] = [sum(c.isupper() for c in str(v)) for v in values]


def _trained(pipeline: Pipeline, rows: list[dict[str, Any]], tmp_path: Path) -> TrainedNetwork:
    run = fit(
        pipeline,
        rows,
        Network([Dense(2), Dense(1)]),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(epochs=1, seed=0, checkpoint_dir=tmp_path),
    )
    return run.trained


ROWS = [{"a": str(i % 3), "b": "Ab" * (i % 4), "y": str(i % 2)} for i in range(40)]


def test_a_column_kind_the_exporter_cannot_write_is_refused_naming_it(tmp_path: Path) -> None:
    pipeline = Pipeline().column(Shouted("b")).number("a").target("y")
    trained = _trained(pipeline, ROWS, tmp_path)
    name = Shouted.key
    with pytest.raises(ExportError, match=rf"column 'b' is of the kind '{name}'.*network alone"):
        trained.export_onnx(tmp_path / "x.onnx")


def test_a_category_that_refuses_unknown_values_is_exported_with_a_warning(tmp_path: Path) -> None:
    pipeline = Pipeline().category("a", unknown="error").target("y")
    trained = _trained(pipeline, ROWS, tmp_path)
    with pytest.warns(DeepSharpWarning, match="cannot refuse a row.*all zeros") as warned:
        trained.export_onnx(tmp_path / "x.onnx")
    assert len(warned) == 1  # before: twice, once a trace
    assert warned[0].filename == __file__  # before: the exporter's own line in model.py
    served = session(tmp_path / "x.onnx")
    unknown = served.run(None, {"a": np.array([["7"]], object)})[0]
    zeros = trained.network.predict(
        np.zeros((1, trained.pipeline.feature_count), np.float32), trained.loss
    )
    np.testing.assert_allclose(unknown, zeros, atol=1e-6)


def test_a_log_column_s_negative_value_is_served_as_nan_as_the_docs_say(tmp_path: Path) -> None:
    """Before: a value in (-1, 0), which predict refuses, was served as a prediction like any
    other (log1p of it is finite); -1 gave -inf, which a network may turn into any value."""
    rows = [{"a": str(i % 5 * 0.7), "y": str(i % 2)} for i in range(40)]
    trained = _trained(Pipeline().number("a", log=True).target("y"), rows, tmp_path)
    trained.export_onnx(tmp_path / "x.onnx")
    served = session(tmp_path / "x.onnx")
    given = np.array([[-0.5], [-1.0], [-3.0], [1e39], [3.5e38], [np.inf], [0.7]], np.float64)
    got = served.run(None, {"a": given})[0][:, 0]  # beyond float32: before, 4.5e-26 for 1e39
    assert np.isnan(got[:6]).all() and np.isfinite(got[6])


def test_values_predict_refuses_are_served_as_nan_not_as_a_confident_prediction(
    tmp_path: Path,
) -> None:
    """Failed before: an infinite number, one beyond float32's range, an image's NaN or
    infinite value (each a DataError from predict) were served as 0.0 or 1.0."""
    rows = [{"x": float(i), "img": [i % 3, 1.0], "y": i % 2} for i in range(40)]
    pipeline = Pipeline().number("x").image("img", (2,)).target("y")
    trained = _trained(pipeline, rows, tmp_path)
    trained.export_onnx(tmp_path / "x.onnx")
    served = session(tmp_path / "x.onnx")
    bad = [(np.inf, [1.0, 1.0]), (-1e39, [1.0, 1.0]), (1.0, [np.nan, 1.0]), (1.0, [1.0, -1e39])]
    for x, image in [*bad, (np.nan, [1.0, 1.0]), (1.0, [1.0, 1.0])]:
        feeds = {"x": np.array([[x]], np.float64), "img": np.array([image], np.float64)}
        got = served.run(None, feeds)[0][0, 0]
        if (x, image) in bad:
            assert np.isnan(got), (x, image)
        else:  # a missing number is filled, as predict fills it
            expected = trained.predict([{"x": None if np.isnan(x) else x, "img": image}])
            np.testing.assert_allclose(got, expected[0, 0], rtol=1e-6)


def test_a_label_s_plain_form_finds_it_in_the_file_as_predict_does(tmp_path: Path) -> None:
    """A learned '02' is found by '2' (a DataFrame's value of it) in the file as by predict."""
    rows = [{"code": f"0{i % 3 + 1}", "y": str(int(i % 3 == 1))} for i in range(40)]
    trained = _trained(Pipeline().category("code").target("y"), rows, tmp_path)
    trained.export_onnx(tmp_path / "x.onnx")
    served = session(tmp_path / "x.onnx")
    got = served.run(None, {"code": np.array([["2"], ["02"], ["9"]], object)})[0]
    wanted = trained.predict([{"code": 2}, {"code": "02"}, {"code": "9"}])
    np.testing.assert_allclose(got, wanted, rtol=1e-6)
    assert got[0, 0] == got[1, 0] != got[2, 0]


def test_a_column_named_as_a_slot_is_served(tmp_path: Path) -> None:
    """Failed before: the column's input and the slot's constant shared a name, and the onnx
    checker's refusal came out as 'deepsharp wrote an ONNX graph ...; please report it'."""
    rows = [{"dense.weights": str(i % 5), "y": str(i % 2)} for i in range(40)]
    trained = _trained(Pipeline().number("dense.weights").target("y"), rows, tmp_path)
    trained.export_onnx(tmp_path / "x.onnx")
    got = session(tmp_path / "x.onnx").run(None, {"dense.weights": np.array([[3.0]])})[0]
    np.testing.assert_allclose(got, trained.predict([{"dense.weights": "3"}]), rtol=1e-6)


def test_a_column_read_two_ways_and_an_unlearned_pipeline_say_what_to_do(tmp_path: Path) -> None:
    """Failed before: 'declare it once' (the trained network cannot be changed so), and 'call
    pipeline.learn(...) before row_shape' (an attribute of deepsharp's own)."""
    rows = [{"a": str(i % 4), "y": str(i % 2)} for i in range(40)]
    trained = _trained(Pipeline().number("a").category("a").target("y"), rows, tmp_path)
    with pytest.raises(ExportError, match=r"export the network alone .*pipeline\.features"):
        trained.export_onnx(tmp_path / "x.onnx")
    network = Network([Dense(1)], inputs=1)
    network.initialize(Generator(0))
    unlearned = TrainedNetwork(network, BinaryCrossEntropy(), Pipeline().number("a").target("y"))
    with pytest.raises(DataError, match=r"not learned its statistics yet: call") as refused:
        unlearned.export_onnx(tmp_path / "x.onnx")
    assert "row_shape" not in str(refused.value)


def test_float32_categories_missing_texts_and_odd_names_are_found_as_predict_finds_them(
    tmp_path: Path,
) -> None:
    """Failed before (trial CA): a category learned from float32 values ('0.1') missed the
    float64 text of them the docs say to give ('0.10000000149011612'), which predict finds
    (trial CH: and '9.999999747378752e-06' for a learned '1e-05');
    pandas' missing texts ('NA') missed the missing category predict reads them as; columns
    named as the exporter's own nodes ('column a/isnan', 'dense/gemm') were refused as a graph
    the onnx checker refuses."""
    pd = pytest.importorskip("pandas")

    frame = pd.DataFrame(
        {
            "f": np.array([0.1, 0.2, 1e-05, 0.2] * 10, np.float32),
            "column a/isnan": [None, "x", "y", "x"] * 10,
            "dense/gemm": [str(i % 3) for i in range(40)],
            "y": [str(i % 2) for i in range(40)],
        }
    )
    pipeline = Pipeline().category("f").category("column a/isnan").category("dense/gemm")
    trained = _trained(pipeline.target("y"), frame, tmp_path)
    trained.export_onnx(tmp_path / "x.onnx")
    given = [repr(float(np.float32(0.2))), repr(float(np.float32(1e-05))), "0.25", "NA", ""]
    texts = ["y", "NA", "x", "", "z"]
    got = session(tmp_path / "x.onnx").run(
        None,
        {
            "f": np.array([[v] for v in given], object),
            "column a/isnan": np.array([[v] for v in texts], object),
            "dense/gemm": np.array([["1"]] * 5, object),
        },
    )[0]
    rows = [
        {"f": float(np.float32(0.2)), "column a/isnan": "y", "dense/gemm": "1"},
        {"f": float(np.float32(1e-05)), "column a/isnan": "NA", "dense/gemm": "1"},
        {"f": 0.25, "column a/isnan": "x", "dense/gemm": "1"},
        {"f": "NA", "column a/isnan": None, "dense/gemm": "1"},
        {"f": None, "column a/isnan": "z", "dense/gemm": "1"},
    ]
    np.testing.assert_allclose(got, trained.predict(rows), rtol=1e-6)
    fed = trained.pipeline.features(rows)
    assert fed[0, :3].tolist() == [0, 0, 1]  # 0.2 widened: its category (1e-05 sorts first)
    assert fed[1, 3:6].tolist() == fed[3, 3:6].tolist() == [0, 0, 1]  # "NA": missing


def test_a_value_no_utf8_holds_is_refused_naming_its_column(tmp_path: Path) -> None:
    """Failed before (trial CA): a lone surrogate (os.fsdecode's) trained and saved, and
    export raised a bare UnicodeEncodeError from inside onnx."""
    rows = [{"a": ["b\udcff", "c"][i % 2], "y": str(i % 2)} for i in range(40)]
    trained = _trained(Pipeline().category("a").target("y"), rows, tmp_path)
    with pytest.raises(ExportError, match=r"column 'a' learned the value 'b\\udcff', which is no"):
        trained.export_onnx(tmp_path / "x.onnx")

"""The pipeline: the recipe for the data, learned from the training rows only."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core.data.pipeline import Pipeline, read_csv
from deepsharp.core.data.scan import scan_csv
from deepsharp.core.errors import DataError, DeepSharpWarning, FileFormatError
from deepsharp.core.samples import data_path

TITANIC = data_path("titanic.csv")

TITANIC_NAMES = [
    "Pclass=1",
    "Pclass=2",
    "Pclass=3",
    "Sex=female",
    "Sex=male",
    "Embarked=C",
    "Embarked=Q",
    "Embarked=S",
    "Age",
    "Age:missing",
    "SibSp",
    "Parch",
    "Fare",
    "Cabin:flag",
]


def titanic_recipe() -> Pipeline:
    return (
        Pipeline()
        .category("Pclass")
        .category("Sex")
        .category("Embarked")
        .number("Age", fill="median", missing_flag=True)
        .number("SibSp")
        .number("Parch")
        .number("Fare", log=True)
        .flag("Cabin")
        .target("Survived", kind="binary")
    )


@pytest.fixture(scope="module")
def titanic_rows() -> list[dict[str, str | None]]:
    return read_csv(TITANIC)


def fresh(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(row) for row in rows]


# -- read_csv -----------------------------------------------------------------------------------


def test_read_csv_gives_text_and_none_for_empty_fields(
    titanic_rows: list[dict[str, Any]],
) -> None:
    assert len(titanic_rows) == 891
    first = titanic_rows[0]
    assert first["Name"] == "Braund, Mr. Owen Harris"
    assert first["Age"] == "22"
    assert first["Cabin"] is None


def test_read_csv_ragged_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("a,b\n1,2\n3\n")
    with pytest.raises(DataError, match=r"ragged\.csv, line 3: this row has 1 fields"):
        read_csv(path)


def test_read_csv_missing_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere\.csv"):
        read_csv(tmp_path / "nowhere.csv")


# -- the Titanic recipe -------------------------------------------------------------------------


def test_titanic_recipe_gives_exactly_14_features(
    titanic_rows: list[dict[str, Any]],
) -> None:
    # Training rows that hold every Embarked value (Titanic's two missing ones would be a
    # category of their own: see the next test).
    training = [row for row in titanic_rows if row["Embarked"] is not None]
    pipe = titanic_recipe().learn(training)
    assert pipe.feature_count == 14
    assert pipe.feature_names == TITANIC_NAMES
    x = pipe.features(titanic_rows)
    assert x.shape == (891, 14)
    assert x.dtype == np.float32
    assert x.flags.c_contiguous
    assert pipe.classes == ["0", "1"]
    assert pipe.target_name == "Survived"
    assert pipe.target_kind == "binary"
    y = pipe.targets(titanic_rows)
    assert y.shape == (891, 1)
    assert y.dtype == np.float32
    assert float(y.sum()) == 342.0  # survivors
    # The first passenger: third class, male, from Southampton, 22, no cabin.
    row = dict(zip(pipe.feature_names, x[0].tolist()))
    assert row["Pclass=3"] == 1.0
    assert row["Sex=male"] == 1.0
    assert row["Embarked=S"] == 1.0
    assert row["Age:missing"] == 0.0
    assert row["Cabin:flag"] == 0.0


def test_a_missing_category_value_is_a_category_of_its_own(
    titanic_rows: list[dict[str, Any]],
) -> None:
    pipe = titanic_recipe().learn(titanic_rows)
    assert pipe.feature_count == 15
    assert pipe.feature_names[8] == "Embarked:missing"
    x = pipe.features(titanic_rows)
    missing = [i for i, row in enumerate(titanic_rows) if row["Embarked"] is None]
    assert len(missing) == 2
    assert np.all(x[missing, 5:9] == [0, 0, 0, 1])


def test_numbers_are_filled_flagged_logged_and_scaled() -> None:
    rows = [{"v": "1"}, {"v": "3"}, {"v": None}, {"v": " 7 "}]
    x = Pipeline().number("v", fill="median", missing_flag=True, scale=False).learn(rows)
    assert x.features(rows).tolist() == [[1, 0], [3, 0], [3, 1], [7, 0]]
    logged = Pipeline().number("v", fill=0.0, log=True, scale=False).learn(rows)
    expected = np.log1p([1.0, 3.0, 0.0, 7.0]).astype(np.float32)
    assert np.array_equal(logged.features(rows)[:, 0], expected)
    scaled = Pipeline().number("v", fill="mean").learn(rows).features(rows)[:, 0]
    assert abs(float(scaled.mean())) < 1e-6
    assert abs(float(scaled.std()) - 1.0) < 1e-6


def test_median_of_a_logged_column_is_taken_after_the_log() -> None:
    rows = [{"v": "0"}, {"v": "3"}, {"v": "100"}, {"v": None}]
    pipe = Pipeline().number("v", fill="median", log=True, scale=False).learn(rows)
    assert pipe.features(rows)[3, 0] == np.float32(math.log1p(3.0))


def test_nan_is_missing_and_filled() -> None:
    training = [{"v": 1.0}, {"v": 2.0}, {"v": 3.0}]
    pipe = Pipeline().number("v", missing_flag=True, scale=False).learn(training)
    rows = [{"v": float("nan")}, {"v": "NaN"}, {"v": "nan"}, {"v": ""}, {"v": None}]
    assert pipe.features(rows).tolist() == [[2.0, 1.0]] * 5


@pytest.mark.parametrize("value", [float("inf"), "-inf", "inf", "1e309", "1e300", -1e40, 10**400])
def test_a_number_that_is_infinite_or_beyond_float32_is_refused_naming_row_and_column(
    value: object,
) -> None:
    """Before: "inf" and "1e309" were taken as missing, 1e300 became inf in float32 (and a
    served prediction of 1.0)."""
    training = [{"Age": 1.0}, {"Age": 2.0}, {"Age": 3.0}]
    pipe = Pipeline().number("Age").learn(training)
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\), column 'Age': .*float32"):
        pipe.features([{"Age": 4.0}, {"Age": value}])
    with pytest.raises(DataError, match=r"row 3 \(counting from 1\), column 'Age'"):
        Pipeline().number("Age").learn([*training[:2], {"Age": value}])


def test_a_dataframe_column_of_infinite_numbers_is_refused_too() -> None:
    pd = pytest.importorskip("pandas")
    pipe = Pipeline().number("x").learn(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    with pytest.raises(DataError, match=r"row 2 .*column 'x': inf is infinite"):
        pipe.features(pd.DataFrame({"x": [1.0, math.inf]}))
    assert pipe.features(pd.DataFrame({"x": [1.0, math.nan]}))[1, 0] == 0.0  # the median, scaled


def test_a_feature_that_overflows_float32_once_scaled_is_refused() -> None:
    pipe = Pipeline().number("x").learn([{"x": 0.0}, {"x": 1e-30}])
    with pytest.raises(DataError, match=r"row 1 .*column 'x': its feature 'x' is inf"):
        pipe.features([{"x": 3e38}])


def test_flag_is_one_where_the_field_holds_anything() -> None:
    rows = [{"c": "C85"}, {"c": None}, {"c": ""}, {"c": 0}, {"c": float("nan")}]
    pipe = Pipeline().flag("c").learn(rows)
    assert pipe.features(rows)[:, 0].tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]


def test_unseen_category_gives_zeros_by_default() -> None:
    pipe = Pipeline().category("c").learn([{"c": "b"}, {"c": "a"}])
    assert pipe.feature_names == ["c=a", "c=b"]
    assert pipe.features([{"c": "z"}, {"c": "b"}]).tolist() == [[0, 0], [0, 1]]


def test_numeric_categories_sort_as_numbers() -> None:
    pipe = Pipeline().category("n").learn([{"n": "10"}, {"n": "9"}, {"n": "1"}])
    assert pipe.feature_names == ["n=1", "n=9", "n=10"]


def test_classes_target_gives_int64_indices_in_sorted_order() -> None:
    rows = [{"x": "1", "y": "cat"}, {"x": "2", "y": "ant"}, {"x": "3", "y": "bee"}]
    pipe = Pipeline().number("x").target("y", kind="classes").learn(rows)
    assert pipe.classes == ["ant", "bee", "cat"]
    targets = pipe.targets(rows)
    assert targets.dtype == np.int64
    assert targets.tolist() == [2, 0, 1]


def test_number_target_gives_float32_column() -> None:
    rows = [{"x": "1", "y": "2.5"}, {"x": "2", "y": "-1"}]
    pipe = Pipeline().number("x").target("y", kind="number").learn(rows)
    targets = pipe.targets(rows)
    assert targets.dtype == np.float32
    assert targets.tolist() == [[2.5], [-1.0]]
    assert pipe.classes is None


# -- learned from the training rows only ---------------------------------------------------------


def test_statistics_come_from_the_training_rows_only(
    titanic_rows: list[dict[str, Any]],
) -> None:
    pipe = titanic_recipe()
    order = np.random.default_rng(7).permutation(len(titanic_rows))
    train, _, test = pipe.partition(len(titanic_rows), order)
    rows = fresh(titanic_rows)
    before = titanic_recipe().learn([rows[i] for i in train])
    # A test row's Age changes wildly, and one gets a missing Age: the learned median is the same.
    rows[test[0]]["Age"] = "9999"
    rows[test[1]]["Age"] = None
    after = titanic_recipe().learn([rows[i] for i in train])
    assert after.to_json() == before.to_json()
    # ...but learning from every row does move it: the test can tell.
    everything = titanic_recipe().learn(rows)
    assert everything.to_json() != before.to_json()
    # A missing Age in a test row is filled with the training median.
    probe = {**rows[test[1]]}
    ages = sorted(float(rows[i]["Age"]) for i in train if rows[i]["Age"] is not None)
    median = float(np.median(ages))
    x = titanic_recipe().learn([rows[i] for i in train])
    age = x.feature_names.index("Age")
    stats = x.to_json()["columns"][3]["learned"]
    assert stats["fill"] == median
    assert x.features([probe])[0, age] == np.float32((median - stats["mean"]) / stats["std"])


# -- the split -----------------------------------------------------------------------------------


def test_partition_of_891_rows_gives_623_133_135() -> None:
    order = np.random.default_rng(0).permutation(891)
    train, validation, test = Pipeline().partition(891, order)
    assert (len(train), len(validation), len(test)) == (623, 133, 135)
    together = np.concatenate([train, validation, test])
    assert np.array_equal(together, order)


def test_split_fractions_are_checked() -> None:
    with pytest.raises(ValueError, match="train"):
        Pipeline().split(train=0.0)
    with pytest.raises(ValueError, match="validation"):
        Pipeline().split(train=0.5, validation=-0.1)
    with pytest.raises(ValueError, match="at most 1"):
        Pipeline().split(train=0.8, validation=0.3)
    # NumPy's numbers are numbers (failed before: 'split: train must be a number'); a truth
    # value is none
    assert Pipeline().split(np.float32(0.75), np.float64(0.25))._train == 0.75
    with pytest.raises(TypeError, match=r"must be a number, not (np\.True_|True)$"):  # NumPy 1
        Pipeline().split(train=np.bool_(True))


def test_a_split_leaving_no_test_fraction_serves_only_a_run_given_test_rows() -> None:
    """Before: split(0.85, 0.15) was refused even where the test rows came apart."""
    pipe = Pipeline().split(train=0.85, validation=0.15)
    with pytest.raises(DataError, match=r"leaves no test rows: give the run test rows"):
        pipe.partition(100, np.arange(100))
    train, validation, test = pipe.partition(100, np.arange(100), test=False)
    assert (len(train), len(validation), len(test)) == (85, 15, 0)
    train, validation, _ = Pipeline().split(0.80, 0.15).partition(3823, np.arange(3823), test=False)
    assert (len(train), len(validation)) == (3220, 603)  # the ratio 80:15


def test_too_few_rows_for_a_split_says_how_many_are_needed() -> None:
    pipe = Pipeline().split(train=0.70, validation=0.15)
    with pytest.raises(DataError, match=r"there are 4 rows.*needs at least 7 rows"):
        pipe.partition(4, np.arange(4))
    train, validation, test = pipe.partition(7, np.arange(7))
    assert (len(train), len(validation), len(test)) == (4, 1, 2)


# -- bad rows: DataError naming row and column ----------------------------------------------------


def test_missing_column_names_row_column_and_the_columns_it_has() -> None:
    pipe = Pipeline().number("Age").learn([{"Age": "1"}, {"Age": "2"}])
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\) has no column 'Age'.*'Fare'"):
        pipe.features([{"Age": "3"}, {"Fare": "7.25"}])


@pytest.mark.parametrize(
    "when",
    [
        np.datetime64("2020-01-03"),
        np.datetime64("NaT"),
        np.timedelta64("NaT"),
        np.timedelta64(3, "D"),
        datetime.date(2020, 1, 3),
    ],
)
@pytest.mark.parametrize("distinct", [True, False])
def test_dates_and_times_are_refused_where_numbers_belong(when: Any, distinct: bool) -> None:
    """Failed before: NumPy took np.datetime64 as days since 1970 (18262) and NaT as -2**63, a
    feature of -9.2e18 (a Titanic row with Age=NaT served a saturated 1.0), silently;
    np.timedelta64('NaT') raised a raw TypeError."""
    rows: list[dict[str, Any]] = [{"a": float(i) if distinct else 1.0} for i in range(40)]
    rows[7]["a"] = when
    said = r"row 8 \(counting from 1\), column 'a': expected a number, found .*"
    with pytest.raises(DataError, match=said):
        Pipeline().number("a").learn(rows)
    pipe = Pipeline().number("a").learn(rows[:5])
    with pytest.raises(DataError, match=said):
        pipe.features(rows)
    image = Pipeline().image("i", (1, 2)).learn([{"i": [1, 2]}])
    with pytest.raises(DataError, match=r"row 2 .*column 'i': expected"):
        image.features([{"i": [1, 2]}, {"i": np.array([when, when])}])
    try:  # a DataFrame's column comes as one array, of objects here (pandas calls NaT missing)
        import pandas
    except ImportError:
        pass
    else:
        if pandas.isna(when):
            return
        frame = pandas.DataFrame({"a": np.array([1.0, 2.0, when], dtype=object)})
        with pytest.raises(DataError, match=r"row 3 .*column 'a': expected a number"):
            pipe.features(frame)


def test_pandas_missing_markers_in_rows_are_missing_values() -> None:
    """Failed before: pd.NA in a row was refused ("expected a number, found <NA>") and as a
    category was the label "<NA>"; pd.NaT was taken as a date."""
    pd = pytest.importorskip("pandas")
    rows = [{"a": 1.0, "c": "x"}, {"a": 3.0, "c": "y"}]
    pipe = Pipeline().number("a", missing_flag=True).category("c").learn(rows)
    for marker in (pd.NA, pd.NaT):
        assert pipe.features([{"a": marker, "c": marker}]).tolist() == [[0.0, 1.0, 0.0, 0.0]]
    image = Pipeline().image("i", (1, 2)).learn([{"i": [1, 2]}])
    with pytest.raises(DataError, match=r"row 1 .*'i': the image is missing"):
        image.features([{"i": pd.NA}])


def test_text_in_a_number_column_names_row_and_column() -> None:
    rows = [{"Age": str(i)} for i in range(20)]
    rows[16]["Age"] = "abc"
    with pytest.raises(
        DataError,
        match=r"row 17 \(counting from 1\), column 'Age': expected a number, found 'abc'",
    ):
        Pipeline().number("Age").learn(rows)
    pipe = Pipeline().number("Age").learn(rows[:10])
    with pytest.raises(DataError, match=r"row 7 \(counting from 1\), column 'Age'.*'abc'"):
        pipe.features(rows[10:])


def test_unseen_category_with_unknown_error_names_row_column_value_and_known_values() -> None:
    pipe = Pipeline().category("Sex", unknown="error").learn([{"Sex": "male"}, {"Sex": "female"}])
    with pytest.raises(
        DataError,
        match=r"row 2 \(counting from 1\), column 'Sex'.*'other'.*'female', 'male'",
    ):
        pipe.features([{"Sex": "male"}, {"Sex": "other"}])


def test_no_rows_is_a_data_error() -> None:
    pipe = Pipeline().number("x")
    with pytest.raises(DataError, match="no rows"):
        pipe.learn([])
    pipe.learn([{"x": 1}])
    with pytest.raises(DataError, match="no rows"):
        pipe.features([])


def test_no_target_column_at_learn_names_row_and_column() -> None:
    pipe = Pipeline().number("x").target("y")
    with pytest.raises(DataError, match=r"row 2 \(counting from 1\) has no column 'y'"):
        pipe.learn([{"x": 1, "y": 0}, {"x": 2}])


def test_a_missing_target_value_at_learn_names_row_and_column() -> None:
    pipe = Pipeline().number("x").target("y")
    with pytest.raises(DataError, match=r"row 3 \(counting from 1\), column 'y'.*missing"):
        pipe.learn([{"x": 1, "y": "0"}, {"x": 2, "y": "1"}, {"x": 3, "y": None}])
    # Several missing: how many, and what to do (before: one row named, as if it were the one).
    rows = [{"x": i, "y": "" if i % 7 == 0 else str(i % 2)} for i in range(100)]
    for kind in ("binary", "number"):
        pipeline = Pipeline().number("x").target("y", kind=kind)  # type: ignore[arg-type]
        with pytest.raises(DataError, match=r"missing \(on 15 of these 100 rows: drop the rows"):
            pipeline.learn(rows)


def test_a_third_value_in_a_binary_target_names_row_column_value_and_the_two_seen() -> None:
    rows = [
        {"x": 1, "y": "yes"},
        {"x": 2, "y": "no"},
        {"x": 3, "y": "no"},
        {"x": 4, "y": "maybe"},
    ]
    with pytest.raises(
        DataError,
        match=r"row 4 \(counting from 1\), column 'y'.*'maybe'.*'yes' and 'no'",
    ):
        Pipeline().number("x").target("y").learn(rows)


def test_an_unseen_class_in_the_targets_is_a_data_error() -> None:
    pipe = Pipeline().number("x").target("y", kind="classes")
    pipe.learn([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}])
    with pytest.raises(DataError, match=r"row 1 \(counting from 1\), column 'y'.*'c'"):
        pipe.targets([{"x": 1, "y": "c"}])


def test_negative_value_for_log_names_row_and_column() -> None:
    # (the value as given, -2.0, not NumPy's np.float64(-2.0): failed before)
    with pytest.raises(
        DataError, match=r"row 2 \(counting from 1\), column 'Fare': found -2.0, .*log"
    ):
        Pipeline().number("Fare", log=True).learn([{"Fare": "1"}, {"Fare": "-2"}])


def test_targets_without_a_target_column_says_to_declare_one() -> None:
    pipe = Pipeline().number("x").learn([{"x": 1}])
    with pytest.raises(DataError, match=r"\.target\("):
        pipe.targets([{"x": 1}])


def test_a_pipeline_with_no_feature_columns_is_a_data_error() -> None:
    with pytest.raises(DataError, match="no feature columns"):
        Pipeline().target("y").learn([{"y": "0"}, {"y": "1"}])


def test_rows_that_are_not_rows_are_refused_and_an_iterator_is_read_once() -> None:
    """Before: a dict or a string was counted as rows; a generator failed with a TypeError."""
    pipe = Pipeline().number("x")
    for wrong in ({"x": 1}, "x,1", b"x"):
        with pytest.raises(DataError, match="rows must be a list of mappings"):
            pipe.learn(wrong)
    learned = pipe.learn({"x": float(i)} for i in range(3))
    assert learned.features(iter([{"x": 1.0}])).tolist() == [[0.0]]


def test_read_csv_of_a_directory_says_it_is_a_directory(tmp_path: Path) -> None:
    """Before: "no such CSV file"."""
    with pytest.raises(IsADirectoryError, match="is a directory, not a CSV file"):
        read_csv(tmp_path)


def test_features_before_learning_says_to_learn_first() -> None:
    with pytest.raises(DataError, match=r"learn\(training_rows\)"):
        Pipeline().number("x").features([{"x": 1}])


# -- files ---------------------------------------------------------------------------------------


def test_to_json_and_from_json_give_identical_features_bit_for_bit(
    titanic_rows: list[dict[str, Any]],
) -> None:
    pipe = titanic_recipe().split(train=0.6, validation=0.2).learn(titanic_rows[:600])
    text = json.dumps(pipe.to_json())
    again = Pipeline.from_json(json.loads(text))
    assert again.to_json() == pipe.to_json()
    assert again.feature_names == pipe.feature_names
    assert again.classes == pipe.classes
    a = pipe.features(titanic_rows)
    b = again.features(titanic_rows)
    assert a.tobytes() == b.tobytes()
    assert np.array_equal(pipe.targets(titanic_rows), again.targets(titanic_rows))
    assert again.partition(891, np.arange(891))[0].shape == (534,)


def test_an_unlearned_pipeline_round_trips_unlearned() -> None:
    again = Pipeline.from_json(titanic_recipe().to_json())
    assert not again.is_learned
    assert again.target_kind == "binary"


@pytest.mark.parametrize(
    ("garbage", "says"),
    [
        ("not a dict", "expected a JSON object"),
        ({}, "missing the key 'format'"),
        ({"format": "deepsharp.pipeline", "version": 1}, "missing the key 'learned'"),
        ({"format": "something else", "version": 1}, "format"),
    ],
)
def test_from_json_with_garbage_raises_file_format_error(garbage: object, says: str) -> None:
    with pytest.raises(FileFormatError, match=says):
        Pipeline.from_json(garbage)


def test_from_json_names_what_is_wrong_in_a_column(
    titanic_rows: list[dict[str, Any]],
) -> None:
    good = titanic_recipe().learn(titanic_rows).to_json()
    bad_kind = json.loads(json.dumps(good))
    bad_kind["columns"][0]["kind"] = "picture"
    with pytest.raises(FileFormatError, match=r"columns\[0\]\.kind: unknown column kind 'picture'"):
        Pipeline.from_json(bad_kind)
    bad_type = json.loads(json.dumps(good))
    bad_type["columns"][3]["learned"]["mean"] = "zero"
    with pytest.raises(
        FileFormatError, match=r"columns\[3\]\.learned\.mean: expected int or float"
    ):
        Pipeline.from_json(bad_type)
    no_key = json.loads(json.dumps(good))
    del no_key["columns"][3]["log"]
    with pytest.raises(FileFormatError, match=r"columns\[3\]: missing the key 'log'"):
        Pipeline.from_json(no_key)
    bad_target = json.loads(json.dumps(good))
    bad_target["target"]["kind"] = "guess"
    with pytest.raises(FileFormatError, match="unknown target kind 'guess'"):
        Pipeline.from_json(bad_target)


# -- pandas --------------------------------------------------------------------------------------


def test_a_dataframe_gives_the_same_features_as_the_list_of_dicts(
    titanic_rows: list[dict[str, Any]],
) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(TITANIC)
    from_dicts = titanic_recipe().learn(titanic_rows)
    from_frame = titanic_recipe().learn(frame)
    assert from_frame.to_json() == from_dicts.to_json()
    assert from_frame.features(frame).tobytes() == from_dicts.features(titanic_rows).tobytes()
    assert np.array_equal(from_frame.targets(frame), from_dicts.targets(titanic_rows))
    with pytest.raises(DataError, match="no column 'Pclass'"):
        from_frame.features(frame.drop(columns=["Pclass"]))


def test_a_dataframe_s_sparse_columns_are_read_as_the_dense_columns_they_stand_for() -> None:
    """Failed before (trial CD): a sparse column raised AttributeError: 'SparseDtype' object
    has no attribute 'numpy_dtype'."""
    pd = pytest.importorskip("pandas")
    dense = pd.DataFrame(
        {
            "x": [0.0, np.nan, 2.0, 0.0],
            "n": [0, 0, 3, 0],
            "c": ["a", None, "a", "b"],
            "t": [0, 1, 1, 0],
        }
    )
    sparse = dense.assign(**{name: pd.arrays.SparseArray(dense[name]) for name in ("x", "n", "c")})
    assert all(type(sparse[name].dtype).__name__ == "SparseDtype" for name in ("x", "n", "c"))
    recipe = Pipeline().number("x").number("n").category("c").target("t")
    learned = recipe.learn(dense)
    assert learned.features(sparse).tobytes() == learned.features(dense).tobytes()
    assert recipe.learn(sparse).to_json() == learned.to_json()


# -- a DataFrame of numbers, integer column names, wide categories --------------------------------


def test_numbers_takes_every_column_but_the_declared_ones_and_the_target() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {"a": [1.0, 2.0, 3.0], "b": [0, 5, 10], "c": ["x", "y", "x"], "t": [0, 1, 1]}
    )
    pipe = Pipeline().category("c").numbers(scale=False).target("t").learn(frame)
    assert pipe.feature_names == ["c=x", "c=y", "a", "b"]
    assert pipe.features(frame)[:, 2:].tolist() == [[1.0, 0.0], [2.0, 5.0], [3.0, 10.0]]
    again = Pipeline.from_json(json.loads(json.dumps(pipe.to_json())))
    assert again.features(frame).tobytes() == pipe.features(frame).tobytes()
    unlearned = Pipeline.from_json(Pipeline().numbers(log=True).target("t").to_json())
    assert unlearned.learn(frame.drop(columns=["c"])).feature_names == ["a", "b"]


def test_a_frame_made_from_an_array_has_whole_number_column_names_shown_as_such() -> None:
    """Before: `.number("0")` said: has no column '0'; the DataFrame has the columns: '0', '1'."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.arange(6.0).reshape(3, 2))
    with pytest.raises(
        DataError,
        match=r"has no column '0' \(the rows name that column 0, not '0': the pipeline and the "
        r"rows must name it alike.*; its columns: 0, 1",
    ):
        Pipeline().number("0").learn(frame)
    pipe = Pipeline().number(0).number(1, scale=False).learn(frame)
    assert pipe.feature_names == ["0", "1"] and pipe.features(frame)[:, 1].tolist() == [
        1.0,
        3.0,
        5.0,
    ]
    assert Pipeline().numbers().learn(frame).feature_count == 2
    again = Pipeline.from_json(json.loads(json.dumps(pipe.to_json())))
    assert again.features(frame).tobytes() == pipe.features(frame).tobytes()


def test_an_id_like_category_column_warns_and_max_values_keeps_the_most_frequent() -> None:
    """Before: 12,000 values made an 8,401-wide one-hot without a word."""
    rows = [{"id": f"T{i}"} for i in range(300)] + [{"id": "T7"}] * 5 + [{"id": "T9"}] * 3
    with pytest.warns(DeepSharpWarning, match=r"column 'id' holds 300 distinct values.*max_values"):
        Pipeline().category("id").learn(rows)
    pipe = Pipeline().category("id", max_values=2).learn(rows)
    assert pipe.feature_names == ["id=T7", "id=T9"]
    assert pipe.features([{"id": "T7"}, {"id": "T100"}]).tolist() == [[1.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="choose one"):
        Pipeline().category("id", unknown="error", max_values=2)


@pytest.mark.parametrize(
    ("statistic", "value", "says"),
    [
        ("mean", 1e300, r"columns\[3\]\.learned\.mean: expected a finite number in"),
        ("std", 1e-300, r"columns\[3\]\.learned\.std: expected a finite number in \[1.17"),
        ("fill", -1e39, r"columns\[3\]\.learned\.fill: expected a finite number"),
    ],
)
def test_statistics_beyond_float32_in_a_file_are_refused_naming_the_statistic(
    titanic_rows: list[dict[str, Any]], statistic: str, value: float, says: str
) -> None:
    """Before: a recipe with mean 1e300 or std 1e-300 loaded, and served NaN."""
    data = titanic_recipe().learn(titanic_rows).to_json()
    data["columns"][3]["learned"][statistic] = value
    with pytest.raises(FileFormatError, match=says):
        Pipeline.from_json(json.loads(json.dumps(data)))


# -- arrays -------------------------------------------------------------------------------------


def test_a_pipeline_of_no_columns_takes_arrays_as_they_are() -> None:
    x = np.arange(24, dtype=np.float64).reshape(3, 2, 4)
    pipe = Pipeline().learn(x)
    assert pipe.row_shape == (2, 4) and pipe.feature_count == 8
    assert pipe.features(x).dtype == np.float32 and np.array_equal(pipe.features(x), x)
    again = Pipeline.from_json(json.loads(json.dumps(pipe.to_json())))
    assert again.features(x[:1]).tobytes() == pipe.features(x[:1]).tobytes()
    with pytest.raises(
        DataError, match=r"rows of shape \(8,\); the pipeline learned rows of shape"
    ):
        again.features(x.reshape(3, 8))
    bad = x.copy()
    bad[1, 0, 3] = np.nan
    with pytest.raises(
        DataError, match=r"row 2, feature \[1, 4\] \(each counting from 1\): missing"
    ):
        pipe.features(bad)
    with pytest.raises(DataError, match=r"arrays of numbers; list cannot be read"):
        Pipeline().learn([{"x": 1}])


def test_values_from_a_data_frame_are_named_as_python_writes_them() -> None:
    """Before: "the value np.int64(9) was not in the training rows", "a third, np.int64(1)"."""
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"a": range(20), "c": [i % 4 for i in range(20)]})
    frame["t"] = frame["a"] % 2
    pipeline = Pipeline().number("a").category("c", unknown="error").target("t")
    pipeline.learn(frame)
    with pytest.raises(DataError, match=r"column 'c': the value 9 was not in the training rows"):
        pipeline.features(pandas.DataFrame({"a": [1], "c": [9]}, index=[7]))
    third = pandas.DataFrame({"a": range(6), "t": [0, 2, 1, 0, 2, 1]}, index=range(10, 16))
    with pytest.raises(DataError) as refused:
        Pipeline().number("a").target("t").learn(third)
    said = str(refused.value)
    assert "this row holds a third, 1, after '0' and '2'" in said, said
    assert "DataFrame index 12" in said and "np." not in said


def test_a_constant_column_whose_mean_rounds_is_not_scaled_by_the_rounding() -> None:
    """Before: six rows of 0.1 learned a std of 1.4e-17 (the float64 sums' rounding): the
    training rows came out as +1.0 and a row of 0.2 as 7.2e15."""
    for count in (3, 6, 10):
        pipeline = Pipeline().number("x").learn([{"x": 0.1}] * count)
        features = pipeline.features([{"x": 0.1}, {"x": 0.2}])
        assert abs(features[0, 0]) < 1e-6 and abs(features[1, 0] - 0.1) < 1e-6


@pytest.mark.parametrize("parts", [False, True], ids=["rows", "a scan's parts"])
def test_a_small_spread_of_large_values_is_standardised_and_a_filled_constant_is_not_scaled(
    parts: bool, tmp_path: Path
) -> None:
    """Failed before (trial BH): times in milliseconds since 1970, a second apart over three
    minutes (std 57,700 against a mean of 1.7e12), were taken for a constant column and left
    unscaled: features from -99,500 to 99,500."""
    times = 1_700_000_000_000 + np.arange(0, 200_000, 1000)
    rows = [
        {"t": int(v), "c": 0.2 if i % 5 else None, "ns": 1_700_000_000_000_000_000 + i * 5000}
        for i, v in enumerate(times)
    ]  # ns: nanoseconds, five microseconds apart (trial BJ: 2^-40 of the mean, the first
    # form of this fix's rule for a constant, took them for one)
    pipeline = Pipeline().number("t").number("c").number("ns")
    if parts:
        path = tmp_path / "times.csv"
        path.write_text("t,c,ns\n" + "".join(
            f"{r['t']},{'' if r['c'] is None else r['c']},{r['ns']}\n" for r in rows))  # fmt: skip
        learning = pipeline.learning(["t", "c", "ns"])
        for part in scan_csv(path, read_rows=37).parts():
            learning.add(part)
        learned = learning.finish()
    else:
        learned = pipeline.learn(rows)
    features = learned.features(rows)
    assert abs(features[:, 0].std() - 1.0) < 1e-3 and abs(features[:, 0].mean()) < 1e-3
    np.testing.assert_allclose(features[:, 1], 0.0, atol=1e-6)  # 0.2, a fill of their mean
    # float64 holds these to 256 ns: their mean and spread are near, not exact
    assert abs(features[:, 2].std() - 1.0) < 0.02 and abs(features[:, 2].mean()) < 0.05


def test_numbers_learns_the_columns_of_every_row_whatever_their_order() -> None:
    """Failed before (trial BH): numbers() took the first row's keys: a column the first row
    lacked was left out without a word, and the same rows reversed were refused."""
    rows = [{"a": 1.0, "y": 0}, {"a": 2.0, "b": 5.0, "y": 1}, {"a": 3.0, "b": 6.0, "y": 0}]
    for given in (rows, rows[::-1]):
        with pytest.raises(DataError, match=r"has no column 'b'"):
            Pipeline().numbers().target("y").learn(given)
    full = [{**row, "b": row.get("b")} for row in rows]  # None where a row has no value
    assert Pipeline().numbers().target("y").learn(full).feature_names == ["a", "b"]


def test_a_scan_handed_to_learn_says_how_a_scanned_file_is_read() -> None:
    with pytest.raises(DataError, match=r"not CsvScan: a scanned file is read a part at a time"):
        Pipeline().number("Age").learn(scan_csv(data_path("titanic.csv")))


def test_one_value_worked_out_two_ways_is_a_constant_column() -> None:
    """Failed before (trial BL): 0.1 + 0.2 and 0.3, one float64 step apart, were taken for a
    spread of 2.8e-17 and scaled by it: a row of 0.31 came out as 2.5e14. IDs two steps apart
    (2^53 + 1 and + 3 as float64 holds them) are two values (trial BM: four steps were one)."""
    ids = Pipeline().number("i").learn([{"i": 2**53 + 1}, {"i": 2**53 + 3}])
    assert ids.features([{"i": 2**53 + 1}, {"i": 2**53 + 3}])[:, 0].tolist() == [-1.0, 1.0]
    learned = Pipeline().number("c").learn([{"c": 0.1 + 0.2}, {"c": 0.3}])
    np.testing.assert_allclose(
        learned.features([{"c": 0.31}, {"c": 1.0}])[:, 0], [0.01, 0.7], atol=1e-6
    )


def test_one_value_worked_out_three_ways_and_whole_numbers_apart() -> None:
    """Trial BN: 0.1 + 0.2, 0.3 and 0.7 - 0.4 lie two units in the last place apart, and a
    rule of one unit scaled them by 5e-17 (a row of 0.31 became 2.2e14); whole numbers two
    units apart (IDs 2^53 + 1 and + 3) are two values."""
    learned = Pipeline().number("c").learn([{"c": 0.1 + 0.2}, {"c": 0.3}, {"c": 0.7 - 0.4}])
    np.testing.assert_allclose(learned.features([{"c": 0.31}])[:, 0], [0.01], atol=1e-6)
    ids = Pipeline().number("i").learn([{"i": 2**53 + 1}, {"i": 2**53 + 3}])
    assert ids.features([{"i": 2**53 + 1}, {"i": 2**53 + 3}])[:, 0].tolist() == [-1.0, 1.0]

"""A column's values read in one pass: each distinct value parsed once, the same values and the
same errors whichever way a column is read (values that repeat, or mostly distinct ones)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from deepsharp.core import DataError, Pipeline
from deepsharp.core.data.values import each_distinct, labels, numbers


def test_each_distinct_makes_each_value_once_in_the_order_met() -> None:
    met: list[object] = []

    def make(value: object) -> float:
        met.append(value)
        return float(len(met))

    made = each_distinct(["b", "a", "b", None, "a", None], make, np.float64)
    assert made is not None
    assert made.tolist() == [1.0, 2.0, 1.0, 3.0, 2.0, 3.0]
    assert met == ["b", "a", None]


def test_each_distinct_gives_none_for_an_unhashable_value_or_too_many_values() -> None:
    assert each_distinct([1, [2], 3], float, np.float64) is None
    assert each_distinct([1, 2, 3], float, np.float64, most=2) is None
    made = each_distinct([1, 2, 1, 2], float, np.float64, most=2)
    assert made is not None and made.tolist() == [1.0, 2.0, 1.0, 2.0]


def test_each_distinct_lets_what_make_raises_through() -> None:
    def make(value: object) -> float:
        raise TypeError(f"no {value!r}")  # a TypeError that is not about hashing

    with pytest.raises(TypeError, match="no 'x'"):
        each_distinct(["x", "x"], make, np.float64)


def test_repeating_and_distinct_columns_parse_to_the_same_numbers() -> None:
    texts = [" 1.5", "2", "", None, "nan", "-3e2", 7, 2.5, True]
    repeating = [texts[i % len(texts)] for i in range(3_000)]
    # Repeating at first, then every value new: over half are distinct, so NumPy parses them.
    turning = repeating[:1_500] + [str(i / 7) for i in range(3_000)]
    expected = np.array([1.5, 2.0, np.nan, np.nan, np.nan, -300.0, 7.0, 2.5, 1.0])
    np.testing.assert_array_equal(numbers(repeating, "x"), np.resize(expected, 3_000))
    parsed = numbers(turning, "x")
    np.testing.assert_array_equal(parsed[:1_500], np.resize(expected, 1_500))
    np.testing.assert_array_equal(parsed[1_500:], [i / 7 for i in range(3_000)])


@pytest.mark.parametrize("bad", ["abc", [1], "inf"])
def test_a_bad_value_among_repeating_ones_names_its_first_row(bad: object) -> None:
    column: list[object] = ["1", "2"] * 600
    column[901] = bad
    column[1001] = bad
    with pytest.raises(DataError, match=r"^row 902 \(counting from 1\), column 'x'"):
        numbers(column, "x")


def test_labels_look_each_distinct_value_up_once_and_refuse_unhashable_ones() -> None:
    lookup = {"a": 0, "3": 1, None: 2}
    np.testing.assert_array_equal(
        labels(["a", 3, 3.0, " a ", None, "", "z"], "c", lookup), [0, 1, 1, 0, 2, 2, -1]
    )
    with pytest.raises(DataError, match=r"^row 2 \(counting from 1\), column 'c': expected text"):
        labels(["a", {"b": 1}], "c", lookup)


def test_a_flag_column_of_unhashable_values_is_still_read() -> None:
    pipe = Pipeline().flag("f").learn([{"f": "x"}, {"f": None}])
    features = pipe.features([{"f": [1]}, {"f": None}, {"f": ""}, {"f": "y"}])
    np.testing.assert_array_equal(features[:, 0], [1.0, 0.0, 0.0, 1.0])


def test_a_number_is_written_in_ascii_digits_without_underscores() -> None:
    """Failed before: Python's float read "1_5" as 15 and full-width "12" as 12 (pandas reads them
    as text): a typo became a number, silently."""
    from deepsharp.core.data.values import parse_number

    for text in ("1_5", "0_0_1_2", "\uff11\uff12", "\u0661\u0662"):
        assert parse_number(text) is None, text
    assert parse_number(" 12 ") == 12.0 and parse_number("-1e3") == -1000.0
    many = [f"{i}_0" for i in range(300)]  # mostly distinct: NumPy's path, refused too
    with pytest.raises(
        DataError, match=r"row 1 \(counting from 1\), column 'n': expected a number"
    ):
        Pipeline().number("n").learn([{"n": v} for v in many])


def test_labels_and_numbers_of_any_length_and_numpy_s_text() -> None:
    """Failed with this round's first forms (trial BC): a whole-number label of 5,000 digits
    raised int()'s limit; NumPy's text of '3_5' was read as 35 where the values were many."""
    from deepsharp.core.data.values import plain_label

    assert plain_label("0" + "7" * 5000) == "7" * 5000
    assert (plain_label("-01"), plain_label("+2"), plain_label("-0"), plain_label("00")) == (
        "-1",
        "2",
        "0",
        "0",
    )
    learned = Pipeline().category("c").learn([{"c": "01"}, {"c": "9" * 5000}])
    assert learned.features([{"c": 1}, {"c": "8" * 5000}]).tolist() == [[1, 0], [0, 0]]
    many = [{"n": v} for v in np.array([f"{i}_5" for i in range(300)])]
    with pytest.raises(DataError, match="expected a number"):
        Pipeline().number("n").learn(many)


def test_a_category_holding_the_text_nan_learns_the_same_in_any_row_order() -> None:
    """Failed before (trial BH): labels were sorted by float(), and NaN compares false with
    everything: the one-hot's order, and which values max_values kept on a tie, followed the
    rows' order."""
    import random

    from deepsharp.core import Pipeline

    values = ["1", "1", "nan", "nan", "2", "2", "3"]  # 1, nan and 2 twice each: a tie
    kept, whole = set(), set()
    for seed in range(20):
        rows = [{"code": v} for v in random.Random(seed).sample(values, len(values))]
        kept.add(tuple(Pipeline().category("code", max_values=2).learn(rows).feature_names))
        whole.add(tuple(Pipeline().category("code").learn(rows).feature_names))
    assert kept == {("code=1", "code=2")}
    assert whole == {("code=1", "code=2", "code=3", "code=nan")}


@pytest.mark.parametrize(
    "value",
    [Decimal("3.25"), Fraction(13, 4), b"3.25", b"1_5", Decimal("sNaN"), "1_5"],
    ids=["Decimal", "Fraction", "bytes", "bytes-underscore", "signalling-NaN", "text-underscore"],
)
def test_a_number_column_s_value_is_read_alike_alone_or_among_others(value: object) -> None:
    """Failed before (trial BH): a Decimal (pandas.read_sql's NUMERIC), a Fraction or bytes
    among mostly distinct values was read by NumPy, and the same value repeated was refused by
    the one-by-one rule (b"1_5" was even 15 the first way)."""
    pipeline = Pipeline().number("x").learn([{"x": 1.0}, {"x": 5.0}])

    def read(rows: list[object]) -> Any:
        try:
            return pipeline.features([{"x": v} for v in rows])[0, 0]
        except DataError as error:
            assert "expected a number, found" in str(error)
            return "refused"

    alone = read([value] * 4)  # repeated: each distinct value parsed once
    among = read([value, 2.0, 3.0, 4.0])  # mostly distinct: NumPy's one pass
    assert alone == among or (alone != alone and among != among)


def test_a_signalling_nan_in_a_frame_is_refused_as_in_rows() -> None:
    """Failed before (trial PD): a DataFrame's Decimal('sNaN') raised decimal.InvalidOperation
    from pandas' missing-value test; rows of dicts were refused naming the row and column."""
    pandas = pytest.importorskip("pandas")
    pipeline = Pipeline().number("a").learn([{"a": 1}, {"a": 2}])
    with pytest.raises(DataError, match=r"row 1 .*column 'a': expected a number, found Decimal"):
        pipeline.features(pandas.DataFrame({"a": [Decimal("sNaN"), Decimal(1)]}))

"""Rows served after training read as the training rows were, whichever way they were read, and
what a served value cannot be is said plainly (trial P: a hostile user's rows, from a CSV read by
deepsharp, by pandas and by the command line)."""

from __future__ import annotations

import pytest

from deepsharp.core import DataError, Pipeline


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
    assert len(said) < 400 and "(5,002 characters)" in said
    assert "beyond float32's range" in said
    with pytest.raises(DataError, match=r"-1797693\d+\.\.\. \(310 characters\) is beyond"):
        pipeline.features([{"a": -(2**1024), "c": "x", "y": "p"}])
    with pytest.raises(DataError, match=r"'a': inf is infinite"):
        pipeline.features([{"a": float("inf"), "c": "x", "y": "p"}])

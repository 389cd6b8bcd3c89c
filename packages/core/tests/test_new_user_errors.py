"""The errors a new user meets first: each says what was wrong, where (the user's own row, the
argument, the file) and what to do."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    SGD,
    BinaryCrossEntropy,
    DataError,
    Dense,
    FitOptions,
    Network,
    Pipeline,
    Relu,
)
from deepsharp.core import fit as fit_run


def _network() -> Network:
    return Network([Dense(4), Relu(), Dense(1)])


def _rows(bad: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"a": str(i), "t": str(i % 2)} for i in range(40)]
    rows[bad]["a"] = "oops"
    return rows


def _fit_rows(rows: Any) -> None:
    fit_run(
        Pipeline().number("a").target("t"),
        rows,
        _network(),
        BinaryCrossEntropy(),
        SGD(0.1),
        FitOptions(seed=1, epochs=1),
    )


@pytest.mark.parametrize("bad", [0, 7, 25, 39])
def test_a_bad_value_in_a_list_of_rows_names_the_user_s_row_not_its_shuffled_place(
    bad: int,
) -> None:
    with pytest.raises(DataError, match=rf"^row {bad + 1} \(counting from 1\), column 'a'"):
        _fit_rows(_rows(bad))


@pytest.mark.parametrize("bad", [0, 7, 25, 39])
def test_a_bad_value_in_a_dataframe_names_its_index_label(bad: int) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(_rows(bad), index=range(100, 140))
    with pytest.raises(
        DataError,
        match=rf"^row {bad + 1} \(counting from 1; DataFrame index {bad + 100}\), column 'a'",
    ):
        _fit_rows(frame)

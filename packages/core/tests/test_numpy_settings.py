"""Settings given as NumPy numbers (`for p in np.arange(1, 5)`, a grid's values) are taken as the
Python numbers they equal: the same object made, its file the same. Before (trial AP), about a
dozen constructors refused them with messages saying the value was out of range
("patience is a whole number from 1, not np.int64(2)"), where `Dense`, `FitOptions` and `SGD`
took them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    BatchNorm,
    Concatenate,
    Dropout,
    LayerNorm,
    LeakyRelu,
    LossScale,
    MultiHeadAttention,
    Pipeline,
    ReduceOnPlateau,
    TransformerBlock,
    scan_csv,
)

MADE: list[tuple[str, Callable[[Any], Any], object]] = [
    ("ReduceOnPlateau patience", lambda n: ReduceOnPlateau(patience=n), 2),
    ("ReduceOnPlateau factor", lambda n: ReduceOnPlateau(factor=n), 0.5),
    ("LossScale interval", lambda n: LossScale(interval=n), 100),
    ("Concatenate axis", lambda n: Concatenate(axis=n), 1),
    ("Dropout rate", lambda n: Dropout(n), 0.5),
    ("LeakyRelu slope", lambda n: LeakyRelu(n), 0.25),
    ("BatchNorm momentum", lambda n: BatchNorm(n), 0.875),
    ("LayerNorm epsilon", lambda n: LayerNorm(n), 0.0625),
    ("MultiHeadAttention dropout", lambda n: MultiHeadAttention(2, dropout=n), 0.125),
    ("TransformerBlock dropout", lambda n: TransformerBlock(2, 8, dropout=n), 0.125),
]


def _said(made: Any) -> str:
    """What the object keeps of its settings, as its file would say them."""
    to_json = getattr(made, "to_json", None)
    return json.dumps(to_json()) if to_json is not None else repr(made)


@pytest.mark.parametrize(("what", "make", "value"), MADE, ids=[m[0] for m in MADE])
def test_a_numpy_number_makes_what_the_python_number_makes(
    what: str, make: Callable[[Any], Any], value: object
) -> None:
    kinds = (np.int64, np.int32) if isinstance(value, int) else (np.float32, np.float64)
    for kind in kinds:
        assert _said(make(kind(value))) == _said(make(value)), kind


def test_a_category_s_most_values_and_a_scan_s_rows_take_numpy_numbers(tmp_path: Path) -> None:
    pipeline = Pipeline().category("c", max_values=np.int64(2))
    assert json.dumps(pipeline.to_json()) == json.dumps(
        Pipeline().category("c", max_values=2).to_json()
    )
    path = tmp_path / "rows.csv"
    path.write_text("c\na\nb\n")
    assert scan_csv(path, read_rows=np.int64(10)).read_rows == 10
    assert type(scan_csv(path, read_rows=np.int64(10)).read_rows) is int


def test_growth_of_1_is_refused_as_its_message_says() -> None:
    with pytest.raises(ValueError, match="growth must be a finite number above 1"):
        LossScale(growth=1.0)


def test_a_number_column_s_fill_takes_numpy_numbers() -> None:
    """Refused before (review): 'fill must be ... a number, not np.int64(0)'."""
    for fill in (np.int64(3), np.float32(0.5)):
        made = Pipeline().number("n", fill=fill)
        assert json.dumps(made.to_json()) == json.dumps(
            Pipeline().number("n", fill=fill.item()).to_json()
        )

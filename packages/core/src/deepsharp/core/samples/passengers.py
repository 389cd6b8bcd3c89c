"""Titanic-shaped rows in any number, for files larger than memory: each row one of the 891
passengers drawn at random from the seed, its age and fare moved a little (so that the numbers
have many distinct values), its PassengerId its row number. Written a block at a time: memory
stays flat whatever the count.

    from deepsharp.core.samples import passengers
    passengers.write_csv("passengers.csv", rows=1_000_000)
    passengers.write_parquet("passengers.parquet", rows=5_000_000)  # needs pyarrow

`titanic.pipeline()` and `titanic.network()` take these rows as they take the 891.
"""

from __future__ import annotations

import csv
import importlib
import os
from typing import Any

import numpy as np

from deepsharp.core.data.sources import read_csv
from deepsharp.core.random import Generator
from deepsharp.core.samples import data_path

__all__ = ["COLUMNS", "block", "write_csv", "write_parquet"]

COLUMNS = (
    "PassengerId",
    "Survived",
    "Pclass",
    "Name",
    "Sex",
    "Age",
    "SibSp",
    "Parch",
    "Ticket",
    "Fare",
    "Cabin",
    "Embarked",
)
_WHOLE = ("Survived", "Pclass", "SibSp", "Parch")
_TEXT = ("Name", "Sex", "Ticket", "Cabin", "Embarked")
_BLOCK = 8_192
_TABLE: dict[str, Any] = {}


def _passengers() -> dict[str, Any]:
    """The 891 passengers as columns (numbers as float64 with NaN, text with None), read once."""
    if not _TABLE:
        rows = read_csv(data_path("titanic.csv"))
        for name in (*_WHOLE, "Age", "Fare"):
            _TABLE[name] = np.array([float(r[name] or "nan") for r in rows])
        for name in _TEXT:
            _TABLE[name] = np.array([r[name] for r in rows], dtype=object)
    return _TABLE


def block(first: int, count: int, seed: int = 0) -> dict[str, Any]:
    """Rows first .. first + count - 1 of the endless file of this seed, as columns: whole
    numbers as int64, age and fare as float64 (NaN where missing), text as objects (None)."""
    table = _passengers()
    draws = Generator(seed, counter=3 * first).uniform(3 * count).reshape(count, 3)
    picked = (draws[:, 0] * 891).astype(np.int64)
    out: dict[str, Any] = {"PassengerId": np.arange(first + 1, first + count + 1, dtype=np.int64)}
    for name in _WHOLE:
        out[name] = table[name][picked].astype(np.int64)
    age = table["Age"][picked] + np.round(draws[:, 1] * 4.0 - 2.0, 1)
    out["Age"] = np.where(np.isnan(age), np.nan, np.maximum(np.round(age, 1), 0.5))
    out["Fare"] = np.round(table["Fare"][picked] * (0.9 + 0.2 * draws[:, 2]), 4)
    for name in _TEXT:
        out[name] = table[name][picked]
    return {name: out[name] for name in COLUMNS}


def write_csv(path: str | os.PathLike[str], rows: int, seed: int = 0) -> None:
    """`rows` passengers as a CSV file (an empty field where a value is missing)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for first in range(0, rows, _BLOCK):
            columns = block(first, min(_BLOCK, rows - first), seed)
            texts = [_texts(columns[name]) for name in COLUMNS]
            writer.writerows(zip(*texts))


def _texts(values: Any) -> list[str]:
    if values.dtype == object:
        return ["" if v is None else v for v in values.tolist()]
    if values.dtype.kind == "i":
        return list(map(str, values.tolist()))
    texts = list(map(repr, values.tolist()))
    for i in np.flatnonzero(np.isnan(values)).tolist():
        texts[i] = ""
    return texts


def _arrow(arrow: Any, values: Any) -> Any:
    """A column for pyarrow: NaN and None become null."""
    if values.dtype.kind == "f":
        return arrow.array(values, mask=np.isnan(values))
    return arrow.array(values.tolist() if values.dtype == object else values)


def write_parquet(
    path: str | os.PathLike[str], rows: int, seed: int = 0, row_group_rows: int = _BLOCK
) -> None:
    """`rows` passengers as a Parquet file in row groups of `row_group_rows` (needs pyarrow;
    a missing value is null)."""
    try:
        arrow = importlib.import_module("pyarrow")
        parquet = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ImportError(
            "writing Parquet files needs pyarrow, which is not installed: pip install "
            "'deepsharp[parquet]' (or pip install pyarrow)"
        ) from None
    writer = None
    try:
        for first in range(0, rows, row_group_rows):
            columns = block(first, min(row_group_rows, rows - first), seed)
            table = arrow.table({name: _arrow(arrow, values) for name, values in columns.items()})
            if writer is None:
                writer = parquet.ParquetWriter(os.fspath(path), table.schema)
            writer.write_table(table, row_group_size=row_group_rows)
    finally:
        if writer is not None:
            writer.close()

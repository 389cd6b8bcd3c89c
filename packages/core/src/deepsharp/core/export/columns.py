"""How each column kind of a pipeline is exported: one table, by kind.

An exported trained network takes raw columns, one ONNX input a column, and makes its features
as the pipeline does, with the statistics it learned as constants:

- a number column is fed as float64 (N, 1), NaN where a value is missing: filled, log1p-taken,
  standardised in float64 as the pipeline does, then rounded to float32 (and its missing flag);
- a category column as text (N, 1), '' where missing: one-hot over the learned values, all
  zeros for a value the training rows did not hold (ai.onnx.ml's LabelEncoder, then Equal);
- a flag column as text (N, 1): 1.0 where the field holds anything, 0.0 for '' (and the texts
  read as missing, `MISSING_TEXTS`: NA, N/A, NULL, ...);
- an image column as float64 (N, width): divided by its divisor in float64, then float32;
- a text column as its ids, int64 (N, length), as the pipeline makes them
  (`trained.pipeline.features(rows)`): ONNX's standard operators have no tokenizer that cuts
  text as the column does (runs of word characters, lower case), so its ids are the file's
  input and the tokens stay deepsharp's to cut.

Text is given as the pipeline reads it: stripped, a whole number as its digits ('3' for 3 or
3.0). A learned label is found by its plain form too ('2' for a learned '02', 'True' for
'true'), as predict finds it; the other way round ('02' given, '2' learned) predict finds it and
the file does not: give a whole number's digits without leading zeros. What ONNX cannot do is
said where it matters: it cannot refuse a row, so a category declared `unknown="error"` gives
unknown values all zeros (a warning says so at export), and
each value the pipeline refuses that ONNX can see gives NaN features instead of a DataError: a
log column's negative value, a number infinite or beyond float32's range, an image's value
missing (NaN), infinite or beyond float32's range — so the row's prediction is NaN, never a
plausible number. A kind of your own is entered
here (`COLUMN_EXPORTS[MyKind.key] = function`), or refused naming it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from deepsharp.core.data.categories import Category, Flag
from deepsharp.core.data.columns import ColumnKind
from deepsharp.core.data.images import Image
from deepsharp.core.data.numbers import Number
from deepsharp.core.data.text import Text
from deepsharp.core.data.values import FLOAT32_MAX, MISSING_TEXTS, widened_texts
from deepsharp.core.errors import DeepSharpWarning, ExportError
from deepsharp.core.export.graph import OnnxGraph

__all__ = ["COLUMN_EXPORTS", "ColumnExport", "Inputs", "write_columns"]

_FLOAT = 1  # ONNX's element type float32, for Cast
_ML = "ai.onnx.ml"


class Inputs:
    """The graph inputs of raw columns, one a column name, each of one type (float64 numbers or
    text): a column read by two kinds is one input, where they take the same type."""

    def __init__(self, graph: OnnxGraph) -> None:
        self.graph = graph
        self.taken: dict[str, tuple[str, str, int]] = {}  # name -> (type, kind, width)

    def take(self, column: ColumnKind, kind: str, width: int = 1) -> str:
        name = str(column.name)
        found = self.taken.get(name)
        if found is None:
            dtype: Any = {"float64": np.float64, "ids": np.int64}.get(kind, "string")
            self.graph.input(name, dtype, ["N", width])
            self.taken[name] = (kind, column.kind, width)
        elif found[0] != kind or found[2] != width:
            raise ExportError(
                f"column {column.name!r} is read as a {column.kind} ({kind}) and as a "
                f"{found[1]} ({found[0]}), and an ONNX input has one type: export the network "
                "alone (trained.network.export_onnx(path)) and make its features with "
                "trained.pipeline.features(rows), or train on the column read one way"
            )
        return name


ColumnExport = Callable[[OnnxGraph, Inputs, Any], str]


def _double(g: OnnxGraph, value: float) -> str:
    return g.scalar(value, np.float64)


def _log1p(g: OnnxGraph, x: str) -> str:
    """log(1 + x) in float64 (Kahan's form: ONNX has no log1p)."""
    u = g.one("Add", x, _double(g, 1.0))
    shifted = g.one("Sub", u, _double(g, 1.0))
    corrected = g.one("Div", g.one("Mul", g.one("Log", u), x), shifted)
    return g.one("Where", g.one("Equal", shifted, _double(g, 0.0)), x, corrected)


def _beyond(g: OnnxGraph, x: str) -> str:
    """Where a float64 value is infinite or beyond float32's range (NaN: not)."""
    return g.one("Greater", g.one("Abs", x), _double(g, FLOAT32_MAX))


def number(g: OnnxGraph, inputs: Inputs, column: Number) -> str:
    """Filled, log1p-taken, standardised in float64, then float32; its missing flag after it.
    A value infinite or beyond float32's range, refused by the pipeline, is NaN here."""
    assert column.fill_value is not None and column.mean is not None and column.std is not None
    x = inputs.take(column, "float64")
    missing = g.one("IsNaN", x)
    values = g.one("Where", _beyond(g, x), _double(g, math.nan), x)
    if column.log:  # a negative value, refused by the pipeline, is NaN here: log1p of one in
        # (-1, 0) is finite and would be served as a value like any other
        below = g.one("Less", x, _double(g, 0.0))
        values = g.one("Where", below, _double(g, math.nan), _log1p(g, values))
    values = g.one("Where", missing, _double(g, column.fill_value), values)
    if column.scale:
        values = g.one("Div", g.one("Sub", values, _double(g, column.mean)), _double(g, column.std))
    made = g.one("Cast", values, to=_FLOAT)
    if not column.missing_flag:
        return made
    return g.one("Concat", made, g.one("Cast", missing, to=_FLOAT), axis=1)


def category(g: OnnxGraph, inputs: Inputs, column: Category) -> str:
    """One-hot over the learned values ('' is the missing category where the rows had one);
    all zeros for any other text."""
    assert column.values is not None
    if column.unknown == "error":
        warnings.warn(
            f"column {column.name!r} refuses values the training rows did not hold "
            "(unknown='error'); onnxruntime cannot refuse a row, so the exported file gives "
            "them all zeros",
            DeepSharpWarning,
            stacklevel=6,
        )
    x = inputs.take(column, "text")
    width = column.width()
    # every text predict finds a learned value by: the value, its plain form ("2" for a learned
    # "02"), pandas' missing texts, a float32 value's text at float64 ("0.10000000149011612"
    # for a learned "0.1"); '' where the rows are missing
    found = {"" if text is None else text: place for text, place in column.lookup.items()}
    for text, place in list(found.items()):
        for wide in widened_texts(text):
            found.setdefault(wide, place)
    keys, indices = list(found), list(found.values())
    for key in keys:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise ExportError(
                f"column {column.name!r} learned the value {key!r}, which is no UTF-8 text (a "
                "lone surrogate, as os.fsdecode makes of undecodable bytes) and an ONNX file "
                "holds text as UTF-8: mend the column's values and train again"
            ) from None
    index = g.one(
        "LabelEncoder",
        x,
        domain=_ML,
        keys_strings=keys,
        values_int64s=indices,
        default_int64=-1,
    )
    return g.one("Cast", g.one("Equal", index, g.ints(range(width))), to=_FLOAT)


def flag(g: OnnxGraph, inputs: Inputs, column: Flag) -> str:
    """1.0 where the field holds text, 0.0 where it is '' or a text read as missing (NA, ...)."""
    x = inputs.take(column, "text")
    empty = ["", *sorted(MISSING_TEXTS)]
    return g.one(
        "LabelEncoder",
        x,
        domain=_ML,
        keys_strings=empty,
        values_floats=[0.0] * len(empty),
        default_float=1.0,
    )


def image(g: OnnxGraph, inputs: Inputs, column: Image) -> str:
    """The values divided by the column's divisor in float64, then float32. A value the pipeline
    refuses (NaN, infinite, beyond float32's range) makes the whole row's features NaN."""
    assert column.divisor is not None
    x = inputs.take(column, "float64", column.width())
    bad = g.one("Cast", g.one("Or", g.one("IsNaN", x), _beyond(g, x)), to=_FLOAT)
    count = g.one("ReduceSum", bad, g.ints([1]), keepdims=1)  # (N, 1): a row's bad values
    row_bad = g.one("Greater", count, g.scalar(0.0, np.float32))
    x = g.one("Where", row_bad, _double(g, math.nan), x)
    if column.divisor != 1.0:
        x = g.one("Div", x, _double(g, column.divisor))
    return g.one("Cast", x, to=_FLOAT)


def text(g: OnnxGraph, inputs: Inputs, column: Text) -> str:
    """The column's ids as given, int64 (N, length): the file's input is what the pipeline's
    tokens make."""
    return inputs.take(column, "ids", column.width())


COLUMN_EXPORTS: dict[str, ColumnExport] = {
    Number.key: number,
    Category.key: category,
    Flag.key: flag,
    Image.key: image,
    Text.key: text,
}
"""Each column kind (its key) -> how its features are written from its raw input."""


def write_columns(g: OnnxGraph, columns: list[ColumnKind], inputs: Inputs) -> str:
    """Every column's features side by side (N, features) — float32, or int64 for ids — from
    raw inputs (taken into `inputs`)."""
    made = []
    for column in columns:
        export = COLUMN_EXPORTS.get(column.key)
        if export is None:
            raise ExportError(
                f"column {column.name!r} is of the kind {column.key!r}, whose features are made "
                "by Python code the exporter cannot write as ONNX: export the network alone "
                "(trained.network.export_onnx(path)) and make its features with "
                "trained.pipeline.features(rows)"
            )
        g.scope = f"column {column.name}"
        try:
            made.append(export(g, inputs, column))
        except ExportError as error:
            if str(error).startswith(f"column {column.name!r}"):
                raise  # it names the column already (trial O4: named twice)
            raise ExportError(f"column {column.name!r} ({column.kind}): {error}") from None
    g.scope = "features"
    return made[0] if len(made) == 1 else g.one("Concat", *made, axis=1)

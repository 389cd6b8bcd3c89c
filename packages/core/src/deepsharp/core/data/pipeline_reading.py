"""Reading a pipeline back: the recipe `Pipeline.to_json` writes (its format and version, the
versions this deepsharp reads), checked entry by entry (`Pipeline.from_json`).

Column kinds register themselves when their class is made, so this module imports every
deepsharp kind's module: a recipe may name any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepsharp.core.data import categories, images, text  # noqa: F401  (their kinds register)
from deepsharp.core.data.columns import Recipe, read_column
from deepsharp.core.data.numbers import Numbers
from deepsharp.core.data.target import Target
from deepsharp.core.errors import FileFormatError

if TYPE_CHECKING:
    from deepsharp.core.data.pipeline import Pipeline

__all__ = ["FORMAT", "READS", "VERSION", "read_pipeline"]

FORMAT = "deepsharp.pipeline"
VERSION = 4
READS = (1, 2, 3, 4)
# 1 is 2 without arrays, numbers() or max_values; 2 is 3 without dicts of arrays; 3 is 4 without
# the inputs columns feed and text columns.


def read_pipeline(pipe: Pipeline, data: object) -> Pipeline:
    """`pipe`, a pipeline just made, given the recipe `data` (what `Pipeline.to_json` wrote):
    its columns, target, split and, where learned, statistics; FileFormatError naming the
    place that is wrong."""
    recipe = Recipe(data, "")
    fmt = recipe.text("format")
    if fmt != FORMAT:
        raise recipe.fail("format", f"expected {FORMAT!r}, found {fmt!r}")
    version = recipe.get("version", int)
    if version not in READS:
        raise recipe.fail(
            "version", f"this deepsharp reads pipeline versions {READS}, the file holds {version}"
        )
    learned = recipe.flag("learned")
    split = recipe.part("split")
    try:
        pipe.split(split.number("train", 0.0, 1.0), split.number("validation", 0.0, 1.0))
    except (ValueError, TypeError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise recipe.fail("split", str(exc)) from None
    entries = recipe.get("columns", list)
    made = [read_column(e, f".columns[{i}]", learned) for i, e in enumerate(entries)]
    for i, column in enumerate(made):
        try:
            pipe._check_new(column)
        except ValueError as exc:
            raise recipe.fail(f"columns[{i}]", str(exc)) from None
        pipe._declared.append(column)
    target = recipe.get("target", dict, type(None))
    if target is not None:
        pipe._target = Target.read(target, learned)
        if any(c.name == pipe._target.name for c in made):
            raise recipe.fail("target", f"column {pipe._target.name!r} is a feature too")
    arrays = recipe.get("arrays", dict, type(None)) if recipe.has("arrays") else None
    if not learned:
        if arrays is not None:
            raise recipe.fail("arrays", "an unlearned pipeline has learned no shape; expected null")
        return pipe
    if arrays is not None:
        if made or target is not None:
            raise recipe.fail("arrays", "a pipeline of arrays has no columns and no target")
        part = recipe.part("arrays")
        if part.has("inputs"):
            shapes = part.get("inputs", dict)
            if not shapes:
                raise recipe.fail("arrays.inputs", "expected at least one input")
            for name, shape in shapes.items():
                _check_sizes(recipe, f"arrays.inputs.{name}", shape)
            pipe._shapes = {str(name): tuple(shape) for name, shape in shapes.items()}
        else:
            shape = part.get("shape", list)
            _check_sizes(recipe, "arrays.shape", shape)
            pipe._shape = tuple(shape)
            if part.has("names"):  # a DataFrame's columns (files before 2026-12 hold none)
                names = part.get("names", list)
                if (
                    len(shape) != 1
                    or len(names) != shape[0]
                    or not all(isinstance(name, str) for name in names)
                    or len(set(names)) != len(names)
                ):
                    raise recipe.fail("arrays.names", f"expected {shape[0]} distinct texts")
                pipe._names = list(names)
    elif not made:
        raise recipe.fail("columns", "a learned pipeline must have at least one column")
    if any(isinstance(c, Numbers) for c in made):
        raise recipe.fail("columns", "a learned pipeline holds its columns, not numbers()")
    pipe._columns = list(made)
    pipe._learned = True
    return pipe


def _check_sizes(recipe: Recipe, key: str, shape: object) -> None:
    if (
        not isinstance(shape, list)
        or not shape
        or len(shape) > 8
        or not all(_is_size(s) for s in shape)
    ):
        raise recipe.fail(key, f"expected one to eight sizes, found {shape!r}")


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 2**31

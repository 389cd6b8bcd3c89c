"""Statistics learned in parts: moments as NumPy's to rounding, the median exact (NumPy's, bit
for bit) while its table holds, then within its stated error; column kinds that learn in parts
learn what they learn from the rows at once."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import DataError, DeepSharpWarning, Pipeline, read_csv, scan_csv
from deepsharp.core.data.columns import ColumnKind, Learner
from deepsharp.core.data.sources import Part
from deepsharp.core.data.summaries import ALPHA, LabelCounts, Median, Moments, Sketch
from deepsharp.core.data.values import FLOAT32_MAX, FLOAT32_TINY, Column

SEEDS = range(6)


def _cut(values: np.ndarray, seed: int) -> list[np.ndarray]:
    """The values in parts of random sizes (some empty)."""
    cuts = np.sort(np.random.default_rng(seed).integers(0, len(values), 7))
    return np.split(values, cuts)


@pytest.mark.parametrize("seed", SEEDS)
def test_moments_in_parts_are_numpy_s_mean_and_std_to_rounding(seed: int) -> None:
    values = np.random.default_rng(seed).lognormal(3.0, 2.0, 5_001) - 40.0
    moments = Moments()
    for part in _cut(values, seed):
        moments.add(part)
    assert moments.count == values.size
    assert moments.mean == pytest.approx(np.mean(values), rel=1e-13)
    assert moments.std == pytest.approx(np.std(values), rel=1e-13)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("count", [1, 2, 999, 1000])
def test_the_median_in_parts_is_numpy_s_bit_for_bit(seed: int, count: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.round(rng.normal(0.0, 50.0, count), 1)  # many repeats, both signs
    median = Median()
    for part in _cut(values, seed):
        median.add(part)
    assert median.exact
    assert median.median() == float(np.median(values))


def _middles(values: np.ndarray) -> tuple[float, float]:
    ranked = np.sort(values)
    return float(ranked[(len(values) - 1) // 2]), float(ranked[len(values) // 2])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.lognormal(0.0, 3.0, n),
        lambda rng, n: -rng.lognormal(5.0, 1.0, n),
        lambda rng, n: rng.normal(0.0, 1e-3, n),
        lambda rng, n: rng.normal(1e30, 1e29, n),
    ],
)
def test_past_its_table_the_median_lies_within_alpha_of_the_middle_values(
    seed: int, draw: object
) -> None:
    rng = np.random.default_rng(seed)
    values = draw(rng, 20_000 + seed)  # type: ignore[operator]
    median = Median(exact_distinct=1_000)
    for part in _cut(values, seed):
        median.add(part)
    assert not median.exact
    low, high = _middles(values)
    bound = ALPHA * (abs(low) + abs(high)) / 2 + FLOAT32_TINY
    assert abs(median.median() - (low + high) / 2) <= bound * (1 + 1e-12)


def test_the_sketch_spans_float32_s_whole_range_with_one_count_a_bucket() -> None:
    extremes = np.array(
        [-FLOAT32_MAX, -1.0, -FLOAT32_TINY, 0.0, 1e-45, FLOAT32_TINY, 1.0, FLOAT32_MAX]
    )
    sketch = Sketch()
    sketch.add(extremes)
    assert list(np.diff(sketch.keys) > 0) == [True] * (len(sketch.keys) - 1)  # order kept
    assert len(sketch.keys) == 7  # 1e-45 counts as 0, with 0
    everything = np.geomspace(FLOAT32_TINY, FLOAT32_MAX, 400_000)
    sketch.add(everything)
    sketch.add(-everything)
    assert len(sketch.keys) < 180_000  # ~88,000 buckets a sign at alpha 0.001
    for value in (FLOAT32_MAX, 1.0, FLOAT32_TINY * 3):
        single = Sketch()
        single.add(np.array([value]))
        assert abs(single.median() - value) <= ALPHA * value * (1 + 1e-12)


def test_a_category_of_too_many_values_is_refused_naming_the_column() -> None:
    counts = LabelCounts("Ticket", limit=100)
    counts.add([str(i) for i in range(60)])
    with pytest.raises(
        DataError, match=r"column 'Ticket' holds more than 100 distinct values in its first 120"
    ):
        counts.add([str(i) for i in range(60, 120)])
    # max_values keeps the most frequent, but from every value's count (trial ST5: it was told
    # a one-hot that wide repays nothing)
    kept = LabelCounts("Ticket", limit=100, kept=20)
    with pytest.raises(DataError, match=r"max_values=20 keeps the most frequent.*text column"):
        kept.add([str(i) for i in range(120)])


def _learned_in_parts(pipeline: Pipeline, path: Path, read_rows: int) -> Pipeline:
    scan = scan_csv(path, read_rows=read_rows)
    learning = pipeline.learning(scan.names)
    for part in scan.parts(learning.reads):
        learning.add(part)
    return learning.finish()


IMAGES = "label,pixels,size,colour\n" + "".join(
    f"{i % 3},{' '.join(str((i * k) % 17) for k in range(4))},{'' if i % 9 == 4 else i * 0.5},"
    f"{'red' if i % 5 else 'blue' if i % 2 else 'green' if i % 4 else ''}\n"
    for i in range(50)
)


@pytest.mark.parametrize("read_rows", [1, 7, 1000])
def test_every_kind_learns_in_parts_what_it_learns_at_once(tmp_path: Path, read_rows: int) -> None:
    path = tmp_path / "images.csv"
    path.write_text(IMAGES, encoding="utf-8")

    def pipeline() -> Pipeline:
        return (
            Pipeline()
            .image("pixels", (1, 2, 2), scale="max")
            .category("colour", max_values=2)
            .flag("size")
            .number("size", fill="mean")
            .target("label", kind="classes")
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeepSharpWarning)
        whole = pipeline().learn(read_csv(path)).to_json()
        parts = _learned_in_parts(pipeline(), path, read_rows).to_json()
    size = parts["columns"][3].pop("learned")
    wanted = whole["columns"][3].pop("learned")
    assert parts == whole
    assert size == pytest.approx(wanted, rel=1e-14)


class Lengths(ColumnKind):
    """Kinds of one's own: each text's length over the longest of the training rows (how that
    is learned is each subclass's)."""

    def __init__(self, name: object) -> None:
        super().__init__(name)
        self.longest = 0

    def width(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [f"{self.name}:length"]

    def write(self, values: Column, out: np.ndarray, at: int) -> None:
        out[:, at] = [len(v) / self.longest for v in values]  # type: ignore[arg-type]


class Longest(Lengths):
    """Learns from all its rows at once (a learn, no learner)."""

    def learn(self, values: Column) -> None:
        lengths = [len(v) if isinstance(v, str) else -1 for v in values]
        if -1 in lengths:
            from deepsharp.core.data.values import row_text

            raise DataError(f"{row_text(lengths.index(-1))}: no text")
        self.longest = max(lengths)


def test_a_kind_without_a_learner_gathers_its_values_and_names_rows_by_their_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "texts.csv"
    path.write_text("text,y\nab,0\nabcd,1\n\nabc,0\n,1\n", encoding="utf-8")
    pipeline = Pipeline().column(Longest("text")).target("y")
    with pytest.warns(DeepSharpWarning, match="Longest learns from all its training rows at once"):
        with pytest.raises(DataError, match=r"texts.csv, line 6: no text"):
            _learned_in_parts(pipeline, path, read_rows=2)
    path.write_text("text,y\nab,0\nabcd,1\n\nabc,0\n", encoding="utf-8")
    learned = _learned_in_parts(pipeline, path, read_rows=2)
    assert learned._columns[0].longest == 4  # type: ignore[attr-defined]


class InParts(Lengths):
    """Learns in parts only (a learner, no learn)."""

    def learner(self) -> Learner:
        return LongestLearner(self)


class LongestLearner(Learner):
    def __init__(self, column: Lengths) -> None:
        self.column = column
        self.seen = 0

    def add(self, values: Column) -> None:
        self.seen = max([self.seen, *(len(v) for v in values)])  # type: ignore[arg-type]

    def finish(self) -> None:
        self.column.longest = self.seen


def test_a_kind_with_only_a_learner_learns_rows_in_memory_through_it(tmp_path: Path) -> None:
    """Before: `learn` (rows in memory) learned nothing for such a kind."""
    path = tmp_path / "texts.csv"
    path.write_text("text,y\nab,0\nabcd,1\nabc,0\n", encoding="utf-8")
    in_parts = _learned_in_parts(Pipeline().column(InParts("text")).target("y"), path, 2)
    at_once = Pipeline().column(InParts("text")).target("y").learn(read_csv(path))
    assert in_parts._columns[0].longest == at_once._columns[0].longest == 4  # type: ignore[attr-defined]


def test_a_third_value_of_a_binary_target_is_named_by_its_line_in_a_later_part(
    tmp_path: Path,
) -> None:
    path = tmp_path / "target.csv"
    path.write_text("x,y\n" + "1,a\n2,b\n" * 5 + "3,c\n", encoding="utf-8")
    pipeline = Pipeline().number("x").target("y")
    with pytest.raises(
        DataError,
        match=r"target.csv, line 12, column 'y': a binary target holds two values, but this row holds a third, 'c', after 'a' and 'b'",
    ):
        _learned_in_parts(pipeline, path, read_rows=3)
    assert not pipeline.is_learned


def test_rows_of_a_part_are_named_by_their_place_in_the_file() -> None:
    part = Part({"x": ["1", "2", "oops"]}, 3, first=10).take(np.array([2, 0]))
    pipeline = Pipeline().number("x").target("y")
    with pytest.raises(
        DataError, match=r"^row 13 \(counting from 1\), column 'x': expected a number, found 'oops'"
    ):
        pipeline.learning(["x", "y"]).add(
            Part({**part.columns, "y": ["0", "1"]}, 2, 10, None, part.places)
        )


def test_a_finished_learning_refuses_more_parts_and_a_second_finish() -> None:
    """Before (trial ST5): a part added after the finish was taken, and a second finish set
    the pipeline's statistics again from it, silently."""
    pipeline = Pipeline().number("x").target("y")
    learning = pipeline.learning(["x", "y"])
    learning.add([{"x": 1.0, "y": 0}, {"x": 3.0, "y": 1}])
    learning.finish()
    learned = pipeline.features([{"x": 3.0}]).tolist()
    for call in (lambda: learning.add([{"x": 100.0, "y": 0}]), learning.finish):
        with pytest.raises(DataError, match=r"this learning has finished.*pipeline\.learning"):
            call()
    assert pipeline.features([{"x": 3.0}]).tolist() == learned

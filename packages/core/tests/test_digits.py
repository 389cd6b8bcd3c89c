"""The digits sample: the shipped optdigits files, the run's accuracy, its file and its command.

One run of the sample (through `deepsharp sample digits --save FILE`, about 15-25 s on two
cores) serves every test that needs a trained network.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import Run, TrainedNetwork
from deepsharp.core.cli import main
from deepsharp.core.samples import data_path, digits

pytestmark = pytest.mark.once  # the sample's runs: the same on every Python

TRAIN_COUNTS = [376, 389, 380, 389, 387, 376, 377, 387, 380, 382]
TEST_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


@pytest.mark.parametrize("name", ["optdigits.tra", "optdigits.tes"])
def test_the_shipped_files_are_the_published_ones(name: str) -> None:
    digest = hashlib.sha256(data_path(name).read_bytes()).hexdigest()
    assert digest == digits.SHA256[name]


@pytest.mark.parametrize(
    ("part", "count", "classes"), [("train", 3823, TRAIN_COUNTS), ("test", 1797, TEST_COUNTS)]
)
def test_rows_and_classes_are_as_the_data_readme_says(
    part: Any, count: int, classes: list[int]
) -> None:
    rows = digits.rows(part)
    assert len(rows) == count
    counted = Counter(row["digit"] for row in rows)
    assert [counted[str(d)] for d in range(10)] == classes
    first = rows[0]["pixels"]
    assert isinstance(first, np.ndarray) and first.shape == (64,) and first.dtype.kind == "f"
    every = np.stack([row["pixels"] for row in rows])
    assert every.min() == 0 and every.max() == 16
    assert np.array_equal(every, np.round(every))


def test_a_part_that_is_not_there_is_refused() -> None:
    with pytest.raises(ValueError, match="'train' or 'test'"):
        digits.rows("validation")  # type: ignore[arg-type]


def test_the_pipeline_makes_8x8_images_scaled_to_one() -> None:
    rows = digits.rows("test")
    pipe = digits.pipeline().learn(rows)
    features = pipe.features(rows)
    assert features.shape == (1797, 64) and features.dtype == np.float32
    assert features.max() == 1.0 and features.min() == 0.0
    assert pipe.classes == [str(d) for d in range(10)]
    assert np.array_equal(pipe.targets(rows[:3]), np.array([0, 1, 2]))


@dataclass
class Sampled:
    run: Run
    printed: str
    saved: Path


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sampled]:
    """`deepsharp sample digits --save FILE`, keeping the Run the command made."""
    saved = tmp_path_factory.mktemp("digits") / "digits.safetensors"
    made: list[Run] = []
    real_run = digits.run

    def keeping(*args: Any, **kwargs: Any) -> Run:
        result = real_run(*args, **kwargs)
        made.append(result)
        return result

    with pytest.MonkeyPatch.context() as patch, _Captured() as captured:
        patch.setattr(digits, "run", keeping)
        assert main(["sample", "digits", "--no-progress", "--save", str(saved)]) == 0
    assert len(made) == 1
    yield Sampled(made[0], captured.text, saved)


class _Captured:
    """Standard output while the block runs (capsys is per test; the fixture is per module)."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._redirect = contextlib.redirect_stdout(self._buffer)
        self.text = ""

    def __enter__(self) -> _Captured:
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._redirect.__exit__(None, None, None)
        self.text = self._buffer.getvalue()


def test_the_command_prints_a_report(sampled: Sampled) -> None:
    printed = sampled.printed
    assert "deepsharp run on light" in printed
    assert "on the 1797 test rows:" in printed
    assert re.search(r"accuracy\s+0\.9\d{3}", printed)
    assert re.search(r"first test image: read as \d \(chance [01]\.\d{3}\), written as 0", printed)
    assert f"saved the trained network to {sampled.saved}" in printed


def test_digits_reaches_95_percent_on_the_1797_test_images(sampled: Sampled) -> None:
    report = sampled.run.report
    assert report.test_rows == 1797
    assert report.measures["accuracy"] >= 0.95
    assert report.epochs_run < 200  # stopped early
    # the report's measure is what the trained network predicts for the test images
    tests = digits.rows("test")
    predictions = sampled.run.trained.predict(tests)
    right = np.argmax(predictions, axis=1) == np.array([int(row["digit"]) for row in tests])
    assert right.mean() == pytest.approx(report.measures["accuracy"], abs=1e-12)


def test_the_saved_network_predicts_the_same_bits(sampled: Sampled) -> None:
    loaded = TrainedNetwork.load(sampled.saved)
    tests = digits.rows("test")
    before = sampled.run.trained.predict(tests)
    after = loaded.predict(tests)
    assert after.dtype == np.float32 and after.shape == (1797, 10)
    assert np.array_equal(before.view(np.uint32), after.view(np.uint32))
    assert loaded.pipeline.to_json() == sampled.run.trained.pipeline.to_json()
    assert loaded.network.inputs == (1, 8, 8)

"""Validation rows given apart (`fit(..., validation_rows=...)`, as Keras's validation_data):
they judge each epoch, the pipeline learns nothing from them, and the data is cut into
training and test rows only (all training rows where test rows are given too) — for arrays,
rows of named columns and scanned files alike. Before (trial PT), validation rows were always
cut from the data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from core_helpers import slot_bits

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Checkpoint,
    CheckpointMismatchError,
    CrossEntropy,
    DataError,
    Dense,
    FitOptions,
    Network,
    Pipeline,
    Relu,
    fit,
    scan_csv,
)
from deepsharp.core.random import Streams
from deepsharp.core.samples import passengers, titanic
from deepsharp.core.training.feeds import Streamed, feeds_for


def _arrays(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, 6)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)


def _network() -> Network:
    return Network([Dense(8), Relu(), Dense(3)])


def _options(**extra: object) -> FitOptions:
    return FitOptions(**{"seed": 2, "epochs": 3, "patience": 100, "progress": False, **extra})


def _sizes(data: object, pipeline: Pipeline | None = None, **apart: object) -> list[int]:
    feeds = feeds_for(
        pipeline, data, _network(), CrossEntropy(), Streams(2), apart.get("test"), None,
        apart.get("validation"),
    )  # fmt: skip
    return [len(feeds.train), len(feeds.validation), len(feeds.test)]


def test_arrays_given_validation_rows_are_cut_into_training_and_test_rows_only() -> None:
    data, held = _arrays(200, 0), _arrays(37, 1)
    assert _sizes(data) == [140, 30, 30]
    assert _sizes(data, validation=held) == [164, 37, 36]  # 0.7 : 0.15 of 200, floored
    assert _sizes(data, validation=held, test=_arrays(11, 2)) == [200, 37, 11]


def test_each_epoch_is_judged_on_the_validation_rows_given() -> None:
    data, held = _arrays(300, 0), _arrays(60, 1)
    run = fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(),
              validation_rows=held)  # fmt: skip
    chances = run.trained.predict(held[0]).astype(np.float64)  # the best epoch's slots
    loss = -np.mean(np.log(chances[np.arange(60), held[1]]))
    best = run.report.history[run.report.best_epoch - 1]
    assert best.validation_loss == pytest.approx(loss, rel=1e-5)
    again = fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(),
                validation_rows=held)  # fmt: skip
    assert slot_bits(again) == slot_bits(run)  # the same run again, bit for bit
    other = fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(),
                validation_rows=_arrays(60, 5))  # fmt: skip
    assert [r.validation_loss for r in other.report.history] != [
        r.validation_loss for r in run.report.history
    ]


def test_rows_given_validation_rows_learn_the_pipeline_from_the_training_rows_alone() -> None:
    rows = titanic.rows()
    held = [{**row, "Age": "500"} for row in rows[:40]]  # would move the mean age were it learned
    feeds = feeds_for(titanic.pipeline(), rows, titanic.network(), BinaryCrossEntropy(),
                      Streams(3), None, None, held)  # fmt: skip
    assert [len(feeds.train), len(feeds.validation), len(feeds.test)] == [733, 40, 158]
    alone = feeds_for(titanic.pipeline(), rows, titanic.network(), BinaryCrossEntropy(),
                      Streams(3), None, None, rows[:40])  # fmt: skip
    assert np.array_equal(alone.train.features[0], feeds.train.features[0])  # nothing learned


def test_a_scanned_file_takes_validation_rows_scanned_or_in_memory(tmp_path: Path) -> None:
    path, held = tmp_path / "rows.csv", tmp_path / "held.csv"
    passengers.write_csv(path, 1_000, seed=7)
    passengers.write_csv(held, 120, seed=8)
    streams = Streams(5)
    feeds = Streamed(scan_csv(path, read_rows=300)).feeds(
        titanic.pipeline(), titanic.network(), BinaryCrossEntropy(), streams, None,
        scan_csv(held),
    )  # fmt: skip
    assert len(feeds.validation) == 120
    assert len(feeds.train) + len(feeds.test) == 1_000
    assert 0.75 < len(feeds.train) / 1_000 < 0.9  # 0.7 : 0.15, drawn row by row
    run = fit(titanic.pipeline(), scan_csv(path, read_rows=300, buffer_rows=256),
              titanic.network(), BinaryCrossEntropy(), Adam(0.01), _options(epochs=2),
              validation_rows=scan_csv(held))  # fmt: skip
    assert np.isfinite([r.validation_loss for r in run.report.history]).all()


def test_validation_rows_that_are_wrong_are_refused_naming_them() -> None:
    data = _arrays(100, 0)
    with pytest.raises(DataError, match=r"validation rows for arrays come as a pair"):
        fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(),
            validation_rows=data[0])  # fmt: skip
    with pytest.raises(
        DataError, match=r"^validation_rows: the features have rows of shape \(4,\)"
    ):
        fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(),
            validation_rows=(data[0][:, :4], data[1]))  # fmt: skip
    with pytest.raises(DataError, match=r"validation_rows: .* with at least one row"):
        fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(),
            validation_rows=(data[0][:0], data[1][:0]))  # fmt: skip
    with pytest.raises(DataError, match="leaves no test rows"):
        fit(Pipeline().split(train=0.9, validation=0.1), data, _network(), CrossEntropy(),
            Adam(0.01), _options(), validation_rows=data)  # fmt: skip


def test_a_checkpoint_resumes_only_on_its_validation_rows(tmp_path: Path) -> None:
    data, held = _arrays(200, 0), _arrays(40, 1)
    fit(None, data, _network(), CrossEntropy(), Adam(0.01),
        _options(epochs=2, checkpoint_dir=tmp_path, checkpoint_every=1),
        validation_rows=held)  # fmt: skip
    whole = fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(epochs=4),
                validation_rows=held)  # fmt: skip
    resumed = fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(epochs=4),
                  validation_rows=held, resume_from=tmp_path)  # fmt: skip
    assert slot_bits(resumed) == slot_bits(whole)
    with pytest.raises(CheckpointMismatchError, match="other validation rows"):
        fit(None, data, _network(), CrossEntropy(), Adam(0.01), _options(epochs=4),
            validation_rows=_arrays(40, 9), resume_from=Checkpoint.path_in(tmp_path))  # fmt: skip


def test_a_scan_s_validation_rows_in_memory_are_named_as_the_rows_given(tmp_path: Path) -> None:
    """A bad value among a scan's validation rows given in memory is named by its place among
    them (the test rows' were named by nothing)."""
    path = tmp_path / "rows.csv"
    passengers.write_csv(path, 600, seed=7)
    held = [dict(row) for row in titanic.rows()[:30]]
    held[4]["Fare"] = "cheap"
    with pytest.raises(DataError, match=r"row 5 .*of the validation rows"):
        fit(titanic.pipeline(), scan_csv(path), titanic.network(), BinaryCrossEntropy(),
            Adam(0.01), _options(epochs=1), validation_rows=held)  # fmt: skip

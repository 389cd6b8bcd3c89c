"""`TrainedNetwork.evaluate(rows)`: a trained (or loaded) network's loss and metrics on new rows
with their targets — on the run's engine and batch size, the bits its report gave for the same
rows as test rows. Asked for by trial PT (F3): before, the figures were the run's alone, and new
labelled rows had to be predicted and scored by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    ConfigurationError,
    CrossEntropy,
    DataError,
    Dense,
    FitOptions,
    MeanSquaredError,
    Network,
    Relu,
    ShapeError,
    TrainedNetwork,
    fit,
    scan_csv,
)
from deepsharp.core.samples import passengers, titanic


def _options(**extra: object) -> FitOptions:
    return FitOptions(**{"seed": 3, "epochs": 3, "patience": 100, "progress": False, **extra})


def _titanic_run(tmp_path: Path, **extra: object):  # type: ignore[no-untyped-def]
    rows = titanic.rows()
    return fit(
        titanic.pipeline(), rows[:600], titanic.network(), BinaryCrossEntropy(), Adam(0.01),
        _options(metrics=("auc", "f1"), **extra), test_rows=rows[600:],
    )  # fmt: skip


@pytest.mark.parametrize("batch_size", [32, 50])
def test_rows_evaluated_give_the_bits_the_run_measured_them_at(
    tmp_path: Path, batch_size: int
) -> None:
    run = _titanic_run(tmp_path, batch_size=batch_size)
    rows = titanic.rows()[600:]
    found = run.trained.evaluate(rows, metrics=("auc", "f1"), batch_size=batch_size)
    assert list(found) == ["loss", "accuracy", "auc", "f1"]
    assert found == run.report.measures
    # A saved and loaded network measures the same rows the same.
    run.trained.save(tmp_path / "titanic.safetensors")
    loaded = TrainedNetwork.load(tmp_path / "titanic.safetensors")
    assert loaded.evaluate(rows, metrics=("auc", "f1"), batch_size=batch_size) == found


def test_a_scanned_file_is_evaluated_part_by_part_as_its_rows_in_memory(tmp_path: Path) -> None:
    path, training = tmp_path / "passengers.csv", tmp_path / "training.csv"
    passengers.write_csv(path, 300, seed=5)
    passengers.write_csv(training, 500, seed=6)
    run = fit(
        titanic.pipeline(), scan_csv(training), titanic.network(), BinaryCrossEntropy(),
        Adam(0.01), _options(), test_rows=scan_csv(path),
    )  # fmt: skip
    found = run.trained.evaluate(scan_csv(path, read_rows=7))  # parts cut across batches
    assert found == run.report.measures
    with pytest.raises(
        DataError, match=r"no evaluated rows: .*empty\.csv: the file holds its header"
    ):
        empty = tmp_path / "empty.csv"
        empty.write_text(path.read_text().splitlines()[0] + "\n")
        run.trained.evaluate(scan_csv(empty))


def test_a_network_of_arrays_is_evaluated_on_a_pair() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
    run = fit(
        None, (x[:200], y[:200]), Network([Dense(8), Relu(), Dense(3)]), CrossEntropy(),
        Adam(0.01), _options(metrics=("f1_macro",)), test_rows=(x[200:], y[200:]),
    )  # fmt: skip
    assert run.trained.evaluate((x[200:], y[200:]), metrics=["f1_macro"]) == run.report.measures
    with pytest.raises(DataError, match=r"evaluated on a pair \(x, y\), features and their"):
        run.trained.evaluate(x[200:])
    with pytest.raises(DataError, match=r"^evaluate: x holds 100 rows but y has shape \(99,\)"):
        run.trained.evaluate((x[200:], y[200:299]))


def test_a_regression_gives_its_loss_and_no_accuracy() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((120, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    run = fit(None, (x, y), Network([Dense(1)]), MeanSquaredError(), Adam(0.05), _options())
    found = run.trained.evaluate((x, y), metrics=("mae", "r2"), batch_size=7)
    assert list(found) == ["loss", "mae", "r2"]
    predicted = run.trained.predict(x).astype(np.float64)
    assert found["mae"] == pytest.approx(np.abs(predicted - y).mean(), rel=1e-12)
    assert found["loss"] == pytest.approx(((predicted - y) ** 2).mean(), rel=1e-5)


def test_what_cannot_be_evaluated_is_refused_saying_why(tmp_path: Path) -> None:
    run = _titanic_run(tmp_path)
    rows = titanic.rows()[600:]
    with pytest.raises(ConfigurationError, match="'r2' measures regression predictions"):
        run.trained.evaluate(rows, metrics=("r2",))
    with pytest.raises(ValueError, match="unknown metric 'acc'"):
        run.trained.evaluate(rows, metrics=("acc",))
    with pytest.raises(ValueError, match="batch_size is 1 or more, not 0"):
        run.trained.evaluate(rows, batch_size=0)
    with pytest.raises(TypeError, match=r"batch_size is a whole number, not 2\.5"):
        run.trained.evaluate(rows, batch_size=2.5)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="no rows: the rows handed in are empty"):
        run.trained.evaluate([])
    unlabelled = [{k: v for k, v in row.items() if k != "Survived"} for row in rows]
    with pytest.raises(DataError, match="Survived"):
        run.trained.evaluate(unlabelled)
    broken = [dict(row) for row in rows[:5]]
    broken[3]["Age"] = "old"
    with pytest.raises(DataError, match=r"row 4 .*of the evaluated rows"):
        run.trained.evaluate(broken)


def test_arrays_of_no_rows_are_refused() -> None:
    x = np.ones((40, 2), np.float32)
    run = fit(None, (x, x[:, :1]), Network([Dense(1)]), MeanSquaredError(), Adam(0.05), _options())
    with pytest.raises(DataError, match=r"evaluate: .*row"):
        run.trained.evaluate((x[:0], x[:0, :1]))


def test_a_frame_of_arrays_is_read_by_its_columns_names_as_predict_reads_it() -> None:
    """Failed before (trial EV): a network trained on a DataFrame as arrays read the frame given
    to evaluate, test_rows or validation_rows by its columns' places: reordered columns were
    measured as scrambled rows (accuracy 0.36 for 0.87), renamed ones taken silently."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 5)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    frame = pd.DataFrame(x, columns=list("abcde"))
    held, labels = frame.iloc[:100], y[:100]
    backwards = held[held.columns[::-1]]

    def run(**apart: object):  # type: ignore[no-untyped-def]
        return fit(None, (frame.iloc[100:], y[100:]), Network([Dense(8), Relu(), Dense(2)]),
                   CrossEntropy(), Adam(0.01), _options(), **apart)  # fmt: skip

    ordered = run(test_rows=(held, labels), validation_rows=(held, labels))
    reordered = run(test_rows=(backwards, labels), validation_rows=(backwards, labels))
    assert reordered.report.measures == ordered.report.measures
    judged = [
        [(r.loss, r.validation_loss) for r in run.report.history] for run in (ordered, reordered)
    ]
    assert judged[0] == judged[1]  # each epoch judged on the same validation rows
    trained = ordered.trained
    assert trained.evaluate((backwards, labels)) == trained.evaluate((held, labels))
    with pytest.raises(DataError, match="it lacks 'a'; it holds 'z'"):
        trained.evaluate((held.rename(columns={"a": "z"}), labels))


def test_labels_a_trained_network_has_no_output_for_are_said_so() -> None:
    """Before (review): 'end the network in Dense(6)', advice a trained network cannot take;
    fit's own refusal keeps its advice."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0).astype(np.int64)
    run = fit(None, (x, y), Network([Dense(3)]), CrossEntropy(), Adam(0.01), _options())
    with pytest.raises(ShapeError) as caught:
        run.trained.evaluate((x, y + 3))
    said = str(caught.value)
    assert "gives 3 outputs, a class each, and these rows hold others" in said
    assert "Dense(" not in said
    with pytest.raises(ShapeError, match=r"count from 1, give them from 0 \(y - 1\)"):
        run.trained.evaluate((x, y + 1))  # labels 1..3
    with pytest.raises(ShapeError, match=r"end the network in Dense\(6\)"):
        fit(None, (x, y + 3), Network([Dense(3)]), CrossEntropy(), Adam(0.01), _options())

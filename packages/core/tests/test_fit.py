"""fit on arrays and frames, its callbacks and extension points, and runs that diverge without
leaving NaN behind (checkpoints: test_checkpoints.py)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import binary_rows, dense_digits, fit_titanic, optdigits, quick, slot_bits

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Callback,
    ConfigurationError,
    CrossEntropy,
    DataError,
    DeepSharpWarning,
    Dense,
    EpochRecord,
    FitOptions,
    Layer,
    Network,
    Pipeline,
    Relu,
    Run,
    RunState,
    ShapeError,
    Tensor,
    TrainedNetwork,
    TrainingDivergedError,
    fit,
)
from deepsharp.core.files import read_safetensors
from deepsharp.core.nn.layers import Pass
from deepsharp.core.random import Streams
from deepsharp.core.samples import titanic
from deepsharp.core.training.distribution import Distribution, Sums
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.trainer import Trainer

# --- arrays and frames -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def from_arrays() -> Run:
    x, y = optdigits("train")
    return fit(None, (x / 16, y), dense_digits(), CrossEntropy(), Adam(0.01), quick(epochs=8))


def test_fit_trains_on_arrays_as_they_are(from_arrays: Run) -> None:
    """Before: fit refused arrays ("row 1 ... is of type ndarray, not a mapping")."""
    report = from_arrays.report
    assert report.test_rows == 3823 - math.floor(0.70 * 3823) - math.floor(0.15 * 3823)
    assert report.measures["accuracy"] > 0.9 and report.epochs_run == 8
    x_test, y_test = optdigits("test")
    predicted = from_arrays.trained.predict(x_test / 16)
    assert predicted.shape == (1797, 10)
    assert float(np.mean(predicted.argmax(1) == y_test)) > 0.9


def test_a_network_trained_on_arrays_saves_and_loads_and_predicts_arrays(
    from_arrays: Run, tmp_path: Path
) -> None:
    from_arrays.trained.save(tmp_path / "digits.safetensors")
    loaded = TrainedNetwork.load(tmp_path / "digits.safetensors")
    x_test, _ = optdigits("test")
    assert (
        loaded.predict(x_test[:40] / 16).tobytes()
        == from_arrays.trained.predict(x_test[:40] / 16).tobytes()
    )
    recipe = json.loads(read_safetensors(tmp_path / "digits.safetensors")[1]["pipeline"])
    assert recipe["arrays"] == {"shape": [64]} and recipe["columns"] == []


def test_arrays_with_test_rows_apart_and_a_split_that_leaves_no_test_fraction() -> None:
    """Before: split(0.85, 0.15) was refused, though the test rows came apart."""
    x, y = optdigits("train")
    x_test, y_test = optdigits("test")
    run = fit(
        Pipeline().split(train=0.85, validation=0.15),
        (x / 16, y),
        dense_digits(),
        CrossEntropy(),
        Adam(0.01),
        quick(epochs=2),
        test_rows=(x_test / 16, y_test),
    )
    assert run.report.test_rows == 1797


def test_test_rows_that_do_not_fit_are_named_as_the_test_rows() -> None:
    """Before (trial DX): 'the features have rows of shape (10,)...', as if of the training
    arrays, which were right."""
    x, y = optdigits("train")
    x, y = x[:200] / 16, y[:200]
    for test, said in [
        ((x[:50, :10], y[:50]), r"test_rows: the features have rows of shape \(10,\)"),
        ((x[:50], y[:40]), r"test_rows: x holds 50 rows but y has shape \(40,\)"),
        ((x[:50], y[:50] + 20), r"test_rows: CrossEntropy: class indices must lie in 0\.\.9"),
    ]:
        with pytest.raises((DataError, ShapeError), match=said):
            fit(None, (x, y), dense_digits(), CrossEntropy(), Adam(0.01), quick(epochs=1),
                test_rows=test)  # fmt: skip


def test_images_as_arrays_go_to_a_convolutional_network_as_they_are() -> None:
    x, y = optdigits("train")
    images = (x[:600] / 16).reshape(600, 1, 8, 8)
    network = Network([ds_conv(), Relu(), ds_flatten(), Dense(10)])
    run = fit(None, (images, y[:600]), network, CrossEntropy(), Adam(0.01), quick(epochs=2))
    assert network.inputs == (1, 8, 8)
    assert run.trained.predict(images[:3]).shape == (3, 10)


def ds_conv() -> Layer:
    from deepsharp.core import Conv2D

    return Conv2D(4, 3, padding="same")


def ds_flatten() -> Layer:
    from deepsharp.core import Flatten

    return Flatten()


def test_a_dataframe_of_numbers_needs_no_call_per_column() -> None:
    pd = pytest.importorskip("pandas")
    x, y = optdigits("train")
    frame = pd.DataFrame(x[:1000])  # columns named 0 .. 63
    frame["digit"] = y[:1000]
    run = fit(
        Pipeline().numbers().target("digit", kind="classes"),
        frame,
        dense_digits(),
        CrossEntropy(),
        Adam(0.01),
        quick(epochs=3),
    )
    assert run.trained.pipeline.feature_count == 64
    assert run.trained.predict(frame.head(2)).shape == (2, 10)
    by_arrays = fit(None, (frame.drop(columns="digit"), frame["digit"]), dense_digits(),
                    CrossEntropy(), Adam(0.01), quick(epochs=1))  # fmt: skip
    assert by_arrays.trained.predict(frame.drop(columns="digit").head(2)).shape == (2, 10)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"Survived": "1"}, "rows must be a list of mappings"),
        ("Survived,Age\n1,22", "rows must be a list of mappings"),
        ((np.zeros((5, 2)), np.zeros(4)), r"x holds 5 rows but y has shape \(4,\)"),
        (
            (np.full((8, 2), np.nan), np.zeros(8)),
            r"row 1, feature \[1\] \(each counting from 1\): missing",
        ),
    ],
)
def test_data_that_is_not_rows_or_arrays_is_refused_clearly(data: Any, says: str) -> None:
    """Before: a dict or a string was counted as rows (a raw KeyError followed)."""
    pipeline = None if isinstance(data, tuple) else titanic.pipeline()
    with pytest.raises(DataError, match=says):
        fit(pipeline, data, titanic.network(), BinaryCrossEntropy(), Adam(), quick())


def test_rows_from_a_generator_are_read_once() -> None:
    """Before: a generator failed with a raw TypeError."""
    rows = (row for row in titanic.rows())
    run = fit(titanic.pipeline(), rows, titanic.network(), BinaryCrossEntropy(), Adam(), quick())
    assert run.report.test_rows == 135


def test_a_target_of_one_class_warns() -> None:
    x = np.random.default_rng(0).standard_normal((40, 3))
    with pytest.warns(DeepSharpWarning, match="every training target is 1"):
        fit(None, (x, np.ones(40)), Network([Dense(1)]), BinaryCrossEntropy(), Adam(), quick())


def test_a_network_of_more_outputs_than_the_target_s_classes_is_refused() -> None:
    """Failed before (trial BE): `deepsharp train --network` of Dense(5) for a target of three
    classes trained and saved; predict then gave five chances a row, under output0..output4,
    two of them for classes the target does not have."""
    rows = [{"x": float(i % 7), "y": "abc"[i % 3]} for i in range(60)]
    pipeline = Pipeline().number("x").target("y", kind="classes")
    with pytest.raises(ConfigurationError, match=r"gives 5 outputs a row, and the pipeline's "
                       r"target has 3 classes \('a', 'b', 'c'\).*Dense\(3\)"):  # fmt: skip
        fit(pipeline, rows, Network([Dense(5)]), CrossEntropy(), Adam(), quick(epochs=1))
    fit(pipeline, rows, Network([Dense(3)]), CrossEntropy(), Adam(), quick(epochs=1))


def test_a_class_the_split_left_out_of_the_training_rows_is_named_with_what_to_do() -> None:
    """Before (trial BE): a label on one row failed the run or not by the seed, saying only
    that it "was not in the training rows" (the pipeline the command line printed had it)."""
    rows = [{"x": float(i % 7), "y": "no" if i % 2 else "yes"} for i in range(60)]
    pipeline = Pipeline().number("x").target("y", kind="classes")
    for seed in range(20):
        rows[0]["y"] = "rare"
        try:
            fit(
                pipeline,
                rows,
                Network([Dense(3)]),
                CrossEntropy(),
                Adam(),
                quick(seed=seed, epochs=1),
            )
        except DataError as error:
            assert "the target value 'rare' was not in the training rows" in str(error)
            assert "It is on 1 of these 60 rows" in str(error)
            assert "on none the pipeline learned from" in str(error)
            assert "give it training rows, or leave its rows out" in str(error)
            return
    raise AssertionError("no seed of 20 left the one row of 'rare' out of the training rows")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"batch_size": 2.5}, TypeError),
        ({"epochs": 2.5}, TypeError),
        ({"epochs": True}, TypeError),
        ({"patience": 0}, ValueError),
        ({"checkpoint_keep": 0}, ValueError),
        ({"seed": "7"}, TypeError),
        ({"seed": 2**63}, ValueError),  # before: taken, and 2**64 was seed 0's run again
        ({"seed": -(2**63) - 1}, ValueError),
        ({"restore_best": 1}, TypeError),
        ({"checkpoint_every": 2}, ValueError),
    ],
)
def test_fit_options_are_checked_where_they_are_made(options: dict[str, Any], error: type) -> None:
    """Before: batch_size=2.5 failed mid-run with a raw TypeError; epochs=2.5 was accepted."""
    with pytest.raises(error, match="FitOptions"):
        FitOptions(**{"seed": 1, **options})
    FitOptions(seed=2**63 - 1)  # the seeds' ends are taken
    FitOptions(seed=-(2**63))


# --- callbacks and extension points ----------------------------------------------------------


class StopAtThree(Callback):
    """A user's callback: sees every epoch's figures and ends the run after the third."""

    def __init__(self) -> None:
        self.seen: list[EpochRecord] = []

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        self.seen.append(record)
        if record.epoch == 3:
            run.stop = True


def test_a_user_s_callback_sees_each_epoch_and_may_stop_the_run() -> None:
    stopper, plain = StopAtThree(), []
    run = fit_titanic(quick(epochs=10), callbacks=[stopper, plain.append])
    assert run.report.epochs_run == 3
    assert stopper.seen == plain == run.report.history


class StopAfterStepTwo(Callback):
    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_batch_end(self, run: RunState, batch: int, loss: float) -> None:
        self.steps.append(batch)
        if batch == 2:
            run.stop = True


def test_a_callback_may_stop_the_run_after_a_step() -> None:
    """Before: run.stop set after a batch ended the run only at the epoch's end (Keras stops
    after the batch)."""
    stopper = StopAfterStepTwo()
    run = fit_titanic(quick(epochs=10), callbacks=[stopper])
    assert stopper.steps == [1, 2] and run.report.epochs_run == 1
    assert run.report.steps.replayed + run.report.steps.recorded == 2


class Watching(Distribution):
    """One process that says it does not write, watching when the loop calls it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @property
    def writes(self) -> bool:
        return False

    def start(self, trainer: Trainer) -> None:
        self.calls.append("start")
        trainer.hooks.insert(0, Counting(self.calls))

    def share(self, count: int) -> tuple[int, int]:
        self.calls.append("share")
        return 0, count

    def combine(self, sums: Sums) -> Sums:
        self.calls.append("combine")
        return sums

    def finish(self) -> None:
        self.calls.append("finish")


class Counting(StepHook):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def gradients(self, trainer: Trainer, grads: list[Any]) -> list[Any] | None:
        self.calls.append("gradients")
        return grads


def test_a_distribution_is_asked_at_its_points_and_a_process_that_does_not_write_writes_nothing(
    tmp_path: Path,
) -> None:
    watching = Watching()
    options = quick(epochs=2, checkpoint_dir=tmp_path / "run", checkpoint_every=1)
    plain = fit_titanic(quick(epochs=2))
    run = fit_titanic(FitOptions(**{**options.__dict__, "distributed": watching}))
    assert slot_bits(run) == slot_bits(plain)
    steps = math.ceil(623 / 32)
    calls = watching.calls
    assert calls[0] == "start" and calls[-1] == "finish"
    assert calls.count("gradients") == 2 * steps
    assert calls.count("combine") == 2 * 2 + 1  # training and validation each epoch, test once
    assert calls.count("share") == 2 * (steps + math.ceil(133 / 32)) + math.ceil(135 / 32)
    assert not (tmp_path / "run").exists()


# --- divergence ------------------------------------------------------------------------------


class Explode(Layer):
    """Passes values through, until its `at`-th training pass makes them infinite."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.passes = at, 0

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        if context.training:
            self.passes += 1
            if self.passes == self.at:
                return x * math.inf
        return x

    def config(self) -> dict[str, Any]:
        return {"at": self.at}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_run_puts_back_the_best_epoch_s_slots_before_raising(tmp_path: Path) -> None:
    """Before: the network was left holding NaN, and save wrote a file load refused."""
    steps = math.ceil(623 / 32)
    network = Network([Dense(16), Relu(), Explode(2 * steps + 5), Dense(1)])
    with pytest.raises(
        TrainingDivergedError, match=r"epoch 3, step 5.*the slots of epoch \d \(the best\)"
    ):
        fit_titanic(quick(epochs=5), network=network)
    calm = Network([Dense(16), Relu(), Explode(0), Dense(1)])
    two_epochs = fit_titanic(quick(epochs=2), network=calm)
    slots = network.slots
    assert all(np.all(np.isfinite(v)) for v in slots.values())
    assert all(slots[n].tobytes() == v.tobytes() for n, v in calm.slots.items())
    assert two_epochs.report.best_epoch in (1, 2)
    network.save(tmp_path / "kept.safetensors")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_run_diverging_in_its_first_epoch_puts_back_the_slots_it_started_from() -> None:
    network = Network([Dense(16), Relu(), Explode(5), Dense(1)])
    with pytest.raises(
        TrainingDivergedError, match=r"epoch 1, step 5.*holds the slots it started from"
    ):
        fit_titanic(quick(), network=network)
    assert network.inputs is not None
    drawn = Network([Dense(16), Relu(), Explode(5), Dense(1)], inputs=network.inputs)
    drawn.initialize(Streams(3).slots)  # what the run of seed 3 drew
    assert all(drawn.slots[n].tobytes() == v.tobytes() for n, v in network.slots.items())


def test_progress_asked_for_where_the_standard_error_is_a_file_writes_a_line_an_epoch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Failed before (trial BK): with tqdm installed, a log file got the bar's frames, each
    overwriting the last with a carriage return, and the last erased: no epoch's figures."""
    pytest.importorskip("tqdm")
    x, y = binary_rows(120)
    fit(None, (x, y), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
        quick(epochs=3, progress=True))  # fmt: skip
    said = capsys.readouterr().err
    assert "\r" not in said
    assert re.findall(r"^epoch (\d)/3: loss=[\d.]+, validation=[\d.]+$", said, re.M) == [
        "1",
        "2",
        "3",
    ]


def test_a_dict_of_one_array_for_a_network_of_one_input_is_told_to_give_the_array() -> None:
    """Failed before (trial O): fit told a dict keyed by the network's one input to "make a
    network of those inputs" (the one it had) or leave input= out of columns it never gave;
    predict said "rows of shape (a dict)"."""
    from deepsharp.core import Input, MeanSquaredError

    rng = np.random.default_rng(0)
    a = Input(3, name="a")
    network = Network(inputs=a, outputs=Dense(1)(a))
    x, y = rng.normal(size=(20, 3)).astype(np.float32), rng.normal(size=(20, 1))
    said = r"the features are a dict of arrays \('a'\).*give (it )?the array itself"
    with pytest.raises(DataError, match=said):
        fit(None, ({"a": x}, y), network, MeanSquaredError(), Adam(0.01), quick(epochs=1))
    run = fit(None, (x, y), network, MeanSquaredError(), Adam(0.01), quick(epochs=1))
    with pytest.raises(DataError, match=said):
        run.trained.predict({"a": x})
    # a dict of a frame's columns, for a network trained on the frame: its columns are no
    # inputs (trial SV5: column 'a' was told to be given as x[None], a row of 20 features)
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(x, columns=["p", "q", "r"])
    run = fit(
        None, (frame, y), Network([Dense(1)]), MeanSquaredError(), Adam(0.01), quick(epochs=1)
    )
    with pytest.raises(
        DataError, match=r"from a frame of the columns 'p', 'q', 'r' \(give a DataFrame"
    ):
        run.trained.predict({name: frame[name].to_numpy() for name in frame})


def test_a_masked_array_that_masks_a_value_is_refused_not_read_under_its_mask() -> None:
    """Failed before (trial H): predict read the values under the mask as they were."""
    x, y = binary_rows(40)
    run = fit(None, (x, y), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01), quick(epochs=1))
    masked = np.ma.masked_array(x[:3], mask=np.eye(3, x.shape[1], dtype=bool))
    for predict in (run.trained.predict, run.trained.network.predict):
        with pytest.raises(DataError, match="a masked array, 3 of its values masked"):
            predict(masked)
    unmasked = np.ma.masked_array(x[:3])
    assert run.trained.predict(unmasked).tolist() == run.trained.predict(x[:3]).tolist()

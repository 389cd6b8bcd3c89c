"""A run: fit with early stopping and a report, checkpoints and resume, serving, files."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import fit_titanic

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Callback,
    CheckpointMismatchError,
    ConfigurationError,
    DataError,
    DeepSharpWarning,
    Dense,
    EngineIdentity,
    EngineMismatchError,
    FileFormatError,
    Layer,
    Network,
    ReduceOnPlateau,
    Relu,
    Tensor,
    TrainingDivergedError,
)
from deepsharp.core.nn.layers import Pass
from deepsharp.core.samples import data_path, titanic
from deepsharp.core.serving import TrainedNetwork
from deepsharp.core.training.checkpoint import Checkpoint
from deepsharp.core.training.loop import FitOptions, Run, fit
from deepsharp.engines.light import LightEngine


@pytest.fixture(scope="module")
def sample() -> Run:
    return titanic.run()


def test_the_titanic_sample_reaches_078_on_its_135_test_passengers(sample: Run) -> None:
    report = sample.report
    assert report.test_rows == 135
    assert report.measures["accuracy"] >= 0.78
    assert set(report.measures) == {"loss", "accuracy"}
    assert report.engine.name == "light"
    assert 1 <= report.best_epoch <= report.epochs_run == len(report.history)
    assert "Braund, Mr. Owen Harris, 22, class 3" in str(report)


def test_early_stopping_keeps_the_best_epoch(sample: Run) -> None:
    report = sample.report
    losses = [record.validation_loss for record in report.history]
    assert report.history[report.best_epoch - 1].validation_loss == min(losses)
    if report.epochs_run < 200:  # it stopped early: patience epochs went by without a better one
        assert report.epochs_run - report.best_epoch == 10


def test_the_report_reads_as_a_table(sample: Run) -> None:
    text = str(sample.report)
    assert "best epoch" in text and "validation" in text and "accuracy" in text


def test_the_report_draws_its_curves(sample: Run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    sample.report.plot(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_the_report_s_epoch_axis_counts_whole_epochs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a run of two epochs drew ticks at epochs 1.2, 1.4, ..."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    ticks: list[float] = []
    drawn = Figure.savefig

    def kept(figure: Any, *args: Any, **kwargs: Any) -> Any:
        for axes in figure.axes:
            low, high = axes.get_xlim()
            ticks.extend(t for t in axes.get_xticks() if low <= t <= high)
        return drawn(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", kept)
    fit_titanic(_options(epochs=2)).report.plot(tmp_path / "curves.png")
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_a_run_of_one_epoch_draws_its_points_on_its_one_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before (trial CB): one epoch's curves were lines of one point, drawn as nothing,
    over ticks at epochs 0.95, 1.00, 1.05."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    seen: list[tuple[list[float], list[str]]] = []
    drawn = Figure.savefig

    def kept(figure: Any, *args: Any, **kwargs: Any) -> Any:
        for axes in figure.axes:
            markers = [line.get_marker() for line in axes.get_lines() if len(line.get_xdata()) == 1]
            seen.append(([float(t) for t in axes.get_xticks()], markers))
        return drawn(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", kept)
    fit_titanic(_options(epochs=1)).report.plot(tmp_path / "curves.png")
    ((ticks, markers),) = seen
    assert ticks == [1.0]
    assert markers == ["o", "o"]  # training and validation loss


def test_a_resumed_run_s_report_says_which_epochs_its_time_is_of(tmp_path: Path) -> None:
    """Failed before (trial CB): "5 epochs in 0.02 s", the time of the 2 this call ran."""
    fit_titanic(_options(epochs=3, checkpoint_dir=tmp_path, checkpoint_every=1))
    resumed = fit_titanic(_options(epochs=5), resume_from=tmp_path)
    head = str(resumed.report).splitlines()[0]
    assert ": 5 epochs (resumed at epoch 3: 2 of them in " in head, head
    assert resumed.report.resumed_at == 3
    assert "resumed" not in str(fit_titanic(_options(epochs=2)).report).splitlines()[0]


def test_a_plot_is_drawn_into_the_file_named_and_leaves_the_backend_alone(
    sample: Run, tmp_path: Path
) -> None:
    """Failed before: a folder was drawn into FOLDER.png beside it, a name without a kind into
    NAME.png, and matplotlib.use("Agg") switched the caller's backend (a notebook's) for the
    whole process."""
    matplotlib = pytest.importorskip("matplotlib")
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # the caller's own
    try:
        _plots(sample, tmp_path)
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)


def _plots(sample: Run, tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match="is a folder; give a file name"):
        sample.report.plot(tmp_path)
    with pytest.raises(ValueError, match=r"matplotlib draws no \.txt files; name one of"):
        sample.report.plot(tmp_path / "curves.txt")
    assert list(tmp_path.iterdir()) == []
    sample.report.plot(tmp_path / "curves")
    sample.report.plot(tmp_path / "curves.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curves", "curves.svg"]
    assert (tmp_path / "curves").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in (tmp_path / "curves.svg").read_bytes()[:2000]


def test_a_plot_into_a_missing_folder_names_the_folder(sample: Run, tmp_path: Path) -> None:
    """Failed before: matplotlib's own "[Errno 2] No such file or directory", after drawing,
    naming neither the folder nor the call."""
    pytest.importorskip("matplotlib")
    with pytest.raises(FileNotFoundError, match=r"report\.plot: .*there is no folder .*missing"):
        sample.report.plot(tmp_path / "missing" / "curves.png")
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match=r"report\.plot: .* is not a folder"):
        sample.report.plot(tmp_path / "file" / "curves.png")


def test_the_shipped_titanic_data_is_the_known_file() -> None:
    digest = hashlib.sha256(data_path("titanic.csv").read_bytes()).hexdigest()
    assert digest == titanic.SHA256


def test_a_row_is_predicted_the_same_alone_in_any_order_and_in_any_company(sample: Run) -> None:
    rows = titanic.rows()
    every = sample.trained.predict(rows)
    assert every.shape == (891, 1) and every.dtype == np.float32
    for index in (0, 31, 32, 890):
        alone = sample.trained.predict([rows[index]])
        assert alone.tobytes() == every[index].tobytes()
    order = np.random.default_rng(1).permutation(891)[:100]
    mixed = sample.trained.predict([rows[i] for i in order])
    assert mixed.tobytes() == every[order].tobytes()


def test_a_trained_network_saved_and_loaded_predicts_the_same_bits(
    sample: Run, tmp_path: Path
) -> None:
    sample.trained.save(tmp_path / "titanic.safetensors")
    loaded = TrainedNetwork.load(tmp_path / "titanic.safetensors")
    rows = titanic.rows()[:50]
    assert loaded.predict(rows).tobytes() == sample.trained.predict(rows).tobytes()
    assert b"light" not in (tmp_path / "titanic.safetensors").read_bytes()[:4096]


def test_a_save_that_fails_midway_leaves_the_earlier_file_intact(
    sample: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "titanic.safetensors"
    sample.trained.save(path)
    before = path.read_bytes()

    def full_disk(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        sample.trained.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["titanic.safetensors"]


def test_a_trained_file_with_a_broken_pipeline_is_refused(sample: Run, tmp_path: Path) -> None:
    from deepsharp.core.files import encode_safetensors, read_safetensors

    sample.trained.save(tmp_path / "good.safetensors")
    tensors, metadata = read_safetensors(tmp_path / "good.safetensors")
    metadata["pipeline"] = '{"format": "deepsharp.pipeline", "columns": 3}'
    (tmp_path / "bad.safetensors").write_bytes(encode_safetensors(tensors, metadata))
    with pytest.raises(FileFormatError):
        TrainedNetwork.load(tmp_path / "bad.safetensors")


# --- checkpoints and resume ------------------------------------------------------------------


def _options(**extra: Any) -> FitOptions:
    settings: dict[str, Any] = {"seed": 7, "epochs": 12, "patience": 100, "progress": False}
    return FitOptions(**{**settings, **extra})


def _bits(run: Run) -> bytes:
    slots = run.trained.network.slots
    return b"".join(slots[name].tobytes() for name in sorted(slots))


@pytest.fixture(scope="module")
def uninterrupted() -> Run:
    return fit_titanic(_options())


@pytest.mark.parametrize("epoch", [1, 5, 10])
def test_a_resumed_run_ends_bit_for_bit_where_the_uninterrupted_one_does(
    uninterrupted: Run, tmp_path: Path, epoch: int
) -> None:
    kept = tmp_path / f"epoch-{epoch}.safetensors"

    def keep(record: Any) -> None:
        if record.epoch == epoch:
            shutil.copy(Checkpoint.path_in(tmp_path / "run"), kept)

    fit_titanic(_options(checkpoint_dir=tmp_path / "run", checkpoint_every=1), on_epoch=keep)
    assert Checkpoint.load(kept).epoch == epoch
    resumed = fit_titanic(_options(), resume_from=kept)
    assert _bits(resumed) == _bits(uninterrupted)
    assert resumed.report.history == uninterrupted.report.history[
        : len(resumed.report.history)
    ] or [(r.epoch, r.loss, r.validation_loss) for r in resumed.report.history] == [
        (r.epoch, r.loss, r.validation_loss) for r in uninterrupted.report.history
    ]
    assert resumed.report.measures == uninterrupted.report.measures


def test_resuming_from_an_earlier_checkpoint_into_its_folder_warns_of_the_later_ones(
    tmp_path: Path,
) -> None:
    """Failed before (trial CB): the folder's checkpoints of epochs 4 and 5 went, unsaid, as the
    run resumed from epoch 2 wrote its first."""
    folder = tmp_path / "run"
    kept = {"checkpoint_dir": folder, "checkpoint_every": 1, "checkpoint_keep": 5}
    fit_titanic(_options(epochs=5, **kept))
    with pytest.warns(DeepSharpWarning, match=r"resumed at epoch 2: .* later epochs \(3-5\)"):
        fit_titanic(_options(epochs=3, **kept), resume_from=Checkpoint.path_in(folder, 2))
    assert [epoch for epoch, _ in Checkpoint.in_folder(folder)] == [1, 2, 3]


def test_a_checkpoint_of_a_long_run_holds_its_history_in_a_table(tmp_path: Path) -> None:
    """Failed before (trial HG): the history was JSON in the 1 MiB header, so a run's 14,000th
    epoch's checkpoint failed to save ("the header would be 1,056,392 bytes"), ending the run;
    version 4 holds it as a float64 table, NaN where a metric has none."""
    import dataclasses

    from deepsharp.core.training.checkpoint import EpochRecord

    fit_titanic(_options(epochs=2, checkpoint_dir=tmp_path / "run", checkpoint_every=1))
    short = Checkpoint.load(Checkpoint.path_in(tmp_path / "run"))
    history = [
        EpochRecord(i, 0.1 + 1 / i, 0.2 + 1 / i, 0.001 * i, {"auc": math.nan if i % 7 else 0.5})
        for i in range(1, 30_001)
    ]
    run = {**short.run, "metrics": ["auc"]}  # the run that measured them
    long = dataclasses.replace(short, epoch=30_000, history=history, best_epoch=29_999, run=run)
    long.save(tmp_path / "long.safetensors")
    again = Checkpoint.load(tmp_path / "long.safetensors")
    assert again.epoch == 30_000 and again.best_epoch == 29_999
    assert [dataclasses.astuple(r)[:4] for r in again.history] == [
        dataclasses.astuple(r)[:4] for r in history
    ]
    assert [r.metrics["auc"] for r in again.history[6:8]] == [
        0.5,
        pytest.approx(math.nan, nan_ok=True),
    ]


def test_a_resume_a_callback_s_state_refuses_leaves_the_network_as_it_was(tmp_path: Path) -> None:
    """Failed before (trial HG): early stopping refused its state ('waited' -1) after the
    trainer had loaded the checkpoint's slots, and the network handed to fit kept them; the
    message named no file."""
    import json

    from deepsharp.core.files import encode_safetensors, read_safetensors

    fit_titanic(_options(epochs=2, checkpoint_dir=tmp_path / "run", checkpoint_every=1))
    tensors, metadata = read_safetensors(Checkpoint.path_in(tmp_path / "run"))
    state = json.loads(metadata["state"])
    state["callbacks"]["early_stopping"]["waited"] = -1
    metadata["state"] = json.dumps(state)
    lying = tmp_path / "lying.safetensors"
    lying.write_bytes(encode_safetensors(tensors, metadata))
    network = fit_titanic(_options(epochs=1)).trained.network
    before = network.slots
    with pytest.raises(FileFormatError, match=r"the checkpoint .*lying\.safetensors: early stop"):
        fit_titanic(_options(epochs=3), network=network, resume_from=lying)
    assert all(np.array_equal(network.slots[name], before[name]) for name in before)


KILLED = """
import os, signal, sys
from deepsharp.core import Adam, BinaryCrossEntropy
from deepsharp.core.training.loop import FitOptions, fit
from deepsharp.core.samples import titanic

def die(record):
    if record.epoch == 7:
        os.kill(os.getpid(), signal.SIGKILL)

fit(titanic.pipeline(), titanic.rows(), titanic.network(), BinaryCrossEntropy(), Adam(0.001),
    FitOptions(seed=7, epochs=12, patience=100, progress=False, checkpoint_dir=sys.argv[1],
               checkpoint_every=1), on_epoch=die)
"""


def test_a_run_killed_mid_training_resumes_to_the_same_final_bits(
    uninterrupted: Run, tmp_path: Path
) -> None:
    process = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path)], capture_output=True)
    assert process.returncode == -9, process.stderr.decode()
    checkpoint = Checkpoint.load(Checkpoint.path_in(tmp_path))
    assert checkpoint.epoch == 7
    resumed = fit_titanic(_options(), resume_from=checkpoint)
    assert _bits(resumed) == _bits(uninterrupted)


class OtherLight(LightEngine):
    """The light engine under another name: what a checkpoint must not go on with."""

    name = "other"

    @property
    def identity(self) -> EngineIdentity:
        return EngineIdentity("other", "9.9", "cpu")


def test_a_checkpoint_is_refused_on_another_engine_before_anything_is_restored(
    tmp_path: Path,
) -> None:
    fit_titanic(_options(epochs=2, checkpoint_dir=tmp_path, checkpoint_every=1))
    checkpoint = Checkpoint.load(Checkpoint.path_in(tmp_path))
    assert checkpoint.engine.name == "light"
    other = OtherLight()
    network = titanic.network()
    with pytest.raises(EngineMismatchError, match=r"light numpy .* other 9\.9 on cpu"):
        fit_titanic(_options(engine=other), network, resume_from=Checkpoint.path_in(tmp_path))
    assert other.counters.transfers_in == 0
    assert not network.initialized


def _rows300() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 4)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.float32)[:, None]


def _resumed(
    folder: Path, rows: int = 300, data: tuple[np.ndarray, np.ndarray] | None = None, **changes: Any
) -> Run:
    x, y = _rows300() if data is None else data
    named = ("class_weight", "callbacks", "sample_weight")
    kept = {k: changes.pop(k) for k in named if k in changes}
    options = _options(epochs=3, checkpoint_dir=folder, checkpoint_keep=3, **changes)
    network = Network([Dense(8), Relu(), Dense(1)])
    at = (
        Checkpoint.path_in(folder, 1)
        if (folder / "checkpoint-000001.safetensors").exists()
        else None
    )
    return fit(None, (x[:rows], y[:rows]), network, BinaryCrossEntropy(), Adam(0.01), options,
               resume_from=at, **kept)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"batch_size": 16}, "a batch size of 32; this run's is 16"),
        ({"accumulate": 2}, r"accumulated over \(batches\) 1; this run's is 2"),
        ({"class_weight": {0: 5.0}}, r"class weights None; this run's is \[5\.0, 1\.0\]"),
        ({"rows": 250}, "of 210 training, 45 validation and 45 test rows; this run has 175"),
        ({"callbacks": [ReduceOnPlateau(patience=2)]}, "'reduce_on_plateau', and .* without"),
        # trial BK: the report then showed the first metrics alone, the new ones' epochs NaN
        ({"metrics": ("auc",)}, r"the metrics \(each epoch's, .*\[\]; this run's is \['auc'\]"),
    ],
    ids=["batch-size", "accumulate", "class-weight", "rows", "a-callback-more", "metrics"],
)
def test_a_run_resumed_with_other_settings_or_data_is_refused_naming_both(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    """Before: each resumed silently and ended elsewhere than the uninterrupted run."""
    _resumed(tmp_path)
    with pytest.raises(CheckpointMismatchError, match=said):
        _resumed(tmp_path, **change)


def test_a_run_resumed_without_its_callback_or_with_other_settings_for_it_is_refused(
    tmp_path: Path,
) -> None:
    _resumed(tmp_path, callbacks=[ReduceOnPlateau(patience=2)])
    with pytest.raises(CheckpointMismatchError, match="'reduce_on_plateau', which this run lacks"):
        _resumed(tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"'patience': 2.*'patience': 3"):
        _resumed(tmp_path, callbacks=[ReduceOnPlateau(patience=3)])
    assert _resumed(tmp_path, callbacks=[ReduceOnPlateau(patience=2)]).report.epochs_run == 3


def test_a_run_resumed_with_other_early_stopping_settings_is_refused(tmp_path: Path) -> None:
    """Failed before: patience and restore_best were not in early stopping's state, so a run
    resumed with patience 2 (taken with 100) stopped at once where the uninterrupted run went on
    (the guide: callbacks must match, their settings too)."""
    _resumed(tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"'early_stopping' set \{'patience': 100"):
        _resumed(tmp_path, patience=2)
    with pytest.raises(CheckpointMismatchError, match=r"'restore_best': False"):
        _resumed(tmp_path, restore_best=False)


class _Named(Callback):
    def __init__(self, name: str, state: Any = None) -> None:
        self.name, self.kept = name, {} if state is None else state

    def state(self) -> dict[str, Any]:
        return self.kept  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("callbacks", "said"),
    [
        ([_Named("early_stopping")], "named 'early_stopping', the name of fit's own"),
        ([_Named("checkpoints")], "named 'checkpoints', the name of fit's own"),
        ([_Named("mine"), _Named("mine")], "two callbacks are named 'mine'"),
        ([_Named("mine", {"best": math.inf})], "Out of range float values"),
        ([_Named("mine", {"best": np.float32(1.5)})], "float32 is not JSON serializable"),
    ],
)
def test_callbacks_whose_states_a_checkpoint_could_not_keep_apart_are_refused_at_the_start(
    tmp_path: Path, callbacks: list[Callback], said: str
) -> None:
    """Failed before: a callback named as fit's own replaced its state in every checkpoint (a
    resumed run lost early stopping's count and trained on); a state of inf or a NumPy number
    stopped the run at its first checkpoint, after an epoch, with json's error naming nothing."""
    with pytest.raises(ConfigurationError, match=said):
        _resumed(tmp_path, callbacks=callbacks)
    assert list(tmp_path.iterdir()) == []


def test_a_run_resumed_past_its_epochs_warns_that_nothing_is_trained(tmp_path: Path) -> None:
    """Failed before: resumed from epoch 3 with epochs=2, it returned a report of 3 epochs,
    silently."""
    _resumed(tmp_path)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)[:, None]
    with pytest.warns(DeepSharpWarning, match=r"after epoch 3, past this run's epochs=2"):
        run = fit(None, (x, y), Network([Dense(8), Relu(), Dense(1)]), BinaryCrossEntropy(),
                  Adam(0.01), _options(epochs=2),
                  resume_from=Checkpoint.path_in(tmp_path, 3))  # fmt: skip
    assert run.report.epochs_run == 3


def test_a_resumed_run_on_other_rows_of_the_same_count_is_refused(tmp_path: Path) -> None:
    """Before: another text's rows relearned the vocabulary and gave its ids to other words."""
    rows = titanic.rows()
    fit_titanic(_options(epochs=2, checkpoint_dir=tmp_path, checkpoint_every=1))
    changed = [{**row, "Age": "80"} if i % 7 == 0 else row for i, row in enumerate(rows)]
    with pytest.raises(CheckpointMismatchError, match="a pipeline that learned other statistics"):
        fit(titanic.pipeline(), changed, titanic.network(), BinaryCrossEntropy(), Adam(0.001),
            _options(epochs=3), resume_from=Checkpoint.path_in(tmp_path))  # fmt: skip


def test_a_run_resumed_on_other_validation_or_test_rows_of_the_same_count_is_refused(
    tmp_path: Path,
) -> None:
    """Failed before (trial CB): only the training rows were digested, so a resume on arrays
    whose validation or test rows (values, labels) had changed went on: other rows judged its
    epochs after the checkpoint's (early stopping, the best epoch kept) than before it."""
    _resumed(tmp_path)
    x, y = _rows300()
    said: dict[str, list[int]] = {}
    for row in range(30):
        changed_x, changed_y = x.copy(), y.copy()
        changed_x[row] *= -10
        changed_y[row] = 1 - changed_y[row]
        with pytest.raises(CheckpointMismatchError) as refused:
            _resumed(tmp_path, data=(changed_x, changed_y))
        part = str(refused.value).split("run on other ")[1].split(" rows")[0]
        said.setdefault(part, []).append(row)
    assert set(said) == {"training", "validation", "test"}, said
    assert "resume on the data it was taken on" in str(refused.value)


def test_weights_of_one_resume_a_run_without_weights_and_back(tmp_path: Path) -> None:
    """Failed before (trial CB): a run started without sample weights was refused when resumed
    with sample_weight of ones, though weights of one are the same run as none, bit for bit."""
    first = _resumed(tmp_path)
    ones = np.ones(300)
    again = _resumed(tmp_path, sample_weight=ones)
    assert [r.loss for r in again.report.history] == [r.loss for r in first.report.history]
    weighed = tmp_path / "weighed"
    _resumed(weighed, sample_weight=ones)
    back = _resumed(weighed)
    assert [r.loss for r in back.report.history] == [r.loss for r in first.report.history]
    with pytest.raises(CheckpointMismatchError, match="other sample weights"):
        _resumed(tmp_path, sample_weight=np.full(300, 2.0))


class Explode(Layer):
    """Passes values through, until its fifth training pass makes them infinite."""

    def __init__(self) -> None:
        super().__init__()
        self.passes = 0

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        if context.training:
            self.passes += 1
            if self.passes == 5:
                return x * math.inf
        return x


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_a_loss_that_turns_infinite_stops_the_run_naming_epoch_and_step() -> None:
    network = Network([Dense(16), Relu(), Explode(), Dense(1)])
    with pytest.raises(TrainingDivergedError, match="epoch 1, step 5"):
        fit(
            titanic.pipeline(),
            titanic.rows(),
            network,
            BinaryCrossEntropy(),
            Adam(0.001),
            _options(),
        )


def test_fit_without_rows_or_target_says_so() -> None:
    with pytest.raises(DataError, match="no rows"):
        _fit_rows([])
    rows = [{k: v for k, v in row.items() if k != "Survived"} for row in titanic.rows()]
    with pytest.raises(DataError, match="Survived"):
        _fit_rows(rows)


def _fit_rows(rows: list[Any]) -> Run:
    return fit(
        titanic.pipeline(), rows, titanic.network(), BinaryCrossEntropy(), Adam(), _options()
    )


def test_the_same_run_twice_gives_the_same_bits(uninterrupted: Run) -> None:
    assert _bits(fit_titanic(_options())) == _bits(uninterrupted)


def test_a_run_resumed_with_its_metrics_in_another_order_goes_on(tmp_path: Path) -> None:
    """Trial BL: the check of the metrics (this round's) first compared them in order."""
    _resumed(tmp_path, metrics=("accuracy", "auc"))
    assert _resumed(tmp_path, metrics=("auc", "accuracy")).report.epochs_run == 3


def test_a_diverged_step_is_said_by_the_whole_batch_s_loss() -> None:
    """Failed before (trial DS): where a data-parallel step's batch loss was NaN from another
    process's share, this process's message quoted its own share's finite loss ("the loss
    turned 0.544 at epoch 1, step 1")."""
    from deepsharp.core import MeanSquaredError
    from deepsharp.core.training.distribution import OneProcess

    class Shared(OneProcess):  # another process's share of the batch was not finite
        def all_finite(self, loss: float) -> bool:
            return False

        def batch_loss(self, loss: float) -> float:
            return math.nan

    x = np.ones((40, 3), np.float32)
    options = FitOptions(seed=0, epochs=1, progress=False, distributed=Shared())
    with pytest.raises(TrainingDivergedError, match="the loss turned nan at epoch 1, step 1"):
        fit(None, (x, x[:, :1]), Network([Dense(1)]), MeanSquaredError(), Adam(0.1), options)


def test_the_report_shows_the_best_epoch_and_small_figures_and_says_what_its_figures_are(
    sample: Run,
) -> None:
    """Failed before (trial P2): a run of over 12 epochs showed the first 5 and the last 6,
    so the best epoch a run stopped early restores (47 of 57) was never shown; figures near
    1e-4 read 0.0000; a run of restore_best=False, a monitor of no value at any epoch and an
    epoch a callback cut short were reported without a word."""
    from deepsharp.core import Callback, Dense, Network, RunState
    from deepsharp.core.nn.losses import MeanSquaredError

    report = sample.report
    assert report.epochs_run > 12 and 5 < report.best_epoch < report.epochs_run - 5
    best = next(line for line in str(report).splitlines() if line.endswith("<- best"))
    assert best.split()[0] == str(report.best_epoch)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 3)).astype(np.float32)
    small = fit(None, (x, x[:, :1] * 1e-4), Network([Dense(1)]), MeanSquaredError(),
                Adam(0.01), FitOptions(seed=0, epochs=2, progress=False, restore_best=False,
                                       patience=1))  # fmt: skip
    shown = dataclasses.replace(small.report, measures={"loss": 2.5e-9, "mae": 4.2e-5})
    said = str(shown)
    assert "loss       2.5e-09" in said and "mae        4.2e-05" in said, said

    class Cut(Callback):
        def on_batch_end(self, run: RunState, batch: int, loss: float) -> None:
            run.stop = run.epoch == 1 and batch == 2

    y = (x[:, 0] > 0).astype(np.float32)
    cut = fit(None, (x, y), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
              FitOptions(seed=0, epochs=4, batch_size=8, progress=False, metrics=("auc",),
                         monitor="auc", restore_best=False), callbacks=[Cut()])  # fmt: skip
    notes = "\n".join(cut.report.notes)
    assert "epoch 2 ran 2 steps: a callback stopped the run" in notes, notes
    with pytest.warns(DeepSharpWarning, match="every training target is 0") as said:
        one_class = fit(None, (x, np.zeros(80, np.float32)), Network([Dense(1)]),
                        BinaryCrossEntropy(), Adam(0.01),
                        FitOptions(seed=0, epochs=2, progress=False, metrics=("auc",),
                                   monitor="auc", restore_best=False))  # fmt: skip
    assert said[0].filename == __file__  # the line of the fit (was feeds.py's)
    notes = "\n".join(one_class.report.notes)
    assert "monitor='auc' had no value at any epoch" in notes, notes
    assert "the measures are of the last epoch's slots, epoch 2" in notes, notes

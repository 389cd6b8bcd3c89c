"""Checkpoints that keep their promises: kept and pruned by epoch, a folder held by one live
run, refused where they lie or belong to another run, resumed bit for bit."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from core_helpers import binary_rows, dense_digits, fit_titanic, optdigits, quick, slot_bits

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    Callback,
    Checkpoint,
    CheckpointMismatchError,
    CrossEntropy,
    DeepSharpWarning,
    Dense,
    EngineIdentity,
    EngineMismatchError,
    EpochRecord,
    FileFormatError,
    Network,
    Relu,
    Run,
    RunState,
    StateError,
    fit,
)
from deepsharp.core.files import encode_safetensors, read_safetensors
from deepsharp.engines.light import LightEngine

# --- checkpoints -----------------------------------------------------------------------------


def test_checkpoint_keep_keeps_the_latest_each_named_by_its_epoch(tmp_path: Path) -> None:
    fit_titanic(quick(epochs=5, checkpoint_dir=tmp_path, checkpoint_every=1, checkpoint_keep=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint-000004.safetensors",
        "checkpoint-000005.safetensors",
    ]
    assert Checkpoint.load(tmp_path).epoch == 5  # a folder: its latest


def test_a_resumed_run_writes_over_the_abandoned_line_of_checkpoints(tmp_path: Path) -> None:
    fit_titanic(quick(epochs=4, checkpoint_dir=tmp_path, checkpoint_every=1, checkpoint_keep=4))
    again = fit_titanic(
        quick(epochs=4, checkpoint_dir=tmp_path, checkpoint_every=1, checkpoint_keep=1),
        resume_from=Checkpoint.path_in(tmp_path, 2),
    )
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-000004.safetensors"]
    assert again.report.epochs_run == 4


LIVE = """
import sys, time
from pathlib import Path
from core_helpers import fit_titanic
from deepsharp.core import FitOptions
folder, started, go = (Path(a) for a in sys.argv[1:4])

def wait(record):
    if record.epoch == 2:
        started.write_text("")
        while not go.exists():
            time.sleep(0.01)

fit_titanic(FitOptions(seed=3, epochs=4, patience=100, progress=False, checkpoint_dir=folder,
                       checkpoint_every=1, checkpoint_keep=4), on_epoch=wait)
"""


def test_a_checkpoint_folder_in_use_by_a_live_run_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    folder, started, go = tmp_path / "run", tmp_path / "started", tmp_path / "go"
    helpers = str(Path(__file__).parent)
    live = subprocess.Popen(
        [sys.executable, "-c", LIVE, str(folder), str(started), str(go)],
        env={**os.environ, "PYTHONPATH": helpers},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not started.exists():  # the live run is between its second and third epoch
            assert live.poll() is None, live.stderr.read() if live.stderr else ""
            time.sleep(0.01)
        said = r"checkpoint_dir '.*run' is in use by another run \(one under way, in this pro"
        with pytest.raises(StateError, match=said):  # (not "a live process": a thread's too, K)
            fit_titanic(quick(epochs=2, checkpoint_dir=folder, checkpoint_every=1))
        assert sorted(p.name for p in folder.glob("checkpoint-*")) == [
            "checkpoint-000001.safetensors",
            "checkpoint-000002.safetensors",
        ]  # before: the second run pruned them, and deleted the live one's temporary file
    finally:
        go.write_text("")
        assert live.wait(timeout=300) == 0, live.stderr.read() if live.stderr else ""
    assert Checkpoint.load(folder).epoch == 4
    fit_titanic(quick(epochs=5, checkpoint_dir=folder, checkpoint_every=1), resume_from=folder)


def test_a_run_prunes_only_its_own_checkpoints(tmp_path: Path) -> None:
    first = quick(epochs=5, checkpoint_dir=tmp_path, checkpoint_every=1, checkpoint_keep=3)
    fit_titanic(first)
    with pytest.warns(DeepSharpWarning, match=r"holds checkpoints of another run \(epochs 3-5\)"):
        fit_titanic(quick(epochs=2, checkpoint_dir=tmp_path, checkpoint_every=1))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "checkpoint-000002.safetensors",  # the second run's latest
        "checkpoint-000003.safetensors",  # the first run's three: before, pruned by the second
        "checkpoint-000004.safetensors",
        "checkpoint-000005.safetensors",
    ]
    resumed = fit_titanic(
        quick(epochs=6, checkpoint_dir=tmp_path, checkpoint_every=1, checkpoint_keep=1),
        resume_from=Checkpoint.path_in(tmp_path, 5),
    )
    assert resumed.report.epochs_run == 6
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "checkpoint-000002.safetensors",  # the other run's: left
        "checkpoint-000006.safetensors",  # the resumed run's line: its latest alone
    ]


def test_a_checkpoint_dir_that_is_a_file_is_refused_before_the_first_epoch(tmp_path: Path) -> None:
    """Before: the run failed after checkpoint_every epochs, losing them."""
    (tmp_path / "file").write_text("")
    seen: list[EpochRecord] = []
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        fit_titanic(
            quick(checkpoint_dir=tmp_path / "file", checkpoint_every=3), callbacks=[seen.append]
        )
    assert seen == []


def test_a_checkpoint_dir_that_is_a_link_to_nothing_is_refused_naming_where_it_leads(
    tmp_path: Path,
) -> None:
    """Before: pathlib's mkdir raised a raw FileExistsError ('File exists'), of a folder that
    does not exist, from inside the run."""
    (tmp_path / "nowhere").symlink_to(tmp_path / "not-made-yet")
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")
    for link in ("nowhere", "one"):
        with pytest.raises(FileNotFoundError, match=f"checkpoint_dir .*{link}' is a symbolic link"):
            fit_titanic(quick(checkpoint_dir=tmp_path / link, checkpoint_every=1))
    (tmp_path / "not-made-yet").mkdir()  # once the folder it names is there, it is written into
    fit_titanic(quick(epochs=1, checkpoint_dir=tmp_path / "nowhere", checkpoint_every=1))
    assert (tmp_path / "not-made-yet" / "checkpoint-000001.safetensors").exists()


def test_temporaries_of_killed_checkpoint_writes_are_removed_when_a_run_starts(
    tmp_path: Path,
) -> None:
    """Before: they stayed (up to 8 MB each)."""
    stale = [".checkpoint-000003.safetensors.k2j3h4.tmp", ".checkpoint.safetensors.x1y2.tmp"]
    for name in [*stale, ".other.tmp", "notes.txt"]:
        (tmp_path / name).write_bytes(b"x")
    fit_titanic(quick(epochs=1, checkpoint_dir=tmp_path, checkpoint_every=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".other.tmp",
        "checkpoint-000001.safetensors",
        "notes.txt",
    ]


@pytest.fixture(scope="module")
def adam_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("adam")
    fit_titanic(quick(epochs=2, checkpoint_dir=folder, checkpoint_every=1))
    return Checkpoint.path_in(folder)


def test_resuming_an_adam_checkpoint_with_sgd_names_both(adam_checkpoint: Path) -> None:
    """Before: a raw KeyError: 'velocity'."""
    with pytest.raises(
        CheckpointMismatchError,
        match=r"taken with the optimizer Adam\(learning_rate=0\.001.*this run's is SGD\(",
    ):
        fit_titanic(quick(), optimizer=SGD(0.1), resume_from=adam_checkpoint)
    with pytest.raises(
        CheckpointMismatchError, match=r"Adam\(learning_rate=0\.001.*Adam\(learning_rate=0\.01"
    ):
        fit_titanic(quick(), optimizer=Adam(0.01), resume_from=adam_checkpoint)


def test_resuming_with_another_network_names_where_it_differs(adam_checkpoint: Path) -> None:
    """Failed before: the message was both architectures whole, side by side, naming no
    difference (2,000 characters for a network of 13 layers)."""
    other = Network([Dense(17), Relu(), Dense(1)])
    with pytest.raises(
        CheckpointMismatchError,
        match=r"of another network than this run trains: layer 'dense' \(Dense\): its units: "
        r"16 there and 17 here \(there: the checkpoint's; here: this run's\)",
    ) as refused:
        fit_titanic(quick(), network=other, resume_from=adam_checkpoint)
    assert len(str(refused.value)) < 400


def test_resuming_with_another_seed_names_both(adam_checkpoint: Path) -> None:
    """Before: a plain ValueError."""
    with pytest.raises(CheckpointMismatchError, match="seed 3; this run's seed is 4"):
        fit_titanic(quick(seed=4), resume_from=adam_checkpoint)


class Float32Light(LightEngine):
    """The light engine, calling itself float32: another precision."""

    @property
    def identity(self) -> EngineIdentity:
        own = super().identity
        return EngineIdentity(own.name, own.version, own.device, "float32")


def test_resuming_with_another_precision_names_both(adam_checkpoint: Path) -> None:
    with pytest.raises(
        EngineMismatchError, match=r"\(strict\); this run's engine is .*\(float32\)"
    ):
        fit_titanic(quick(engine=Float32Light()), resume_from=adam_checkpoint)


def _lying(source: Path, target: Path, change: Any) -> Path:
    tensors, metadata = read_safetensors(source)
    state = json.loads(metadata["state"])
    change(tensors, state)
    metadata["state"] = json.dumps(state)
    target.write_bytes(encode_safetensors(tensors, metadata))
    return target


def _set(key: str, value: Any) -> Any:
    return lambda tensors, state: state.__setitem__(key, value)


def _measured(name: str) -> Any:
    """A change giving the history a column of the metric `name`."""

    def change(tensors: dict[str, Any], state: dict[str, Any]) -> None:
        state["history"]["metrics"] = [name]
        tensors["history"] = np.concatenate([tensors["history"], np.ones((2, 1))], axis=1)

    return change


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda t, s: t.pop("slots/dense.bias"), r"its slots: slot 'dense\.bias' is missing"),
        (
            lambda t, s: t.pop("memory/second/dense_1.weights"),
            "its memory/second: slot 'dense_1.weights' is missing",
        ),
        (lambda t, s: t.__setitem__("extra/x", np.zeros(1, np.float32)), "tensor 'extra/x'"),
        (
            lambda t, s: t.__setitem__("best/dense.bias", np.full(16, np.nan, np.float32)),
            r"its best: slot 'dense\.bias' holds NaN",
        ),
        (lambda t, s: s["optimizer"].__setitem__("steps", -1), "step count must be a whole number"),
        (lambda t, s: s["optimizer"].__setitem__("kind", "Adagrad"), "optimizer 'Adagrad'"),
        (lambda t, s: s["generator"].__setitem__("order", 2**70), "'order' counter"),
        (lambda t, s: s["generator"].__setitem__("seed", 1.5), "seed must be a whole number"),
        (_set("epoch", math.inf), "epoch must be a whole number"),
        (_set("epoch", 3), r"history is float64 of shape \(2, 4\), not a table .* \(3, 4\)"),
        # Before: a list of 2**31 epoch numbers was built to compare (the fuzzer's OOM kill).
        (_set("epoch", 2**31), r"history is float64 of shape \(2, 4\), .* \(2147483648, 4\)"),
        (_set("best_epoch", 7), r"best epoch must lie in 1\.\.2"),
        (lambda t, s: t["history"].__setitem__((0, 1), math.inf), "loss must be a finite number"),
        (_set("callbacks", []), "callbacks must be an object"),
        # a key missing was said as the key alone, "'epoch'" (trial HG)
        (lambda t, s: s.pop("epoch"), "its state lacks the entry 'epoch'"),
        # a history of a metric the run did not measure resumed into its report (trial: left)
        (_measured("foo"), r"epoch 1 holds the metric\(s\) 'foo', which its run did not "),
    ],
)
def test_a_checkpoint_whose_contents_lie_is_refused_at_load(
    adam_checkpoint: Path, tmp_path: Path, change: Any, says: str
) -> None:
    """Before: such files loaded, and resuming failed with raw errors (or went on wrongly); and
    a slot or buffer missing (as a layer's code changed since gives it) was said without the
    file's name."""
    path = _lying(adam_checkpoint, tmp_path / "lying.safetensors", change)
    with pytest.raises(FileFormatError, match=says) as refused:
        Checkpoint.load(path)
    assert str(refused.value).startswith(f"checkpoint {str(path)!r}: ")
    if says.startswith("its slots"):
        assert "a layer's code changed since the file was written" in str(refused.value)


def test_a_checkpoint_on_arrays_resumes_to_the_uninterrupted_run_sslot_bits(tmp_path: Path) -> None:
    x, y = optdigits("train")
    data = (x[:800] / 16, y[:800])
    whole = fit(None, data, dense_digits(), CrossEntropy(), Adam(0.01), quick(epochs=4))
    fit(None, data, dense_digits(), CrossEntropy(), Adam(0.01),
        quick(epochs=2, checkpoint_dir=tmp_path, checkpoint_every=1))  # fmt: skip
    resumed = fit(
        None, data, dense_digits(), CrossEntropy(), Adam(0.01), quick(epochs=4),
        resume_from=tmp_path,
    )  # fmt: skip
    assert slot_bits(resumed) == slot_bits(whole)
    assert [r.loss for r in resumed.report.history] == [r.loss for r in whole.report.history]


def test_the_checkpoint_records_its_own_format_version_and_the_optimizer(
    adam_checkpoint: Path,
) -> None:
    _, metadata = read_safetensors(adam_checkpoint)
    state = json.loads(metadata["state"])
    assert metadata["format_version"] == "5"
    assert (
        state["optimizer"]["kind"] == "Adam"
        and state["optimizer"]["config"]["learning_rate"] == 0.001
    )
    assert os.path.basename(adam_checkpoint) == "checkpoint-000002.safetensors"


def test_a_reduce_on_plateau_given_to_a_second_fit_starts_afresh() -> None:
    """Failed before (trial BK): the second run began with the first's best loss and wait, and
    cut the rate almost at once: another run than with a fresh ReduceOnPlateau."""
    from deepsharp.core import ReduceOnPlateau

    x, y = binary_rows()

    def run(plateau: Any) -> list[float]:
        network = Network([Dense(8), Relu(), Dense(1)])
        made = fit(None, (x, y), network, BinaryCrossEntropy(), Adam(0.05),
                   quick(epochs=10, seed=0), callbacks=[plateau])  # fmt: skip
        return [record.validation_loss for record in made.report.history]

    reused = ReduceOnPlateau(patience=2)
    first = run(reused)
    assert run(reused) == first == run(ReduceOnPlateau(patience=2))


class _Budget(Callback):
    """Stops the run after `epochs` epochs of this job (a time budget, counted in epochs)."""

    def __init__(self, epochs: int) -> None:
        self.epochs, self.ran = epochs, 0

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        self.ran += 1
        if self.ran >= self.epochs:
            run.stop = True


def test_a_run_a_callback_stopped_goes_on_when_resumed_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    """A stop your callback makes is this job's (a time budget: trial BL), not the run's: a run
    resumed from the checkpoint of the epoch it stopped at trains on, to the epochs asked for.
    (This round's first mend of trial BK kept the stop in the checkpoint, and such a run then
    trained nothing more.)"""
    x, y = binary_rows()

    def run(budget: int, **more: Any) -> Run:
        network = Network([Dense(8), Relu(), Dense(1)])
        options = quick(epochs=6, seed=0, checkpoint_dir=tmp_path, checkpoint_keep=100)
        return fit(None, (x, y), network, BinaryCrossEntropy(), Adam(0.01), options,
                   callbacks=[_Budget(budget)], **more)  # fmt: skip

    assert len(run(3).report.history) == 3
    resumed = run(10, resume_from=Checkpoint.path_in(tmp_path))
    assert len(resumed.report.history) == 6


class _StepBudget(Callback):
    """Stops the run after step `step` of epoch `epoch` (a time budget run out mid-epoch);
    counts the steps of each epoch it sees."""

    def __init__(self, epoch: int = 0, step: int = 0) -> None:
        self.epoch, self.step, self.steps = epoch, step, 0

    def on_batch_end(self, run: RunState, batch: int, loss: float) -> None:
        self.steps = batch
        if run.epoch + 1 == self.epoch and batch == self.step:
            run.stop = True


def test_an_epoch_a_callback_cut_short_is_not_a_checkpoint_and_a_resumed_run_does_it_whole(
    tmp_path: Path,
) -> None:
    """Failed before (trial R): a stop after step 3 of epoch 2 wrote checkpoint-000002 as if
    the epoch were whole, and the run resumed from it went on to epoch 3, epoch 2's last steps
    lost without a word (its weights and losses not the uninterrupted run's)."""
    x, y = binary_rows()

    def run(budget: _StepBudget, folder: Path | None, resume: Path | None = None) -> Run:
        network = Network([Dense(8), Relu(), Dense(1)])
        options = quick(epochs=4, seed=0, batch_size=25, checkpoint_dir=folder, checkpoint_keep=9)
        return fit(None, (x, y), network, BinaryCrossEntropy(), Adam(0.01), options,
                   callbacks=[budget], resume_from=resume)  # fmt: skip

    counted = _StepBudget()
    whole = run(counted, None)
    assert counted.steps > 3
    with pytest.warns(DeepSharpWarning, match=r"after step 3 of epoch 2, before its end.*"
                      r"none was written for epoch 2.*goes on from epoch 1's"):  # fmt: skip
        run(_StepBudget(2, 3), tmp_path)
    assert [epoch for epoch, _ in Checkpoint.in_folder(tmp_path)] == [1]
    resumed = run(_StepBudget(), tmp_path, Checkpoint.path_in(tmp_path))
    assert [r.loss for r in resumed.report.history] == [r.loss for r in whole.report.history]
    assert slot_bits(resumed) == slot_bits(whole)
    with pytest.warns(DeepSharpWarning, match="no checkpoint holds an epoch of this run yet"):
        run(_StepBudget(1, 2), tmp_path / "first")
    # A stop at an epoch's last step cuts nothing short: that epoch's checkpoint is written.
    run(_StepBudget(2, counted.steps), tmp_path / "last")
    assert [epoch for epoch, _ in Checkpoint.in_folder(tmp_path / "last")] == [1, 2]


def test_a_reduce_on_plateau_whose_resume_was_refused_starts_the_next_fit_afresh(
    tmp_path: Path,
) -> None:
    """Failed before (trial BL): restored, then the resume refused by a later check, it kept
    the checkpoint's best loss into the next fit."""
    from deepsharp.core import ReduceOnPlateau

    x, y = binary_rows()

    def run(plateau: Any, **more: Any) -> list[float]:
        network = Network([Dense(8), Relu(), Dense(1)])
        options = quick(epochs=4, seed=0, **more.pop("options", {}))
        after = more.pop("callbacks_after", [])
        made = fit(None, (x, y), network, BinaryCrossEntropy(), Adam(0.05), options,
                   callbacks=[plateau, *after], **more)  # fmt: skip
        return [record.validation_loss for record in made.report.history]

    class Refuses(Callback):
        name = "refuses"
        refuse = False

        def state(self) -> dict[str, Any]:
            return {}

        def restore(self, state: Any) -> None:
            if self.refuse:
                raise CheckpointMismatchError("refused after ReduceOnPlateau's restore")

    first = ReduceOnPlateau(patience=2)
    run(first, options={"checkpoint_dir": tmp_path}, callbacks_after=[Refuses()])
    plateau, refuses = ReduceOnPlateau(patience=2), Refuses()
    refuses.refuse = True
    with pytest.raises(CheckpointMismatchError, match="refused after"):
        run(plateau, callbacks_after=[refuses], resume_from=Checkpoint.path_in(tmp_path))
    assert plateau.best != float("inf")  # restored before the refusal
    assert run(plateau) == run(ReduceOnPlateau(patience=2))


def test_a_folder_whose_latest_checkpoint_is_damaged_names_the_one_before(tmp_path: Path) -> None:
    """Failed before (trial RS): a latest checkpoint cut short stopped every resume from its
    folder, the refusal saying only that it was truncated; the one before, still whole, went
    unnamed."""
    folder = tmp_path / "run"
    fit_titanic(quick(epochs=2, checkpoint_dir=folder, checkpoint_every=1, checkpoint_keep=2))
    (first, before), (_, latest) = Checkpoint.in_folder(folder)[-2:]
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])
    with pytest.raises(FileFormatError, match="truncated") as refused:
        fit_titanic(quick(epochs=3), resume_from=folder)
    assert f"the one before it, {str(before)!r}, loads" in str(refused.value)
    assert Checkpoint.load(before).epoch == first
    with pytest.raises(FileFormatError) as alone:  # the file named itself: no folder to speak of
        Checkpoint.load(latest)
    assert "the one before it" not in str(alone.value)
    before.write_bytes(before.read_bytes()[:100])  # both damaged: none named (review)
    with pytest.raises(FileFormatError) as both:
        Checkpoint.load(folder)
    assert "the one before it" not in str(both.value)


def test_a_checkpoint_that_waited_past_its_patience_is_refused(tmp_path: Path) -> None:
    """Taken before (trial RS): a checkpoint no run writes, whose run then stopped at once."""
    from deepsharp.core import FileFormatError, FitOptions

    options = FitOptions(seed=0, epochs=2, patience=3, progress=False, checkpoint_dir=tmp_path)
    fit_titanic(options)
    checkpoint = Checkpoint.load(Checkpoint.path_in(tmp_path))
    checkpoint.callbacks["early_stopping"]["waited"] = 7
    resumed = FitOptions(seed=0, epochs=4, patience=3, progress=False)
    with pytest.raises(FileFormatError, match="'waited' is 7, past its patience of 3"):
        fit_titanic(resumed, resume_from=checkpoint)


def test_a_checkpoint_s_engine_of_control_characters_and_a_name_of_other_digits_are_refused(
    tmp_path: Path,
) -> None:
    """Failed before (trial H): an engine name holding escapes and a newline loaded, and the
    command line printed it raw (the screen cleared, a line forged); a checkpoint named by
    Arabic-Indic digits was taken for the latest checkpoint."""
    fit_titanic(quick(epochs=1, checkpoint_dir=tmp_path))
    path = Checkpoint.path_in(tmp_path)
    tensors, metadata = read_safetensors(path, "checkpoint")
    state = json.loads(metadata["state"])
    state["engine"]["name"] = "light\x1b[2J\ndeepsharp: all good"
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / path.name).write_bytes(
        encode_safetensors(tensors, {**metadata, "state": json.dumps(state)})
    )
    with pytest.raises(FileFormatError, match=r"printable text .*'light\\x1b\[2J\\ndeepsharp"):
        Checkpoint.load(forged / path.name)
    arabic = "".join(chr(0x0660 + int(d)) for d in "000007")  # (digits \\d took)
    (tmp_path / f"checkpoint-{arabic}.safetensors").write_bytes(path.read_bytes())
    assert [epoch for epoch, _ in Checkpoint.in_folder(tmp_path)] == [1]


def test_a_run_reads_each_checkpoint_s_header_once_however_many_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Trial Q: every write read the header of every checkpoint in the folder (and compared
    # each with each kept), so a long run's writes grew quadratic: epochs 501-1,000 took 3
    # times epochs 1-500's time with checkpoint_keep=100000, and a folder of other runs'
    # checkpoints cost the same with keep=1.
    from deepsharp.core.training import callbacks

    x, y = binary_rows(64)
    other = tmp_path / "other"
    fit(None, (x, y), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
        quick(epochs=6, checkpoint_dir=other, checkpoint_keep=10))  # fmt: skip
    reads: list[Path] = []
    read = callbacks.read_metadata
    monkeypatch.setattr(
        callbacks, "read_metadata", lambda path, *a: reads.append(path) or read(path, *a)
    )
    for epoch, path in Checkpoint.in_folder(other):  # another run's, in the folder: left
        os.rename(path, Checkpoint.path_in(tmp_path, 100 + epoch))
    with pytest.warns(DeepSharpWarning, match="checkpoints of another run"):
        run = fit(None, (x, y), Network([Dense(1)]), BinaryCrossEntropy(), Adam(0.01),
                  quick(epochs=20, checkpoint_dir=tmp_path, checkpoint_keep=100))  # fmt: skip
    assert run.report.epochs_run == 20
    assert len(reads) <= 6 + 20 + 2, len(reads)  # each file once (the last written twice)
    assert len(Checkpoint.in_folder(tmp_path)) == 26


class _Smoothing(Callback):
    """Sets a label smoothing after the first epoch (a loss setting is read by the next step)."""

    name = "smoothing"

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        if record.epoch == 1:
            run.trainer.loss.label_smoothing = 0.2  # type: ignore[attr-defined]


def test_a_loss_setting_a_callback_changes_is_in_the_checkpoints_after_it(tmp_path: Path) -> None:
    """Failed before (trial CK6): checkpoints recorded the loss as the run began; a run
    resumed with it went on without the smoothing, silently, and one resumed with the loss it
    trained with was refused, said to differ from a plain CrossEntropy()."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(150, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 2] > 0.8)

    def go(loss: CrossEntropy, **kw: Any) -> tuple[float, bytes]:
        network, resume = dense_digits(), kw.pop("resume_from", None)
        options = quick(**kw)
        run = fit(None, (x, y), network, loss, Adam(0.01), options, callbacks=[_Smoothing()],
                  resume_from=resume)  # fmt: skip
        return run.report.history[-1].loss, network.slots["dense.weights"].tobytes()

    whole = go(CrossEntropy(), checkpoint_dir=tmp_path, checkpoint_keep=10)
    second = Checkpoint.path_in(tmp_path, 2)
    assert Checkpoint.load(second).run["loss_now"]["config"] == {"label_smoothing": 0.2}
    assert go(CrossEntropy(), resume_from=second) == whole
    with pytest.raises(
        CheckpointMismatchError,
        match=r"CrossEntropy\(\); this run's is CrossEntropy\(label_smoothing=0\.2\)",
    ):
        go(CrossEntropy(label_smoothing=0.2), resume_from=second)


class _SmoothingEachEpoch(Callback):
    """Sets the label smoothing from the epoch, at every epoch's end (named: before the
    epoch's checkpoint is written, as its decisions go into it)."""

    name = "smoothing_each_epoch"

    def on_epoch_end(self, run: RunState, record: EpochRecord) -> None:
        run.trainer.loss.label_smoothing = 0.05 * record.epoch  # type: ignore[attr-defined]


def test_a_loss_setting_a_callback_sets_each_epoch_resumes_bit_for_bit(tmp_path: Path) -> None:
    """A review: with the loss recorded as the run's own, this resume was refused."""
    x, y = binary_rows(80)
    classes = y.astype(np.int64).ravel()

    def go(**kw: Any) -> bytes:
        network, resume = Network([Dense(8), Relu(), Dense(2)]), kw.pop("resume_from", None)
        fit(None, (x, classes), network, CrossEntropy(), Adam(0.01), quick(**kw),
            callbacks=[_SmoothingEachEpoch()], resume_from=resume)  # fmt: skip
        return network.slots["dense.weights"].tobytes()

    whole = go(checkpoint_dir=tmp_path, checkpoint_keep=10)
    assert go(resume_from=Checkpoint.path_in(tmp_path, 2)) == whole

"""Training and serving from files larger than memory: fit on a scanned file learns the recipe
in one pass, splits each row from (seed, row index), spills the rows' features once and trains
from the spill in a buffered shuffle — the same run again bit for bit, resumable, each process
reading its own share; predictions stream part by part; peak memory does not grow with the
file."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Checkpoint,
    CheckpointMismatchError,
    DataError,
    FitOptions,
    Pipeline,
    Run,
    TrainedNetwork,
    fit,
    read_csv,
    scan_csv,
)
from deepsharp.core.cli import main
from deepsharp.core.data.scan import Scan
from deepsharp.core.random import Generator, KeyedOrder, Streams
from deepsharp.core.samples import passengers, titanic
from deepsharp.core.training.distribution import Distribution
from deepsharp.core.training.feeds import Feeds, SpillFeed, Streamed
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.spill import Spill
from deepsharp.core.training.trainer import Trainer

LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def rows_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rows") / "passengers.csv"
    passengers.write_csv(path, 4_000, seed=7)
    return path


def _numbered() -> Pipeline:
    """Titanic's recipe with each row's number as a feature of its own (unscaled: exact)."""
    return titanic.pipeline().number("PassengerId", scale=False)


def _feeds(scan: Scan, seed: int = 11, pipeline: Pipeline | None = None) -> Feeds:
    return Streamed(scan).feeds(
        pipeline or _numbered(), titanic.network(), BinaryCrossEntropy(), Streams(seed), None
    )


def _ids(feed: Any, order: Generator | None = None, size: int = 32) -> list[np.ndarray]:
    """The row numbers of each batch a feed gives (the last feature of `_numbered`)."""
    return [
        b.features[0][:, -1].astype(np.int64) for b in feed.batches(size, order, lambda n: (0, n))
    ]


def _all_ids(feed: SpillFeed) -> np.ndarray:
    return np.concatenate(_ids(feed))


# --- the split -----------------------------------------------------------------------------


def test_a_row_s_part_is_drawn_from_the_seed_and_its_place_alone(rows_csv: Path) -> None:
    draws = Generator(11, stream=Streams.PURPOSES.index("split")).uniform(4_000)
    wanted = [
        np.flatnonzero(draws < 0.70) + 1,
        np.flatnonzero((draws >= 0.70) & (draws < 0.85)) + 1,
        np.flatnonzero(draws >= 0.85) + 1,
    ]
    for read_rows in (333, 4_096):
        feeds = _feeds(scan_csv(rows_csv, read_rows=read_rows))
        for feed, ids in zip((feeds.train, feeds.validation, feeds.test), wanted, strict=True):
            np.testing.assert_array_equal(_all_ids(feed), ids)  # in the file's order


def test_the_shares_hold_in_expectation(tmp_path: Path) -> None:
    path = tmp_path / "many.csv"
    passengers.write_csv(path, 20_000, seed=3)
    for seed in (1, 2, 3):
        feeds = _feeds(scan_csv(path), seed)
        for feed, share in zip((feeds.train, feeds.validation, feeds.test), (0.70, 0.15, 0.15)):
            spread = math.sqrt(20_000 * share * (1 - share))  # a binomial count's
            assert abs(len(feed) - 20_000 * share) < 5 * spread  # type: ignore[arg-type]


def test_the_recipe_is_learned_from_the_training_rows_only(rows_csv: Path) -> None:
    feeds = _feeds(scan_csv(rows_csv, read_rows=500))
    rows = read_csv(rows_csv)
    training = [rows[i - 1] for i in _all_ids(feeds.train)]
    whole = _numbered().learn(training).to_json()
    streamed = feeds.pipeline.to_json()
    for mine, theirs in zip(streamed["columns"], whole["columns"], strict=True):
        if mine["kind"] == "number":
            assert mine["learned"]["fill"] == theirs["learned"]["fill"]  # the median, exactly
            assert mine["learned"]["std"] == pytest.approx(theirs["learned"]["std"], rel=1e-13)
        else:
            assert mine == theirs


def test_a_split_that_leaves_a_part_empty_is_refused_naming_the_draws(tmp_path: Path) -> None:
    path = tmp_path / "few.csv"
    passengers.write_csv(path, 3)
    with pytest.raises(DataError, match=r"few.csv: too few rows for the split: its 3 rows drew"):
        _feeds(scan_csv(path))
    with pytest.raises(DataError, match=r"leaves no test rows: give the run test rows"):
        _feeds(scan_csv(path), pipeline=_numbered().split(0.8, 0.2))
    with pytest.raises(DataError, match="a file's rows have named columns"):
        fit(None, scan_csv(path), titanic.network(), BinaryCrossEntropy(), Adam(), FitOptions(1))


def test_a_file_of_a_header_and_no_rows_is_refused_as_no_rows(tmp_path: Path) -> None:
    """Failed before: said "too few rows for the split ... give more rows, or larger fractions",
    where rows read whole say "no rows" (docs/streaming.md promises the same)."""
    path = tmp_path / "header.csv"
    passengers.write_csv(path, 0)
    assert path.read_text(encoding="utf-8").count("\n") == 1
    with pytest.raises(DataError, match=r"header.csv: no rows: fit needs rows to learn from"):
        _feeds(scan_csv(path))


# --- the epoch order -------------------------------------------------------------------------


def test_keyed_orders_are_permutations_drawn_from_their_key() -> None:
    for count in (1, 2, 3, 7, 64, 1000, 4097):
        order = KeyedOrder(5, count)[np.arange(count, dtype=np.int64)]
        assert sorted(order.tolist()) == list(range(count))
    first = KeyedOrder(5, 1000)[np.arange(1000, dtype=np.int64)]
    np.testing.assert_array_equal(first, KeyedOrder(5, 1000)[np.arange(1000, dtype=np.int64)])
    assert (first != KeyedOrder(6, 1000)[np.arange(1000, dtype=np.int64)]).mean() > 0.9
    some = np.array([999, 3, 500], dtype=np.int64)
    np.testing.assert_array_equal(KeyedOrder(5, 1000)[some], first[some])  # alone, no table


def test_an_epoch_takes_every_training_row_once_in_a_fresh_buffered_shuffle(
    rows_csv: Path,
) -> None:
    feeds = _feeds(scan_csv(rows_csv, buffer_rows=256))  # blocks of 4 rows
    training = np.sort(_all_ids(feeds.train))
    order = Generator(11, stream=2)
    epochs = [_ids(feeds.train, order) for _ in range(2)]
    for batches in epochs:
        assert [len(b) for b in batches[:-1]] == [32] * (len(batches) - 1)
        np.testing.assert_array_equal(np.sort(np.concatenate(batches)), training)
        assert np.ptp(batches[0]) > 2_000  # a batch draws from blocks all over the file
    assert not np.array_equal(np.concatenate(epochs[0]), np.concatenate(epochs[1]))
    assert order.counter == 2  # one draw an epoch: the order is (seed, epoch)'s


class Shares(Distribution):
    """Process `rank` of `world_size`, on its own: a contiguous share of each batch, as
    deepsharp-distributed's DataParallel takes it (no communication: a feed's test)."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.place, self.processes = rank, world_size

    @property
    def rank(self) -> int:  # type: ignore[override]
        return self.place

    @property
    def world_size(self) -> int:  # type: ignore[override]
        return self.processes

    def share(self, count: int) -> tuple[int, int]:
        base, extra = divmod(count, self.processes)
        start = self.place * base + min(self.place, extra)
        return start, start + base + (1 if self.place < extra else 0)


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("part", ["train", "validation"])
def test_each_process_keeps_only_its_share_of_every_batch(
    rows_csv: Path, world_size: int, part: str
) -> None:
    feed = getattr(_feeds(scan_csv(rows_csv, buffer_rows=512)), part)
    order = None if part == "validation" else 3

    def batches(distribution: Distribution) -> list[Any]:
        drawn = None if order is None else Generator(order, stream=2)
        return list(feed.batches(32, drawn, distribution.share))

    whole = batches(Shares(0, 1))
    shares = [batches(Shares(rank, world_size)) for rank in range(world_size)]
    for index, batch in enumerate(whole):
        mine = [share[index] for share in shares]
        for rank, got in enumerate(mine):
            first, last = Shares(rank, world_size).share(len(batch))
            assert got.share == (first, last, len(batch))
            np.testing.assert_array_equal(got.features[0], batch.features[0][first:last])
            np.testing.assert_array_equal(got.targets, batch.targets[first:last])


class Seen(StepHook):
    def __init__(self) -> None:
        self.shares: list[tuple[int, int, int] | None] = []

    def objective(self, trainer: Trainer, value: Any, share: Any) -> Any:
        self.shares.append(share)
        return value


class Watched(Shares):
    def __init__(self, rank: int, world_size: int) -> None:
        super().__init__(rank, world_size)
        self.hook = Seen()

    def start(self, trainer: Trainer) -> None:
        trainer.hooks.insert(0, self.hook)


def test_a_run_hands_each_process_its_share_of_the_global_batches(rows_csv: Path) -> None:
    watched = [Watched(rank, 2) for rank in range(2)]
    for distribution in watched:
        _run(rows_csv, epochs=1, distributed=distribution)
    left, right = (w.hook.shares for w in watched)
    assert len(left) == len(right) > 80
    for (a, b, total), (c, d, other) in zip(left, right, strict=True):  # type: ignore[misc]
        assert (a, b + (d - c), total) == (0, total, other) and b == c


def test_a_streaming_run_on_several_processes_is_the_one_process_run(rows_csv: Path) -> None:
    distributed = pytest.importorskip("deepsharp.distributed")
    pytest.importorskip("torch.distributed")
    from streaming_workers import streamed_run

    _, alone, test_rows = streamed_run(str(rows_csv), parallel=False)
    for processes in (2, 3):
        first, again = (
            distributed.launch(streamed_run, processes, str(rows_csv), True) for _ in "12"
        )
        assert first == again  # the same run again, bit for bit, at this world size
        _, measures, rows = first
        assert rows == test_rows  # every process drew the same split
        assert abs(measures["accuracy"] - alone["accuracy"]) <= 2 / rows
        assert measures["loss"] == pytest.approx(alone["loss"], rel=1e-6)  # float32 rounding


# --- whole runs --------------------------------------------------------------------------------


def _run(path: Path, **options: Any) -> Run:
    settings = {"seed": 5, "epochs": 3, "patience": 100, "progress": False, **options}
    return fit(
        titanic.pipeline(),
        scan_csv(path, read_rows=700, buffer_rows=512),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(**settings),
    )


def _bits(run: Run) -> tuple[Any, ...]:
    slots = run.trained.network.slots
    history = [(r.loss, r.validation_loss) for r in run.report.history]
    return (*(v.tobytes() for v in slots.values()), history, run.report.measures)


def test_a_streaming_run_is_the_same_run_again_bit_for_bit(rows_csv: Path) -> None:
    first, second = _run(rows_csv), _run(rows_csv)
    assert _bits(first) == _bits(second)
    assert first.report.measures["accuracy"] > 0.7
    assert _bits(_run(rows_csv, seed=6)) != _bits(first)


def test_a_resumed_streaming_run_ends_where_the_whole_run_does(
    rows_csv: Path, tmp_path: Path
) -> None:
    whole = _run(rows_csv, epochs=4, checkpoint_dir=tmp_path, checkpoint_every=1, checkpoint_keep=4)
    resumed = fit(
        titanic.pipeline(),
        scan_csv(rows_csv, read_rows=700, buffer_rows=512),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(seed=5, epochs=4, patience=100, progress=False),
        resume_from=Checkpoint.path_in(tmp_path, 2),
    )
    assert _bits(resumed) == _bits(whole)


def test_resuming_a_streaming_run_on_other_values_or_another_buffer_is_refused(
    rows_csv: Path, tmp_path: Path
) -> None:
    """Failed before: a file of the same rows with half the targets flipped resumed (the counts
    and the statistics the same), and so did another buffer_rows (another order each epoch)."""
    _run(rows_csv, epochs=2, checkpoint_dir=tmp_path / "ck", checkpoint_every=1)
    lines = rows_csv.read_text().splitlines()
    place = lines[0].split(",").index("Survived")
    flipped = tmp_path / "flipped.csv"
    changed = [lines[0]]
    for i, line in enumerate(lines[1:]):
        fields = next(csv.reader([line]))
        if 200 <= i < 600:
            fields[place] = "1" if fields[place] == "0" else "0"
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(fields)
        changed.append(out.getvalue())
    flipped.write_text("\n".join(changed) + "\n")
    checkpoint = Checkpoint.path_in(tmp_path / "ck", 2)
    for data, said in (
        (scan_csv(flipped, read_rows=700, buffer_rows=512), "other training rows"),
        (scan_csv(rows_csv, read_rows=700, buffer_rows=64), r"buffer_rows.* of 512; .* is 64"),
        # said as "this run's is None" and with no word of read_rows (trial RS)
        (read_csv(rows_csv), "on rows scanned from a file; this run's are rows held in memory"),
        (scan_csv(rows_csv, read_rows=500, buffer_rows=512), "another size, read_rows"),
    ):
        with pytest.raises(CheckpointMismatchError, match=said):
            fit(titanic.pipeline(), data, titanic.network(), BinaryCrossEntropy(), Adam(0.01),
                FitOptions(seed=5, epochs=3, progress=False), resume_from=checkpoint)  # fmt: skip


def test_a_spill_s_digest_is_of_its_rows_however_they_were_written() -> None:
    rng = np.random.default_rng(0)
    features, targets = rng.random((10, 3)).astype(np.float32), rng.random((10, 1))
    whole, cut = Spill(None), Spill(None)
    whole.write([features, targets])
    for start in range(0, 10, 3):
        cut.write([features[start : start + 3], targets[start : start + 3]])
    assert whole.digest.hexdigest() == cut.digest.hexdigest()
    other = Spill(None)
    other.write([features, 1 - targets])
    assert other.digest.hexdigest() != whole.digest.hexdigest()


def test_test_rows_given_apart_are_measured_the_same_from_a_file_or_in_memory(
    rows_csv: Path, tmp_path: Path
) -> None:
    test_path = tmp_path / "test.csv"
    passengers.write_csv(test_path, 900, seed=8)
    runs = [
        fit(
            titanic.pipeline(),
            scan_csv(rows_csv),
            titanic.network(),
            BinaryCrossEntropy(),
            Adam(0.01),
            FitOptions(seed=5, epochs=2, progress=False),
            test_rows=test_rows,
        )
        for test_rows in (scan_csv(test_path, read_rows=100), read_csv(test_path))
    ]
    assert runs[0].report.test_rows == runs[1].report.test_rows == 900
    assert runs[0].report.measures == runs[1].report.measures


def test_a_missing_spill_folder_is_refused_naming_it_before_a_pass(
    rows_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before (trial SD): refused after the first pass over the file (minutes of
    reading on a large one)."""
    scan = scan_csv(rows_csv, spill_dir=tmp_path / "absent")
    passes: list[object] = []
    parts = scan.parts
    monkeypatch.setattr(scan, "parts", lambda *a, **k: passes.append(a) or parts(*a, **k))
    with pytest.raises(FileNotFoundError, match=r"spill_dir .*absent.* is not a folder"):
        _feeds(scan)
    assert passes == []


def test_a_spill_the_disk_has_no_room_for_is_named_with_its_folder_and_size(
    rows_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before (trial SD): a bare "[Errno 28] No space left on device"."""
    import errno

    from deepsharp.core.training import spill

    class Full(io.BytesIO):
        def write(self, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spill, "_temporary", lambda folder: Full())
    with pytest.raises(OSError, match=r"could not spill .* into .*test_a_spill.* \(No space left "
                       r"on device\): a spill takes 68 bytes a row") as raised:  # fmt: skip
        _feeds(scan_csv(rows_csv, spill_dir=tmp_path))
    assert raised.value.errno == errno.ENOSPC


# --- serving -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trained") / "titanic.safetensors"
    titanic.run(epochs=3, progress=False).trained.save(path)
    return path


def test_predictions_stream_part_by_part_as_the_same_bits(rows_csv: Path, trained: Path) -> None:
    network = TrainedNetwork.load(trained)
    whole = network.predict(read_csv(rows_csv))
    parts = list(network.predict_parts(scan_csv(rows_csv, read_rows=999)))
    assert [len(p) for p in parts] == [999, 999, 999, 999, 4]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    np.testing.assert_array_equal(network.predict(scan_csv(rows_csv, read_rows=512)), whole)
    rows = read_csv(rows_csv)
    batches = (rows[i : i + 1500] for i in range(0, len(rows), 1500))
    np.testing.assert_array_equal(np.concatenate(list(network.predict_parts(batches))), whole)
    # Failed before: an empty part (a filter's, a grouping's) was refused as "no rows: the rows
    # handed in are empty", after the parts before it were served.
    given = [rows[:3], [], rows[3:4]]
    parts = list(network.predict_parts(given))
    assert [p.shape for p in parts] == [(3, 1), (0, 1), (1, 1)]
    np.testing.assert_array_equal(np.concatenate(parts), whole[:4])


def test_a_bad_value_in_a_batch_is_named_by_its_batch_and_its_row_in_it(
    rows_csv: Path, trained: Path
) -> None:
    """Failed before (trial CD): a batch's row was named by its place in the batch alone,
    "row 501", so the user could not tell which of the batches held it."""
    pandas = pytest.importorskip("pandas")
    network = TrainedNetwork.load(trained)
    rows = read_csv(rows_csv)
    rows[2500] = {**rows[2500], "Age": "twenty"}
    batches = [rows[i : i + 1000] for i in range(0, len(rows), 1000)]
    said = r"^row 501 of batch 3 \(counting from 1\), column 'Age': expected a number"
    with pytest.raises(DataError, match=said):
        list(network.predict_parts(batches))
    frames = [pandas.DataFrame(batch, index=range(i * 1000, i * 1000 + len(batch)))
              for i, batch in enumerate(batches)]  # fmt: skip
    said = r"^row 501 of batch 3 \(counting from 1; DataFrame index 2500\), column 'Age'"
    with pytest.raises(DataError, match=said):
        list(network.predict_parts(frames))
    with pytest.raises(DataError, match=r"passengers.csv, line 2502, column 'Age'"):
        list(network.predict_parts(scan_csv(_aged(rows_csv, rows), read_rows=999).parts()))


def _aged(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The rows written to a file beside `path`'s folder, named as `path` is."""
    out = path.parent / "aged" / path.name
    out.parent.mkdir(exist_ok=True)
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out


def test_a_file_without_the_target_column_is_predicted(tmp_path: Path, trained: Path) -> None:
    path = tmp_path / "unknown.csv"
    path.write_text("Pclass,Sex,Age,SibSp,Parch,Fare,Cabin,Embarked\n3,male,22,1,0,7.25,,S\n")
    (predictions,) = TrainedNetwork.load(trained).predict_parts(scan_csv(path))
    assert predictions.shape == (1, 1)


def test_the_command_line_streams_its_predictions_in_the_format_it_always_wrote(
    rows_csv: Path, trained: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    predictions = TrainedNetwork.load(trained).predict(read_csv(rows_csv))
    wanted = "Survived\n" + "".join(f"{float(v)!r}\n" for v in predictions[:, 0])
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(trained), str(rows_csv), "--output", str(out)]) == 0
    assert out.read_text() == wanted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.csv"]  # no temporary left
    assert main(["predict", str(trained), str(rows_csv)]) == 0
    assert capsysbinary.readouterr().out.decode() == wanted


def test_a_bad_row_late_in_the_file_leaves_an_earlier_output_as_it_was(
    rows_csv: Path, trained: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(rows_csv.read_text() + "9999,1,3,X,male,old,0,0,T,7.0,,S\n")
    out = tmp_path / "predictions.csv"
    out.write_text("before\n")
    assert main(["predict", str(trained), str(bad), "--output", str(out)]) == 1
    assert out.read_text() == "before\n"


# --- memory ----------------------------------------------------------------------------------

_PEAK = textwrap.dedent(
    """
    import json, sys
    from deepsharp.core import *
    from deepsharp.core.samples import titanic
    what, path = sys.argv[1], sys.argv[2]
    if what == "serve":
        for _ in TrainedNetwork.load(sys.argv[3]).predict_parts(scan_csv(path, read_rows=1024)):
            pass
    else:
        scan = (
            scan_parquet(path) if path.endswith(".parquet")
            else scan_csv(path, read_rows=1024, buffer_rows=4096)
        )
        fit(titanic.pipeline(), scan, titanic.network(), BinaryCrossEntropy(), Adam(),
            FitOptions(seed=1, epochs=1, batch_size=512, progress=False))
    # VmHWM: this process's own peak (getrusage's ru_maxrss keeps the parent's across exec)
    status = open("/proc/self/status").read()
    print(json.dumps(int(status.split("VmHWM:")[1].split()[0]) * 1024))
    """
)


def _peak(*arguments: str) -> int:
    """The peak resident memory (bytes) of a fresh process doing `arguments`."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *arguments], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout.strip().splitlines()[-1]))


MIB = 1 << 20


@pytest.mark.once  # a whole run's peak memory: the same on every Python
@pytest.mark.skipif(not LINUX, reason="peak memory as Linux's /proc states it")
@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_training_on_twenty_times_the_rows_keeps_peak_memory(tmp_path: Path, kind: str) -> None:
    small, big = tmp_path / f"small.{kind}", tmp_path / f"big.{kind}"
    if kind == "parquet":
        pytest.importorskip("pyarrow")
        for path, count in ((small, 50_000), (big, 1_000_000)):
            passengers.write_parquet(path, count, row_group_rows=16_384)
        held = 700_000 * 64  # the big file's training features and targets, were they held
    else:
        for path, count in ((small, 20_000), (big, 400_000)):
            passengers.write_csv(path, count)
        held = 280_000 * 64
    low, high = _peak("fit", str(small)), _peak("fit", str(big))
    assert high <= 1.5 * low, (low / MIB, high / MIB)
    assert high - low < held, (low / MIB, high / MIB)  # less than holding its rows would add


@pytest.mark.once  # peak memory: the same on every Python
@pytest.mark.skipif(not LINUX, reason="peak memory as Linux's /proc states it")
def test_serving_twenty_times_the_rows_keeps_peak_memory(tmp_path: Path, trained: Path) -> None:
    small, big = tmp_path / "small.csv", tmp_path / "big.csv"
    passengers.write_csv(small, 10_000)
    passengers.write_csv(big, 200_000)
    low, high = _peak("serve", str(small), str(trained)), _peak("serve", str(big), str(trained))
    assert high - low < 2 * MIB, (low / MIB, high / MIB)  # what 200,000 predictions alone take


def test_a_run_of_rows_in_memory_resumed_on_a_scan_says_so(tmp_path: Path) -> None:
    # Trial J: refused rightly, but said as another buffer_rows setting ("of none ... this
    # run's is 65536: resume with the run's own settings"), which no setting mends.
    rows = titanic.rows()
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    options = FitOptions(seed=42, epochs=1, progress=False)
    folder = tmp_path / "checkpoints"
    fit(titanic.pipeline(), rows, titanic.network(), BinaryCrossEntropy(), Adam(0.001),
        FitOptions(seed=42, epochs=1, progress=False, checkpoint_dir=folder))  # fmt: skip
    said = "taken by a run on rows held in memory; this run's are rows scanned from a file"
    with pytest.raises(CheckpointMismatchError, match=said):
        fit(titanic.pipeline(), scan_csv(path), titanic.network(), BinaryCrossEntropy(),
            Adam(0.001), options, resume_from=folder)  # fmt: skip

"""What the tests' processes run under `launch`: importable (conftest puts this folder on the path,
and spawned processes inherit the path), so every function here can be handed to `launch`.

Each function's inputs are a pure function of the rank, so the test that launched it can work
out every rank's inputs, and the exact expected answer, by itself.
"""

from __future__ import annotations

import dataclasses
import os
import time
from itertools import product
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    Callback,
    CheckpointMismatchError,
    CrossEntropy,
    Dense,
    Dropout,
    FitOptions,
    Network,
    Relu,
    Run,
    Tanh,
    Trainer,
    TrainingDivergedError,
    fit,
    make_engine,
)
from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine
from deepsharp.core.nn.layers import Pass
from deepsharp.core.random import Generator
from deepsharp.core.samples import titanic
from deepsharp.core.training.hooks import StepHook
from deepsharp.distributed import DataParallel, ReplicasDifferError
from deepsharp.distributed.training import Place

START = "forkserver"
"""How the tests start most jobs (conftest preloads the fork server)."""

SIZES = {
    "small": [(14, 16), (16,), (16, 1), (1,)],
    "large": [(14, 16), (16,), (16, 1), (1,), (128, 300)],
}
"""A Titanic network's gradients (257 values: the ordered sum gathers them whole), and the same
with 38,400 more (the ordered sum goes by shards). No world of 2 or 3 divides either evenly,
so the shards' padding is exercised."""

TITANIC_SEED, TITANIC_ROWS, FEATURES = 1912, 32, 14


def gradients_of(rank: int, size: str) -> list[NDArray[np.float32]]:
    """Rank `rank`'s gradients: values of every size and sign, so that the order of adding
    them shows in the last bits."""
    generator = np.random.default_rng(100 + rank)
    return [
        (generator.standard_normal(shape) * 10.0 ** generator.uniform(-3, 3, shape)).astype(
            np.float32
        )
        for shape in SIZES[size]
    ]


def weight_of(rank: int) -> float:
    """Rank `rank`'s share weight in the reduction checks (11/32, 11/32, 10/32 for 3 ranks)."""
    return [11 / 32, 11 / 32, 10 / 32, 1.0][rank] if rank < 3 else 1.0


def environment() -> dict[str, Any]:
    """What launch set in the process's environment, and the job as DataParallel sees it."""
    job = DataParallel().join()
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")
    every = job.means({"rank": float(job.rank)}, 1)  # a collective: every rank took part
    return {
        "environment": {name: os.environ.get(name) for name in names},
        "rank": job.rank,
        "world_size": job.world_size,
        "writes": job.writes,
        "mean rank": every["rank"],
    }


def reductions(specs: list[str]) -> dict[str, Any]:
    """Every engine's gradients reduced both ways, with what each reduction cost in transfers.
    The ordered sums are checked identical on every rank (check_identical raises otherwise)."""
    job = DataParallel().join()
    found: dict[str, Any] = {}
    for spec, size, reduction in product(specs, SIZES, ("ordered", "fast")):
        engine = make_engine(spec)
        job.config = DataParallel(reduction=reduction)
        grads = [engine.put(g) for g in gradients_of(job.rank, size)]
        before = (engine.counters.transfers_in, engine.counters.transfers_out)
        reduced = job.reduce_gradients(engine, grads, weight_of(job.rank))
        after = (engine.counters.transfers_in, engine.counters.transfers_out)
        if reduction == "ordered":
            job.check_identical(engine, {str(i): h for i, h in enumerate(reduced)})
        found[f"{spec} {size} {reduction}"] = {
            "gradients": [engine.get(h) for h in reduced],
            "transfers": (after[0] - before[0], after[1] - before[1]),
        }
    return found


def titanic_batch() -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """32 rows shaped like the Titanic sample's: 6 scaled numbers, 8 flags; targets 0/1."""
    generator = Generator(TITANIC_SEED + 1)
    numbers = generator.uniform(TITANIC_ROWS * 6).reshape(TITANIC_ROWS, 6) * 4.0 - 2.0
    flags = (generator.uniform(TITANIC_ROWS * 8).reshape(TITANIC_ROWS, 8) < 0.4).astype(np.float64)
    targets = (generator.uniform(TITANIC_ROWS) < 0.38).astype(np.float32).reshape(-1, 1)
    return np.hstack([numbers, flags]).astype(np.float32), targets


def titanic_trainer(engine: Engine | str, seed: int = TITANIC_SEED, units: int = 16) -> Trainer:
    network = Network([Dense(units), Relu(), Dense(1)], inputs=FEATURES)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=seed)


def share_gradients(
    trainer: Trainer,
    rows: slice,
    features: NDArray[np.float32] | None = None,
    targets: NDArray[np.float32] | None = None,
) -> list[Any]:
    """The gradients of the mean loss over `rows` of the batch (the Titanic-shaped one unless
    given), by the trainer's own pieces."""
    engine, network, loss = trainer.engine, trainer.network, trainer.loss
    if features is None or targets is None:
        features, targets = titanic_batch()
    slots = list(trainer.bound.tensors.values())
    x = Tensor.put(engine, features[rows])
    y = Tensor.put(engine, loss.targets(targets[rows], network.outputs))
    with Recording(slots) as recording:
        outputs = network.forward(x, trainer.bound, Pass(engine, True, None))
        return recording.gradients(loss.value(outputs, y), slots)


def reference_gradients(
    slots: list[NDArray[np.float32]], features: NDArray[np.float32], targets: NDArray[np.float32]
) -> tuple[list[Any], list[Any]]:
    """A Titanic network's gradient of the batch's mean loss in float64 from the float32 slots
    and rows (g*), and each element's magnitude S (the same on absolute values, earlier
    roundings carried along): what the precision's bound is stated in."""
    w1, b1, w2, b2 = (s.astype(np.float64) for s in slots)
    x, y = features.astype(np.float64), targets.astype(np.float64).reshape(-1, 1)
    rows = x.shape[0]
    h = x @ w1 + b1
    z = np.maximum(h, 0.0) @ w2 + b2
    p = 1.0 / (1.0 + np.exp(-z))
    dz = (p - y) / rows
    dh = (dz @ w2.T) * (h > 0)
    exact = [x.T @ dh, dh.sum(0), np.maximum(h, 0.0).T @ dz, dz.sum(0)]
    s_h = np.abs(x) @ np.abs(w1) + np.abs(b1)
    s_z = s_h @ np.abs(w2) + np.abs(b2)
    s_dz = (p + np.abs(y) + s_z / 4.0) / rows  # sigmoid' <= 1/4 carries z's rounding on
    s_dh = s_dz @ np.abs(w2).T
    scale = [np.abs(x).T @ s_dh, s_dh.sum(0), s_h.T @ s_dz, s_dz.sum(0)]
    return exact, scale


def titanic_steps(specs: list[str]) -> dict[str, Any]:
    """On each engine: the slots made identical (and a mismatch caught), then one data-parallel
    step's gradients on the Titanic batch, summed both ways."""
    job = DataParallel().join()
    found: dict[str, Any] = {}
    for spec in specs:
        engine = make_engine(spec)
        # A rank drawn from another seed holds other slots: caught on every rank, named...
        stray = titanic_trainer(engine, TITANIC_SEED + job.rank)
        slots = {name: t.handle for name, t in stray.bound.tensors.items()}
        try:
            job.check_identical(engine, slots)
            caught = None
        except ReplicasDifferError as error:
            caught = str(error)
        # ...and start_identical gives every rank rank 0's.
        job.start_identical(engine, slots)
        # A rank that built another network is refused before anything moves.
        other = titanic_trainer(engine, units=16 if job.rank == 0 else 8)
        try:
            job.start_identical(engine, {n: t.handle for n, t in other.bound.tensors.items()})
            found[f"{spec} other network"] = None
        except ReplicasDifferError as error:
            found[f"{spec} other network"] = str(error)
        trainer = titanic_trainer(engine)
        before = (engine.counters.transfers_in, engine.counters.transfers_out)
        job.start_identical(engine, {n: t.handle for n, t in trainer.bound.tensors.items()})
        after = (engine.counters.transfers_in, engine.counters.transfers_out)
        share = job.share(TITANIC_ROWS)
        grads = share_gradients(trainer, share.rows)
        for reduction in ("ordered", "fast"):
            job.config = DataParallel(reduction=reduction)
            reduced = job.reduce_gradients(engine, grads, share.weight)
            found[f"{spec} {reduction}"] = [engine.get(h) for h in reduced]
        found[f"{spec} mismatch"] = caught
        found[f"{spec} stray slots now"] = [engine.get(h) for h in slots.values()]
        found[f"{spec} start transfers"] = (after[0] - before[0], after[1] - before[1])
    return found


def raises_on(rank: int) -> None:
    """Rank `rank` raises while the others wait for it in a collective."""
    job = DataParallel().join()
    if job.rank == rank:
        raise ValueError(f"rank {rank} found a broken row")
    job.barrier()


def exits_on(rank: int) -> None:
    """Rank `rank` leaves the process without a word while the others wait for it."""
    job = DataParallel().join()
    if job.rank == rank:
        os._exit(7)
    job.barrier()


def hangs_on(rank: int) -> None:
    """Rank `rank` stops answering while the others wait for it in a collective."""
    job = DataParallel().join()
    if job.rank == rank:
        time.sleep(600)
    job.barrier()


def fits_but(rank: int) -> None:
    """Every rank but `rank` trains under DataParallel; `rank` returns at once, never calling
    fit (a branch on the rank)."""
    if int(os.environ["RANK"]) == rank:
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    options = FitOptions(seed=1, epochs=1, batch_size=8, progress=False,
                         distributed=DataParallel())  # fmt: skip
    fit(None, (x, y), Network([Dense(8), Relu(), Dense(2)]), CrossEntropy(), Adam(0.01), options)


def returns_early_but(rank: int) -> str:
    """Every rank but `rank` returns at once; `rank` hangs outside any collective."""
    if int(os.environ["RANK"]) == rank:
        time.sleep(600)
    return "done"


def data_parallel_checks(specs: list[str], titanic_specs: list[str]) -> dict[str, Any]:
    """Everything test_data_parallel checks, in one job (starting processes costs seconds)."""
    return {"reductions": reductions(specs), "titanic": titanic_steps(titanic_specs)}


# --- fit with DataParallel ------------------------------------------------------------------

SAMPLE_SEED = 42


def run_figures(run: Run, config: DataParallel) -> dict[str, Any]:
    """What a test compares of a run: its slots' bits, its history, its measures, its place."""
    report = run.report
    return {
        "rank": config.rank,
        "world_size": config.world_size,
        "slots": run.trained.network.slots,
        "history": [(r.epoch, r.loss, r.validation_loss) for r in report.history],
        "measures": report.measures,
        "epochs_run": report.epochs_run,
        "best_epoch": report.best_epoch,
        "test_rows": report.test_rows,
    }


def fit_titanic(options: FitOptions, **extra: Any) -> Run:
    """The Titanic sample's run (its rows, pipeline and network, binary cross-entropy,
    Adam(0.001)) with these options; `extra` goes to fit (resume_from=, on_epoch=)."""
    return fit(
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.001),
        options,
        **extra,
    )


def data_parallel_titanic(spec: str, reduction: str = "ordered", **options: Any) -> dict[str, Any]:
    """The Titanic sample (its pipeline, network and Adam) on `spec`, data-parallel."""
    config = DataParallel(reduction=reduction)
    run = titanic.run(engine=spec, seed=SAMPLE_SEED, distributed=config, progress=False, **options)
    found = run_figures(run, config)
    found["writers"] = DataParallel().join().totals({"writes": float(config.writes)})["writes"]
    return found


def titanic_fits(specs: list[str], folder: str) -> dict[str, Any]:
    """The Titanic runs a test compares, in one job: each engine's full run, the light one
    writing a checkpoint every 10 epochs into `folder`."""
    found = {}
    for spec in specs:
        checkpoints = {"checkpoint_dir": folder, "checkpoint_every": 10, "checkpoint_keep": 10}
        found[spec] = data_parallel_titanic(spec, **(checkpoints if spec == "light" else {}))
    return found


def titanic_resumed(spec: str, checkpoint: str, reduction: str = "ordered") -> dict[str, Any]:
    """The Titanic sample resumed from `checkpoint` (whatever the world size it was taken at)."""
    config = DataParallel(reduction=reduction)
    try:
        run = fit_titanic(
            FitOptions(seed=SAMPLE_SEED, engine=spec, distributed=config, progress=False),
            resume_from=checkpoint,
        )
    except CheckpointMismatchError as error:
        return {"refused": f"{type(error).__name__}: {error}"}
    return run_figures(run, config)


class FirstStep(StepHook):
    """Records the first step's gradients as the optimizer would apply them (after the sum)."""

    def __init__(self) -> None:
        self.grads: list[NDArray[np.float32]] | None = None

    def gradients(self, trainer: Trainer, grads: list[Any]) -> list[Any] | None:
        if self.grads is None:
            self.grads = [trainer.engine.get(g) for g in grads]
        return grads


SEEN: dict[str, Any] = {}
"""What a `Watched` run saw of its first step, in this process."""


@dataclasses.dataclass(frozen=True)
class Watched(DataParallel):
    """DataParallel whose run also records the first step: its slots, this process's rows, the
    summed gradients the optimizer applies; and the transfers the second step made."""

    def for_run(self) -> Place:
        return WatchedPlace(self.join())


class WatchedPlace(Place):
    """A run's place in the job that records what `Watched` says."""

    def start(self, trainer: Trainer) -> None:
        super().start(trainer)
        hook = FirstStep()
        trainer.hooks.insert(1, hook)  # right after the sum
        SEEN.clear()
        SEEN["hook"] = hook
        step = trainer.step

        def watched(
            features: Any,
            targets: Any,
            share: Any = None,
            weights: Any = None,
        ) -> float:
            # The step may take the rows as they are: they are copied before it.
            if "rows" not in SEEN:
                SEEN["slots"] = list(trainer.network.slots.values())
                SEEN["rows"] = (np.array(features[0]), np.array(targets))  # one input
                return step(features, targets, share, weights)
            if "transfers" in SEEN:
                return step(features, targets, share, weights)
            counters = trainer.engine.counters  # the second step's (FirstStep reads the first's)
            before = (counters.transfers_in, counters.transfers_out)
            value = step(features, targets, share, weights)
            SEEN["transfers"] = (
                counters.transfers_in - before[0],
                counters.transfers_out - before[1],
            )
            return value

        trainer.step = watched  # type: ignore[method-assign]


def first_step_through_fit(specs: list[str]) -> dict[str, Any]:
    """On each engine, both reductions: the first step of a Titanic fit, data-parallel; its
    slots, the whole batch (every process's rows, in rank order) and the summed gradients."""
    import torch.distributed as dist

    found = {}
    for spec, reduction in product(specs, ("ordered", "fast")):
        titanic.run(engine=spec, distributed=Watched(reduction=reduction), epochs=1, progress=False)
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, SEEN["rows"])
        features = np.concatenate([rows for rows, _ in every])
        targets = np.concatenate([part for _, part in every])
        found[f"{spec} {reduction}"] = {
            "slots": SEEN["slots"],
            "batch": (features, targets),
            "gradients": SEEN["hook"].grads,
            "transfers": SEEN["transfers"],
        }
    return found


def failing_epoch(rank: int, epoch: int) -> Any:
    """An epoch callback that raises on `rank` at `epoch` (the others go on into the next
    epoch's first collective, and wait there)."""

    def check(record: Any) -> None:
        if record.epoch == epoch and int(os.environ["RANK"]) == rank:
            raise ValueError(f"rank {rank} found a broken row at epoch {epoch}")

    return check


def titanic_failing_on(rank: int) -> None:
    fit_titanic(
        FitOptions(seed=SAMPLE_SEED, distributed=DataParallel(), progress=False),
        on_epoch=failing_epoch(rank, 2),
    )


def diverging_from_own_slots() -> list[Any]:
    """Every rank starts from slots of its own (drawn from another seed) and diverges in the
    first epoch: fit puts back the slots the run started from. Every rank's, rank by rank."""
    import torch.distributed as dist

    x, y = titanic_batch()
    network = Network([Dense(16), Relu(), Dense(1)], inputs=FEATURES)
    network.initialize(Generator(int(os.environ["RANK"])))
    try:
        fit(
            None,
            (np.vstack([x] * 4), np.vstack([y] * 4)),
            network,
            BinaryCrossEntropy(),
            Adam(1e30),
            FitOptions(seed=3, distributed=DataParallel(), progress=False),
        )
    except TrainingDivergedError:
        pass
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, network.slots)
    return every


def dropout_arrays() -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """48 rows: 33 for training (a batch of 32, then one of 1: at 3 processes two ranks get
    none), 7 for validation, 8 for testing."""
    generator = np.random.default_rng(8)
    x = generator.standard_normal((48, 6)).astype(np.float32)
    y = (x[:, :1] - x[:, 1:2] > 0).astype(np.float32)
    return x, y


def dropout_fit(distributed: bool) -> list[Any]:
    """A network with dropout trained by SGD for 5 epochs on `dropout_arrays`: every rank's
    slots (one process: its own)."""
    network = Network([Dense(8), Dropout(0.5), Relu(), Dense(1)])
    options = FitOptions(
        seed=5,
        epochs=5,
        distributed=DataParallel() if distributed else None,
        progress=False,
    )
    fit(None, dropout_arrays(), network, BinaryCrossEntropy(), SGD(0.1), options)
    if not distributed:
        return [network.slots]
    import torch.distributed as dist

    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, network.slots)
    return every


class _StopsOn(Callback):
    """Ends the run on one rank only: after `epoch`, or after step 2 of it (`mid`)."""

    def __init__(self, rank: int, epoch: int, mid: bool) -> None:
        self.rank, self.epoch, self.mid = rank, epoch, mid

    def on_batch_end(self, run: Any, batch: int, loss: float) -> None:
        if self.mid and run.epoch + 1 == self.epoch and batch == 2 and _rank() == self.rank:
            run.stop = True

    def on_epoch_end(self, run: Any, record: Any) -> None:
        if not self.mid and record.epoch >= self.epoch and _rank() == self.rank:
            run.stop = True


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def stopped_on_one_rank(rank: int, mid: bool) -> list[Any]:
    """A run one rank's callback ends (after epoch 2, or after step 2 of epoch 2): every
    rank's epochs run and slots."""
    network = Network([Dense(8), Relu(), Dense(1)])
    options = FitOptions(seed=5, epochs=5, batch_size=8, distributed=DataParallel(), progress=False)
    run = fit(None, dropout_arrays(), network, BinaryCrossEntropy(), SGD(0.1), options,
              callbacks=[_StopsOn(rank, 2, mid)])  # fmt: skip
    import torch.distributed as dist

    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, (run.report.epochs_run, network.slots))
    return every


class _Steps(Callback):
    def __init__(self) -> None:
        self.taken = 0

    def on_batch_end(self, run: Any, batch: int, loss: float) -> None:
        self.taken += 1


def batchnorm_last_batch(batch_size: int) -> int:
    """A BatchNorm network on 210 training rows (300 given, fit's 0.7 of them) in batches of
    `batch_size`: the steps it took (none, where refused)."""
    from deepsharp.core import BatchNorm, Pipeline

    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 4)).astype(np.float32)
    y = (x[:, :1] > 0).astype(np.float32)
    network = Network([Dense(8), BatchNorm(), Relu(), Dense(1)])
    options = FitOptions(seed=5, epochs=1, batch_size=batch_size, distributed=DataParallel(),
                         progress=False)  # fmt: skip
    steps = _Steps()
    try:
        fit(Pipeline().split(0.7, 0.15), (x, y), network, BinaryCrossEntropy(), SGD(0.1), options,
            callbacks=[steps])  # fmt: skip
    except Exception as error:
        raise type(error)(f"{error} [after {steps.taken} steps]") from None
    return steps.taken


# --- ranks handed different data or seeds -----------------------------------------------------


def titanic_handed(flipped_on: int | None, seed_on: int | None) -> dict[str, Any]:
    """The Titanic sample data-parallel, where rank `flipped_on` holds its rows with every
    target flipped (the same count of rows), or rank `seed_on` runs from another seed: what fit
    raised, and whether the run began (its callbacks' start, just before the first step)."""
    rank = DataParallel().join().rank
    rows = titanic.rows()
    if rank == flipped_on:
        rows = [{**row, "Survived": "1" if row["Survived"] == "0" else "0"} for row in rows]
    seed = SAMPLE_SEED + (1 if rank == seed_on else 0)
    began: list[bool] = []

    class Beginning(Callback):
        def on_run_start(self, run: Any) -> None:
            began.append(True)

    options = FitOptions(seed=seed, epochs=2, distributed=DataParallel(), progress=False)
    try:
        fit(titanic.pipeline(), rows, titanic.network(), BinaryCrossEntropy(), Adam(0.001), options,
            callbacks=[Beginning()])  # fmt: skip
    except ReplicasDifferError as error:
        return {"refused": str(error), "began": bool(began)}
    return {"refused": "", "began": bool(began)}


def titanic_set_apart(what: str) -> dict[str, Any]:
    """The Titanic sample data-parallel, where rank 1 runs with another learning rate (`what`
    "rate"), on another precision ("engine"), another network ("tanh": a Tanh for the Relu;
    "dropout": a Dropout more), another reduction ("reduction") or writes checkpoints alone
    ("checkpoints"): what fit raised, and whether the run began."""
    rank = DataParallel().join().rank
    rate = 0.01 if what == "rate" and rank == 1 else 0.001
    engine = "light:float32" if what == "engine" and rank == 1 else "light"
    apart = rank == 1
    sizes = {"batch": 17 if apart and what == "batch" else 32}
    extra: dict[str, Any] = {}
    if what == "class_weight":
        extra["class_weight"] = {0: 1.0, 1: 5.0 if apart else 1.0}
    began: list[bool] = []

    class Beginning(Callback):
        def on_run_start(self, run: Any) -> None:
            began.append(True)

    layers: list[Any] = [Dense(16), Tanh() if apart and what == "tanh" else Relu(), Dense(1)]
    if apart and what == "dropout":
        layers.insert(2, Dropout(0.3))
    reduction = "fast" if apart and what == "reduction" else "ordered"
    folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"set-apart-{os.getpid()}")
    options = FitOptions(
        seed=SAMPLE_SEED,
        epochs=2 if apart and what == "epochs" else 1,
        batch_size=sizes["batch"],
        accumulate=2 if apart and what == "accumulate" else 1,
        distributed=DataParallel(reduction=reduction),
        progress=False,
        engine=engine,
        checkpoint_dir=folder if apart and what == "checkpoints" else None,
    )
    try:
        fit(titanic.pipeline(), titanic.rows(), Network(layers), BinaryCrossEntropy(),
            Adam(rate), options, callbacks=[Beginning()], **extra)  # fmt: skip
    except ReplicasDifferError as error:
        return {"refused": str(error), "began": bool(began)}
    return {"refused": "", "began": bool(began)}


def arrays_weighed_apart() -> dict[str, Any]:
    """Arrays data-parallel, rank 1's rows weighing 2 and rank 0's 1: what fit raised, and
    whether the run began."""
    rank = DataParallel().join().rank
    rng = np.random.default_rng(0)
    x = rng.normal(size=(67, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    options = FitOptions(
        seed=0, epochs=1, batch_size=16, distributed=DataParallel(), progress=False
    )
    try:
        run = fit(None, (x, y), Network([Dense(3)]), CrossEntropy(), Adam(0.01), options,
                  sample_weight=np.full(67, 2.0 if rank == 1 else 1.0))  # fmt: skip
    except ReplicasDifferError as error:
        return {"refused": str(error), "began": False}
    return {"refused": "", "began": bool(run.report.history)}


def report_of_a_small_run() -> str:
    """A small data-parallel run's report, as it prints."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    options = FitOptions(seed=0, epochs=1, batch_size=8, distributed=DataParallel(), progress=False)
    return str(fit(None, (x, y), Network([Dense(2)]), CrossEntropy(), Adam(0.01), options).report)

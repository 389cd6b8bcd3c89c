"""What the tests' processes run under `launch`: importable (conftest puts this folder on the path,
and spawned processes inherit the path), so every function here can be handed to `launch`.

Each function's inputs are a pure function of the rank, so the test that launched it can work
out every rank's inputs, and the exact expected answer, by itself.
"""

from __future__ import annotations

import os
import time
from itertools import product
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core import Adam, BinaryCrossEntropy, Dense, Network, Relu, Trainer, make_engine
from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine
from deepsharp.core.nn.layers import Pass
from deepsharp.core.random import Generator
from deepsharp.distributed import DataParallel, ReplicasDifferError

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
    """32 rows shaped like the Titanic sample's: 6 scaled numbers, 8 flags; answers 0/1."""
    generator = Generator(TITANIC_SEED + 1)
    numbers = generator.uniform(TITANIC_ROWS * 6).reshape(TITANIC_ROWS, 6) * 4.0 - 2.0
    flags = (generator.uniform(TITANIC_ROWS * 8).reshape(TITANIC_ROWS, 8) < 0.4).astype(np.float64)
    answers = (generator.uniform(TITANIC_ROWS) < 0.38).astype(np.float32).reshape(-1, 1)
    return np.hstack([numbers, flags]).astype(np.float32), answers


def titanic_trainer(engine: Engine | str, seed: int = TITANIC_SEED, units: int = 16) -> Trainer:
    network = Network([Dense(units), Relu(), Dense(1)], inputs=FEATURES)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=seed)


def share_gradients(trainer: Trainer, rows: slice) -> list[Any]:
    """The gradients of the mean loss over `rows` of the batch, by the trainer's own pieces."""
    engine, network, loss = trainer.engine, trainer.network, trainer.loss
    features, answers = titanic_batch()
    slots = list(trainer.bound.tensors.values())
    x = Tensor.put(engine, features[rows])
    y = Tensor.put(engine, loss.targets(answers[rows], network.outputs))
    with Recording(slots) as recording:
        outputs = network.forward(x, trainer.bound, Pass(engine, True, None))
        return recording.gradients(loss.value(outputs, y), slots)


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


def returns_early_but(rank: int) -> str:
    """Every rank but `rank` returns at once; `rank` hangs outside any collective."""
    if int(os.environ["RANK"]) == rank:
        time.sleep(600)
    return "done"


def data_parallel_checks(specs: list[str], titanic_specs: list[str]) -> dict[str, Any]:
    """Everything test_data_parallel checks, in one job (starting processes costs seconds)."""
    return {"reductions": reductions(specs), "titanic": titanic_steps(titanic_specs)}

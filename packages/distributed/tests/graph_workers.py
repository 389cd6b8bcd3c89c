"""What the graph tests' processes run under `launch`: a network of two inputs, a residual
connection, a shared layer and a BatchNorm, trained through fit on arrays (a dict of them)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core import (
    SGD,
    Adam,
    Add,
    BatchNorm,
    Concatenate,
    CrossEntropy,
    Dense,
    Embedding,
    FitOptions,
    Input,
    Network,
    Relu,
    Run,
    fit,
)
from deepsharp.distributed import DataParallel

SEED = 31


def arrays() -> tuple[dict[str, NDArray[np.float32]], NDArray[np.int64]]:
    """600 rows of two inputs (6 and 3 numbers) and a class of three."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((600, 6)).astype(np.float32) * 3 + 1
    b = rng.standard_normal((600, 3)).astype(np.float32)
    score = a[:, 0] - a[:, 1] + 2 * b[:, 2]
    return {"a": a, "b": b}, np.digitize(score, [-1.5, 1.5]).astype(np.int64)


def network() -> Network:
    """Two inputs; a residual block with a BatchNorm on one; a layer shared by both."""
    a, b = Input(6, name="a"), Input(3, name="b")
    h = Relu()(BatchNorm()(Dense(8)(a)))
    block = Add()([h, Dense(8)(h)])
    shared = Dense(4, name="shared")
    joined = Concatenate()([block, shared(a), shared(Dense(6)(b))])
    return Network(inputs=[a, b], outputs=Dense(3)(joined))


def run_graph(options: FitOptions, **extra: Any) -> Run:
    x, y = arrays()
    return fit(None, (x, y), network(), CrossEntropy(), Adam(0.01), options, **extra)


def figures(run: Run, job: Any = None) -> dict[str, Any]:
    """What a test compares of a run; under a job, every process's slots and buffers checked to
    be the same bits as rank 0's first (ReplicasDifferError ends the job otherwise)."""
    slots, buffers = run.trained.network.values()
    if job is not None:
        held = b"".join(v.tobytes() for v in [*slots.values(), *buffers.values()])
        job.check_agree("slots and buffers after the run", held)
    return {
        "slots": slots,
        "buffers": buffers,
        "history": [(r.epoch, r.loss, r.validation_loss) for r in run.report.history],
        "measures": run.report.measures,
        "steps": run.report.steps,
    }


def graph_runs(spec: str, folder: str) -> dict[str, Any]:
    """In one job: a run that writes a checkpoint every 3 epochs, the same run again, a run
    resumed from its checkpoint of epoch 3, and the run with its steps run as recorded."""
    base = {"seed": SEED, "engine": spec, "epochs": 6, "patience": 50, "progress": False}
    first = run_graph(
        FitOptions(
            **base,
            distributed=DataParallel(),
            checkpoint_dir=folder,
            checkpoint_every=3,
            checkpoint_keep=5,
        )
    )
    again = run_graph(FitOptions(**base, distributed=DataParallel()))
    resumed = run_graph(
        FitOptions(**base, distributed=DataParallel()),
        resume_from=f"{folder}/checkpoint-000003.safetensors",
    )
    recorded = run_graph(FitOptions(**base, distributed=DataParallel(), compile=False))
    job = DataParallel().join()
    return {
        "first": figures(first, job),
        "again": figures(again, job),
        "resumed": figures(resumed, job),
        "recorded": figures(recorded, job),
    }


def shakespeare_run(spec: str) -> dict[str, Any]:
    """The Shakespeare sample, shortened (two steps, 8 validation windows, 20 characters), on
    every process of the job: the same slots and the same text on each."""
    from deepsharp.core.samples import shakespeare

    shakespeare.VALIDATION_WINDOWS = 8
    run = shakespeare.run(
        engine=spec, steps=2, characters=20, progress=False, distributed=DataParallel()
    )
    job = DataParallel().join()
    job.check_agree("the generated text", run.report.notes[-1].encode())
    return {**figures(run, job), "text": run.report.notes[-1]}


def spam_run(spec: str) -> dict[str, Any]:
    """The spam sample (an Embedding and an LSTM on word ids), one epoch, on every process of
    the job: the same slots on each."""
    from deepsharp.core.samples import spam

    run = spam.run(engine=spec, epochs=1, progress=False, distributed=DataParallel())
    return {**figures(run, DataParallel().join()), "counts": run.report.notes[-1]}


def padded_tags(distributed: bool) -> dict[str, Any]:
    """A class at every position of texts of 1 or 8 tokens, padded with 0 (an Embedding's mask):
    one epoch, in batches of 8 rows, on one process or shared by the job's."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 11, (64, 8))
    for row, length in enumerate(rng.choice([1, 8], 64)):
        ids[row, length:] = 0
    tags = rng.integers(0, 5, (64, 8))
    x = Input(8, dtype="int64")
    network = Network(inputs=x, outputs=Dense(5)(Embedding(11, 4)(x)))
    options = FitOptions(seed=0, epochs=1, batch_size=8, progress=False, restore_best=False,
                         distributed=DataParallel() if distributed else None)  # fmt: skip
    run = fit(None, (ids, tags), network, CrossEntropy(), SGD(0.5), options)
    return {"slots": run.trained.network.slots, "loss": run.report.history[0].loss}

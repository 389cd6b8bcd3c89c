"""What the training tools' tests run under `launch`: the Titanic sample with a cosine schedule,
global gradient clipping, class weights and metrics, through fit on its rows."""

from __future__ import annotations

from typing import Any

from deepsharp.core import (
    SGD,
    Adam,
    BinaryCrossEntropy,
    CosineDecay,
    FitOptions,
    Optimizer,
    Run,
    fit,
)
from deepsharp.core.samples import titanic
from deepsharp.distributed import DataParallel

SEED = 7
METRICS = ("accuracy", "auc", "f1", "precision", "recall", "f1_macro")
CLASS_WEIGHT = {0: 1.0, 1: 1.6}


def optimizer() -> Optimizer:
    return Adam(CosineDecay(0.01, steps=60, warmup=5, final=0.001), global_clip_norm=0.5)


def run_tools(options: FitOptions, chosen: Optimizer | None = None, **extra: Any) -> Run:
    """The sample's rows, pipeline and network with the training tools."""
    return fit(
        titanic.pipeline(),
        titanic.rows(),
        titanic.network(),
        BinaryCrossEntropy(),
        optimizer() if chosen is None else chosen,
        options,
        class_weight=CLASS_WEIGHT,
        **extra,
    )


def figures(run: Run, job: Any = None) -> dict[str, Any]:
    """What a test compares of a run; under a job, every process's slots checked to be the
    same bits as rank 0's first (ReplicasDifferError ends the job otherwise)."""
    slots = run.trained.network.slots
    if job is not None:
        job.check_agree("slots after the run", b"".join(v.tobytes() for v in slots.values()))
    return {
        "slots": {name: value.tobytes() for name, value in slots.items()},
        "history": [
            (r.epoch, r.loss, r.validation_loss, dict(r.metrics)) for r in run.report.history
        ],
        "measures": run.report.measures,
    }


def tools_runs(spec: str, folder: str) -> dict[str, Any]:
    """In one job: a run that writes a checkpoint every 3 epochs, the same run again, and a run
    resumed from its checkpoint of epoch 3."""
    base = {"seed": SEED, "engine": spec, "epochs": 6, "patience": 50, "progress": False}
    base["metrics"] = METRICS
    first = run_tools(
        FitOptions(
            **base,
            distributed=DataParallel(),
            checkpoint_dir=folder,
            checkpoint_every=3,
            checkpoint_keep=2,
        )
    )
    again = run_tools(FitOptions(**base, distributed=DataParallel()))
    resumed = run_tools(
        FitOptions(**base, distributed=DataParallel()),
        resume_from=f"{folder}/checkpoint-000003.safetensors",
    )
    job = DataParallel().join()
    return {
        "first": figures(first, job),
        "again": figures(again, job),
        "resumed": figures(resumed, job),
    }


def one_step(spec: str, distributed: bool, kind: str) -> dict[str, bytes]:
    """One step of plain SGD over every training row, its gradient clipped hard (`kind`
    "clipped": global norm 0.01) or under a loss scale of 1,024 ("scaled"): the slots after it
    (under a job, rank 0's)."""
    options = FitOptions(
        seed=SEED,
        engine=spec,
        epochs=1,
        batch_size=1000,
        progress=False,
        loss_scale=1024.0 if kind == "scaled" else "auto",
        distributed=DataParallel() if distributed else None,
    )
    chosen = SGD(0.5, global_clip_norm=0.01) if kind == "clipped" else SGD(0.5)
    run = run_tools(options, chosen)
    return {name: value.tobytes() for name, value in run.trained.network.slots.items()}


def parted_runs(spec: str, folder: str) -> dict[str, str]:
    """What a run says where its processes part: a callback lowering the rate on rank 1 alone
    (as one deciding on its share's loss does), and a run one process resumes from a
    checkpoint while the other starts afresh. Each refusal's message."""
    from deepsharp.core import Callback
    from deepsharp.distributed import ReplicasDifferError

    class LowersOnRankOne(Callback):
        def on_batch_end(self, run: Any, step: int, loss: float) -> None:
            if DataParallel().join().rank == 1:
                run.trainer.state.rate_scale *= 0.9

    class AtTheEnd(Callback):  # on rank 1, at the last epoch's end, or at the run's
        def __init__(self, hook: str) -> None:
            self.hook = hook

        def lower(self, run: Any) -> None:
            if DataParallel().join().rank == 1:
                run.trainer.state.rate_scale *= 0.5

        def on_epoch_end(self, run: Any, record: Any) -> None:
            if self.hook == "epoch" and record.epoch == 2:
                self.lower(run)

        def on_run_end(self, run: Any) -> None:
            if self.hook == "run":
                self.lower(run)

    base = {"seed": SEED, "engine": spec, "epochs": 2, "patience": 50, "progress": False}
    said = {}
    for name, callback in (
        ("parted", LowersOnRankOne()),
        ("last epoch", AtTheEnd("epoch")),
        ("run's end", AtTheEnd("run")),
    ):
        try:
            run_tools(FitOptions(**base, distributed=DataParallel()), callbacks=[callback])
        except ReplicasDifferError as refused:
            said[name] = str(refused)
    run_tools(
        FitOptions(**base, distributed=DataParallel(), checkpoint_dir=folder, checkpoint_every=1)
    )
    rank = DataParallel().join().rank
    try:
        run_tools(
            FitOptions(**{**base, "epochs": 3}, distributed=DataParallel()),
            resume_from=f"{folder}/checkpoint-000002.safetensors" if rank == 1 else None,
        )
    except ReplicasDifferError as refused:
        said["resumed"] = str(refused)
    import numpy as np

    from deepsharp.core import Dense, MeanSquaredError, Network

    x = np.linspace(-1, 1, 80, dtype=np.float32).reshape(40, 2)
    ones = np.ones(40, np.float32) if rank == 1 else None  # weights of one are none
    fit(None, (x, x[:, :1]), Network([Dense(1)]), MeanSquaredError(), SGD(0.1),
        FitOptions(**base, distributed=DataParallel()), sample_weight=ones)  # fmt: skip
    said["weighed"] = "the same run"
    return said


def logged_on_rank_zero(spec: str) -> dict[str, Any]:
    """A run whose callback (one of its own, with on_batch_end: a logger) is given to rank 0
    alone, as a script that logs on the process that writes gives it; and the same run with no
    callback. Each one's figures."""
    from deepsharp.core import Callback

    class Logs(Callback):
        def __init__(self) -> None:
            self.steps = 0

        def on_batch_end(self, run: Any, step: int, loss: float) -> None:
            self.steps += 1

    config = DataParallel()
    base = {"seed": SEED, "engine": spec, "epochs": 2, "progress": False}
    logs = Logs()
    logged = run_tools(
        FitOptions(**base, distributed=config), callbacks=[logs] if config.writes else []
    )
    plain = run_tools(FitOptions(**base, distributed=DataParallel()))
    job = config.join()
    return {"logged": figures(logged, job), "plain": figures(plain, job), "steps": logs.steps}

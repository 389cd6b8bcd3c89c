"""DataParallel in the training loop: what `fit` asks of a run spread over processes, answered
by this process's `Job`.

`DataParallel.for_run` makes a `Place` when a run starts: the run's `Distribution`, which
fit calls at seven points (deepsharp.core.training.distribution says which).
Here each is one collective of the job, or none:

- `check` (when resuming): the checkpoint's world size against the job's, refused naming both.
- `check_data`: every process's seed, then its data (row counts, the learned recipe, a digest
  of the rows' features and targets), against rank 0's: one collective each, and a run whose
  processes differ ends on every one before its first step, naming them.
- `start`: the run's settings (engine, optimizer, loss, loss scale, accumulation) against
  rank 0's; rank 0's slots to every process (a broadcast, then checked bit for bit); the
  optimizer's memory and the run's counters checked the same on every process; then a
  `GradientSum` put first among the trainer's step hooks.
- `share`: this process's contiguous rows of every batch (no collective).
- every step, through `GradientSum`: the gradients of the share's mean loss, weighted by
  share/B, and beside them the share's loss (weighted alike), added over the processes: one
  collective a step. The summed gradients are the whole batch's; the summed loss is the whole
  batch's mean loss, which `all_finite` reads (no collective), so every process stops together.
- `combine`: an epoch's (or a validation or test pass's) sums, added in rank order; `gather`:
  every process's predictions and targets (for the run's metrics), joined in rank order.
- `state` into every checkpoint (the world size, the reduction); `finish` leaves the job.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.engine import Engine, Handle
from deepsharp.core.errors import CheckpointMismatchError
from deepsharp.core.nn.network import Network
from deepsharp.core.training.distribution import Distribution, Sums, data_fingerprint
from deepsharp.core.training.feeds import Feeds
from deepsharp.core.training.hooks import StepHook
from deepsharp.core.training.state import optimizer_record
from deepsharp.core.training.trainer import Trainer
from deepsharp.distributed.bridge import host_bytes
from deepsharp.distributed.job import Job
from deepsharp.distributed.shares import check_world_size

__all__ = ["GradientSum", "Place"]


class GradientSum(StepHook):
    """The step hook of a data-parallel run: first among the trainer's hooks, so that every
    process holds the same gradients before any later hook (a loss scale) decides on them.

    `gradients` hands back the sum over every process of the gradients — and of the step's
    loss (`trainer.step_loss`) — times their share's weight, share/B (the objective is left as
    it is, so a share's way back is one process's on those rows, and a compiled step replays
    it). A process left no rows of a batch takes no forward pass: its zeros take part, with
    weight 0.
    """

    def __init__(self, job: Job) -> None:
        self.job = job
        self.engine: Engine | None = None
        self.batch_loss: Handle | None = None
        """The whole batch's mean loss (every share's loss times its weight, summed)."""

    def weight(self, share: tuple[int, int, int] | None) -> float:
        """A share's weight in the batch's sum: its rows over the batch's."""
        if share is None:  # each process's rows a batch of its own: the mean of their gradients
            return 1.0 / self.job.world_size
        start, stop, total = share
        return (stop - start) / total if total else 0.0

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        engine = self.engine = trainer.engine
        loss = trainer.step_loss.handle
        summed = self.job.reduce_gradients(
            engine, [*grads, engine.reshape(loss, (1,))], self.weight(trainer.step_share)
        )
        self.batch_loss = summed[-1]
        return summed[:-1]

    def batch_loss_value(self) -> float:
        """The last step's whole-batch loss, read where it lies (no transfer on the host)."""
        if self.batch_loss is None or self.engine is None:
            return math.nan
        return float(np.frombuffer(host_bytes(self.engine, self.batch_loss), np.float32)[0])


class Place(Distribution):
    """This process's part in one data-parallel run of `fit` (see the module's docstring): the
    run's `Distribution`, made by `DataParallel.for_run` when the run starts, holding the job
    until `finish`."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.hook = GradientSum(job)

    @property
    def rank(self) -> int:
        return self.job.rank

    @property
    def world_size(self) -> int:
        return self.job.world_size

    def share(self, count: int) -> tuple[int, int]:
        share = self.job.share(count)
        return share.start, share.stop

    def check_settings(self, settings: Mapping[str, str]) -> None:
        self.job.check_same_settings(settings)

    def check_data(self, seed: int, feeds: Feeds) -> None:
        self.job.check_same_run(seed, data_fingerprint(feeds))

    def start(self, trainer: Trainer) -> None:
        job, engine = self.job, trainer.engine
        job.check_same_parts(
            "networks",
            _layers(trainer.network),
            "layer",
            "every process must build the same network: a layer of no slots, or of other "
            "settings, on one process gives its share of each step's gradient another network's",
        )
        job.check_same_settings(_settings(trainer, job.config.reduction))
        bound = trainer.bound
        job.start_identical(
            engine, {name: t.handle for name, t in {**bound.tensors, **bound.buffers}.items()}
        )
        state = trainer.state
        assert state is not None
        counters = [trainer.streams.state, state.steps, trainer.skipped_steps]
        job.check_agree(  # first: a process resumed where another started afresh differs here
            "counters (the generator's, the optimizer's steps: where the run starts, afresh or "
            "from a checkpoint of which epoch)",
            json.dumps(counters, sort_keys=True).encode(),
        )
        memory = _memory(trainer)
        if memory:
            job.check_identical(engine, memory)
        trainer.hooks.insert(0, self.hook)
        # A pass's statistics of the whole batch (BatchNorm's) summed over every process's rows.
        trainer.reducer = self._batch_total
        trainer.processes = job.world_size

    def check_replicas(self, trainer: Trainer, when: str) -> None:
        """The replicas after an epoch and after the run: the same slots, buffers and optimizer
        memory, bit for bit, and the same learning rate (one digest a process; a second names
        what differs where they do)."""
        state = trainer.state
        assert state is not None
        bound = trainer.bound
        why = (
            f"the processes parted {when}. A callback that decides on this process's values "
            "alone parts them (on_batch_end's loss is this process's share of the batch: "
            "decide on the epoch's loss, which every process holds), and so does one that "
            "changes the slots, the optimizer or the rate on some processes"
        )
        rate = [state.steps, float(trainer.optimizer.rate(state))]
        self.job.check_agree("learning rates or counts of steps", json.dumps(rate).encode(), why)
        handles = {name: t.handle for name, t in {**bound.tensors, **bound.buffers}.items()}
        self.job.check_identical(trainer.engine, {**handles, **_memory(trainer)}, why=why)

    def _batch_total(self, engine: Engine, partial: Handle) -> Handle:
        return self.job.reduce_gradients(engine, [partial])[0]

    def batch_loss(self, loss: float) -> float:
        # The same bits on every process (`all_finite` reads it): all go on, or all stop.
        return self.hook.batch_loss_value()

    def any_process(self, flag: bool) -> bool:
        return self.job.totals({"flag": float(flag)})["flag"] > 0

    def combine(self, sums: Sums) -> Sums:
        total = self.job.totals(
            {"loss": sums.loss, "right": sums.right, "rows": sums.rows, "counted": sums.counted}
        )
        return Sums(total["loss"], total["right"], round(total["rows"]), round(total["counted"]))

    def gather(self, arrays: Sequence[NDArray[Any]]) -> list[NDArray[Any]]:
        return [self.job.gather_rows(array) for array in arrays]

    def state(self) -> dict[str, Any]:
        return {"world_size": self.job.world_size, "reduction": self.job.config.reduction}

    def check(self, state: Mapping[str, Any], where: str) -> None:
        recorded = state.get("world_size")
        check_world_size(None if recorded is None else int(recorded), self.job.world_size, where)
        reduction = state.get("reduction", self.job.config.reduction)
        if reduction != self.job.config.reduction:  # (it resumed, and parted from the run)
            raise CheckpointMismatchError(
                f"{where} was taken by a run whose gradients were summed {reduction!r}; this "
                f"run's are summed {self.job.config.reduction!r}, which adds them in another "
                f"order: resume with DataParallel(reduction={reduction!r}), or start afresh"
            )

    def finish(self) -> None:
        """Leave the job (its group ends here where this process started it: under torchrun)."""
        self.job.close()


def _memory(trainer: Trainer) -> dict[str, Handle]:
    """The optimizer's memory (a moment, a velocity), each by its slot's name and kind."""
    state = trainer.state
    assert state is not None
    return {
        f"{name} ({kind})": handle
        for kind, handles in state.memory.items()
        for name, handle in zip(trainer.slot_names, handles)
    }


def _layers(network: Network) -> list[str]:
    """A network's layers in words (each one's place, kind, name and settings): what every
    process must build alike, with its inputs and joins (`_settings`). The slots' names and
    shapes alone let a Tanh stand for a Relu, or a Dropout on one process alone (trial DS)."""
    return [
        f"layer {index} {layer['kind']} {layer['name']!r} "
        + json.dumps(layer["config"], sort_keys=True)
        for index, layer in enumerate(network.to_json()["layers"], start=1)
    ]


def _settings(trainer: Trainer, reduction: str) -> dict[str, str]:
    """What must be the same on every process for the replicas to take the same steps, in
    words: the engine (its name, version and precision; each process has its own device), the
    optimizer (its kind and settings, clipping among them), the loss, the loss scale, how
    many batches' gradients one update adds, and how gradients are summed (one process's
    "ordered" beside another's "fast" waited out the timeout in a collective: trial DS)."""
    identity = trainer.engine.identity
    scale = trainer.loss_scale
    made = trainer.network.to_json()
    del made["layers"]  # (each compared first, `_layers`)
    return {
        "network inputs and joins": json.dumps(made, sort_keys=True),
        "gradient reductions": reduction,
        "engines": f"{identity.name} {identity.version or ''} ({identity.precision})",
        "optimizers": json.dumps(optimizer_record(trainer.optimizer), sort_keys=True),
        "losses": repr(trainer.loss),
        "loss scales": "none"
        if scale is None
        else json.dumps(
            {k: getattr(scale, k) for k in ("initial", "dynamic", "growth", "backoff", "interval")}
        ),
        "accumulation": f"gradients of {trainer.accumulate} batches a step",
    }

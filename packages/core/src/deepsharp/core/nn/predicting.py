"""Predicting: the one path every door serves rows through (`Network.predict`,
`TrainedNetwork.predict`, the command line).

Features go through the network 32 rows at a time (Keras's default batch), the last chunk padded
with zero rows, so that no prediction depends on how many rows share its pass. On strict a row's
prediction is the same bits alone, in any order, in any company; on float32 and the mixed
precisions its last bits may depend on its place among the 32, where the processor's BLAS kernels
add a block's rows in different orders. On an engine whose precision promises batch invariance
of its own (`Precision.batch_invariant`: strict), many chunks go in one pass, which gives the
same bits with fewer calls. The first chunk goes through the layers and is traced; the others
replay the trace (`deepsharp.core.autodiff.replay`): the same engine calls in the same order,
without the layers' Python. A prediction that is not finite (a value that overflowed inside the
network, from finite features) is refused, naming its row: it is never handed back silently.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.replay import Replay
from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import PRECISIONS, Engine, default_engine, make_engine
from deepsharp.core.errors import DataError, StateError, check_instance
from deepsharp.core.nn.binding import Bound
from deepsharp.core.nn.layer import Pass
from deepsharp.core.nn.losses import Loss

if TYPE_CHECKING:
    from deepsharp.core.nn.network import Features, Network

__all__ = ["CHUNK", "PASS_VALUES", "Predictor", "measured", "predict"]

CHUNK = 32
PASS_VALUES = 1 << 14
"""About how many input values one pass of many chunks takes (on a batch-invariant engine): few
enough that its products stay one thread's work, as chunk by chunk. On a busy 2-core machine,
1,152 Titanic rows a pass served 100,000 rows' network part in 8-10 ms; 4,672 rows a pass in
7-64 ms (OpenBLAS's two threads waiting on each other); 32 rows a pass in 52-56 ms."""


def serving_engine(engine: Engine | str | None) -> Engine:
    """The engine named, or the light engine made once for every call that names none."""
    return default_engine() if engine is None else make_engine(engine)


class Predictor:
    """A network's values put on one engine once, predicting batches of features.

    While a run trains the network, the values one of its steps left: on the run's own engine a
    copy taken there (no transfer), on another brought back from it, whole."""

    def __init__(self, network: Network, loss: Loss, engine: Engine | str | None = None) -> None:
        check_instance("loss", loss, Loss, "predict")
        loss.check_network(network)  # as a run does: one output under CrossEntropy served 1.0
        self.network = network
        self.loss = loss
        self.engine = made = serving_engine(engine)
        bound = network.bound
        if bound is None:
            self.bound: Bound = network.put(made)
        elif bound.engine is made:
            self.bound = bound.copied()
        else:
            self.bound = network.put(made, bound.read())
        self.context = Pass(made, False, None)

    def predict(self, features: Any, where: str = "the features") -> NDArray[np.float32]:
        """Predictions (rows, outputs) for a batch of features (as `Network.arrange` takes them)."""
        arranged = self.network.arrange(features, where, reshape=True)
        count = arranged[0].shape[0]
        if count == 0:
            return np.zeros((0, self.network.outputs), np.float32)
        with np.errstate(all="ignore"):  # an overflow is looked for below, and named
            result = self._chunks(arranged, count)
        finite = np.isfinite(result)
        if not finite.all():
            self._refuse_unfinished_slots()
            row = int(np.argwhere(~finite)[0][0])
            precision = self.engine.identity.precision
            half = (
                f"; on {precision} products are float16's, whose range ends at 65,504: serve "
                "on a float32 or mixed_bfloat16 engine, or scale the features smaller"
                if precision == "mixed_float16"
                else ""
            )
            raise DataError(
                f"row {row + 1} (counting from 1) of {where}: its prediction is "
                f"{float(result[row][~finite[row]][0])!r}: a value overflowed inside the network "
                "although the features are finite: huge values in this row's features (scale "
                "them: a pipeline's number and image columns can), or outputs past float32's "
                "range, 3.4e38 (targets near it: scale them, or train on their logarithm)"
                f"{half}"
            )
        return result

    def measured(self, arranged: Features, targets: Any) -> Batch:
        """A batch's mean loss, predictions and positions counted (`measured`), its features as
        the network takes them: the batch in one pass, as a run measures its validation and
        test rows."""
        return measured(self.network, self.loss, self.bound, self.context, arranged, targets)

    def _refuse_unfinished_slots(self) -> None:
        """Where a prediction is not finite, the network's own values first: a slot or buffer
        that holds NaN or infinity (a training step whose gradients overflowed while its loss
        stayed finite, `Trainer.step` alone) makes every row's prediction so, whatever its
        features."""
        for kind, values in zip(("slot", "buffer"), self.bound.read()):
            for name, value in values.items():
                if not np.isfinite(value).all():
                    raise StateError(
                        f"the network's {kind} {name!r} holds NaN or infinite values, so no "
                        "prediction is finite: "
                        + (
                            "a training step's update overflowed"
                            if kind == "slot"
                            else "a training step's forward pass overflowed where the buffer "
                            "is updated (a BatchNorm's moving statistics), which a step a loss "
                            "scale skips updates too, as PyTorch's GradScaler's does"
                        )
                        + " (fit looks at each epoch's end and stops; Trainer.step does not "
                        "look); train again with features scaled smaller, or a smaller "
                        "learning rate"
                    )

    def _chunks(self, arranged: Features, count: int) -> NDArray[np.float32]:
        made, network, bound, context = self.engine, self.network, self.bound, self.context
        padded = -(-count // CHUNK) * CHUNK
        if padded != count:
            arranged = tuple(
                np.concatenate([a, np.zeros((padded - count, *a.shape[1:]), a.dtype)])
                for a in arranged
            )
        # The rows cross once an input; each chunk is a slice on the engine; the predictions
        # cross once.
        inputs = [Tensor.put(made, a) for a in arranged]
        outputs = network.outputs

        def forward(chunk: list[Tensor]) -> Tensor:
            return network.forward(chunk, bound, context)

        def rows_at(start: int, size: int) -> list[Tensor]:
            return [
                Tensor(
                    made.slice(x.handle, 0, start, start + size),
                    (size, *x.shape[1:]),
                    made,
                    None,
                    x.dtype,
                )
                for x in inputs
            ]

        def link(out: Any, size: int) -> Any:
            return self.loss.predictions(made, out, size, outputs)

        fixed = [*bound.tensors.values(), *bound.buffers.values()]
        replay, traced = Replay.trace(forward, rows_at(0, CHUNK), fixed)
        chunks = [link(traced.handle, CHUNK)]
        span = done = CHUNK
        if replay is not None and padded > CHUNK and _batch_invariant(made):
            # This engine's precision promises a row's prediction the same bits in any company:
            # many chunks then go in one pass, with the bits of one chunk at a time.
            width = sum(math.prod(a.shape[1:]) for a in arranged)
            span = min(padded - CHUNK, max(1, PASS_VALUES // (width * CHUNK)) * CHUNK)
            replay, traced = Replay.trace(forward, rows_at(CHUNK, span), fixed)
            chunks.append(link(traced.handle, span))
            done += span
        for start in range(done, padded, span):
            size = min(span, padded - start)
            if replay is None or size != span:  # moves values, or the last, shorter pass
                chunks.append(link(forward(rows_at(start, size)).handle, size))
            else:
                handles = [made.slice(x.handle, 0, start, start + size) for x in inputs]
                chunks.append(link(replay.replay(made, handles), size))
        every = chunks[0] if len(chunks) == 1 else made.concatenate(chunks, 0)
        result: NDArray[np.float32] = made.get(every)
        return result[:count]


def predict(
    network: Network, loss: Loss, features: Any, engine: Engine | str | None = None
) -> NDArray[np.float32]:
    """Predictions for a batch of features on `engine` (the light engine when none is named)."""
    return Predictor(network, loss, engine).predict(features)


Batch = tuple[float, NDArray[np.float32], NDArray[np.float32] | None]
"""A batch measured: its mean loss, its predictions, and the positions its loss counts
(`Loss.counted`: its padding mask, (rows, positions), on the host), or None where every value
counts."""


def measured(
    network: Network, loss: Loss, bound: Bound, context: Pass, arranged: Features, targets: Any
) -> Batch:
    """The mean loss, the predictions (the loss's link applied) and the positions the loss
    counts (`Batch`) of one batch, its features as the network takes them, in one pass
    without recording: how a run measures its validation and test rows, and
    `TrainedNetwork.evaluate` its rows. A loss that is not finite is given back, for the caller
    to judge (NumPy's warnings of it held)."""
    engine = context.engine
    xs = [Tensor.put(engine, a) for a in arranged]
    y = Tensor.put(engine, loss.targets(targets, network.outputs))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        outputs = network.forward(xs, bound, context)
        value = loss.value(outputs, y)
        rows = arranged[0].shape[0]
        predicted = loss.predictions(engine, outputs.handle, rows, network.outputs)
        counted = loss.counted(outputs)
        places = None if counted is None else engine.get(counted.handle)
        return float(engine.get(value.handle)), engine.get(predicted), places


def _batch_invariant(engine: Engine) -> bool:
    """Whether the engine's precision promises a row's prediction the same bits in any company."""
    precision = PRECISIONS.get(engine.identity.precision or "")
    return precision is not None and precision.batch_invariant

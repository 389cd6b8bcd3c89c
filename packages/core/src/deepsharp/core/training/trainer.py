"""One training step as the loop takes it: rows in, loss out, slots changed on the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.autodiff.tensor import Recording, Tensor
from deepsharp.core.engine import Engine, Handle, make_engine
from deepsharp.core.nn.layers import Pass
from deepsharp.core.nn.losses import Loss
from deepsharp.core.nn.network import Bound, Network
from deepsharp.core.nn.optimizers import Optimizer, OptimizerState
from deepsharp.core.random import Streams

__all__ = ["Trainer"]


class Trainer:
    """Trains `network` on `engine` (the light engine when none is named).

    Slots the network does not have yet are drawn from `seed`. A step puts the batch's rows
    and answers on the engine (2 transfers in) and brings back the loss (1 transfer out).
    """

    def __init__(
        self,
        network: Network,
        loss: Loss,
        optimizer: Optimizer,
        engine: Engine | str | None = None,
        seed: int = 0,
        streams: Streams | None = None,
    ) -> None:
        self.network = network
        self.loss = loss
        self.optimizer = optimizer
        self.engine: Engine = make_engine(engine)
        self.streams = streams if streams is not None else Streams(seed)
        self._bound: Bound | None = None
        self._slots: list[Tensor] = []
        self.state: OptimizerState | None = None
        self.rules_applied = 0
        if network.inputs is not None:
            self.start(network.inputs)

    def start(self, inputs: tuple[int, ...]) -> None:
        """Build the network for rows of shape `inputs`, draw its slots if it has none, bind it."""
        if self._bound is not None:
            return
        self.network.build(inputs)
        if not self.network.initialized:
            self.network.initialize(self.streams.slots)
        self._bound = self.network.bind(self.engine)
        self._slots = list(self._bound.tensors.values())
        self.state = self.optimizer.start(self.engine, [t.shape for t in self._slots])

    @property
    def bound(self) -> Bound:
        if self._bound is None:
            raise RuntimeError("the trainer has not started: take a step, or call start(inputs)")
        return self._bound

    def step(self, features: Any, answers: Any) -> float:
        """One step: forward, the way back towards the slots, the optimizer's update. The loss."""
        value = self.step_tensor(features, answers)
        return float(self.engine.get(value.handle))

    def step_tensor(self, features: Any, answers: Any) -> Tensor:
        """A step whose loss stays on the engine (the run reads it when it chooses)."""
        rows = np.asarray(features, dtype=np.float32)
        if self._bound is None:
            self.start(tuple(rows.shape[1:]))
        self.network.check_rows(rows)
        engine = self.engine
        x = Tensor.put(engine, rows)
        y = Tensor.put(engine, self.loss.answers(answers, self.network.outputs))
        context = Pass(engine, True, self.streams.dropout)
        with Recording(self._slots) as recording:
            outputs = self.network.forward(x, self.bound, context)
            value = self.loss.value(outputs, y)
            grads = recording.gradients(value, self._slots)
            self.rules_applied += recording.rules_applied
        self.update(grads)
        return value

    def update(self, grads: Sequence[Handle]) -> None:
        """The one place in a step where every gradient exists before the slots change."""
        assert self.state is not None
        self.optimizer.update(self.engine, [t.handle for t in self._slots], grads, self.state)

    def evaluate(self, features: NDArray[Any], answers: Any) -> tuple[float, NDArray[np.float32]]:
        """The loss and the answers (the link applied) for a batch, without recording."""
        rows = np.asarray(features, dtype=np.float32)
        self.network.check_rows(rows)
        engine = self.engine
        x = Tensor.put(engine, rows)
        y = Tensor.put(engine, self.loss.answers(answers, self.network.outputs))
        outputs = self.network.forward(x, self.bound, Pass(engine, False, None))
        value = self.loss.value(outputs, y)
        return float(engine.get(value.handle)), engine.get(self.loss.link(engine, outputs.handle))

    def close(self) -> None:
        """Bring the slots back to the host network and let go of the engine's memory."""
        self.network.release()
        self._bound = None
        self._slots = []
        self.state = None

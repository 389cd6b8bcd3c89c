"""Optimizers: how gradients change slots. What they remember of each slot lives on the engine."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from deepsharp.core.autodiff.functions import parts
from deepsharp.core.engine import Engine, Handle

__all__ = ["SGD", "Adam", "Optimizer"]


class Optimizer:
    """Holds its hyper-parameters; its memory is made on an engine by `start`."""

    memories: tuple[str, ...] = ()

    def start(self, engine: Engine, shapes: Sequence[tuple[int, ...]]) -> OptimizerState:
        total = sum(math.prod(shape) for shape in shapes)
        return OptimizerState(
            {name: parts(engine, engine.zeros((total,)), shapes) for name in self.memories}, 0
        )

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"


class OptimizerState:
    """An optimizer's memory of each slot (handles on the engine) and the steps taken."""

    def __init__(self, memory: dict[str, list[Handle]], steps: int) -> None:
        self.memory = memory
        self.steps = steps


class SGD(Optimizer):
    """slot += v, with v = momentum * v - learning_rate * gradient."""

    memories = ("velocity",)

    def __init__(self, learning_rate: float, momentum: float = 0.0) -> None:
        if not learning_rate > 0 or not 0.0 <= momentum < 1.0:
            raise ValueError(
                f"SGD needs learning_rate > 0 and 0 <= momentum < 1, not {learning_rate!r}, {momentum!r}"
            )
        self.learning_rate = float(learning_rate)
        self.momentum = float(momentum)

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        state.steps += 1
        engine.sgd_update(
            slots,
            grads,
            state.memory["velocity"],
            learning_rate=self.learning_rate,
            momentum=self.momentum,
        )

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.learning_rate, "momentum": self.momentum}


class Adam(Optimizer):
    """Adam as Keras takes it (epsilon added to the root of the second moment)."""

    memories = ("first", "second")

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
    ) -> None:
        if not learning_rate > 0 or not 0 <= beta1 < 1 or not 0 <= beta2 < 1 or not epsilon > 0:
            raise ValueError(
                "Adam needs learning_rate > 0, 0 <= beta1 < 1, 0 <= beta2 < 1 and epsilon > 0"
            )
        self.learning_rate = float(learning_rate)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        state.steps += 1
        t = state.steps
        step_size = self.learning_rate * math.sqrt(1.0 - self.beta2**t) / (1.0 - self.beta1**t)
        engine.adam_update(
            slots,
            grads,
            state.memory["first"],
            state.memory["second"],
            step_size=step_size,
            beta1=self.beta1,
            beta2=self.beta2,
            epsilon=self.epsilon,
        )

    def config(self) -> dict[str, Any]:
        return {
            "learning_rate": self.learning_rate,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
        }

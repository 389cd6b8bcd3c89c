"""SGD with momentum: v = momentum·v - learning_rate·gradient; slot += v."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.nn.optimizers.base import Optimizer, OptimizerState, setting

__all__ = ["SGD"]


class SGD(Optimizer):
    """slot += v, with v = momentum * v - learning_rate * gradient (v starts at zero)."""

    memories = ("velocity",)

    def __init__(self, learning_rate: float, momentum: float = 0.0) -> None:
        self.learning_rate = setting("SGD", "learning_rate", learning_rate, above=0.0)
        self.momentum = setting("SGD", "momentum", momentum, at_least=0.0, below=1.0)

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        state.steps += 1
        fused.sgd_update(
            engine,
            slots,
            grads,
            state.memory["velocity"],
            learning_rate=self.learning_rate,
            momentum=self.momentum,
        )

    def config(self) -> dict[str, Any]:
        return {"learning_rate": self.learning_rate, "momentum": self.momentum}

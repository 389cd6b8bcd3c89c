"""SGD with momentum: v = momentum·v - learning_rate·gradient; slot += v."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.nn.optimizers.base import (
    LearningRate,
    Optimizer,
    OptimizerState,
    learning_rate_setting,
    setting,
)

__all__ = ["SGD"]


class SGD(Optimizer):
    """slot += v, with v = momentum * v - learning_rate * gradient (v starts at zero).

    `learning_rate`: a number or a schedule (`CosineDecay`, `StepDecay`, one's own);
    `clip_norm`, `global_clip_norm`: clip the gradients first (Keras's clipnorm and
    global_clipnorm; None: not clipped)."""

    memories = ("velocity",)

    def __init__(
        self,
        learning_rate: LearningRate,
        momentum: float = 0.0,
        *,
        clip_norm: float | None = None,
        global_clip_norm: float | None = None,
    ) -> None:
        self.learning_rate = learning_rate_setting("SGD", learning_rate)
        self.momentum = setting("SGD", "momentum", momentum, at_least=0.0, below=1.0)
        self.clipping(clip_norm, global_clip_norm)

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        rate = self.rate(state)
        state.steps += 1
        fused.sgd_update(
            engine,
            slots,
            grads,
            state.memory["velocity"],
            learning_rate=rate,
            momentum=self.momentum,
        )

    def config(self) -> dict[str, Any]:
        return {
            "learning_rate": self.rate_config(),
            "momentum": self.momentum,
            **self.clipping_config(),
        }

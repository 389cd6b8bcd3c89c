"""Adam as Keras takes it: epsilon added to the root of the second moment, before the bias
corrections (which go into the step size)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.nn.optimizers.base import (
    LearningRate,
    Optimizer,
    OptimizerState,
    checked,
)

__all__ = ["Adam"]


class Adam(Optimizer):
    """At step t: m += (g - m)(1 - beta1); v += (g² - v)(1 - beta2);
    slot -= learning_rate·√(1 - beta2^t)/(1 - beta1^t) · m / (√v + epsilon).

    `learning_rate`: a number or a schedule (`CosineDecay`, `StepDecay`, one's own);
    `clip_norm`, `global_clip_norm`: clip the gradients first (Keras's clipnorm and
    global_clipnorm; None: not clipped)."""

    memories = ("first", "second")
    beta1 = checked("beta1", at_least=0.0, below=1.0)
    beta2 = checked("beta2", at_least=0.0, below=1.0)
    epsilon = checked("epsilon", above=0.0)

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
        *,
        clip_norm: float | None = None,
        global_clip_norm: float | None = None,
    ) -> None:
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
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
        t = state.steps
        step_size = rate * math.sqrt(1.0 - self.beta2**t) / (1.0 - self.beta1**t)
        fused.adam_update(
            engine,
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
            "learning_rate": self.rate_config(),
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
            **self.clipping_config(),
        }

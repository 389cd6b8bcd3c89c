"""AdamW: Adam with decoupled weight decay, as Keras takes it (Loshchilov & Hutter, 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.nn.optimizers.adam import Adam
from deepsharp.core.nn.optimizers.base import OptimizerState, setting

__all__ = ["AdamW"]


class AdamW(Adam):
    """Each step first shrinks every slot, slot -= learning_rate·weight_decay·slot (the decay
    is applied to the slots directly, not added to the gradient), then takes Adam's step."""

    def __init__(
        self,
        learning_rate: float = 0.001,
        weight_decay: float = 0.004,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
    ) -> None:
        super().__init__(learning_rate, beta1, beta2, epsilon)
        self.weight_decay = setting("AdamW", "weight_decay", weight_decay, at_least=0.0)
        if not self.learning_rate * self.weight_decay < 1.0:
            raise ValueError(
                f"AdamW's learning_rate * weight_decay must be < 1 (each step keeps that much "
                f"less of every slot), not {self.learning_rate} * {self.weight_decay}"
            )

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        if self.weight_decay:
            fused.decay_update(engine, slots, factor=1.0 - self.learning_rate * self.weight_decay)
        super().update(engine, slots, grads, state)

    def config(self) -> dict[str, Any]:
        return {
            "learning_rate": self.learning_rate,
            "weight_decay": self.weight_decay,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
        }

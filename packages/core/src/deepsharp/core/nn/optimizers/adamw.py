"""AdamW: Adam with decoupled weight decay, as Keras takes it (Loshchilov & Hutter, 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.errors import ConfigurationError
from deepsharp.core.nn.optimizers.adam import Adam
from deepsharp.core.nn.optimizers.base import LearningRate, OptimizerState, checked
from deepsharp.core.nn.optimizers.schedules import Schedule

__all__ = ["AdamW"]


class AdamW(Adam):
    """Each step first shrinks every slot, slot -= learning_rate·weight_decay·slot (the decay
    is applied to the slots directly, not added to the gradient), then takes Adam's step.
    Under a schedule, each step's rate shrinks the slots."""

    weight_decay = checked("weight_decay", at_least=0.0)

    def __init__(
        self,
        learning_rate: LearningRate = 0.001,
        weight_decay: float = 0.004,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
        *,
        clip_norm: float | None = None,
        global_clip_norm: float | None = None,
    ) -> None:
        super().__init__(
            learning_rate,
            beta1,
            beta2,
            epsilon,
            clip_norm=clip_norm,
            global_clip_norm=global_clip_norm,
        )
        self.weight_decay = weight_decay
        rate = self.learning_rate
        if not isinstance(rate, Schedule) and not rate * self.weight_decay < 1.0:
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
            rate = self.rate(state)
            factor = 1.0 - rate * self.weight_decay
            if not factor > 0.0:  # was a ValueError naming neither the schedule nor its step
                raise ConfigurationError(
                    f"AdamW: {self._rate_said(rate, state)} times weight_decay "
                    f"{self.weight_decay!r} is 1 or more (each step would keep nothing of the "
                    "slots, or less): lower the schedule's rates or the decay"
                )
            fused.decay_update(engine, slots, factor=factor)
        super().update(engine, slots, grads, state)

    def _rate_said(self, rate: float, state: OptimizerState) -> str:
        """Where the step's rate came from: the schedule, at the step it is asked (from 0), and
        the factor callbacks put on it."""
        given = self.learning_rate
        said = (
            f"{type(given).__name__}.rate({state.steps}) gave {given.rate(state.steps)!r}"
            if isinstance(given, Schedule)
            else f"the learning rate {given!r}"
        )
        if state.rate_scale != 1.0:
            said += f", times the rate scale {state.rate_scale!r} callbacks put on it ({rate!r}),"
        return said

    def config(self) -> dict[str, Any]:
        return {
            "learning_rate": self.rate_config(),
            "weight_decay": self.weight_decay,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon,
            **self.clipping_config(),
        }

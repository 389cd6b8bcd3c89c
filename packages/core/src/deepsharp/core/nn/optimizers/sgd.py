"""SGD with momentum: v = momentum·v - learning_rate·gradient; slot += v (Nesterov's: slot +=
momentum·v - learning_rate·gradient)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepsharp.core.edits import Checked
from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.nn.optimizers.base import (
    LearningRate,
    Optimizer,
    OptimizerState,
    checked,
)

__all__ = ["SGD"]


def _truth(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"SGD: nesterov is True or False, not {value!r}")
    return value


class SGD(Optimizer):
    """slot += v, with v = momentum * v - learning_rate * gradient (v starts at zero).

    `learning_rate`: a number or a schedule (`CosineDecay`, `StepDecay`, one's own);
    `nesterov=True`: Nesterov's momentum, as Keras writes it (slot += momentum·v -
    learning_rate·gradient, with the new v), the steps PyTorch's `SGD(nesterov=True)` takes;
    `clip_norm`, `global_clip_norm`: clip the gradients first (Keras's clipnorm and
    global_clipnorm; None: not clipped)."""

    memories = ("velocity",)
    momentum = checked("momentum", at_least=0.0, below=1.0)
    nesterov = Checked(lambda optimizer, value: _truth(value), default=False)

    def __init__(
        self,
        learning_rate: LearningRate,
        momentum: float = 0.0,
        *,
        nesterov: bool = False,
        clip_norm: float | None = None,
        global_clip_norm: float | None = None,
    ) -> None:
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.nesterov = nesterov
        if nesterov and self.momentum == 0:
            raise ValueError(
                "SGD: nesterov=True looks ahead along the momentum, and momentum is 0: give "
                "momentum=0.9 (say), or leave nesterov out"
            )
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
        if self.nesterov:  # in the engine's primitives: v = μ·v - lr·g; slot += μ·v - lr·g
            for slot, grad, velocity in zip(slots, grads, state.memory["velocity"], strict=True):
                step = engine.mul(grad, rate)
                engine.assign(velocity, engine.sub(engine.mul(velocity, self.momentum), step))
                ahead = engine.sub(engine.mul(velocity, self.momentum), step)
                engine.assign(slot, engine.add(slot, ahead))
            return
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
            **({"nesterov": True} if self.nesterov else {}),
            **self.clipping_config(),
        }

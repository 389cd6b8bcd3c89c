"""Optimizers: how gradients change slots, one file each, written in the engine's primitives
through the fused operations (`deepsharp.core.engine.fused`), which an engine may run faster.
What an optimizer remembers of each slot lives on the engine during a run."""

from deepsharp.core.nn.optimizers.adam import Adam
from deepsharp.core.nn.optimizers.adamw import AdamW
from deepsharp.core.nn.optimizers.base import Optimizer, OptimizerState
from deepsharp.core.nn.optimizers.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "OptimizerState"]

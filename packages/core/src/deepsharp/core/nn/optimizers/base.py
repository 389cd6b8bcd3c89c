"""What every optimizer shares: its memory laid out on the engine, and its settings checked."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from deepsharp.core.engine import Engine, Handle, fused
from deepsharp.core.reals import brief, finite_real

__all__ = ["Optimizer", "OptimizerState", "setting"]


class OptimizerState:
    """An optimizer's memory of each slot (handles on the engine) and the steps taken."""

    def __init__(self, memory: dict[str, list[Handle]], steps: int) -> None:
        self.memory = memory
        self.steps = steps


class Optimizer:
    """Holds its settings; its memory (`memories`, one tensor of each a slot, starting at zero)
    is made on an engine by `start`, laid out as the slots are: the parts of one flat tensor."""

    memories: tuple[str, ...] = ()

    def start(self, engine: Engine, shapes: Sequence[tuple[int, ...]]) -> OptimizerState:
        total = sum(math.prod(shape) for shape in shapes)
        return OptimizerState(
            {name: fused.parts(engine, engine.zeros((total,)), shapes) for name in self.memories},
            0,
        )

    def update(
        self,
        engine: Engine,
        slots: Sequence[Handle],
        grads: Sequence[Handle],
        state: OptimizerState,
    ) -> None:
        """Change the slots in place from their gradients (and the memory in `state`)."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """The settings, as the constructor takes them (checkpoints record them)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"


def setting(
    optimizer: str,
    name: str,
    value: Any,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
) -> float:
    """`value` as a float, refused unless it is a finite real number (not a bool) in range:
    > `above`, >= `at_least`, < `below` (a TypeError for the wrong kind, a ValueError for a
    value out of range, each naming the optimizer, the setting and what it must be)."""
    wanted = []
    if above is not None:
        wanted.append(f"> {above:g}")
    if at_least is not None:
        wanted.append(f">= {at_least:g}")
    if below is not None:
        wanted.append(f"< {below:g}")
    must = "a finite number" + (f" {' and '.join(wanted)}" if wanted else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{optimizer}'s {name} must be {must}, not {value!r} ({type(value).__name__})"
        )
    number = finite_real(value)
    if (
        number is None
        or (above is not None and not number > above)
        or (at_least is not None and not number >= at_least)
        or (below is not None and not number < below)
    ):
        raise ValueError(f"{optimizer}'s {name} must be {must}, not {brief(value)}")
    return number

"""Step hooks: what takes part in every training step between the loss and the optimizer's
update — the sum of a data-parallel run's gradients over its processes, a loss scale, a user's
own (gradient clipping, say)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Handle

if TYPE_CHECKING:
    from deepsharp.core.training.trainer import Trainer

__all__ = ["Share", "StepHook"]

Share = tuple[int, int, int]
"""Where a process's rows lie in the whole batch: (start, stop, total) — its rows are the batch's
rows start .. stop - 1 of total (a contiguous share; (0, n, n) in one process)."""


class StepHook:
    """Takes part in every training step, between the loss and the optimizer's update.

    Hooks run in the order of `trainer.hooks`. A reduction over processes goes first
    (`trainer.hooks.insert(0, ...)`), so that every process holds the same gradients before any
    hook decides on them. `name` keys what a checkpoint keeps of it (`state`, `restore`).
    """

    name = ""

    def objective(self, trainer: Trainer, value: Tensor, share: Share | None) -> Tensor:
        """What the way back differentiates, given the loss (or an earlier hook's objective):
        a loss scale multiplies it; a process weighs it by its share of the batch,
        (stop - start) / total, so that the processes' gradients add up to the batch's."""
        return value

    def objective_key(self) -> Hashable:
        """What `objective` reads of this hook's own state (a loss scale: its scale): a compiled
        step replays the objective traced under the same key, and is traced again where the key
        changes. A hook that overrides `objective` says it here; one that does not is taken as
        recorded every step (`deepsharp.core.training.compiled`)."""
        return None

    def gradients(self, trainer: Trainer, grads: list[Handle]) -> list[Handle] | None:
        """The gradients the optimizer applies (every slot's, in `trainer.slot_names` order),
        or None to skip this step's update (counted in `trainer.skipped_steps`)."""
        return grads

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of this hook (JSON values)."""
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back what `state` gave (checked: FileFormatError where it cannot be)."""

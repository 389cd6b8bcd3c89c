"""Step hooks: what takes part in every training step between the loss and the optimizer's
update — the sum of a data-parallel run's gradients over its processes, a loss scale, a user's
own (gradient clipping, say)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deepsharp.core.autodiff.tensor import Tensor
from deepsharp.core.engine import Handle
from deepsharp.core.errors import CheckpointMismatchError, json_values

if TYPE_CHECKING:
    from deepsharp.core.training.trainer import Trainer

__all__ = ["Share", "StepHook", "check_hooks"]

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


def check_hooks(
    kept: Mapping[str, Any], hooks: Sequence[StepHook], where: str, apart: Sequence[str] = ()
) -> None:
    """Refuse a checkpoint's hook states where this run lacks a named hook it holds the state
    of, has one it was taken without, or has one with other settings (those its state records
    as "settings", compared as the checkpoint holds them: JSON) — as a named callback's are:
    such a run would not end where the one it resumes would have (CheckpointMismatchError).
    `apart`: the names checked elsewhere (the loss scale's)."""
    named = {hook.name: hook for hook in hooks if hook.name and hook.name not in apart}
    states = {name: state for name, state in kept.items() if name not in apart}
    lacking, extra = sorted(set(states) - set(named)), sorted(set(named) - set(states))
    if lacking or extra:
        which, said = (lacking, "which this run lacks") if lacking else (extra, "this run has")
        raise CheckpointMismatchError(
            f"{where} {'holds the state of' if lacking else 'was taken without'} the step "
            f"hook(s) {', '.join(map(repr, which))}, {said}: resume with the hooks it was "
            "taken with (their settings too), or start the run afresh"
        )
    for name, state in states.items():
        settings = state.get("settings") if isinstance(state, Mapping) else None
        ours = named[name].state().get("settings")
        ours = None if ours is None else json_values(ours, f"the step hook {name!r}'s settings")
        if settings is not None and ours is not None and settings != ours:
            raise CheckpointMismatchError(
                f"{where} was taken with the step hook {name!r} set {settings}; this run's is "
                f"set {ours}: resume with the settings it was taken with, or start the run "
                "afresh"
            )

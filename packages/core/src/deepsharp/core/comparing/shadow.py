"""Shadow checks: a run's sampled steps taken again beside a second engine, each operation
judged by its bound, so that a run learns while it trains whether its engine keeps the contract.

`FitOptions(shadow=Shadow(every=100, engine="light"))`: the run's first step and every 100th
after it (steps 1, 101, 201, ...) is taken again from the same slots, optimizer memory and
dropout masks, on a copy, by the run's engine with each operation done again by the shadow
engine (`compare`'s step); the run itself goes on untouched. Each check's worst ratio to the
bound is kept in `report.shadow` (and said by the report's text); a check whose worst ratio
passes 1 warns (`DeepSharpWarning`), naming the operation, its layer and the figures.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepsharp.core.comparing.comparison import Comparison
from deepsharp.core.comparing.step import compare_step, engine_precision
from deepsharp.core.engine import Engine, make_engine
from deepsharp.core.engine.registry import check_spec
from deepsharp.core.errors import ConfigurationError, DeepSharpWarning
from deepsharp.core.training.trainer import Trainer

__all__ = ["Shadow", "ShadowCheck", "ShadowChecks", "shadow_lines"]


@dataclass(frozen=True)
class Shadow:
    """Check a run against a second engine: every `every`-th step (the first, then every
    `every`) is taken again from the same state on a copy, each operation done again by
    `engine` (a spec or an engine) and judged by its bound."""

    every: int = 100
    engine: Engine | str = "light"

    def __post_init__(self) -> None:
        every = self.every
        if isinstance(every, (bool, np.bool_)) or not isinstance(every, (int, np.integer)):
            raise TypeError(f"Shadow: every is a whole number of steps, not {every!r}")
        if every < 1:
            raise ValueError(f"Shadow: every must be 1 or more steps, not {every!r}")
        check_spec(self.engine, "Shadow: engine")


@dataclass(frozen=True)
class ShadowCheck:
    """One shadow check: the step it took again (`epoch`, and `step`, counted over the run from
    1), its worst `ratio` to the bound and where (`worst`: the operation, its layer and phase),
    and the first operation past its bound (`first`; None when every one was within);
    `vacuous`, the operations held to a bound that bounds nothing (`Comparison.vacuous`:
    the check cannot tell there)."""

    epoch: int
    step: int
    ratio: float
    worst: str
    first: str | None = None
    vacuous: tuple[str, ...] = ()


class ShadowChecks:
    """A run's shadow checks: made when the run starts (the shadow engine made and refused
    where it is the run's own), asked before each step."""

    def __init__(self, shadow: Shadow, engine: Engine) -> None:
        self.shadow = shadow
        self.engine = make_engine(shadow.engine)
        where = "FitOptions: shadow"
        engine_precision(self.engine, where)
        engine_precision(engine, where)
        if self.engine is engine or self.engine.identity == engine.identity:
            raise ConfigurationError(
                f"{where}: the shadow engine is the run's own ({engine.identity}): it would "
                "check the engine against itself. Name another engine (Shadow(engine='light') "
                "beside torch, or 'light:float32' beside light)"
            )
        self.checks: list[ShadowCheck] = []

    def before_step(
        self, trainer: Trainer, features: Any, targets: Any, epoch: int, step: int
    ) -> Comparison | None:
        """Check the step the trainer is about to take, where it is due (its comparison)."""
        assert trainer.state is not None
        taken = trainer.state.steps + trainer.skipped_steps
        if taken % self.shadow.every:
            return None
        comparison = compare_step(
            trainer.network,
            trainer.loss,
            features,
            targets,
            self.engine,
            trainer.engine,
            trainer.optimizer,
            state=trainer.export_state(),
            seed=trainer.streams.seed,
            loss_scale=copy.deepcopy(trainer.loss_scale),
            where="shadow check",
        )
        worst, first = comparison.worst, comparison.first
        self.checks.append(
            ShadowCheck(
                epoch,
                taken + 1,
                comparison.ratio,
                "" if worst is None else worst.where,
                None if first is None else first.where,
                tuple(row.where for row in comparison.vacuous),
            )
        )
        if first is not None:
            warnings.warn(
                f"shadow check of epoch {epoch}, step {taken + 1} ({step} of the epoch) on "
                f"{trainer.engine.identity} beside {self.engine.identity}: {first.where} is past "
                f"its bound, {first.shapes}: difference {first.difference:.3g}, bound "
                f"{first.bound:.3g}, ratio {first.ratio:.3g}{'; ' + first.detail if first.detail else ''}. "
                "deepsharp.core.compare on this batch shows the whole step",
                DeepSharpWarning,
                stacklevel=2,
            )
        return comparison


def shadow_lines(checks: Sequence[ShadowCheck], engine: Any = None) -> list[str]:
    """What a report says of its shadow checks: how many, the worst, every one past its bound."""
    if not checks:
        return []
    worst = max(checks, key=lambda check: check.ratio)
    beside = f" beside {engine}" if engine is not None else ""
    lines = [
        f"shadow checks{beside}: {len(checks)}, worst ratio to the bound {worst.ratio:.3g} "
        f"(epoch {worst.epoch}, step {worst.step}: {worst.worst})"
    ]
    lines.extend(
        f"  past its bound at epoch {check.epoch}, step {check.step}: {check.first} "
        f"(ratio {check.ratio:.3g})"
        for check in checks
        if check.first is not None
    )
    vacuous = dict.fromkeys(where for check in checks for where in check.vacuous)
    if vacuous:
        lines.append(
            f"  held to a bound that bounds nothing (the checks cannot tell there): "
            f"{', '.join(vacuous)}"
        )
    return lines

"""The contract's reference: every primitive operation in NumPy float64, written in the plainest
way (`deepsharp.core.comparing.exact`, where compare finds it too; named here as the suite has
always named it). `AbsoluteTotals` takes every total over absolute values (Σ|terms|),
`TermCounts` counts the terms of each total (n)."""

from __future__ import annotations

from deepsharp.core.comparing.exact import AbsoluteTotals, Float64Engine, TermCounts

__all__ = ["AbsoluteTotals", "Float64Engine", "TermCounts"]

"""A whole network's bound: each operation's contract, propagated through the network
(`deepsharp.core.comparing.propagated`, where compare judges the fast paths made of several
families with it too; named here as the suite has always named it)."""

from __future__ import annotations

from deepsharp.core.comparing.propagated import Bounded, Propagated, bounded_predictions

__all__ = ["Bounded", "Propagated", "bounded_predictions"]

"""A pytest plugin for the runs of broken engines (`-p no_shrinking`): Hypothesis reports the first
failing example it finds, without shrinking it (a broken engine's failure needs no minimal
example, and shrinking one takes longer than finding it)."""

from __future__ import annotations

from hypothesis import Phase, settings

settings.register_profile(
    "deepsharp-contracts-no-shrinking", phases=[Phase.explicit, Phase.reuse, Phase.generate]
)
settings.load_profile("deepsharp-contracts-no-shrinking")

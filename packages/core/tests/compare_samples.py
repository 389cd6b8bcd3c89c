"""The samples as compare meets them: each trained a little (2 epochs, seed 42), its loss, its
optimizer, and its first batches of 32 rows through its own pipeline, as the network takes them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from deepsharp.core import Adam, Optimizer, TrainedNetwork
from deepsharp.core.samples import digits, titanic

SAMPLES = ("titanic", "digits")


def trained(sample: str) -> tuple[TrainedNetwork, Optimizer, list[dict[str, Any]]]:
    """The sample trained for 2 epochs, the optimizer it trains with, and rows to compare on."""
    if sample == "titanic":
        return titanic.run(seed=42, epochs=2, progress=False).trained, Adam(0.001), titanic.rows()
    return digits.run(seed=42, epochs=2, progress=False).trained, Adam(0.003), digits.rows("test")


def batches(sample: TrainedNetwork, rows: list[dict[str, Any]], count: int) -> Iterator[Any]:
    """The first `count` batches of 32 rows: (features, targets)."""
    for start in range(0, 32 * count, 32):
        part = rows[start : start + 32]
        features = sample.network.arrange(sample.pipeline.features(part), reshape=True)
        yield features, sample.pipeline.targets(part)

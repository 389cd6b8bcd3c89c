"""compare on the torch engine: every operation of a step of every sample within its bound
beside the light engine, at every precision torch offers on the processor (and on a card, where
the CUDA session runs: DEEPSHARP_TEST_CUDA=1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")

from deepsharp.core import Adam, Optimizer, TrainedNetwork, compare
from deepsharp.core.samples import digits, titanic

ENGINES = ["torch:cpu", "torch:cpu:strict", "torch:cpu:mixed_bfloat16"]
if os.environ.get("DEEPSHARP_TEST_CUDA") == "1":
    ENGINES += ["torch:cuda:0", "torch:cuda:0:strict"]


@pytest.fixture(scope="module")
def samples() -> dict[str, tuple[TrainedNetwork, Optimizer, list[dict[str, Any]]]]:
    """Each sample trained a little (2 epochs, seed 42), its optimizer and rows to compare on."""
    return {
        "titanic": (
            titanic.run(seed=42, epochs=2, progress=False).trained,
            Adam(0.001),
            titanic.rows(),
        ),
        "digits": (
            digits.run(seed=42, epochs=2, progress=False).trained,
            Adam(0.003),
            digits.rows("test"),
        ),
    }


def _batches(trained: TrainedNetwork, rows: list[dict[str, Any]], count: int) -> Iterator[Any]:
    for start in range(0, 32 * count, 32):
        part = rows[start : start + 32]
        features = trained.network.arrange(trained.pipeline.features(part), reshape=True)
        yield features, trained.pipeline.targets(part)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("sample", ["titanic", "digits"])
def test_every_operation_of_every_sample_is_within_its_bound_beside_light(
    samples: dict[str, Any], sample: str, engine: str
) -> None:
    trained, optimizer, rows = samples[sample]
    for batch in _batches(trained, rows, 3):
        found = compare(
            trained.network, trained.loss, batch, engines=("light", engine), optimizer=optimizer
        )
        assert found.within, found
        assert found.engines[1].name == "torch"

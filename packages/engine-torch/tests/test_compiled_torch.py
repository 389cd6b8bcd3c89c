"""The compiled step on the torch engine: every layer kind of the layer harness, the residual
sample's network and a transformer block give the recorded step's bits at every processor
precision; on a card (DEEPSHARP_TEST_CUDA=1, ci/gpu-check) the plan replays as one CUDA graph,
with the same bits, and a plan with host steps (dropout) runs as a plan, saying why."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "tests"))

from test_compiled import compiled_beside_recorded, same_bits  # noqa: E402
from test_layer_harness import CASES  # noqa: E402

from deepsharp.core import (  # noqa: E402
    Adam,
    CrossEntropy,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    Input,
    MeanSquaredError,
    Network,
    Relu,
    Trainer,
    TransformerBlock,
)
from deepsharp.core.samples import resnet  # noqa: E402

ENGINES = ["torch:cpu", "torch:cpu:strict", "torch:cpu:mixed_bfloat16"]
CARD = os.environ.get("DEEPSHARP_TEST_CUDA") == "1"
if CARD:
    ENGINES += ["torch:cuda:0", "torch:cuda:0:strict", "torch:cuda:0:mixed_float16"]


@pytest.mark.parametrize("name", list(CASES))
def test_a_compiled_step_gives_the_recorded_steps_bits_for_every_layer_kind(name: str) -> None:
    for engine in ENGINES:
        assert compiled_beside_recorded(name, engine).replayed >= 2, f"{name} on {engine}"


def networks() -> dict[str, tuple[Network, Any, list[np.ndarray], np.ndarray]]:
    """The residual sample's network on 8 x 8 images, and a causal transformer block over ids
    read by a Dense layer."""
    rng = np.random.default_rng(2)
    images = rng.random((16, 1, 8, 8)).astype(np.float32)
    ids = rng.integers(1, 20, (8, 12))
    tokens = Input((12,), dtype="int64", name="tokens")
    h = TransformerBlock(2, 32, causal=True)(Embedding(20, 16)(tokens))
    block = Network(inputs=tokens, outputs=Dense(20)(Flatten()(h)))
    return {
        "resnet": (resnet.network(), CrossEntropy(), [images], rng.integers(0, 10, 16)),
        "transformer": (block, CrossEntropy(), [ids], rng.integers(0, 20, 8)),
    }


def taken(name: str, engine: str, compile: bool) -> tuple[bytes, dict[str, Any], Any]:
    network, loss, xs, ys = networks()[name]
    with Trainer(network, loss, Adam(0.01), engine=engine, seed=4, compile=compile) as trainer:
        losses = [trainer.step([x[:rows] for x in xs], ys[:rows]) for rows in (8, 8, 6, 8, 6)]
        record = trainer.compiled.record()
    slots, buffers = network.values()
    return np.array(losses, np.float32).tobytes(), {**slots, **buffers}, record


@pytest.mark.parametrize("name", ["resnet", "transformer"])
def test_the_residual_and_transformer_steps_compiled_give_the_recorded_bits(name: str) -> None:
    for engine in ENGINES:
        recorded, compiled = taken(name, engine, False), taken(name, engine, True)
        assert recorded[0] == compiled[0], f"{name} on {engine}: the losses differ"
        assert same_bits(recorded[1], compiled[1]), f"{name} on {engine}: the values differ"
        assert compiled[2].replayed == 3 and compiled[2].why == (), compiled[2]


@pytest.mark.skipif(not CARD, reason="a card's CUDA graphs: DEEPSHARP_TEST_CUDA=1 (ci/gpu-check)")
def test_on_a_card_a_plan_replays_as_one_cuda_graph_with_the_recorded_bits() -> None:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((64, 20)).astype(np.float32)
    targets = rng.standard_normal((64, 3)).astype(np.float32)
    kept = []
    for compile in (False, True):
        network = Network([Dense(32), Relu(), Dense(3)], inputs=20)
        with Trainer(
            network, MeanSquaredError(), Adam(0.01), "torch:cuda:0", compile=compile
        ) as trainer:
            losses = [trainer.step(rows, targets) for _ in range(6)]
            graphed = [found.graphed for found in trainer.compiled.plans.values() if found]
            kept.append((np.array(losses).tobytes(), network.slots, trainer.compiled.record()))
    assert kept[0][0] == kept[1][0] and same_bits(kept[0][1], kept[1][1])
    assert kept[1][2].replayed == 5 and kept[1][2].why == ()
    assert graphed and all(callable(graph) for graph in graphed)  # replayed as a CUDA graph


@pytest.mark.skipif(not CARD, reason="a card's CUDA graphs: DEEPSHARP_TEST_CUDA=1 (ci/gpu-check)")
def test_on_a_card_a_plan_with_dropout_runs_as_a_plan_and_says_why() -> None:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((64, 20)).astype(np.float32)
    targets = rng.standard_normal((64, 3)).astype(np.float32)
    kept = []
    for compile in (False, True):
        network = Network([Dense(32), Relu(), Dropout(0.3), Dense(3)], inputs=20)
        with Trainer(
            network, MeanSquaredError(), Adam(0.01), "torch:cuda:0", compile=compile
        ) as trainer:
            losses = [trainer.step(rows, targets) for _ in range(4)]
            kept.append((np.array(losses).tobytes(), network.slots, trainer.compiled.record()))
    assert kept[0][0] == kept[1][0] and same_bits(kept[0][1], kept[1][1])
    assert kept[1][2].replayed == 3
    assert any("not as one CUDA graph" in why for why in kept[1][2].why)

"""The samples as compare meets them: each trained a little (seed 42), its loss, its optimizer,
and its first batches of 32 rows through its own pipeline, as the network takes them; and
networks that hold every layer kind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from deepsharp.core import Adam, AdamW, Optimizer, TrainedNetwork
from deepsharp.core.samples import digits, resnet, titanic

SAMPLES = ("titanic", "digits", "resnet")


def trained(sample: str) -> tuple[TrainedNetwork, Optimizer, list[dict[str, Any]]]:
    """The sample trained a little (2 epochs; the residual one 1), the optimizer it trains with,
    and rows to compare on."""
    if sample == "titanic":
        return titanic.run(seed=42, epochs=2, progress=False).trained, Adam(0.001), titanic.rows()
    if sample == "digits":
        run = digits.run(seed=42, epochs=2, progress=False)
        return run.trained, Adam(0.003), digits.rows("test")
    run = resnet.run(seed=42, epochs=1, progress=False)
    return run.trained, AdamW(0.002, weight_decay=0.01), digits.rows("test")


def batches(sample: TrainedNetwork, rows: list[dict[str, Any]], count: int) -> Iterator[Any]:
    """The first `count` batches of 32 rows: (features, targets)."""
    for start in range(0, 32 * count, 32):
        part = rows[start : start + 32]
        features = sample.network.arrange(sample.pipeline.features(part), reshape=True)
        yield features, sample.pipeline.targets(part)


def every_layer() -> dict[str, tuple[Any, Any]]:
    """Three networks that hold every layer kind between them, each with a batch: a sequence one
    (Embedding, LayerNorm, Dense, Gelu, Reshape, Conv1D, GlobalAvgPool), an image one (Conv2D,
    BatchNorm, Silu, AvgPool2D, MaxPool2D over a pair, Flatten, Dropout, LeakyRelu) and an
    attention one (PositionalEmbedding, a causal TransformerBlock with dropout, MultiHeadAttention
    over padded ids)."""
    import numpy as np

    from deepsharp.core import (
        AvgPool2D,
        BatchNorm,
        Conv1D,
        Conv2D,
        Dense,
        Dropout,
        Embedding,
        Flatten,
        Gelu,
        GlobalAvgPool,
        Input,
        LayerNorm,
        LeakyRelu,
        MaxPool2D,
        MultiHeadAttention,
        Network,
        PositionalEmbedding,
        Reshape,
        Silu,
        TransformerBlock,
    )

    rng = np.random.default_rng(0)
    ids = Input((12,), dtype="int64", name="ids")
    words = Gelu()(Dense(16)(LayerNorm()(Embedding(50, 16)(ids))))
    sequence = Dense(3)(GlobalAvgPool()(Conv1D(8, 3, padding="same")(Reshape((16, 12))(words))))
    image = Network(
        [
            Conv2D(4, 3, padding="same"),
            BatchNorm(),
            Silu(),
            AvgPool2D(),
            MaxPool2D((2, 1)),
            Flatten(),
            Dropout(0.2),
            Dense(8),
            LeakyRelu(),
            Dense(3),
        ],
        inputs=(1, 8, 8),
    )
    tokens = Input((12,), dtype="int64", name="tokens")
    attended = PositionalEmbedding(12, 16)(Embedding(50, 16)(tokens))
    attended = MultiHeadAttention(2)(TransformerBlock(4, 32, dropout=0.1, causal=True)(attended))
    padded = rng.integers(0, 50, (8, 12))
    padded[:, -3:] = 0  # padding: no attention
    return {
        "sequence": (
            Network(inputs=ids, outputs=sequence),
            (rng.integers(0, 50, (16, 12)), rng.integers(0, 3, 16)),
        ),
        "attention": (
            Network(inputs=tokens, outputs=Dense(3)(GlobalAvgPool()(Reshape((16, 12))(attended)))),
            (padded, rng.integers(0, 3, 8)),
        ),
        "image": (
            image,
            (rng.normal(size=(16, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, 16)),
        ),
    }

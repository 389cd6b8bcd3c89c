"""Tiny Shakespeare: a character-level transformer language model, and text it generates.

The text (1,115,394 characters of Shakespeare's plays, shipped with deepsharp) is cut at 90 %:
the first part trains, the last validates. The pipeline is one text column of characters,
`context`, its vocabulary the training text's 65 characters (ids 2 .. 66; 0 padding, 1
unknown). A training batch is 32 windows of 65 characters drawn from the training text, each
from the run's generator: its first 64 characters the input, its last 64 the targets (at every
position, the character that follows). The network: an Embedding and learned positions, four
causal pre-norm TransformerBlocks (4 heads, 128 wide, 512 inside), a LayerNorm and the logits
of the next character at each position; CrossEntropy over every position; AdamW(0.001).

An epoch is `STEPS_AN_EPOCH` steps (fresh windows each); the validation loss (nats per
character, over `VALIDATION_WINDOWS` windows of the last tenth) judges each epoch. A run of
`steps` steps ends by generating text from a prompt:

    from deepsharp.core.samples import shakespeare
    run = shakespeare.run(engine="torch:cpu")       # 3,000 steps
    print(run.trained.generate("ROMEO:", 300))
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.data.text import Text
from deepsharp.core.engine import Engine
from deepsharp.core.errors import ConfigurationError, DataError
from deepsharp.core.nn.graph import Input
from deepsharp.core.nn.layers import (
    Dense,
    Embedding,
    LayerNorm,
    PositionalEmbedding,
    TransformerBlock,
)
from deepsharp.core.nn.losses import CrossEntropy, Loss
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import AdamW
from deepsharp.core.random import Generator, Streams
from deepsharp.core.samples import data_path
from deepsharp.core.training.feeds import ArrayFeed, Batch, Feed, Feeds, ShareOf, Source
from deepsharp.core.training.loop import FitOptions, Run, fit

__all__ = [
    "CONTEXT",
    "SHA256",
    "STEPS",
    "STEPS_AN_EPOCH",
    "Windows",
    "network",
    "pipeline",
    "run",
    "text",
]

FILE = "tinyshakespeare.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
CONTEXT = 64
"""Characters a window gives the network (its targets: the 64 that follow each)."""
STEPS = 3000
STEPS_AN_EPOCH = 300
VALIDATION_WINDOWS = 512
BATCH = 32
WIDTH, HEADS, HIDDEN, BLOCKS = 128, 4, 512, 4


def text() -> str:
    """The whole text (UTF-8)."""
    with open(data_path(FILE), encoding="utf-8") as handle:
        return handle.read()


def pipeline() -> Pipeline:
    """One text column of characters, `context`, CONTEXT long, its vocabulary learned from the
    training text (67 ids: padding, unknown and its 65 characters)."""
    return Pipeline().text("context", tokens="characters", length=CONTEXT, vocabulary=67)


def network(vocabulary: int = 67) -> Network:
    """The character-level transformer: (CONTEXT,) ids -> (CONTEXT, vocabulary) logits."""
    ids = Input(CONTEXT, dtype="int64", name="context")
    h = PositionalEmbedding(CONTEXT, WIDTH)(Embedding(vocabulary, WIDTH)(ids))
    for _ in range(BLOCKS):
        h = TransformerBlock(HEADS, HIDDEN, causal=True)(h)
    return Network(inputs=ids, outputs=Dense(vocabulary)(LayerNorm()(h)))


class Windows(Source):
    """A text as a next-token model's data: training batches of windows drawn afresh each epoch
    from the first `train` fraction, validation and test windows fixed, evenly spaced over the
    rest, cut by the pipeline's one text column (its name, its tokens, its length L).
    Features: (N, L) ids; targets: the ids that follow each, (N, L)."""

    def __init__(
        self, corpus: str, steps_an_epoch: int = STEPS_AN_EPOCH, train: float = 0.9
    ) -> None:
        self.corpus = corpus
        self.steps = steps_an_epoch
        self.train = train
        self.cut = int(len(corpus) * train)  # characters: the text the vocabulary learns

    def feeds(
        self,
        pipeline: Pipeline | None,
        network: Network,
        loss: Loss,
        streams: Streams,
        test: object | None,
        validation: object | None = None,
    ) -> Feeds:
        if pipeline is None:
            raise ValueError("Windows: a pipeline of one text column cuts the text")
        if test is not None or validation is not None:
            raise DataError(
                "Windows cuts its validation windows from the text's held-out part and holds "
                "no test rows apart: fit it with no test_rows or validation_rows"
            )
        declared = pipeline.declared
        if len(declared) != 1 or not isinstance(declared[0], Text):
            raise ConfigurationError(
                "Windows cuts its text into windows for a pipeline of one text column (as "
                "shakespeare.pipeline(): Pipeline().text(name, tokens=..., length=...)), not "
                f"one of {', '.join(map(repr, declared)) or 'no columns'}"
            )
        pipeline.learn([{declared[0].name: self.corpus[: self.cut]}])  # (trial T: "context")
        (column,) = pipeline.columns
        assert isinstance(column, Text)
        window = column.length  # each window: `window` ids, and the one after each (trial T)
        ids = np.array([column.lookup.get(c, 1) for c in column.split(self.corpus)], np.int64)
        cut = len(column.split(self.corpus[: self.cut]))  # tokens, not characters, where words
        parts = {"training": cut, "held-out": len(ids) - cut}
        short = {part: count for part, count in parts.items() if count < window + 2}
        if short:
            raise DataError(
                f"Windows: the text cuts into {len(ids):,} tokens, {parts['training']:,} for "
                f"training and {parts['held-out']:,} held out (train={self.train:g} of its "
                f"{len(self.corpus):,} characters); each part needs {window + 2} tokens or "
                f"more (windows of {window} and the token after): give a longer text"
                + (
                    " or a train fraction that leaves each part enough"
                    if len(ids) > 2 * (window + 2)
                    else ""
                )
            )
        network.build()
        held_out = _evenly(ids[cut:], VALIDATION_WINDOWS, window)
        fixed = ArrayFeed((held_out[:, :-1],), held_out[:, 1:])
        said = "validation windows (the same as each epoch's: Windows holds no test rows apart)"
        return Feeds(pipeline, _Drawn(ids[:cut], self.steps, window), fixed, fixed, said)


class _Drawn(Feed):
    """`steps` batches of windows of `window` ids (and the one after each) an epoch, each
    window's start drawn from the epoch's order."""

    def __init__(self, ids: NDArray[np.int64], steps: int, window: int) -> None:
        self.ids = ids
        self.steps = steps
        self.window = window

    def __len__(self) -> int:
        return self.steps * BATCH

    def batches(self, size: int, order: Generator | None, share: ShareOf) -> Iterator[Batch]:
        starts_of = order if order is not None else Generator(0)
        last = len(self.ids) - self.window - 1
        for _ in range(self.steps):
            starts = (starts_of.bits(size) % np.uint64(last)).astype(np.int64)
            first, stop = share(size)
            windows = self.ids[starts[first:stop, None] + np.arange(self.window + 1)]
            yield Batch((windows[:, :-1],), windows[:, 1:], (first, stop, size))


def _evenly(ids: NDArray[np.int64], count: int, window: int) -> NDArray[np.int64]:
    """`count` windows of `window` + 1 ids, evenly spaced over `ids`."""
    starts = np.linspace(0, len(ids) - window - 1, count).astype(np.int64)
    windows: NDArray[np.int64] = ids[starts[:, None] + np.arange(window + 1)]
    return windows


def run(
    engine: Engine | str | None = None,
    seed: int = 42,
    steps: int = STEPS,
    resume_from: str | os.PathLike[str] | None = None,
    prompt: str = "ROMEO:",
    characters: int = 300,
    **options: Any,
) -> Run:
    """Train the sample for `steps` steps on `engine` (whole epochs of equal length, at most
    STEPS_AN_EPOCH each: `steps` rounded up to a multiple of the epochs, 301 as 2 epochs of 151),
    judge each epoch by the validation loss, and end the report with `characters` characters
    generated from `prompt`."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"shakespeare.run: steps is a whole number of 1 or more, not {steps!r}")
    epochs = max(1, math.ceil(steps / STEPS_AN_EPOCH))
    steps_an_epoch = math.ceil(steps / epochs)
    settings = {"epochs": epochs, "patience": epochs, "batch_size": BATCH, **options}
    result = fit(
        pipeline(),
        Windows(text(), steps_an_epoch),
        network(),
        CrossEntropy(),
        AdamW(0.001, weight_decay=0.01),
        FitOptions(seed=seed, engine=engine, **settings),
        resume_from=resume_from,
    )
    written = result.trained.generate(prompt, characters, temperature=0.8, seed=seed, engine=engine)
    result.report.notes.append(f"{steps_an_epoch * result.report.epochs_run} steps; generated:")
    result.report.notes.append(written)
    return result

"""SMS messages: spam or not? 5,574 messages, their words as ids, an embedding and an LSTM.

The UCI SMS Spam Collection ships with deepsharp: 4,827 legitimate messages ("ham") and 747
spam. The messages are split by the run's seed into training, validation and test rows
(70 / 15 / 15); the report ends with the test rows' confusion counts.

    from deepsharp.core.samples import spam
    run = spam.run()             # the light engine, seed 42
    print(run.report)            # accuracy on the 837 test messages, and the confusion counts
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.engine import Engine
from deepsharp.core.nn.layers import LSTM, Dense, Embedding
from deepsharp.core.nn.losses import BinaryCrossEntropy
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Adam
from deepsharp.core.random import Streams
from deepsharp.core.samples import data_path
from deepsharp.core.training.feeds import Rows
from deepsharp.core.training.loop import FitOptions, Run, fit

__all__ = ["LENGTH", "SHA256", "VOCABULARY", "confusion", "network", "pipeline", "rows", "run"]

SHA256 = "7d039a24a6083ed9ef0f806ebad56bbb976e3aeb8de05669173bfdc4996c239d"
LENGTH = 40
"""Words a message keeps (nineteen in twenty messages have fewer)."""
VOCABULARY = 6000
"""Ids: padding, unknown and the 5,998 words the training messages hold most often."""


def rows() -> list[dict[str, str]]:
    """The 5,574 messages as rows: ``{"label": "ham" or "spam", "message": its text}``."""
    text = data_path("SMSSpamCollection").read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        label, message = line.split("\t", 1)
        out.append({"label": label, "message": message})
    return out


def pipeline() -> Pipeline:
    """Each message's first 40 words as ids (padding before them, so that its last word is the
    LSTM's last step), over the 6,000 ids of the training messages' words; the label binary
    (spam is the positive one). Split 70 / 15 / 15."""
    return (
        Pipeline()
        .text("message", tokens="words", length=LENGTH, vocabulary=VOCABULARY, padding="start")
        .target("label", kind="binary")
        .split(train=0.70, validation=0.15)
    )


def network() -> Network:
    """An embedding of 32 values a word, an LSTM of 32 units read to the message's end, and one
    logit (the loss's link makes it the chance of spam)."""
    return Network([Embedding(VOCABULARY, 32), LSTM(32), Dense(1)], inputs=LENGTH)


def confusion(trained: Any, messages: list[dict[str, str]], engine: Any = None) -> dict[str, int]:
    """How many of these messages the trained network calls spam or ham, against their labels:
    the counts of true and false positives and negatives (spam is positive)."""
    called = trained.predict(messages, engine)[:, 0] > 0.5
    spam = np.array([row["label"] == "spam" for row in messages])
    return {
        "spam called spam": int((called & spam).sum()),
        "ham called spam": int((called & ~spam).sum()),
        "spam called ham": int((~called & spam).sum()),
        "ham called ham": int((~called & ~spam).sum()),
    }


def run(
    engine: Engine | str | None = None,
    seed: int = 42,
    resume_from: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Run:
    """Train the sample on `engine` (the light engine when none is named) and measure it on the
    test messages; `options` are FitOptions' (patience 3 unless given), `resume_from` fit's.
    Its report ends with the test messages' confusion counts."""
    messages = rows()
    options.setdefault("patience", 3)  # the validation loss turns up after three or four epochs
    result = fit(
        pipeline(),
        messages,
        network(),
        BinaryCrossEntropy(),
        Adam(0.003),
        FitOptions(seed=seed, engine=engine, **options),
        resume_from=resume_from,
    )
    _, _, test = Rows(messages).parts(pipeline(), Streams(seed))  # as the run cut them
    tests = [messages[int(i)] for i in test]
    counts = confusion(result.trained, tests, engine)
    result.report.notes.append(
        f"test messages: {', '.join(f'{count} {said}' for said, count in counts.items())}"
    )
    return result

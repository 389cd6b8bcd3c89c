"""Handwritten digits: 8x8 images of counts 0..16, ten classes, a small convolutional network.

The UCI optdigits set ships with deepsharp: 3,823 training images (30 writers) and 1,797 test
images (13 other writers). The training images are split into training and validation rows; the
test images are the run's test rows.

    from deepsharp.core.samples import digits
    run = digits.run()           # the light engine, seed 42
    print(run.report)            # accuracy on the 1,797 test images
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.engine import Engine
from deepsharp.core.nn.layers import Conv2D, Dense, Flatten, MaxPool2D, Relu
from deepsharp.core.nn.losses import CrossEntropy
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import Adam
from deepsharp.core.samples import data_path
from deepsharp.core.training.loop import FitOptions, Run, fit

__all__ = ["FILES", "SHA256", "network", "pipeline", "rows", "run"]

FILES = {"train": "optdigits.tra", "test": "optdigits.tes"}
SHA256 = {
    "optdigits.tra": "e1b683cc211604fe8fd8c4417e6a69f31380e0c61d4af22e93cc21e9257ffedd",
    "optdigits.tes": "6ebb3d2fee246a4e99363262ddf8a00a3c41bee6014c373ed9d9216ba7f651b8",
}


def _table(part: str) -> NDArray[np.int64]:
    if part not in FILES:
        raise ValueError(f"digits.rows: part is 'train' or 'test', not {part!r}")
    table: NDArray[np.int64] = np.loadtxt(
        data_path(FILES[part]), delimiter=",", dtype=np.int64, ndmin=2
    )
    return table


def rows(part: Literal["train", "test"] = "train") -> list[dict[str, Any]]:
    """The images of one file as rows: ``{"pixels": 64 float32 counts 0..16, "digit": "3"}``.

    ``part="train"``: the 3,823 training images; ``part="test"``: the 1,797 test images.
    """
    table = _table(part)
    pixels = table[:, :64].astype(np.float32)
    return [
        {"pixels": image, "digit": str(digit)}
        for image, digit in zip(pixels, table[:, 64].tolist(), strict=True)
    ]


def pipeline() -> Pipeline:
    """The 64 counts as one 1x8x8 image divided by 16; the digit as one of ten classes.

    The test images are a file of their own, so the training file is only split into training
    and validation rows, in the ratio 80 : 15 (a run given its own test rows uses only the
    ratio): 3,220 training and 603 validation images.
    """
    return (
        Pipeline()
        .image("pixels", (1, 8, 8), scale=16.0)
        .target("digit", kind="classes")
        .split(train=0.80, validation=0.15)
    )


def network() -> Network:
    """16 3x3 filters ('same'), ReLU, 2x2 max-pool, then ten logits (softmax is the loss's link)."""
    return Network(
        [Conv2D(16, 3, padding="same"), Relu(), MaxPool2D(), Flatten(), Dense(10)],
        inputs=(1, 8, 8),
    )


def run(engine: Engine | str | None = None, seed: int = 42, **options: Any) -> Run:
    """Train the sample on `engine` (the light engine when none is named) and measure it on the
    1,797 test images. Its report ends with the prediction for the first test image."""
    tests = rows("test")
    result = fit(
        pipeline(),
        rows("train"),
        network(),
        CrossEntropy(),
        Adam(0.003),
        FitOptions(seed=seed, engine=engine, **options),
        test_rows=tests,
    )
    first = tests[0]
    chances = result.trained.predict([first], engine)[0]
    classes = result.trained.pipeline.classes or []
    best = int(np.argmax(chances))
    result.report.notes.append(
        f"first test image: read as {classes[best]} (chance {float(chances[best]):.3f}), "
        f"written as {first['digit']}"
    )
    return result

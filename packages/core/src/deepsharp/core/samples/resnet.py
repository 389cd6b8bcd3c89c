"""Handwritten digits with a residual network: the digits sample's data (8x8 images of counts
0..16, ten classes) through convolutions with BatchNorm and two residual blocks.

The network is a graph: a stem (a 3x3 convolution, BatchNorm, ReLU), a residual block (two
convolutions with BatchNorm, their output added to what came in), a 2x2 max-pool, a second
block, the mean over every place of each channel, and ten logits. It trains for EPOCHS epochs
(101 steps each: 3,220 training images in batches of 32) with AdamW, its rate a cosine decay
from 0.003 after a warm-up of the first 5 % of steps, and CrossEntropy with label smoothing 0.1;
`epochs=N` runs the first N epochs of that schedule.

    from deepsharp.core.samples import resnet
    run = resnet.run()           # the light engine, seed 42
    print(run.report)            # accuracy on the 1,797 test images
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from deepsharp.core.engine import Engine
from deepsharp.core.nn.graph import Input, Symbol
from deepsharp.core.nn.layers import Add, BatchNorm, Conv2D, Dense, GlobalAvgPool, MaxPool2D, Relu
from deepsharp.core.nn.losses import CrossEntropy
from deepsharp.core.nn.network import Network
from deepsharp.core.nn.optimizers import AdamW
from deepsharp.core.nn.optimizers.schedules import CosineDecay
from deepsharp.core.samples import digits
from deepsharp.core.training.loop import FitOptions, Run, fit

__all__ = ["EPOCHS", "FILTERS", "network", "optimizer", "run"]

FILTERS = 32
"""The channels of every convolution."""
EPOCHS = 30
STEPS_AN_EPOCH = 101
"""3,220 training images (digits.pipeline()'s split) in batches of 32."""


def _block(x: Symbol, filters: int) -> Symbol:
    """Two 3x3 convolutions with BatchNorm, their output added to x, then ReLU."""
    h = Relu()(BatchNorm()(Conv2D(filters, 3, padding="same", init="he_normal")(x)))
    h = BatchNorm()(Conv2D(filters, 3, padding="same", init="he_normal")(h))
    return Relu()(Add()([x, h]))


def network(filters: int = FILTERS) -> Network:
    """The residual network for images (1, 8, 8): stem, block, pool, block, mean, ten logits."""
    images = Input((1, 8, 8), name="pixels")
    h = Relu()(BatchNorm()(Conv2D(filters, 3, padding="same", init="he_normal")(images)))
    h = MaxPool2D()(_block(h, filters))
    h = GlobalAvgPool()(_block(h, filters))
    return Network(inputs=images, outputs=Dense(10)(h))


def optimizer() -> AdamW:
    """AdamW (weight decay 0.01), its rate warming up over the first 5 % of the run's steps, then
    falling along half a cosine from 0.003 to 0 at the end of epoch EPOCHS."""
    steps = EPOCHS * STEPS_AN_EPOCH
    return AdamW(CosineDecay(0.003, steps - steps // 20, warmup=steps // 20), weight_decay=0.01)


def run(
    engine: Engine | str | None = None,
    seed: int = 42,
    resume_from: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Run:
    """Train the sample on `engine` (the light engine when none is named) and measure it on the
    1,797 test images; `options` go to FitOptions (epochs=, checkpoint_dir=, ...), `resume_from`
    to fit. Its report ends with the prediction for the first test image."""
    tests = digits.rows("test")
    settings = {"epochs": EPOCHS, "patience": EPOCHS, **options}
    result = fit(
        digits.pipeline(),
        digits.rows("train"),
        network(),
        CrossEntropy(label_smoothing=0.1),
        optimizer(),
        FitOptions(seed=seed, engine=engine, **settings),
        test_rows=tests,
        resume_from=resume_from,
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

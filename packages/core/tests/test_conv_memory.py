"""Convolution steps do not leak: 2,000 steps leave the test engine's live bytes where 30 left them.

The test engine keeps every value outside Python's heap and counts what is alive, so a handle kept
by the recording, the optimizer or a rule shows as bytes that grow step after step. No
`gc.collect()`: the recording must hold no reference cycles, so everything is freed at once.
2,000 steps of 8 images 14x14 with 8 filters take a few seconds of one core on the test engine
(the handles a step makes do not depend on its sizes: small images keep the test engine's
single-precision totals cheap); a handle kept once in a few hundred steps still shows.
"""

from __future__ import annotations

import numpy as np
import pytest

from deepsharp.core import Adam, Conv2D, CrossEntropy, Dense, Flatten, Network, Relu, Trainer

testbuffer = pytest.importorskip("deepsharp.engines.testbuffer")

STEPS = 2_000
SETTLED = 30


@pytest.mark.once  # 2,000 steps: the same on every Python
def test_2000_convolution_steps_keep_live_bytes_where_they_were_after_30() -> None:
    engine = testbuffer.TestBufferEngine()
    network = Network([Conv2D(8, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 14, 14))
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    rng = np.random.default_rng(0)
    images = rng.random((8, 1, 14, 14), dtype=np.float32)
    classes = rng.integers(0, 10, size=8)

    for _ in range(SETTLED):
        trainer.step(images, classes)
    settled_bytes = engine.counters.live_bytes
    settled_buffers = engine.counters.live_buffers
    most = engine.counters.max_live_buffers
    assert settled_bytes > 0  # the slots and Adam's memory live on the engine

    losses = []
    for step in range(SETTLED + 1, STEPS + 1):
        losses.append(trainer.step(images, classes))
        if step % 250 == 0:  # say when it began to grow, not only that it did
            assert engine.counters.live_bytes == settled_bytes, f"after step {step}"
    assert engine.counters.live_bytes == settled_bytes
    assert engine.counters.live_buffers == settled_buffers
    assert engine.counters.max_live_buffers == most  # no step holds more at once than before
    assert np.isfinite(losses).all() and losses[-1] < losses[0]  # the steps did train

    trainer.close()
    del trainer
    assert engine.counters.live_bytes == 0  # closed: nothing of the run is left on the engine

"""Serving many chunks in one pass: only on an engine whose precision promises a row's prediction
the same bits in any company (strict), and then with exactly the bits of one chunk at a time."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from core_helpers import chunk_by_chunk, untrained

from deepsharp.core import (
    Conv2D,
    Dense,
    Flatten,
    Layer,
    MaxPool2D,
    Relu,
    Tensor,
    available_engines,
    make_engine,
)
from deepsharp.core.engine import describe_engine, precision_named
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.nn.layers import Pass
from deepsharp.core.serving import CHUNK


def _strict_engines() -> list[str]:
    """Every engine installed here at each precision that promises batch invariance (strict):
    light, and testbuffer and torch:cpu:strict where present."""
    found = []
    for name in available_engines():
        try:
            description = describe_engine(name)
            made = make_engine(description.default_spec)
        except EngineUnavailableError:
            continue
        specs = {description.default_spec: made.identity.precision}
        specs.update((description.spec_with(p), p) for p in description.precisions)
        found += [spec for spec, p in specs.items() if precision_named(p).batch_invariant]
    return found


class Shapes(Layer):
    """Passes its rows on, noting the shape of each pass it is run in (it moves no values, so a
    traced pass of it can be replayed)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, ...]] = []

    def forward(self, x: Tensor, slots: Mapping[str, Tensor], context: Pass) -> Tensor:
        self.seen.append(tuple(x.shape))
        return x


@pytest.mark.parametrize("engine", _strict_engines())
def test_many_chunks_a_pass_give_the_bits_of_one_chunk_at_a_time(engine: str) -> None:
    # The Titanic network's shape, rows spread over several orders of magnitude.
    trained = untrained([Dense(16), Relu(), Dense(2)], (14,), 11)
    generator = np.random.default_rng(12)
    rows = generator.standard_normal((10_000, 14)) * 10.0 ** generator.integers(-3, 4, (10_000, 1))
    served = trained.predict_features(rows.astype(np.float32), engine)
    assert served.tobytes() == chunk_by_chunk(trained, rows.astype(np.float32), engine).tobytes()


@pytest.mark.parametrize("engine", _strict_engines())
def test_many_images_a_pass_give_the_bits_of_one_chunk_at_a_time(engine: str) -> None:
    trained = untrained(
        [Conv2D(4, 3, padding="same"), Relu(), MaxPool2D(2), Flatten(), Dense(3)], (1, 8, 8), 11
    )
    images = np.random.default_rng(13).random((1_000, 1, 8, 8)).astype(np.float32)
    served = trained.predict_features(images, engine)
    assert served.tobytes() == chunk_by_chunk(trained, images, engine).tobytes()


def test_a_strict_engine_serves_many_chunks_a_pass() -> None:
    shapes = Shapes()
    trained = untrained([Dense(4), shapes, Dense(2)], (14,), 11)
    rows = np.random.default_rng(14).standard_normal((10_000, 14)).astype(np.float32)
    trained.predict_features(rows, "light")
    # The first chunk traced alone, then a pass of many chunks traced and replayed; the last,
    # shorter pass runs through the layers.
    assert shapes.seen[0] == (CHUNK, 4)
    assert len(shapes.seen) == 3 and shapes.seen[1][0] > CHUNK and shapes.seen[1][0] % CHUNK == 0
    assert shapes.seen[2][0] < shapes.seen[1][0]


def test_a_float32_engine_serves_32_rows_a_pass() -> None:
    """Its bits may depend on a row's company, so every pass is one chunk, traced once."""
    shapes = Shapes()
    trained = untrained([Dense(4), shapes, Dense(2)], (3,), 11)
    rows = np.random.default_rng(15).standard_normal((1_000, 3)).astype(np.float32)
    served = trained.predict_features(rows, "light:float32")
    assert shapes.seen == [(CHUNK, 4)]
    assert served.tobytes() == chunk_by_chunk(trained, rows, "light:float32").tobytes()

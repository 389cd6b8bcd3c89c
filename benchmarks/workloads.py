"""The workloads, written once for deepsharp and once for each peer a user would pick instead.

A `Workload` is one training step measured on deepsharp's engines beside a peer (plain PyTorch
eager with torch.optim.Adam for the seed workloads): its name, a line for the docs, a maker of
deepsharp's step for an engine spec, a maker of the peer's step, and which engines it runs on.
Every step takes fresh copies of its rows, as a user's loop would hand it new ones.

- `SEED`: the three seed workloads (docs/design.md, "Checks and benchmarks"), timed and held to
  goals by `test_steps.py`.
- `SCALING`: how cost grows: the Titanic-shaped step at 1 to 4,096 rows, the convolution step
  at 32 to 256 images, timed by `test_scaling.py` (`nox -s scaling`) for the docs' tables.

- `mixed_workloads.MIXED`: mixed precision's steps beside PyTorch's autocast, timed and held to
  goals by `test_mixed.py`.

A new workload is one more `Workload` in `SEED` (or a list of its own) naming its engines; its
goals go in `test_steps.LIMITS` and `GUARDS`. benchmarks/README.md says how.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    Conv2D,
    CrossEntropy,
    Dense,
    Flatten,
    Network,
    Relu,
    Trainer,
)

Step = Callable[[], object]

PYTORCH = "PyTorch eager"
"""The seed workloads' peer: torch.nn and torch.optim.Adam, the same model, its default threads."""


@dataclass(frozen=True)
class Workload:
    """One step measured on deepsharp's engines beside a peer, in the same interleaved rounds.

    `engines`: the specs it runs on, where present (None: every engine present at every
    precision but the mixed ones, see `bench_support.engine_specs`). `rounds`: how many
    interleaved rounds its ratios are the median of."""

    name: str
    title: str
    step: Callable[[str], Step]
    peer: Callable[[], Step]
    peer_name: str = PYTORCH
    engines: Sequence[str] | None = None
    rounds: int = 9
    group: str = ""
    size: int = 0
    """For scaling tables: the table (`group`) and the size of the work (rows or images)."""
    references: Mapping[str, Callable[[], Step]] = field(default_factory=dict)
    """Other peers' steps timed in the same rounds, for scale (PyTorch's float32 step beside
    its autocast peer): name -> maker."""


# --- the batches ---------------------------------------------------------------------------


def titanic_batch(rows: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((rows, 14)).astype(np.float32),
        (rng.random((rows, 1)) > 0.5).astype(np.float32),
    )


def image_batch(count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((count, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, count)


# --- deepsharp's steps ---------------------------------------------------------------------


def titanic_trainer(engine: Any) -> Trainer:
    """The Titanic network: Dense 16, ReLU, Dense 1, BCE, Adam(0.001)."""
    network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=0)


def conv_trainer(engine: Any, filters: int) -> Trainer:
    """The convolution network: Conv 3x3, ReLU, Flatten, Dense 10, cross entropy, Adam."""
    network = Network([Conv2D(filters, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 28, 28))
    return Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)


def titanic_step(engine: Any, rows: int = 32) -> Step:
    """A Titanic step with fresh copies of the rows."""
    features, targets = titanic_batch(rows)
    trainer = titanic_trainer(engine)
    return lambda: trainer.step(features.copy(), targets.copy())


def conv_step(engine: Any, count: int, filters: int) -> Step:
    """A convolution step over `count` images with fresh copies of them."""
    images, classes = image_batch(count)
    trainer = conv_trainer(engine, filters)
    return lambda: trainer.step(images.copy(), classes.copy())


# --- the peer: plain PyTorch eager ---------------------------------------------------------


def torch_step(
    model: Any, loss: Any, rows: Any, targets: Any, device: str, autocast: bool = False
) -> Step:
    """Plain PyTorch eager: torch.optim.Adam, autograd, fresh copies of the rows each step;
    under `autocast` the forward pass in `torch.autocast(device, bfloat16)`, its slots float32
    (PyTorch's own mixed precision)."""
    import torch

    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
    kind = device.split(":")[0]

    def step() -> float:
        x = torch.from_numpy(rows.copy()).to(device)
        y = torch.from_numpy(targets.copy()).to(device)
        optimizer.zero_grad()
        with torch.autocast(kind, dtype=torch.bfloat16, enabled=autocast):
            value = loss(model(x), y)
        value.backward()
        optimizer.step()
        return float(value.item())

    return step


def torch_titanic_step(rows: int = 32, device: str = "cpu", autocast: bool = False) -> Step:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(14, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return torch_step(model, torch.nn.BCEWithLogitsLoss(), *titanic_batch(rows), device, autocast)


def torch_conv_step(count: int, filters: int, device: str = "cpu", autocast: bool = False) -> Step:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, filters, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(filters * 26 * 26, 10),
    )
    return torch_step(model, torch.nn.CrossEntropyLoss(), *image_batch(count), device, autocast)


# --- the workloads -------------------------------------------------------------------------

CONV = "Conv 3×3, ReLU, Flatten, Dense 10, cross entropy, Adam"


def titanic(rows: int = 32, rounds: int = 9) -> Workload:
    return Workload(
        name="titanic" if rows == 32 else f"titanic-{rows}",
        title=f"Titanic: {rows:,} rows × 14 features, Dense 16, ReLU, Dense 1, BCE, Adam",
        step=lambda engine: titanic_step(engine, rows),
        peer=lambda: torch_titanic_step(rows),
        rounds=rounds,
        group="titanic",
        size=rows,
    )


def convolution(images: int, filters: int, rounds: int = 9) -> Workload:
    return Workload(
        name=f"conv-{images}x{filters}",
        title=f"Convolution: {images} images 1×28×28, {filters} filters 3×3; {CONV}",
        step=lambda engine: conv_step(engine, images, filters),
        peer=lambda: torch_conv_step(images, filters),
        rounds=rounds,
        group=f"conv-{filters}",
        size=images,
    )


SEED = [titanic(32, rounds=11), convolution(32, 8, rounds=9), convolution(256, 32, rounds=9)]
"""The seed workloads (docs/design.md, "Checks and benchmarks"), in the order the docs give them."""

SCALING = [titanic(rows, rounds=7) for rows in (1, 32, 256, 4096)] + [
    convolution(images, 8, rounds=7) for images in (32, 64, 128, 256)
]
"""How cost grows with the work: rows a step, images a step (8 filters)."""

SCALING_ENGINES = ("light", "light:float32", "torch:cpu", "torch:cpu:strict")
"""The scaling tables' engines (the test engine is measured on the seed workloads only)."""

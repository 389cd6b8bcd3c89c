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

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deepsharp.core import (
    LSTM,
    Adam,
    BinaryCrossEntropy,
    Conv2D,
    CrossEntropy,
    Dense,
    Flatten,
    Input,
    MeanSquaredError,
    Network,
    Relu,
    Trainer,
    TransformerBlock,
)

Step = Callable[[], object]

PYTORCH = "PyTorch eager"
"""The seed workloads' peer: torch.nn and torch.optim.Adam, the same model, its default threads."""
TORCH_COMPILE = "torch.compile"
"""The second peer: the same PyTorch step with its model through `torch.compile` (inductor, its
defaults), timed in the same rounds once compiled; its compile time is kept out and stated."""
FLOOR = "NumPy by hand"
"""The name of a workload's `floor` (the step written by hand in NumPy) where it is timed."""
COMPILED = os.environ.get("DEEPSHARP_BENCHMARK_COMPILE", "0") == "1"
"""Whether torch.compile is timed: in the run that publishes the page (`nox -s benchmarks --
--publish` sets DEEPSHARP_BENCHMARK_COMPILE=1), not in the default matrix's guard run, where its
compiles (about a minute on 2 cores) and its rounds would take CI past its 20 minutes."""


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
    floor: Callable[[], Step] | None = None
    """The same step written by hand in NumPy (no framework, no checks), where there is one:
    profiled beside the engine's and PyTorch's (`profile_steps.py`), the floor a goal near it
    is measured against."""


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


def numpy_titanic_step(rows: int = 32) -> Step:
    """The Titanic step written by hand in NumPy at float32, as a user would write it with no
    framework: the same network, slots (drawn by deepsharp's trainer from seed 0), loss and
    Adam as `titanic_step`, and no checks of the rows — the floor of what a step costs in
    NumPy's calls. Fresh copies of the rows each step, as the others take."""
    features, targets = titanic_batch(rows)
    trainer = titanic_trainer("light:float32")
    trainer.start((14,))
    drawn, _ = trainer.network.values()
    slots = [
        np.array(drawn[name], np.float32)
        for name in ("dense.weights", "dense.bias", "dense_1.weights", "dense_1.bias")
    ]
    firsts = [np.zeros_like(slot) for slot in slots]
    seconds = [np.zeros_like(slot) for slot in slots]
    beta1, beta2, epsilon = np.float32(0.9), np.float32(0.999), np.float32(1e-7)
    steps = [0]

    def step() -> float:
        x, y = features.copy(), targets.copy()
        w1, b1, w2, b2 = slots
        h = x @ w1
        h += b1
        a = np.maximum(h, np.float32(0))
        z = a @ w2
        z += b2
        loss = np.mean(np.maximum(z, np.float32(0)) - z * y + np.log1p(np.exp(-np.abs(z))))
        gz = (np.float32(1) / (np.float32(1) + np.exp(-z)) - y) / np.float32(rows)
        ga = gz @ w2.T
        ga *= h > 0
        grads = (x.T @ ga, ga.sum(0), a.T @ gz, gz.sum(0))
        steps[0] += 1
        t = steps[0]
        size = np.float32(0.001 * np.sqrt(1.0 - 0.999**t) / (1.0 - 0.9**t))
        for slot, grad, first, second in zip(slots, grads, firsts, seconds):
            first += (grad - first) * (np.float32(1) - beta1)
            second += (grad * grad - second) * (np.float32(1) - beta2)
            slot -= size * first / (np.sqrt(second) + epsilon)
        return float(loss)

    step.slots = slots  # type: ignore[attr-defined]
    return step


# --- the peer: plain PyTorch eager ---------------------------------------------------------


def torch_step(
    model: Any,
    loss: Any,
    rows: Any,
    targets: Any,
    device: str,
    autocast: bool = False,
    compiled: bool = False,
) -> Step:
    """Plain PyTorch eager: torch.optim.Adam, autograd, fresh copies of the rows each step;
    under `autocast` the forward pass in `torch.autocast(device, bfloat16)`, its slots float32
    (PyTorch's own mixed precision). `compiled`: the model through `torch.compile` (its
    defaults: inductor), what a user who wants PyTorch faster reaches for; the step's first
    call compiles (`step.compile_seconds` says how long), and is kept out of the timing."""
    import torch

    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
    kind = device.split(":")[0]
    forward = torch.compile(model) if compiled else model

    def step() -> float:
        x = torch.from_numpy(rows.copy()).to(device)
        y = torch.from_numpy(targets.copy()).to(device)
        optimizer.zero_grad()
        with torch.autocast(kind, dtype=torch.bfloat16, enabled=autocast):
            value = loss(forward(x), y)
        value.backward()
        optimizer.step()
        return float(value.item())

    if compiled:
        started = time.perf_counter()
        step()  # compiles the forward pass and its way back
        step.compile_seconds = round(time.perf_counter() - started, 2)  # type: ignore[attr-defined]
    return step


def torch_titanic_step(
    rows: int = 32, device: str = "cpu", autocast: bool = False, compiled: bool = False
) -> Step:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(14, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return torch_step(
        model, torch.nn.BCEWithLogitsLoss(), *titanic_batch(rows), device, autocast, compiled
    )


def torch_conv_step(
    count: int, filters: int, device: str = "cpu", autocast: bool = False, compiled: bool = False
) -> Step:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, filters, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(filters * 26 * 26, 10),
    )
    return torch_step(
        model, torch.nn.CrossEntropyLoss(), *image_batch(count), device, autocast, compiled
    )


# --- the sequence and residual workloads (issue 20's speed, issue 23's table) -----------------

RESIDUAL_IMAGES = 32
"""The residual step's batch: the resnet sample's 1x8x8 images, its batch size."""
TOKENS, WIDTH, HEADS, HIDDEN = 64, 128, 4, 512
"""The transformer block's step: 32 sequences of 64 positions, 128 wide, 4 heads, 512 inner."""
STEPS, UNITS = 50, 64
"""The LSTM step: 32 sequences of 50 steps of 64 values, 64 units."""
SEQUENCES = 32


def residual_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 17, (RESIDUAL_IMAGES, 1, 8, 8)).astype(np.float32) / 16.0
    return images, rng.integers(0, 10, RESIDUAL_IMAGES)


def block_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SEQUENCES, TOKENS, WIDTH)).astype(np.float32)
    return x, rng.standard_normal((SEQUENCES, TOKENS * WIDTH)).astype(np.float32)


def lstm_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SEQUENCES, STEPS, UNITS)).astype(np.float32)
    return x, rng.integers(0, 10, SEQUENCES)


def residual_step(engine: Any) -> Step:
    """The resnet sample's network (stem, two residual blocks with BatchNorm, max-pool, mean,
    ten logits), cross entropy, Adam."""
    from deepsharp.core.samples import resnet

    images, classes = residual_batch()
    trainer = Trainer(resnet.network(), CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    return lambda: trainer.step(images.copy(), classes.copy())


def block_step(engine: Any) -> Step:
    """A pre-norm TransformerBlock (4 heads, 512 inner), its output against a target by the
    squared error, Adam."""
    x = Input((TOKENS, WIDTH))
    network = Network(inputs=x, outputs=Flatten()(TransformerBlock(HEADS, HIDDEN)(x)))
    rows, targets = block_batch()
    trainer = Trainer(network, MeanSquaredError(), Adam(0.001), engine=engine, seed=0)
    return lambda: trainer.step(rows.copy(), targets.copy())


def lstm_step(engine: Any) -> Step:
    """LSTM(64) over 50 steps, its last output through Dense(10), cross entropy, Adam."""
    network = Network([LSTM(UNITS), Dense(10)], inputs=(STEPS, UNITS))
    rows, classes = lstm_batch()
    trainer = Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    return lambda: trainer.step(rows.copy(), classes.copy())


def torch_residual_model() -> Any:
    """The resnet sample's network in torch.nn (BatchNorm as Keras's: momentum 0.01 in
    PyTorch's convention, epsilon 1e-3)."""
    import torch

    nn = torch.nn
    filters = 32

    def bn() -> Any:
        return nn.BatchNorm2d(filters, eps=1e-3, momentum=0.01)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.one = nn.Conv2d(filters, filters, 3, padding=1)
            self.two = nn.Conv2d(filters, filters, 3, padding=1)
            self.bn_one, self.bn_two = bn(), bn()

        def forward(self, x: Any) -> Any:
            h = torch.relu(self.bn_one(self.one(x)))
            return torch.relu(x + self.bn_two(self.two(h)))

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.bn = nn.Conv2d(1, filters, 3, padding=1), bn()
            self.first, self.second = Block(), Block()
            self.out = nn.Linear(filters, 10)

        def forward(self, x: Any) -> Any:
            h = self.first(torch.relu(self.bn(self.stem(x))))
            h = self.second(torch.nn.functional.max_pool2d(h, 2))
            return self.out(h.mean((2, 3)))

    return Residual()


def torch_residual_step(
    device: str = "cpu", autocast: bool = False, compiled: bool = False
) -> Step:
    import torch

    torch.manual_seed(0)
    return torch_step(
        torch_residual_model(),
        torch.nn.CrossEntropyLoss(),
        *residual_batch(),
        device,
        autocast,
        compiled,
    )


def torch_block_step(device: str = "cpu", autocast: bool = False, compiled: bool = False) -> Step:
    """PyTorch's own pre-norm block: nn.TransformerEncoderLayer (norm first, exact GELU, no
    dropout), flattened, the squared error."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        WIDTH, HEADS, HIDDEN, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    model = torch.nn.Sequential(layer, torch.nn.Flatten())
    return torch_step(model, torch.nn.MSELoss(), *block_batch(), device, autocast, compiled)


def torch_lstm_model() -> Any:
    import torch

    class Last(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(UNITS, UNITS, batch_first=True)
            self.out = torch.nn.Linear(UNITS, 10)

        def forward(self, x: Any) -> Any:
            return self.out(self.lstm(x)[0][:, -1])

    return Last()


def torch_lstm_step(device: str = "cpu", autocast: bool = False, compiled: bool = False) -> Step:
    """PyTorch's nn.LSTM (its fused kernel on the processor), the last output through a
    Linear(64, 10), cross entropy."""
    import torch

    torch.manual_seed(0)
    return torch_step(
        torch_lstm_model(), torch.nn.CrossEntropyLoss(), *lstm_batch(), device, autocast, compiled
    )


# --- the workloads -------------------------------------------------------------------------


def compile_peer(make: Callable[[], Step]) -> dict[str, Callable[[], Step]]:
    """torch.compile's step as a workload's second peer, where it is timed (COMPILED)."""
    return {TORCH_COMPILE: make} if COMPILED else {}


CONV = "Conv 3×3, ReLU, Flatten, Dense 10, cross entropy, Adam"


def titanic(rows: int = 32, rounds: int = 9, compiled: bool = False) -> Workload:
    return Workload(
        name="titanic" if rows == 32 else f"titanic-{rows}",
        title=f"Titanic: {rows:,} rows × 14 features, Dense 16, ReLU, Dense 1, BCE, Adam",
        step=lambda engine: titanic_step(engine, rows),
        peer=lambda: torch_titanic_step(rows),
        rounds=rounds,
        group="titanic",
        size=rows,
        references=compile_peer(lambda: torch_titanic_step(rows, compiled=True))
        if compiled
        else {},
        floor=lambda: numpy_titanic_step(rows),
    )


def convolution(images: int, filters: int, rounds: int = 9, compiled: bool = False) -> Workload:
    return Workload(
        name=f"conv-{images}x{filters}",
        title=f"Convolution: {images} images 1×28×28, {filters} filters 3×3; {CONV}",
        step=lambda engine: conv_step(engine, images, filters),
        peer=lambda: torch_conv_step(images, filters),
        rounds=rounds,
        group=f"conv-{filters}",
        size=images,
        references=compile_peer(lambda: torch_conv_step(images, filters, compiled=True))
        if compiled
        else {},
    )


RESIDUAL = (
    f"Residual: {RESIDUAL_IMAGES} images 1×8×8, the resnet sample's network (3×3 convolutions "
    "with BatchNorm, two residual blocks, max-pool, mean, Dense 10), cross entropy, Adam"
)
BLOCK = (
    f"Transformer block: {SEQUENCES} sequences × {TOKENS} tokens × {WIDTH} wide, pre-norm, "
    f"{HEADS} heads, {HIDDEN} inner (GELU), squared error, Adam"
)
RECURRENT = (
    f"LSTM: {SEQUENCES} sequences × {STEPS} steps × {UNITS} values, {UNITS} units, the last "
    "output through Dense 10, cross entropy, Adam"
)

SEED = [
    titanic(32, rounds=11, compiled=True),
    convolution(32, 8, rounds=9, compiled=True),
    convolution(256, 32, rounds=9, compiled=True),
    Workload(
        name="residual",
        title=RESIDUAL,
        step=residual_step,
        peer=torch_residual_step,
        engines=("light", "light:float32", "torch:cpu"),
        rounds=7,
        references=compile_peer(lambda: torch_residual_step(compiled=True)),
    ),
    Workload(
        name="transformer",
        title=BLOCK,
        step=block_step,
        peer=torch_block_step,
        engines=("light:float32", "torch:cpu"),
        rounds=7,
        references=compile_peer(lambda: torch_block_step(compiled=True)),
    ),
    Workload(
        name="lstm",
        title=RECURRENT,
        step=lstm_step,
        peer=torch_lstm_step,
        engines=("light:float32", "torch:cpu"),
        rounds=7,
        references=compile_peer(lambda: torch_lstm_step(compiled=True)),
    ),
]
"""The seed workloads (docs/design.md, "Checks and benchmarks") and the residual, transformer and
LSTM steps, in the order the docs give them; each beside PyTorch eager and torch.compile."""

SCALING = [titanic(rows, rounds=7) for rows in (1, 32, 256, 4096)] + [
    convolution(images, 8, rounds=7) for images in (32, 64, 128, 256)
]
"""How cost grows with the work: rows a step, images a step (8 filters)."""

SCALING_ENGINES = ("light", "light:float32", "torch:cpu", "torch:cpu:strict")
"""The scaling tables' engines (the test engine is measured on the seed workloads only)."""

"""The seed workloads, written once for deepsharp and once for plain PyTorch (the peer)."""

from __future__ import annotations

from collections.abc import Callable
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


def titanic_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((32, 14)).astype(np.float32),
        (rng.random((32, 1)) > 0.5).astype(np.float32),
    )


def image_batch(count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((count, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, count)


def titanic_trainer(engine: Any) -> Trainer:
    """The Titanic network: Dense 16, ReLU, Dense 1, BCE, Adam(0.001)."""
    network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=0)


def conv_trainer(engine: Any, filters: int) -> Trainer:
    """The convolution network: Conv 3x3, ReLU, Flatten, Dense 10, cross entropy, Adam."""
    network = Network([Conv2D(filters, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 28, 28))
    return Trainer(network, CrossEntropy(), Adam(0.001), engine=engine, seed=0)


def titanic_step(engine: Any) -> Callable[[], float]:
    """A Titanic step with fresh copies of the rows."""
    rows, answers = titanic_batch()
    trainer = titanic_trainer(engine)
    return lambda: trainer.step(rows.copy(), answers.copy())


def conv_step(engine: Any, count: int, filters: int) -> Callable[[], float]:
    """A convolution step over `count` images with fresh copies of them."""
    images, classes = image_batch(count)
    trainer = conv_trainer(engine, filters)
    return lambda: trainer.step(images.copy(), classes.copy())


def _torch_step(model: Any, loss: Any, rows: Any, answers: Any, device: str) -> Callable[[], float]:
    """Plain PyTorch eager: torch.optim.Adam, autograd, fresh copies of the rows each step."""
    import torch

    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)

    def step() -> float:
        x = torch.from_numpy(rows.copy()).to(device)
        y = torch.from_numpy(answers.copy()).to(device)
        optimizer.zero_grad()
        value = loss(model(x), y)
        value.backward()
        optimizer.step()
        return float(value.item())

    return step


def torch_titanic_step(device: str = "cpu") -> Callable[[], float]:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(14, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return _torch_step(model, torch.nn.BCEWithLogitsLoss(), *titanic_batch(), device)


def torch_conv_step(count: int, filters: int, device: str = "cpu") -> Callable[[], float]:
    import torch

    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, filters, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(filters * 26 * 26, 10),
    )
    return _torch_step(model, torch.nn.CrossEntropyLoss(), *image_batch(count), device)

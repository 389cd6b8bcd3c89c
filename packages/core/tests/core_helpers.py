"""Shared pieces of the core's tests (importable: conftest puts this folder on the path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deepsharp.core import (
    Adam,
    BinaryCrossEntropy,
    CrossEntropy,
    Dense,
    FitOptions,
    Layer,
    Network,
    Optimizer,
    Relu,
    Run,
    Tanh,
    Trainer,
    fit,
    make_engine,
)
from deepsharp.core.data.pipeline import Pipeline
from deepsharp.core.nn.predicting import Predictor
from deepsharp.core.random import Generator
from deepsharp.core.samples import digits, titanic
from deepsharp.core.serving import CHUNK, TrainedNetwork

ROOT = Path(__file__).resolve().parents[3]

XOR_ROWS = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
XOR_TARGETS = np.array([[0], [1], [1], [0]], np.float32)


def xor_trainer(seed: int = 0, engine: object = None) -> Trainer:
    network = Network([Dense(8), Tanh(), Dense(1)])
    return Trainer(network, BinaryCrossEntropy(), Adam(0.05), engine=engine, seed=seed)


def titanic_shaped(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """32 rows of 14 features and their 0/1 targets, from a fixed NumPy generator."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((32, 14)).astype(np.float32)
    targets = (rng.random((32, 1)) > 0.5).astype(np.float32)
    return rows, targets


def titanic_trainer(seed: int = 0, engine: object = None) -> Trainer:
    network = Network([Dense(16), Relu(), Dense(1)], inputs=14)
    return Trainer(network, BinaryCrossEntropy(), Adam(0.001), engine=engine, seed=seed)


def fit_titanic(
    options: FitOptions,
    network: Network | None = None,
    optimizer: Optimizer | None = None,
    **extra: Any,
) -> Run:
    """The Titanic sample's run with these options: its rows, pipeline and network (or
    `network`), binary cross-entropy and Adam(0.001) (or `optimizer`); `extra` goes to fit
    (resume_from=, on_epoch=, callbacks=)."""
    return fit(
        titanic.pipeline(),
        titanic.rows(),
        titanic.network() if network is None else network,
        BinaryCrossEntropy(),
        Adam(0.001) if optimizer is None else optimizer,
        options,
        **extra,
    )


def untrained(layers: list[Layer], inputs: tuple[int, ...], seed: int) -> TrainedNetwork:
    """A network of these layers, its slots drawn from `seed`, ready to serve (cross-entropy's
    link, a pipeline of arrays)."""
    network = Network(layers, inputs=inputs)
    network.initialize(Generator(seed))
    return TrainedNetwork(network, CrossEntropy(), Pipeline())


def chunk_by_chunk(trained: TrainedNetwork, features: np.ndarray, engine: str) -> np.ndarray:
    """The predictions with every chunk of CHUNK rows run through the layers on its own
    (nothing replayed, no two chunks in one pass)."""
    count = features.shape[0]
    padded = -(-count // CHUNK) * CHUNK
    rows = np.concatenate([features, np.zeros((padded - count, *features.shape[1:]), np.float32)])
    served = Predictor(trained.network, trained.loss, make_engine(engine))
    chunks = [served.predict(rows[i : i + CHUNK]) for i in range(0, padded, CHUNK)]
    return np.concatenate(chunks)[:count]


def optdigits(part: str) -> tuple[np.ndarray, np.ndarray]:
    """The digits as arrays, as scikit-learn's load_digits gives them: x (N, 64) counts 0..16."""
    table = digits._table(part)
    return table[:, :64].astype(np.float64), table[:, 64]


def quick(**extra: Any) -> FitOptions:
    return FitOptions(**{"seed": 3, "epochs": 4, "patience": 100, "progress": False, **extra})


def dense_digits() -> Network:
    return Network([Dense(32), Relu(), Dense(10)])


def binary_rows(count: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Rows of 5 features and a noisy binary target of the first two."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((count, 5)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] + 0.3 * rng.standard_normal(count) > 0).astype(np.float32)


def slot_bits(run: Run) -> bytes:
    """A run's trained slots' bytes, in the order of their names."""
    slots = run.trained.network.slots
    return b"".join(slots[name].tobytes() for name in sorted(slots))

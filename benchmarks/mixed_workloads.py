"""Mixed precision's workloads, for deepsharp and for its peers (plain PyTorch eager in float32,
and PyTorch's own mixed precision: `torch.autocast("cpu", dtype=torch.bfloat16)` with float32
master weights and `torch.optim.Adam`).

- the dense network: 4,096 rows x 1,024 features, three Dense(1,024) + ReLU, Dense(10), cross
  entropy, Adam;
- the convolution steps of the seed workloads (32 images x 8 filters, 256 x 32): Conv 3x3, ReLU,
  Flatten, Dense 10, cross entropy, Adam (`workloads.conv_step`);
- the Titanic step (`workloads.titanic_step`);
- serving: the dense network's predictions for 4,096 rows, without recording.

Every step takes fresh copies of its rows, as the seed workloads do. `python
benchmarks/mixed_speed.py` times them against each other (see its docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from deepsharp.core import Adam, CrossEntropy, Dense, Network, Relu, Trainer
from workloads import image_batch, titanic_batch

__all__ = [
    "DENSE_FEATURES",
    "DENSE_ROWS",
    "dense_batch",
    "dense_network",
    "dense_serving",
    "dense_step",
    "torch_conv_step",
    "torch_dense_model",
    "torch_dense_serving",
    "torch_dense_step",
    "torch_titanic_step",
]

DENSE_ROWS, DENSE_FEATURES, DENSE_WIDTH = 4096, 1024, 1024


def dense_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((DENSE_ROWS, DENSE_FEATURES)).astype(np.float32)
    return rows, rng.integers(0, 10, DENSE_ROWS)


def dense_network() -> Network:
    """Three Dense(1,024) + ReLU, then Dense(10) (ten logits; softmax is the loss's link)."""
    layers: list[Any] = []
    for _ in range(3):
        layers += [Dense(DENSE_WIDTH), Relu()]
    return Network([*layers, Dense(10)], inputs=DENSE_FEATURES)


def dense_step(engine: Any) -> Callable[[], float]:
    """A training step of the dense network on `engine`, with fresh copies of the rows."""
    rows, classes = dense_batch()
    trainer = Trainer(dense_network(), CrossEntropy(), Adam(0.001), engine=engine, seed=0)
    return lambda: trainer.step(rows.copy(), classes.copy())


def dense_serving(engine: Any) -> Callable[[], np.ndarray]:
    """The dense network's probabilities for the 4,096 rows on `engine`, in one pass
    (`Network.served`: the slots bound once, then one transfer in and one out a call)."""
    rows, _ = dense_batch()
    network, loss = dense_network(), CrossEntropy()
    Trainer(network, loss, Adam(0.001), seed=0).close()  # its slots, drawn from the seed
    serving = network.served(loss, engine)
    served = serving.__enter__()

    def serve() -> np.ndarray:
        assert serving is not None  # held for as long as the function lives
        return served.predict(rows.copy())

    return serve


# --- the peers: plain PyTorch ------------------------------------------------------------------


def torch_dense_model() -> Any:
    import torch

    layers: list[Any] = []
    width = DENSE_FEATURES
    for _ in range(3):
        layers += [torch.nn.Linear(width, DENSE_WIDTH), torch.nn.ReLU()]
        width = DENSE_WIDTH
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def _torch_step(
    model: Any, loss: Any, rows: np.ndarray, targets: np.ndarray, autocast: bool
) -> Callable[[], float]:
    """PyTorch eager: autograd, torch.optim.Adam (Keras's epsilon), fresh copies of the rows;
    under `autocast` the forward pass in torch.autocast("cpu", bfloat16), the slots float32."""
    import torch

    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)

    def step() -> float:
        x, y = torch.from_numpy(rows.copy()), torch.from_numpy(targets.copy())
        optimizer.zero_grad()
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                value = loss(model(x), y)
        else:
            value = loss(model(x), y)
        value.backward()
        optimizer.step()
        return float(value.detach())

    return step


def torch_dense_step(autocast: bool = False) -> Callable[[], float]:
    import torch

    torch.manual_seed(0)
    return _torch_step(torch_dense_model(), torch.nn.CrossEntropyLoss(), *dense_batch(), autocast)


def torch_conv_step(count: int, filters: int, autocast: bool = False) -> Callable[[], float]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, filters, 3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(filters * 26 * 26, 10),
    )
    return _torch_step(model, torch.nn.CrossEntropyLoss(), *image_batch(count), autocast)


def torch_titanic_step(autocast: bool = False) -> Callable[[], float]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(14, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return _torch_step(model, torch.nn.BCEWithLogitsLoss(), *titanic_batch(), autocast)


def torch_dense_serving(autocast: bool = False) -> Callable[[], np.ndarray]:
    """PyTorch's inference on the dense network: no_grad, softmax, float32 answers on the host."""
    import torch

    torch.manual_seed(0)
    model = torch_dense_model()
    rows, _ = dense_batch()

    def serve() -> np.ndarray:
        with torch.no_grad():
            x = torch.from_numpy(rows.copy())
            if autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = model(x)
            else:
                logits = model(x)
            out: np.ndarray = torch.softmax(logits.float(), 1).numpy()
            return out

    return serve

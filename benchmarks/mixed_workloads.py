"""Mixed precision's workloads, for deepsharp and for its peers (plain PyTorch eager in float32,
and PyTorch's own mixed precision: `torch.autocast("cpu", dtype=torch.bfloat16)` with float32
master weights and `torch.optim.Adam`).

- the dense network: 4,096 rows x 1,024 features, three Dense(1,024) + ReLU, Dense(10), cross
  entropy, Adam;
- the convolution steps of the seed workloads (32 images x 8 filters, 256 x 32): Conv 3x3, ReLU,
  Flatten, Dense 10, cross entropy, Adam (`workloads.conv_step`);
- the Titanic step (`workloads.titanic_step`);
- the transformer block and the LSTM step (`workloads.block_step`, `workloads.lstm_step`);
- serving: the dense network's predictions for 4,096 rows, without recording.

Every step takes fresh copies of its rows, as the seed workloads do. `MIXED` holds them as
workloads: torch:cpu:mixed_bfloat16 and torch:cpu (float32) beside PyTorch's autocast step, with
PyTorch's float32 step timed in the same rounds for scale; `test_mixed.py` holds them to their
goals in `nox -s benchmarks`. `python benchmarks/mixed_speed.py --profile` shows where each
side's time goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from deepsharp.core import Adam, CrossEntropy, Dense, Network, Relu, Trainer
from deepsharp.core.nn.predicting import Predictor
from workloads import (
    BLOCK,
    CONV,
    RECURRENT,
    Step,
    Workload,
    block_step,
    conv_step,
    lstm_step,
    titanic_step,
    torch_block_step,
    torch_conv_step,
    torch_lstm_step,
    torch_step,
    torch_titanic_step,
)

__all__ = [
    "AUTOCAST",
    "DENSE_FEATURES",
    "DENSE_ROWS",
    "MIXED",
    "dense_batch",
    "dense_network",
    "dense_serving",
    "dense_step",
    "torch_dense_model",
    "torch_dense_serving",
    "torch_dense_step",
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
    (`Predictor`: the slots put once, then one transfer in and one out a call)."""
    rows, _ = dense_batch()
    network, loss = dense_network(), CrossEntropy()
    Trainer(network, loss, Adam(0.001), seed=0).close()  # its slots, drawn from the seed
    predictor = Predictor(network, loss, engine)
    return lambda: predictor.predict(rows.copy())


# --- the peers: plain PyTorch ------------------------------------------------------------------


def torch_dense_model() -> Any:
    import torch

    layers: list[Any] = []
    width = DENSE_FEATURES
    for _ in range(3):
        layers += [torch.nn.Linear(width, DENSE_WIDTH), torch.nn.ReLU()]
        width = DENSE_WIDTH
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def torch_dense_step(autocast: bool = False, device: str = "cpu") -> Callable[[], float]:
    import torch

    torch.manual_seed(0)
    rows, classes = dense_batch()
    step = torch_step(
        torch_dense_model(), torch.nn.CrossEntropyLoss(), rows, classes, device, autocast
    )
    return lambda: float(step())


def torch_dense_serving(autocast: bool = False) -> Callable[[], np.ndarray]:
    """PyTorch's inference on the dense network: no_grad, softmax, float32 predictions on the
    host."""
    import torch

    torch.manual_seed(0)
    model = torch_dense_model()
    rows, _ = dense_batch()

    def serve() -> np.ndarray:
        with torch.no_grad():
            x = torch.from_numpy(rows.copy())
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                logits = model(x)
            out: np.ndarray = torch.softmax(logits.float(), 1).numpy()
            return out

    return serve


# --- the workloads -----------------------------------------------------------------------------

AUTOCAST = 'PyTorch eager, autocast("cpu", bfloat16)'
"""The mixed workloads' peer: PyTorch's own mixed precision, float32 master weights."""
PYTORCH_FLOAT32 = "PyTorch eager, float32"
ENGINES = ("torch:cpu:mixed_bfloat16", "torch:cpu")
DENSE = "Dense: 4,096 rows × 1,024 features, 3 × (Dense 1,024, ReLU), Dense 10, cross entropy, Adam"


def mixed(
    name: str,
    title: str,
    step: Callable[[str], Step],
    pytorch: Callable[[bool], Step],
    rounds: int,
) -> Workload:
    """A mixed workload: deepsharp's `step` on both engines, `pytorch(autocast)` the peer's
    (autocast, the peer; float32, timed beside it for scale)."""
    return Workload(
        name=name,
        title=title,
        step=step,
        peer=lambda: pytorch(True),
        peer_name=AUTOCAST,
        engines=ENGINES,
        rounds=rounds,
        references={PYTORCH_FLOAT32: lambda: pytorch(False)},
    )


def _convolution(images: int, filters: int, rounds: int) -> Workload:
    return mixed(
        f"mixed-conv-{images}x{filters}",
        f"Convolution: {images} images 1×28×28, {filters} filters 3×3; {CONV}",
        lambda engine: conv_step(engine, images, filters),
        lambda autocast: torch_conv_step(images, filters, autocast=autocast),
        rounds,
    )


MIXED = [
    mixed("mixed-dense-4096x1024", DENSE, dense_step, torch_dense_step, rounds=5),
    _convolution(256, 32, rounds=7),
    _convolution(32, 8, rounds=7),
    mixed(
        "mixed-titanic",
        "Titanic: 32 rows × 14 features, Dense 16, ReLU, Dense 1, BCE, Adam",
        titanic_step,
        lambda autocast: torch_titanic_step(autocast=autocast),
        rounds=7,
    ),
    mixed(
        "mixed-transformer",
        BLOCK,
        block_step,
        lambda autocast: torch_block_step(autocast=autocast),
        rounds=5,
    ),
    mixed(
        "mixed-lstm",
        RECURRENT,
        lstm_step,
        lambda autocast: torch_lstm_step(autocast=autocast),
        rounds=5,
    ),
    mixed(
        "mixed-serving-4096",
        "Serving the dense network: 4,096 rows' predictions, no recording",
        dense_serving,
        torch_dense_serving,
        rounds=5,
    ),
]
"""Mixed precision on the processor, in the order the docs give them: the two steps the goals
are set on (dense, the 256 × 32 convolution), the small steps, the transformer block and the
LSTM step (issue 20: timed beside autocast), serving."""

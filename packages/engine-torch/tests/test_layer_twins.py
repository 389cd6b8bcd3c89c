"""Each layer kind beside its PyTorch twin built from the same slots: outputs and gradients (of
sum(out · r) towards the inputs and every slot) on light and torch:cpu within 1e-5 of the twin's
float64 ones relative to their size (1e-5·max|ref|, strict and float32 alike), and on
torch:cpu:mixed_bfloat16 within twice the distance PyTorch's own bfloat16 autocast keeps. The
whole layer harness runs on the torch engines too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from deepsharp.core import (
    Add,
    AvgPool2D,
    BatchNorm,
    Concatenate,
    Conv1D,
    Conv2D,
    Dense,
    Embedding,
    Gelu,
    GlobalAvgPool,
    Input,
    Layer,
    LayerNorm,
    LeakyRelu,
    MaxPool2D,
    Network,
    Rescaling,
    Reshape,
    Silu,
    Tensor,
    make_engine,
)
from deepsharp.core.autodiff import functions as ops
from deepsharp.core.autodiff.tensor import Recording
from deepsharp.core.nn.layer import Pass
from deepsharp.core.nn.testing import check_layer
from deepsharp.core.random import Generator

Twin = Callable[[list[Any], dict[str, Any]], Any]

CASES: dict[str, tuple[Callable[[], Layer], list[tuple[int, ...]], Twin]] = {
    "dense-gelu": (
        lambda: Dense(5, activation="gelu"),
        [(6,)],
        lambda x, s: F.gelu(x[0] @ s["weights"] + s["bias"]),
    ),
    "dense-sequence": (
        lambda: Dense(3),
        [(4, 6)],
        lambda x, s: x[0] @ s["weights"] + s["bias"],
    ),
    "conv1d-same": (
        lambda: Conv1D(4, 3, padding="same"),
        [(3, 9)],
        lambda x, s: F.conv1d(F.pad(x[0], (1, 1)), s["weights"], s["bias"]),
    ),
    "conv2d-silu": (
        lambda: Conv2D(3, 3, activation="silu"),
        [(2, 6, 6)],
        lambda x, s: F.silu(F.conv2d(x[0], s["weights"], s["bias"])),
    ),
    "maxpool2d-pair": (
        lambda: MaxPool2D((2, 3)),
        [(2, 6, 7)],
        lambda x, s: F.max_pool2d(x[0], (2, 3)),
    ),
    "avgpool2d-pair": (
        lambda: AvgPool2D((3, 2)),
        [(2, 7, 6)],
        lambda x, s: F.avg_pool2d(x[0], (3, 2)),
    ),
    "globalavgpool": (lambda: GlobalAvgPool(), [(3, 4, 5)], lambda x, s: x[0].mean(dim=(2, 3))),
    "batchnorm-training": (
        lambda: BatchNorm(),
        [(3, 4, 4)],
        lambda x, s: F.batch_norm(x[0], None, None, s["scale"], s["shift"], True, 0.0, 1e-3),
    ),
    "layernorm": (
        lambda: LayerNorm(),
        [(5, 8)],
        lambda x, s: F.layer_norm(x[0], (8,), s["scale"], s["shift"], 1e-5),
    ),
    "gelu": (lambda: Gelu(), [(7,)], lambda x, s: F.gelu(x[0])),
    "silu": (lambda: Silu(), [(7,)], lambda x, s: F.silu(x[0])),
    "leakyrelu": (lambda: LeakyRelu(0.1), [(7,)], lambda x, s: F.leaky_relu(x[0], 0.1)),
    "add": (lambda: Add(), [(5,), (5,)], lambda x, s: x[0] + x[1]),
    "concatenate": (lambda: Concatenate(), [(2, 3), (2, 4)], lambda x, s: torch.cat(x, -1)),
    "reshape": (lambda: Reshape((3, 4)), [(12,)], lambda x, s: x[0].reshape(-1, 3, 4)),
    "rescaling": (
        lambda: Rescaling([2.0, 0.5, 3.0], [1.0, 0.0, -2.0]),
        [(4, 3)],
        lambda x, s: x[0] * x[0].new_tensor([2.0, 0.5, 3.0]) + x[0].new_tensor([1.0, 0.0, -2.0]),
    ),
}
ROWS = 4


def _deepsharp(
    spec: str, layer: Layer, xs: list[np.ndarray], slots: dict[str, np.ndarray], r: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray], dict[str, np.ndarray]]:
    symbols = [Input(x.shape[1:], "int64" if x.dtype.kind == "i" else "float32") for x in xs]
    network = Network(inputs=symbols, outputs=layer(symbols if layer.several else symbols[0]))
    network.initialize(Generator(0))
    full = {f"{layer.name}.{k}": v for k, v in slots.items()}
    engine = make_engine(spec)
    bound = network.put(engine, (full, network.buffers))
    tensors = [Tensor.put(engine, x) for x in xs]
    floats = [t for t in tensors if t.dtype == "float32"]
    wanted = [*floats, *bound.tensors.values()]
    with Recording(wanted) as recording:
        out = network.forward(tensors, bound, Pass(engine, True, None))
        grads = recording.gradients(ops.sum(out * Tensor.put(engine, r)), wanted)
    got = [np.asarray(engine.get(g), np.float64) for g in grads]
    names = list(bound.tensors)
    return (
        np.asarray(engine.get(out.handle), np.float64),
        got[: len(floats)],
        {name.split(".", 1)[1]: g for name, g in zip(names, got[len(floats) :])},
    )


def _twin(
    twin: Twin, xs: list[np.ndarray], slots: dict[str, np.ndarray], r: np.ndarray, dtype: Any
) -> tuple[np.ndarray, list[np.ndarray], dict[str, np.ndarray]]:
    inputs = [
        torch.tensor(x) if x.dtype.kind == "i" else torch.tensor(x, dtype=dtype, requires_grad=True)
        for x in xs
    ]
    held = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in slots.items()}
    out = twin(inputs, held)
    (out * torch.tensor(r, dtype=out.dtype)).sum().backward()
    return (
        out.detach().double().numpy(),
        [x.grad.double().numpy() for x in inputs if x.is_floating_point()],
        {k: v.grad.double().numpy() for k, v in held.items()},
    )


def _case(name: str, seed: int = 0) -> tuple[Layer, list[np.ndarray], dict[str, np.ndarray]]:
    factory, shapes, _ = CASES[name]
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((ROWS, *shape)).astype(np.float32) for shape in shapes]
    layer = factory()
    symbols = [Input(s) for s in shapes]
    Network(inputs=symbols, outputs=layer(symbols if layer.several else symbols[0]))
    slots = {
        slot: (
            rng.standard_normal(spec.shape) * 0.5 + (1.0 if spec.init == "ones" else 0.0)
        ).astype(np.float32)
        for slot, spec in layer.specs.items()
    }
    return factory(), xs, slots


CARD = ["torch:cuda:0", "torch:cuda:0:strict"] if torch.cuda.is_available() else []


def _worst(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


@pytest.mark.parametrize("spec", ["light", "torch:cpu", "torch:cpu:strict", *CARD])
@pytest.mark.parametrize("name", list(CASES))
def test_the_layer_gives_what_its_pytorch_twin_gives(spec: str, name: str) -> None:
    layer, xs, slots = _case(name)
    r = np.random.default_rng(9).standard_normal(
        np.shape(
            CASES[name][2](
                [torch.tensor(x) for x in xs], {k: torch.tensor(v) for k, v in slots.items()}
            )
        )
    )
    out, grads, slot_grads = _deepsharp(spec, layer, xs, slots, r)
    ref_out, ref_grads, ref_slots = _twin(CASES[name][2], xs, slots, r, torch.float64)
    assert _worst(out, ref_out) <= 1e-5, "output"
    for got, ref in zip(grads, ref_grads, strict=True):
        assert _worst(got, ref) <= 1e-5, "gradient towards an input"
    for slot, ref in ref_slots.items():
        assert _worst(slot_grads[slot], ref) <= 1e-5, f"gradient towards {slot}"


def test_an_embedding_gives_what_its_pytorch_twin_gives() -> None:
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 6, (ROWS, 5)).astype(np.int64)
    table = rng.standard_normal((6, 3)).astype(np.float32)
    r = rng.standard_normal((ROWS, 5, 3))
    for spec in ("light", "torch:cpu"):
        out, _, grads = _deepsharp(spec, Embedding(6, 3), [ids], {"table": table}, r)
        ref_out, _, ref = _twin(
            lambda x, s: F.embedding(x[0], s["table"]), [ids], {"table": table}, r, torch.float64
        )
        assert _worst(out, ref_out) == 0.0
        assert _worst(grads["table"], ref["table"]) <= 1e-5


@pytest.mark.parametrize("name", ["dense-gelu", "conv2d-silu", "layernorm", "batchnorm-training"])
def test_mixed_bfloat16_keeps_within_twice_autocast_s_distance(name: str) -> None:
    layer, xs, slots = _case(name, seed=5)
    twin = CASES[name][2]
    r = np.ones_like(_twin(twin, xs, slots, np.zeros(1), torch.float64)[0])
    ref_out, _, _ = _twin(twin, xs, slots, r, torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        auto_out, _, _ = _twin(twin, xs, slots, r, torch.float32)
    out, _, _ = _deepsharp("torch:cpu:mixed_bfloat16", layer, xs, slots, r)
    allowed = 2 * np.abs(auto_out - ref_out).max() + 1e-6 * np.abs(ref_out).max()
    assert np.abs(out - ref_out).max() <= allowed


@pytest.mark.parametrize(
    "layer",
    [Dense(4, activation="gelu"), Conv1D(2, 3), BatchNorm(), LayerNorm(), MaxPool2D((2, 3))],
    ids=lambda layer: layer.kind,
)
def test_the_layer_harness_holds_on_the_torch_engines(layer: Layer) -> None:
    shapes = {
        "Dense": (5,),
        "Conv1D": (2, 6),
        "BatchNorm": (3,),
        "LayerNorm": (2, 6),
        "MaxPool2D": (1, 4, 6),
    }
    engines = ["torch:cpu", "torch:cpu:strict", "torch:cpu:mixed_bfloat16"]
    found = check_layer(layer, shapes[layer.kind], engines=engines, rows=4)
    assert set(found.engine_ratios) == set(engines)

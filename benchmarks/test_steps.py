"""Training steps on every engine present, beside plain PyTorch eager: the ratios asserted.

Goals (issues 2, 5, 6, 12): the Titanic step on light <= 0.3x PyTorch's and on torch:cpu (its
default precision, float32) <= 1.0x; the convolution steps on torch:cpu <= 1.0x and on
light:float32 <= 1.0x (32 images) and <= 1.5x (256). Light and torch each run at both of their
precisions (light, light:float32; torch:cpu, torch:cpu:strict); the strict ones' goals are
the earlier ones. A ratio over its goal but under its GUARD (what is reached now, with room for noise) is
reported as an expected failure naming both figures, so that the gap stays visible; over its
guard, the benchmark fails: something got slower. docs/performance.md gives the figures and
why the gaps are there.
"""

from __future__ import annotations

from typing import Any

import pytest
from bench_support import best_of, engine_specs, record
from workloads import conv_step, titanic_step, torch_conv_step, torch_titanic_step

torch = pytest.importorskip("torch", reason="the peer is plain PyTorch: install torch")

# (workload, engine) -> the goal: the largest ratio to PyTorch's step that meets it.
LIMITS = {
    ("titanic", "light"): 0.3,
    ("titanic", "light:float32"): 0.4,
    ("titanic", "torch:cpu:strict"): 1.0,
    ("titanic", "torch:cpu"): 1.0,
    ("titanic", "testbuffer"): None,  # measured, not held to a goal: it exists for tests
    ("conv-32x8", "light"): 1.2,
    ("conv-32x8", "light:float32"): 1.0,
    ("conv-32x8", "torch:cpu:strict"): 1.05,
    ("conv-32x8", "torch:cpu"): 1.0,
    ("conv-32x8", "testbuffer"): None,
    ("conv-256x32", "light"): 2.0,
    ("conv-256x32", "light:float32"): 1.5,
    ("conv-256x32", "torch:cpu:strict"): 1.05,
    ("conv-256x32", "torch:cpu"): 1.0,
    ("conv-256x32", "testbuffer"): None,
}

# The ratio that would mean a regression (met goals get room for a noisy machine; unmet ones
# sit just above what is reached now).
GUARDS = {
    ("titanic", "light"): 0.6,
    ("titanic", "light:float32"): 0.6,
    ("titanic", "torch:cpu:strict"): 1.5,
    ("titanic", "torch:cpu"): 1.5,
    ("conv-32x8", "light"): 3.0,
    ("conv-32x8", "light:float32"): 1.8,
    ("conv-32x8", "torch:cpu:strict"): 2.4,
    ("conv-32x8", "torch:cpu"): 1.6,
    ("conv-256x32", "light"): 5.0,
    ("conv-256x32", "light:float32"): 3.0,
    ("conv-256x32", "torch:cpu:strict"): 4.0,
    ("conv-256x32", "torch:cpu"): 2.5,
}

WORKLOADS: dict[str, tuple[Any, Any, int, int]] = {
    # name: (deepsharp step maker, peer maker, calls a round, rounds)
    "titanic": (titanic_step, torch_titanic_step, 200, 15),
    "conv-32x8": (lambda e: conv_step(e, 32, 8), lambda: torch_conv_step(32, 8), 20, 15),
    "conv-256x32": (lambda e: conv_step(e, 256, 32), lambda: torch_conv_step(256, 32), 2, 12),
}


@pytest.mark.parametrize("engine", engine_specs())
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_step_against_plain_pytorch(benchmark: Any, workload: str, engine: str) -> None:
    make, make_peer, number, rounds = WORKLOADS[workload]
    step, peer = make(engine), make_peer()
    if engine == "testbuffer" and workload == "conv-256x32":
        number, rounds = 1, 2
    seconds, peer_seconds = best_of(step, peer, number, rounds)
    ratio = seconds / peer_seconds
    benchmark.extra_info.update(peer_seconds=peer_seconds, ratio=ratio)
    benchmark.pedantic(step, rounds=max(3, rounds), iterations=number)
    record(
        f"{workload} on {engine}",
        step_us=round(seconds * 1e6, 1),
        pytorch_us=round(peer_seconds * 1e6, 1),
        ratio=round(ratio, 3),
        torch_threads=torch.get_num_threads(),
    )
    limit = LIMITS.get((workload, engine))
    if limit is None or ratio <= limit:
        return
    guard = GUARDS.get((workload, engine))
    message = f"{workload} on {engine}: {ratio:.3f}x PyTorch's step (goal {limit}x)"
    assert guard is not None and ratio <= guard, message
    pytest.xfail(f"{message}: goal not met yet, regression guard {guard}x holds")

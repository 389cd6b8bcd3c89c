"""The CUDA guard: TF32 off and deterministic algorithms inside, the application's settings after.

The guard only touches process settings, so it is exercised on any torch build; each case runs
in a fresh interpreter so the settings it changes never leak into other tests.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPT = """
import torch
from deepsharp.engines.torch import TorchEngine, _exact
TorchEngine.on_cpu()
C = torch._C

def settings():
    out = []
    for read in (
        C._get_cublas_allow_tf32, C._get_cudnn_allow_tf32, torch.get_float32_matmul_precision,
        lambda: torch.backends.cuda.matmul.fp32_precision,
        lambda: torch.backends.cudnn.conv.fp32_precision,
        lambda: torch.backends.cudnn.rnn.fp32_precision,
        C._get_deterministic_algorithms, C._get_deterministic_algorithms_warn_only,
        C._get_cudnn_benchmark, C._get_cudnn_deterministic,
    ):
        try:
            out.append(read())
        except RuntimeError:
            out.append("refused")
    return out

for name, setup in SETUPS.items():  # cumulative: each case starts where the last left off
    exec(setup)
    before = settings()
    with _exact.Exact():
        inside = settings()
    after = settings()
    assert after == before, (name, before, after)
    expected = [False, False, "highest", "ieee", "ieee", "ieee", True, False, False, True]
    assert inside == expected, (name, inside)
    print("ok", name)
"""

SETUPS = {
    "defaults": "pass",
    "legacy-tf32": "torch.backends.cuda.matmul.allow_tf32 = True",
    "new-tf32": "torch.backends.cuda.matmul.fp32_precision = 'tf32'",
    "new-conv-ieee": "torch.backends.cudnn.conv.fp32_precision = 'ieee'",
    "precision-medium": "torch.set_float32_matmul_precision('medium')",
    "deterministic-warn-benchmark": (
        "torch.use_deterministic_algorithms(True, warn_only=True); "
        "torch.backends.cudnn.benchmark = True"
    ),
}


def test_guard_sets_exact_and_restores() -> None:
    script = f"SETUPS = {SETUPS!r}\n{SCRIPT}"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ok") == len(SETUPS), done.stdout

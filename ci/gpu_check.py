"""Every check that needs an NVIDIA card, in one run of a few minutes (`ci/gpu-check`).

On torch:cuda:0: determinism (the same steps twice give the same bits), flat memory over
2,000 steps (torch.cuda.memory_allocated), the application's TF32 and determinism settings left
as they were, and the seed workloads beside plain PyTorch eager on the same card; the mixed
precisions' steps (the same bits twice, their speed beside float32 and PyTorch's autocast with
its GradScaler). The contract suite on torch:cuda:0 is run by the wrapper script. Figures go to
the folder named by --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from workloads import (  # noqa: E402
    conv_step,
    conv_trainer,
    image_batch,
    titanic_batch,
    titanic_step,
    titanic_trainer,
    torch_conv_step,
    torch_titanic_step,
)

from deepsharp.engines.torch import TorchEngine  # noqa: E402


def conv_8(engine: Any) -> Any:
    return conv_trainer(engine, 8)


def slots_after(make: Any, batch: Any, steps: int) -> bytes:
    trainer = make(TorchEngine.on_gpu(0))
    rows, answers = batch
    for _ in range(steps):
        trainer.step(rows, answers)
    return b"".join(value.tobytes() for value in trainer.network.slots.values())


def determinism() -> dict[str, bool]:
    return {
        "titanic 200 steps twice, same bits": slots_after(titanic_trainer, titanic_batch(), 200)
        == slots_after(titanic_trainer, titanic_batch(), 200),
        "conv 50 steps twice, same bits": slots_after(conv_8, image_batch(32), 50)
        == slots_after(conv_8, image_batch(32), 50),
    }


def memory(steps: int = 2000) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, make, batch in (
        ("titanic", titanic_trainer, titanic_batch()),
        ("conv 32x8", conv_8, image_batch(32)),
    ):
        trainer = make(TorchEngine.on_gpu(0))
        rows, answers = batch
        for _ in range(30):
            trainer.step(rows, answers)
        torch.cuda.synchronize()
        after_30 = torch.cuda.memory_allocated(0)
        for _ in range(steps - 30):
            trainer.step(rows, answers)
        torch.cuda.synchronize()
        after_all = torch.cuda.memory_allocated(0)
        figures[name] = {
            "after_30": after_30,
            f"after_{steps}": after_all,
            "flat": after_all == after_30,
        }
    return figures


def settings_left_alone() -> dict[str, bool]:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.use_deterministic_algorithms(False)
    trainer = conv_8(TorchEngine.on_gpu(0))
    images, classes = image_batch(32)
    trainer.step(images, classes)
    return {
        "matmul TF32 still the application's": torch.backends.cuda.matmul.allow_tf32 is True,
        "cudnn TF32 still the application's": torch.backends.cudnn.allow_tf32 is True,
        "deterministic algorithms still off": not torch.are_deterministic_algorithms_enabled(),
    }


def best(step: Any, number: int, rounds: int = 5) -> float:
    for _ in range(3):
        step()
    fastest = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            step()
        fastest = min(fastest, (time.perf_counter() - start) / number)
    return fastest


def benchmarks() -> dict[str, Any]:
    """The seed workloads on the card at precisions float32 (the default) and strict, beside
    PyTorch."""
    cases: dict[str, tuple[Any, Any, int]] = {
        "titanic": (titanic_step, lambda: torch_titanic_step("cuda:0"), 200),
        "conv-32x8": (
            lambda engine: conv_step(engine, 32, 8),
            lambda: torch_conv_step(32, 8, "cuda:0"),
            50,
        ),
        "conv-256x32": (
            lambda engine: conv_step(engine, 256, 32),
            lambda: torch_conv_step(256, 32, "cuda:0"),
            20,
        ),
    }
    figures = {}
    for precision in ("float32", "strict"):
        engine = TorchEngine.on_gpu(0, precision)
        for name, (make, make_peer, number) in cases.items():
            ours, theirs = best(make(engine), number), best(make_peer(), number)
            figures[f"{name} ({precision})"] = {
                "step_us": ours * 1e6,
                "pytorch_us": theirs * 1e6,
                "ratio": ours / theirs,
            }
    return figures


def mixed() -> dict[str, Any]:
    """Mixed precision on the card: a mixed_float16 run twice gives the same bits, and the
    dense network's and the 256x32 convolution's steps at float32, mixed_bfloat16 and
    mixed_float16, beside PyTorch's autocast (float16, GradScaler; bfloat16)."""
    from mixed_workloads import dense_batch, dense_step, torch_dense_model

    figures: dict[str, Any] = {}

    def conv_bits(precision: str) -> bytes:
        trainer = conv_trainer(TorchEngine.on_gpu(0, precision), 8)
        images, classes = image_batch(32)
        for _ in range(50):
            trainer.step(images, classes)
        return b"".join(value.tobytes() for value in trainer.network.slots.values())

    for precision in ("mixed_float16", "mixed_bfloat16"):
        same = conv_bits(precision) == conv_bits(precision)
        figures[f"conv 50 steps twice at {precision}, same bits"] = same
    rows, classes = dense_batch()

    def autocast_step(dtype: Any) -> Any:
        model = torch_dense_model().to("cuda:0")
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
        scaler = torch.amp.GradScaler("cuda", enabled=dtype is torch.float16)
        loss = torch.nn.CrossEntropyLoss()

        def step() -> float:
            x = torch.from_numpy(rows.copy()).to("cuda:0")
            y = torch.from_numpy(classes.copy()).to("cuda:0")
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=dtype):
                value = loss(model(x), y)
            scaler.scale(value).backward()
            scaler.step(optimizer)
            scaler.update()
            return float(value.detach())

        return step

    steps = {
        f"dense ({precision})": dense_step(TorchEngine.on_gpu(0, precision))
        for precision in ("float32", "mixed_bfloat16", "mixed_float16")
    }
    steps["dense (PyTorch autocast float16)"] = autocast_step(torch.float16)
    steps["dense (PyTorch autocast bfloat16)"] = autocast_step(torch.bfloat16)
    for precision in ("float32", "mixed_bfloat16", "mixed_float16"):
        steps[f"conv-256x32 ({precision})"] = conv_step(TorchEngine.on_gpu(0, precision), 256, 32)
    for name, step in steps.items():
        figures[f"{name} step_us"] = best(step, 10) * 1e6
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / "docs" / "gpu"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("no usable NVIDIA card: nothing to check here")
        return 2
    report = {
        "card": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "determinism": determinism(),
        "settings": settings_left_alone(),
        "memory": memory(),
        "benchmarks": benchmarks(),
        "mixed": mixed(),
    }
    text = json.dumps(report, indent=2)
    print(text)
    (out / "gpu-check.json").write_text(text + "\n")
    failed = [k for k, v in {**report["determinism"], **report["settings"]}.items() if not v]
    failed += [k for k, v in report["memory"].items() if not v["flat"]]
    failed += [k for k, v in report["mixed"].items() if v is False]
    if failed:
        print("FAILED:", ", ".join(failed))
        return 1
    print("every GPU check passed")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())

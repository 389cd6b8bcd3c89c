"""Mixed precision's speed on the processor, measured in one run: deepsharp's torch engine at
float32 and at mixed_bfloat16 beside PyTorch's own float32 step and its autocast step.

    python benchmarks/mixed_speed.py                      # every workload
    python benchmarks/mixed_speed.py dense conv-256x32    # some
    python benchmarks/mixed_speed.py --profile dense      # and where each step's time goes
    python benchmarks/mixed_speed.py --json figures.json  # the figures, for docs

Each workload's sides are timed in interleaved rounds (a rest before each, so a thread pool
that has just worked does not spin on the next side's cores); the best round of each is
compared (the median is printed beside it). glibc's heap is kept as deepsharp's engines keep it
(`keep_freed_memory`) for every side, PyTorch's included, so no side pays page faults the other
does not. Ratios are what matter on a shared machine; the times say which machine it was.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import torch

import mixed_workloads as mixed
from deepsharp.core.cli_arguments import at_least_one
from deepsharp.core.engine.memory import keep_freed_memory
from workloads import conv_step, titanic_step, torch_conv_step, torch_titanic_step

SETTLE = 0.3
FLOAT32, MIXED = "torch:cpu", "torch:cpu:mixed_bfloat16"

# name -> (sides: label -> maker, calls a round, rounds)
WORKLOADS: dict[str, tuple[dict[str, Callable[[], Callable[[], object]]], int, int]] = {
    "dense": (
        {
            "deepsharp float32": lambda: mixed.dense_step(FLOAT32),
            "deepsharp mixed_bfloat16": lambda: mixed.dense_step(MIXED),
            "PyTorch float32": lambda: mixed.torch_dense_step(False),
            "PyTorch autocast": lambda: mixed.torch_dense_step(True),
        },
        2,
        8,
    ),
    "conv-256x32": (
        {
            "deepsharp float32": lambda: conv_step(FLOAT32, 256, 32),
            "deepsharp mixed_bfloat16": lambda: conv_step(MIXED, 256, 32),
            "PyTorch float32": lambda: torch_conv_step(256, 32, autocast=False),
            "PyTorch autocast": lambda: torch_conv_step(256, 32, autocast=True),
        },
        3,
        10,
    ),
    "conv-32x8": (
        {
            "deepsharp float32": lambda: conv_step(FLOAT32, 32, 8),
            "deepsharp mixed_bfloat16": lambda: conv_step(MIXED, 32, 8),
            "PyTorch float32": lambda: torch_conv_step(32, 8, autocast=False),
            "PyTorch autocast": lambda: torch_conv_step(32, 8, autocast=True),
        },
        30,
        10,
    ),
    "titanic": (
        {
            "deepsharp float32": lambda: titanic_step(FLOAT32),
            "deepsharp mixed_bfloat16": lambda: titanic_step(MIXED),
            "PyTorch float32": lambda: torch_titanic_step(autocast=False),
            "PyTorch autocast": lambda: torch_titanic_step(autocast=True),
        },
        200,
        10,
    ),
    "serving": (
        {
            "deepsharp float32": lambda: mixed.dense_serving(FLOAT32),
            "deepsharp mixed_bfloat16": lambda: mixed.dense_serving(MIXED),
            "PyTorch float32": lambda: mixed.torch_dense_serving(False),
            "PyTorch autocast": lambda: mixed.torch_dense_serving(True),
        },
        5,
        10,
    ),
}


def timed(
    sides: dict[str, Callable[[], object]], number: int, rounds: int
) -> dict[str, list[float]]:
    """Seconds per call of each side, one figure a round, the sides interleaved."""
    for work in sides.values():  # warm: kernels chosen, memory taken
        for _ in range(max(2, number // 5)):
            work()
    seconds: dict[str, list[float]] = {label: [] for label in sides}
    for _ in range(rounds):
        for label, work in sides.items():
            time.sleep(SETTLE)
            start = time.perf_counter()
            for _ in range(number):
                work()
            seconds[label].append((time.perf_counter() - start) / number)
    return seconds


def profile(label: str, work: Callable[[], object], calls: int = 5) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    work()
    with profiler(activities=[ProfilerActivity.CPU]) as seen:
        for _ in range(calls):
            work()
    print(f"\n--- {label}: libtorch's operations over {calls} steps")
    print(seen.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD", help=", ".join(WORKLOADS))
    parser.add_argument(
        "--rounds", type=at_least_one, default=0, help="rounds per workload (default: its own)"
    )
    parser.add_argument("--profile", action="store_true", help="also profile each side")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    options = parser.parse_args()
    unknown = sorted(set(options.workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"no workload {', '.join(unknown)}: the workloads are {', '.join(WORKLOADS)}")
    keep_freed_memory()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__} on {torch.get_num_threads()} threads, Python "
        f"{platform.python_version()}"
    )
    figures: dict[str, Any] = {}
    for name in options.workloads or list(WORKLOADS):
        makers, number, rounds = WORKLOADS[name]
        sides = {label: make() for label, make in makers.items()}
        seconds = timed(sides, number, options.rounds or rounds)
        best = {label: min(values) for label, values in seconds.items()}
        middle = {label: statistics.median(values) for label, values in seconds.items()}
        print(f"\n{name} ({number} calls a round, {len(next(iter(seconds.values())))} rounds):")
        for label in sides:
            print(
                f"  {label:<26} best {best[label] * 1e3:9.3f} ms   median {middle[label] * 1e3:9.3f} ms"
            )
        speedup = best["deepsharp float32"] / best["deepsharp mixed_bfloat16"]
        to_autocast = best["deepsharp mixed_bfloat16"] / best["PyTorch autocast"]
        torch_speedup = best["PyTorch float32"] / best["PyTorch autocast"]
        print(
            f"  deepsharp's speed-up, float32's time / mixed_bfloat16's: {speedup:.2f}x;  "
            f"mixed_bfloat16 / PyTorch autocast: {to_autocast:.2f}x the time;  "
            f"PyTorch float32 / autocast: {torch_speedup:.2f}x"
        )
        figures[name] = {
            "best_ms": {label: round(value * 1e3, 3) for label, value in best.items()},
            "median_ms": {label: round(value * 1e3, 3) for label, value in middle.items()},
            "mixed_speedup": round(speedup, 3),
            "mixed_to_autocast": round(to_autocast, 3),
            "pytorch_autocast_speedup": round(torch_speedup, 3),
            "torch_threads": torch.get_num_threads(),
        }
        if options.profile:
            for label in ("deepsharp mixed_bfloat16", "PyTorch autocast"):
                profile(f"{name}, {label}", sides[label])
    if options.json is not None:
        options.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()

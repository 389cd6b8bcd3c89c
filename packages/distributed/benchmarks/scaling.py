"""Rows per second of data-parallel training, at 1, 2 and 4 processes (gloo, on the processor).

    python packages/distributed/benchmarks/scaling.py [--worlds 1 2 4] [--engine light]

Each workload trains a fixed number of epochs (no early stop) with `fit`; rows per second is
the training rows times the epochs over the epochs' seconds (each a pass over the training rows
and one over the validation rows), as rank 0 measured them. One process is a plain `fit` (no
DataParallel) in a process `launch` starts, so that every world runs under the same thread
settings (launch shares the cores out: OMP_NUM_THREADS = cores / processes, at least 1); and
once more with one thread (OMP_NUM_THREADS=1), a core's worth of one process.
Each world of 2 or more runs both reductions. Each figure is the best of `--repeats` runs
(3 unless said), taken in turn (one of each, then again), as the machine is shared. The
workloads:

- the Titanic sample (its pipeline, network and Adam; 623 training rows, batches of 32;
  a gradient of 273 values);
- the digits sample (3,220 training images 1x8x8, 16 filters 3x3, max-pool, Dense 10;
  2,730 values);
- the benchmarks' convolution steps on random 1x28x28 images in 10 classes (1,400 training
  images): 8 filters 3x3, ReLU, Flatten, Dense 10 in batches of 32 (54,170 values), and 32
  filters in batches of 256 (216,650 values).

Prints a Markdown table (docs/distributed.md quotes it) and the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
from typing import Any

import numpy as np

from deepsharp.core import (
    Adam,
    Conv2D,
    CrossEntropy,
    Dense,
    FitOptions,
    Flatten,
    Network,
    Pipeline,
    Relu,
    fit,
)
from deepsharp.core.samples import digits, titanic
from deepsharp.distributed import DataParallel, launch

WORKLOADS = {
    "Titanic": (8, 32),
    "digits (convolution)": (2, 32),
    "convolution 32 x 8 filters": (2, 32),
    "convolution 256 x 32 filters": (2, 256),
}
"""Each workload's epochs and batch size (the global batch)."""

IMAGES = 2000


def _images() -> tuple[Any, Any]:
    generator = np.random.default_rng(0)
    x = generator.uniform(0.0, 1.0, (IMAGES, 1, 28, 28)).astype(np.float32)
    y = generator.integers(0, 10, IMAGES)
    return x, y


def train(workload: str, engine: str, reduction: str | None) -> dict[str, float]:
    """One run of `workload` (data-parallel where `reduction` is given): rank 0's figures."""
    epochs, batch = WORKLOADS[workload]
    distributed = DataParallel(reduction=reduction) if reduction else None
    options: dict[str, Any] = {
        "engine": engine,
        "epochs": epochs,
        "batch_size": batch,
        "patience": epochs,
        "progress": False,
        "distributed": distributed,
    }
    if workload == "Titanic":
        run = titanic.run(**options)
        rows = len(titanic.pipeline().partition(891, np.arange(891))[0])
    elif workload.startswith("digits"):
        run = digits.run(**options)
        count = len(digits.rows("train"))
        rows = len(digits.pipeline().partition(count, np.arange(count), test=False)[0])
    else:
        filters = 8 if batch == 32 else 32
        network = Network([Conv2D(filters, 3), Relu(), Flatten(), Dense(10)])
        run = fit(
            None, _images(), network, CrossEntropy(), Adam(0.001), FitOptions(seed=0, **options)
        )
        rows = len(Pipeline().partition(IMAGES, np.arange(IMAGES))[0])
    seconds = sum(record.seconds for record in run.report.history)
    return {"rows per second": rows * epochs / seconds, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--engine", default="light")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"engine: {options.engine}; load average before: {os.getloadavg()[0]:.1f}")
    print(
        "| workload | processes | ordered: rows/s | fast: rows/s | time: ordered / fast | speed-up |"
    )
    print("|---|---|---|---|---|---|")
    for workload in options.workloads:
        cases: list[tuple[int, str | None]] = [(1, None), (1, "1 thread")] + [
            (world, reduction)
            for world in options.worlds
            if world > 1
            for reduction in ("ordered", "fast")
        ]
        best: dict[tuple[int, str | None], float] = {}
        for _ in range(options.repeats):
            for world, reduction in cases:
                if reduction == "1 thread":  # launch leaves a thread count it is given
                    os.environ["OMP_NUM_THREADS"] = "1"
                    try:
                        found = launch(train, 1, workload, options.engine, None)
                    finally:
                        del os.environ["OMP_NUM_THREADS"]
                else:
                    found = launch(train, world, workload, options.engine, reduction)
                key = (world, reduction)
                best[key] = max(best.get(key, 0.0), found["rows per second"])
        alone = best[(1, None)]
        print(f"| {workload} | 1 (no DataParallel) | {alone:,.0f} | | | 1.00 |", flush=True)
        single = best[(1, "1 thread")]
        print(f"| {workload} | 1, one thread | {single:,.0f} | | | {single / alone:.2f} |")
        for world in options.worlds:
            if world == 1:
                continue
            ordered, fast = best[(world, "ordered")], best[(world, "fast")]
            print(
                f"| {workload} | {world} | {ordered:,.0f} | {fast:,.0f} | "
                f"{fast / ordered:.2f} | {ordered / alone:.2f} |",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

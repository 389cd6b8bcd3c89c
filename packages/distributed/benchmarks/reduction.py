"""Time of one ordered and one fast sum of a gradient, at 2 and 4 processes (gloo, light engine).

    python packages/distributed/benchmarks/reduction.py [--repeats 200] [--worlds 2 4]

Prints a Markdown table (docs/distributed.md quotes it) and the machine it ran on. The gradients:
the Titanic sample network's (Dense 16 + ReLU, Dense 1 on its 15 features: 273 values) and the 256-image
convolution step's (32 filters 3x3 on 1x28x28 images, ReLU, Flatten, Dense 10: 216,650 values).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np

from deepsharp.core import make_engine
from deepsharp.distributed import DataParallel, launch

GRADIENTS = {
    "Titanic (273)": [(15, 16), (16,), (16, 1), (1,)],
    "convolution 256x32 (216,650)": [(32, 1, 3, 3), (32,), (32 * 26 * 26, 10), (10,)],
}


def timings(shapes: list[tuple[int, ...]], repeats: int, warmup: int) -> dict[str, float]:
    """Median seconds of one sum each way, as rank 0 saw them (every rank takes part)."""
    job = DataParallel().join()
    engine = make_engine("light")
    generator = np.random.default_rng(job.rank)
    grads = [engine.put(generator.standard_normal(shape).astype(np.float32)) for shape in shapes]
    found: dict[str, float] = {}
    for reduction in ("ordered", "fast"):
        job.config = DataParallel(reduction=reduction)
        seconds = []
        for index in range(warmup + repeats):
            job.barrier()
            began = time.perf_counter()
            job.reduce_gradients(engine, grads, 0.5)
            if index >= warmup:
                seconds.append(time.perf_counter() - began)
        found[reduction] = float(np.median(seconds))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    options = parser.parse_args()
    rows: list[Any] = []
    for name, shapes in GRADIENTS.items():
        for world in options.worlds:
            found = launch(timings, world, shapes, options.repeats, options.warmup)
            ordered, fast = found["ordered"], found["fast"]
            rows.append((name, world, ordered, fast))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print("| gradient | processes | ordered | fast | ordered / fast |")
    print("|---|---|---|---|---|")
    for name, world, ordered, fast in rows:
        print(
            f"| {name} | {world} | {ordered * 1e6:,.0f} µs | {fast * 1e6:,.0f} µs | "
            f"{ordered / fast:.2f} |"
        )


if __name__ == "__main__":
    main()

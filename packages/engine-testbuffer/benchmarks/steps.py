"""CPU time of the seed workloads' training steps on the test engine (and PyTorch's wall time).

    .venv/bin/python packages/engine-testbuffer/benchmarks/steps.py [titanic conv-32x8 conv-256x32]

The test engine runs in one thread, so its CPU time (`time.process_time`) is what a step costs
it even on a machine busy with other work; the median of a few rounds is printed. PyTorch, where
installed, is timed by the wall clock (it may use every core), for scale.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from workloads import conv_step, titanic_step, torch_conv_step, torch_titanic_step

from deepsharp.engines.testbuffer import TestBufferEngine

WORKLOADS: dict[
    str, tuple[Callable[..., Callable[[], float]], Callable[[], Callable[[], float]], int, int]
] = {
    # name: (deepsharp step maker, PyTorch step maker, steps a round, rounds)
    "titanic": (titanic_step, torch_titanic_step, 200, 5),
    "conv-32x8": (lambda e: conv_step(e, 32, 8), lambda: torch_conv_step(32, 8), 10, 5),
    "conv-256x32": (lambda e: conv_step(e, 256, 32), lambda: torch_conv_step(256, 32), 1, 3),
}


def median_seconds(
    step: Callable[[], float], steps: int, rounds: int, clock: Callable[[], float]
) -> float:
    step()
    times = []
    for _ in range(rounds):
        start = clock()
        for _ in range(steps):
            step()
        times.append((clock() - start) / steps)
    return statistics.median(times)


def main(names: list[str]) -> None:
    for name in names or list(WORKLOADS):
        make, make_peer, steps, rounds = WORKLOADS[name]
        ours = median_seconds(make(TestBufferEngine()), steps, rounds, time.process_time)
        line = f"{name}: testbuffer {ours * 1e3:.2f} ms CPU a step"
        try:
            peer = median_seconds(make_peer(), steps, rounds, time.perf_counter)
            line += f"; PyTorch {peer * 1e3:.2f} ms wall"
        except ImportError:
            pass
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

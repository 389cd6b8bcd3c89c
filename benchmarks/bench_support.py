"""What the benchmarks share (conftest puts this folder on the path): the engines present, the peer, and a fair way to time them.

Timings on a shared machine are noisy, so a benchmark times its workload and its peer
interleaved, round after round, in the same run, and compares the best rounds: the ratio is
what is asserted, never a time.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepsharp.core import available_engines, make_engine
from deepsharp.core.engine import describe_engine
from deepsharp.core.errors import EngineUnavailableError

RESULTS = Path(
    os.environ.get("DEEPSHARP_BENCHMARK_RESULTS", Path(__file__).parent / "results.json")
)
_results: dict[str, Any] = {}

SETTLE = 0.3
"""Seconds of rest before each round: a thread pool that has just worked spins a while, waiting
for more (OpenBLAS's under NumPy about 0.1 s, libgomp's under torch a few ms), and would take
the cores from the other side's first calls. Rested, each side's round has the cores alone."""


def engine_specs() -> list[str]:
    """Every engine installed here that can be made, at its default spec (torch on the
    processor) and at each other precision it offers: light, light:float32, torch:cpu,
    torch:cpu:strict, testbuffer."""
    specs = []
    for name in available_engines():
        try:
            description = describe_engine(name)
            make_engine(description.default_spec)
        except EngineUnavailableError:
            continue
        specs.append(description.default_spec)
        for other in description.precisions[1:]:
            spec = description.spec_with(other)
            try:  # a precision offered on cards only (torch's mixed_float16) is left out here
                make_engine(spec)
            except EngineUnavailableError:
                continue
            specs.append(spec)
    return specs


def best_of(
    work: Callable[[], object], peer: Callable[[], object], number: int, rounds: int
) -> tuple[float, float]:
    """The best seconds per call of `work` and of `peer`, timed in alternating rounds."""
    for _ in range(max(2, number // 10)):
        work()
        peer()
    best_work = best_peer = float("inf")
    for _ in range(rounds):
        time.sleep(SETTLE)
        start = time.perf_counter()
        for _ in range(number):
            work()
        best_work = min(best_work, (time.perf_counter() - start) / number)
        time.sleep(SETTLE)
        start = time.perf_counter()
        for _ in range(number):
            peer()
        best_peer = min(best_peer, (time.perf_counter() - start) / number)
    return best_work, best_peer


def record(name: str, **figures: Any) -> None:
    """Keep a benchmark's figures; they are written to results.json at the end of the session."""
    _results[name] = figures
    print(f"\n{name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def write_results() -> None:
    if _results:
        earlier = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        earlier.update(_results)
        RESULTS.write_text(json.dumps(earlier, indent=2, sort_keys=True) + "\n")

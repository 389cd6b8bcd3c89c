"""Mixed precision on the processor: torch:cpu:mixed_bfloat16 beside PyTorch's own autocast
step, and beside torch:cpu (float32), the ratios asserted.

Each workload of `mixed_workloads.MIXED` is timed once: the two engines, the peer (PyTorch eager
under `torch.autocast("cpu", bfloat16)`, float32 master weights, torch.optim.Adam) and PyTorch's
float32 step, all in the same interleaved rounds (bench_support.compare). Two figures each:

- the **ratio** of torch:cpu:mixed_bfloat16's step to autocast's (the median of the rounds'
  ratios): goal <= 1.0x on the dense network (issue 23) and <= 1.1x on the 256 x 32
  convolution; the transformer block and the LSTM step beside autocast are stated (issue 20);
- its **speed-up** over torch:cpu, float32 (the median of the rounds' torch:cpu time over
  mixed_bfloat16's time): goal >= 2.5x on the same two. PyTorch's own speed-up (its float32
  step over its autocast step, same rounds) is recorded beside it: what this processor gives.

The small steps and serving are measured and guarded, not held to a goal. As in test_steps.py,
a figure past its goal but within its guard is an expected failure naming both; past its guard
it fails, unless the machine was busy.
"""

from __future__ import annotations

import functools
import statistics
from typing import Any

import pytest

from bench_support import busy, compare, engine_specs, has_amx, record
from mixed_workloads import MIXED, PYTORCH_FLOAT32

pytest.importorskip("torch", reason="the peer is PyTorch's autocast: install torch")

MIXED_SPEC, FLOAT32_SPEC = "torch:cpu:mixed_bfloat16", "torch:cpu"

# workload -> (goal, guard) for mixed_bfloat16's step over autocast's: at most.
RATIO: dict[str, tuple[float | None, float]] = {
    "mixed-dense-4096x1024": (1.0, 1.6),
    "mixed-conv-256x32": (1.1, 1.7),
    "mixed-conv-32x8": (None, 1.6),
    "mixed-titanic": (None, 1.0),
    "mixed-transformer": (None, 2.0),
    "mixed-lstm": (None, 10.0),
    "mixed-serving-4096": (None, 3.0),
}
# workload -> (goal, guard) for mixed_bfloat16's speed-up over torch:cpu: at least.
SPEEDUP: dict[str, tuple[float | None, float]] = {
    "mixed-dense-4096x1024": (2.5, 1.7),
    "mixed-conv-256x32": (2.5, 0.85),
    "mixed-serving-4096": (None, 1.5),
}
# Goals and guards: issue 15's goals; guards about 1.5x the figures measured on a shared
# 2-core machine (dense 3.2-3.35x float32, 1.03-1.19x autocast; convolution 256 x 32
# 1.07-1.22x float32, 1.10-1.18x autocast; serving 4.2-4.6x float32, and 2.0-2.4x since the
# float32 serving path got faster: 2.5x failed CI at 2.19x, so its guard is 1.5x; dense seen
# at 2.23x in CI beside its guard of 2.0x, now 1.7x). On a quiet machine PyTorch's autocast
# gains more (serving 3.7x over its float32, on an AMD EPYC with AVX-512 BF16, no AMX): mixed
# serving then reads 1.93-1.95x
# autocast (guard 3.0x), the mixed LSTM 4.6-8.3x (guard 10x; its float32 step is the LSTM's
# many small operations, see the profile in docs/performance.md).

# On a processor with AMX (an Intel Xeon of this class: amx_bf16, amx_tile) PyTorch's autocast
# serves the 4,096 rows in one pass on AMX tiles, 4.6-4.8x its float32 step, while deepsharp
# serves 32 rows a pass (the serving rule), where AMX gains far less: a bfloat16 32 x 1,024 x
# 1,024 product takes 124 us there, 24 us for 32 rows of a 4,096-row product. Measured on such a
# machine, quiet: mixed serving 5.0-5.6x autocast, 1.48-1.58x torch:cpu. Its guards there:
if has_amx():
    RATIO["mixed-serving-4096"] = (None, 8.0)
    SPEEDUP["mixed-serving-4096"] = (None, 1.2)

WORKLOADS = {workload.name: workload for workload in MIXED}
PRESENT = MIXED_SPEC in engine_specs(mixed=True) and FLOAT32_SPEC in engine_specs()


def _median_of(values: list[float]) -> float:
    return round(statistics.median(values), 3)


@functools.cache
def measured(name: str) -> dict[str, Any]:
    """The workload timed once, both engines, the peer and PyTorch's float32 step in the same
    rounds; recorded in steps.json under `mixed`."""
    workload = WORKLOADS[name]
    sides = {spec: workload.step(spec) for spec in (MIXED_SPEC, FLOAT32_SPEC)}
    sides.update({label: make() for label, make in workload.references.items()})
    found, peer = compare(sides, workload.peer(), workload.rounds)
    mixed, float32, pytorch = found[MIXED_SPEC], found[FLOAT32_SPEC], found[PYTORCH_FLOAT32]
    # Their time over each other's in the rounds both were timed (a side whose call takes over a
    # second sits the later rounds out).
    speedups = [
        f / m
        for f, m in zip(float32.pop("ratio_each_round"), mixed.pop("ratio_each_round"), strict=True)
        if f is not None and m is not None
    ]
    pytorch.pop("ratio_each_round")
    pytorch_speedups = list(pytorch["ratios"])  # PyTorch float32 over its autocast
    figures = {
        "title": workload.title,
        "order": MIXED.index(workload),
        "peer": workload.peer_name,
        "peer_step_us": peer["step_us"],
        "rounds": workload.rounds,
        **{key: peer[key] for key in ("others_share_each_round", "quiet_rounds", "busy")},
        "engines": {MIXED_SPEC: mixed, FLOAT32_SPEC: float32},
        "references": {PYTORCH_FLOAT32: pytorch},
        "speedup": _median_of(speedups),
        "speedups": [round(s, 3) for s in speedups],
        "pytorch_speedup": _median_of(pytorch_speedups),
        "ratio_goal": RATIO[name][0],
        "ratio_guard": RATIO[name][1],
        "speedup_goal": SPEEDUP.get(name, (None, None))[0],
        "speedup_guard": SPEEDUP.get(name, (None, None))[1],
    }
    record("steps", ("mixed", name), figures)
    return figures


pytestmark = pytest.mark.skipif(
    not PRESENT, reason=f"{MIXED_SPEC} and {FLOAT32_SPEC} are needed (the torch engine)"
)


def _judge(figures: dict[str, Any], what: str, at_most: bool) -> None:
    """Fail past the guard (an expected failure on a busy machine), expect a failure past the
    goal."""
    value = figures["ratio"] if at_most else figures["speedup"]
    goal = figures["ratio_goal"] if at_most else figures["speedup_goal"]
    guard = figures["ratio_guard"] if at_most else figures["speedup_guard"]
    rounds = len(figures["others_share_each_round"])
    message = (
        f"{what}: {value:.3f}x (the median of {rounds} interleaved rounds; PyTorch's own "
        f"autocast is {figures['pytorch_speedup']:.2f}x faster than its float32 step here; goal "
        f"{'none' if goal is None else f'{goal}x'}, regression guard {guard}x)"
    )
    past_guard = value > guard if at_most else value < guard
    if past_guard and figures["busy"]:
        pytest.xfail(f"{message}: past the guard, on a busy machine ({busy(figures)})")
    assert not past_guard, f"{message}: past the guard: something got slower"
    if goal is not None and (value > goal if at_most else value < goal):
        pytest.xfail(f"{message}: the goal is not met")


@pytest.mark.parametrize("workload", list(RATIO))
def test_mixed_step_against_autocast(workload: str) -> None:
    figures = measured(workload)
    ratio = figures["engines"][MIXED_SPEC]["ratio"]
    _judge(
        {**figures, "ratio": ratio},
        f"{workload} on {MIXED_SPEC} against {figures['peer']}",
        at_most=True,
    )


@pytest.mark.parametrize("workload", list(SPEEDUP))
def test_mixed_step_against_float32(workload: str) -> None:
    figures = measured(workload)
    _judge(figures, f"{workload}: {MIXED_SPEC}'s speed-up over {FLOAT32_SPEC}", at_most=False)

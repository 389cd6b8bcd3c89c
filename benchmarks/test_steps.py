"""Training steps on every engine present, beside plain PyTorch eager and torch.compile: the
ratios asserted.

Each workload (workloads.SEED) is timed once, every engine, the peer and torch.compile in the
same interleaved rounds (bench_support.compare); each engine's test then reads its ratio, the
median of its per-round ratios to the peer (PyTorch eager), and its ratio to torch.compile (the
median of its per-round times over torch.compile's, the compile kept out: its first call
compiles, and its seconds are recorded; torch.compile is timed where the page is published or
DEEPSHARP_BENCHMARK_COMPILE=1 asks, workloads.COMPILED). Goals (issue 23, the compiled step): light <= 0.20x
and torch:cpu <= 0.50x on the Titanic step; light:float32 <= 0.75x and torch:cpu <= 0.85x on the
32-image convolution; torch:cpu <= 0.95x and light:float32 <= 1.5x on the 256-image one;
torch:cpu <= 1.0x on the transformer block and the LSTM step (issue 20 asked 1.2x). The other
engines and precisions are measured and guarded, not held to a goal: docs/performance.md states
what strict costs beside float32.

A ratio over its goal but within its GUARD is an expected failure naming both figures, so the
gap stays visible; over its guard the benchmark fails: something got slower. Guards are what
was measured on a shared 2-core machine, with room for its noise.
"""

from __future__ import annotations

import functools
import statistics
from typing import Any

import pytest

from bench_support import busy, compare, engine_specs, record
from workloads import FLOOR, SEED, TORCH_COMPILE, Workload

pytest.importorskip("torch", reason="the peer is plain PyTorch: install torch")

# (workload, engine) -> the goal: the largest ratio to the peer's step that meets it.
LIMITS: dict[tuple[str, str], float] = {
    ("titanic", "light"): 0.20,
    ("titanic", "torch:cpu"): 0.50,
    ("conv-32x8", "light:float32"): 0.75,
    ("conv-32x8", "torch:cpu"): 0.85,
    ("conv-256x32", "light:float32"): 1.5,
    ("conv-256x32", "torch:cpu"): 0.95,
    ("transformer", "torch:cpu"): 1.0,
    ("lstm", "torch:cpu"): 1.0,
}

# (workload, engine) -> the ratio that would mean a regression: about 1.5x the quiet figures
# (provisional: from the ranges the 2-core CI machine measured before, best rounds then; a busy
# comparison's breach is told apart, see bench_support.Rounds). Machines of this class differ: on
# an Intel Xeon with AMX, oneDNN's convolutions gain over NumPy's, and light's 256-image step
# read 4.8-6.2x quiet (rounds of 4.0-7.1x) and 5.66x beside other work (3.2x on an AMD EPYC):
# its guard is 8x.
GUARDS: dict[tuple[str, str], float] = {
    ("titanic", "light"): 0.6,
    ("titanic", "light:float32"): 0.6,
    ("titanic", "torch:cpu"): 1.2,
    ("titanic", "torch:cpu:strict"): 1.5,
    ("titanic", "testbuffer"): 3.0,
    ("conv-32x8", "light"): 3.0,
    ("conv-32x8", "light:float32"): 1.8,
    ("conv-32x8", "torch:cpu"): 1.8,
    ("conv-32x8", "torch:cpu:strict"): 2.5,
    ("conv-32x8", "testbuffer"): 30.0,
    ("conv-256x32", "light"): 8.0,
    ("conv-256x32", "light:float32"): 3.0,
    ("conv-256x32", "torch:cpu"): 1.8,
    ("conv-256x32", "torch:cpu:strict"): 4.0,
    ("conv-256x32", "testbuffer"): 60.0,
    ("residual", "light"): 6.0,
    ("residual", "light:float32"): 6.0,
    ("residual", "torch:cpu"): 3.0,  # 1.40-1.70x quiet here; 2.03x in a CI run whose rounds
    # read quiet (as the LSTM's: its small BatchNorm and residual operations wait on libtorch)
    ("transformer", "light:float32"): 12.0,
    ("transformer", "torch:cpu"): 1.8,
    ("lstm", "light:float32"): 3.5,
    ("lstm", "torch:cpu"): 2.2,  # 0.92-1.03x quiet; 1.72-1.97x in every round of one CI run
    # whose rounds read quiet (its 50 steps' small operations wait on libtorch's threads)
}

SPECS = engine_specs()
WORKLOADS = {workload.name: workload for workload in SEED}


def specs_of(workload: Workload) -> list[str]:
    """The engines present that the workload runs on."""
    return [spec for spec in (workload.engines or SPECS) if spec in SPECS]


def timed_once(workload: Workload) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The workload timed once on all its engines, its references and its peer, in the same
    rounds: the engines' figures, the references' and the peer's."""
    sides: dict[str, Any] = {spec: workload.step(spec) for spec in specs_of(workload)}
    others = {label: make() for label, make in workload.references.items()}
    if workload.floor is not None:  # the step written by hand, timed in the same rounds
        others[FLOOR] = workload.floor()
    found, peer = compare({**sides, **others}, workload.peer(), workload.rounds)
    references = {label: found[label] for label in others}
    for label, step in others.items():
        if label != FLOOR:
            references[label]["compile_seconds"] = getattr(step, "compile_seconds", None)
    return {spec: found[spec] for spec in sides}, references, peer


def over_guard(name: str, engines: dict[str, Any]) -> dict[str, float]:
    """The engines whose ratio is over their guard: spec -> ratio."""
    return {
        spec: figures["ratio"]
        for spec, figures in engines.items()
        if (guard := GUARDS.get((name, spec))) is not None and figures["ratio"] > guard
    }


@functools.cache
def measured(name: str) -> dict[str, Any]:
    """The workload timed once on all its engines and its peer, in the same rounds; recorded.

    A breach of a guard in rounds that read quiet is measured again, fresh steps in fresh
    rounds, before it fails: on the shared 2-core machine one comparison in a few dozen reads
    an engine at twice its figure in every round, the next one reads it back (conv-32x8 on
    torch:cpu: 1.99x and 1.91x in two CI runs, 0.94x and 0.96x on the same clone right
    after). A regression is over its guard both times; the figures kept are the second
    measurement's, the first's ratios stated beside them (`first_ratio`)."""
    workload = WORKLOADS[name]
    engines, references, peer = timed_once(workload)
    first = over_guard(name, engines) if not peer["busy"] else {}
    if first:
        engines, references, peer = timed_once(workload)
        for spec, ratio in first.items():
            engines[spec]["first_ratio"] = ratio
    compiled = references.get(TORCH_COMPILE)
    for spec, figures in engines.items():
        figures.update(goal=LIMITS.get((name, spec)), guard=GUARDS.get((name, spec)))
        if compiled is not None:  # its time over torch.compile's, in the rounds both were timed
            pairs = zip(figures["ratio_each_round"], compiled["ratio_each_round"], strict=True)
            each = [a / b for a, b in pairs if a is not None and b is not None]
            figures["to_compiled"] = round(
                statistics.median(each) if each else figures["ratio"] / compiled["ratio"], 3
            )
    for figures in [*engines.values(), *references.values()]:
        del figures["ratio_each_round"]  # said by "ratios" where every round was timed
    figures = {
        "title": workload.title,
        "order": SEED.index(workload),
        "peer": workload.peer_name,
        "peer_step_us": peer["step_us"],
        "rounds": workload.rounds,
        **{key: peer[key] for key in ("others_share_each_round", "quiet_rounds", "busy")},
        "engines": engines,
        "references": references,
    }
    record("steps", ("steps", name), figures)
    return figures


@pytest.mark.parametrize(
    ("workload", "engine"),
    [(w.name, spec) for w in SEED for spec in specs_of(w)],
)
def test_step_against_its_peer(workload: str, engine: str) -> None:
    figures = measured(workload)
    ratio = figures["engines"][engine]["ratio"]
    limit, guard = LIMITS.get((workload, engine)), GUARDS.get((workload, engine))
    measured_rounds = len(figures["others_share_each_round"])
    first = figures["engines"][engine].get("first_ratio")
    again = "" if first is None else f", measured again after {first:.3f}x"
    message = (
        f"{workload} on {engine}: {ratio:.3f}x {figures['peer']}'s step (the median of "
        f"{measured_rounds} interleaved rounds{again}; goal "
        f"{'none' if limit is None else f'{limit}x'}, regression guard {guard}x)"
    )
    if guard is not None and ratio > guard and figures["busy"]:
        pytest.xfail(f"{message}: over the guard, on a busy machine ({busy(figures)})")
    assert guard is None or ratio <= guard, f"{message}: over the guard: something got slower"
    if limit is not None and ratio > limit:
        pytest.xfail(f"{message}: the goal is not met")

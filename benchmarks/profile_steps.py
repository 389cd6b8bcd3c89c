"""Where a step's time goes: each goal of the benchmarks profiled on its engine beside PyTorch.

    python benchmarks/profile_steps.py [--out PATH] [--steps N] [--only WORKLOAD ...]

For each goal of `test_steps.LIMITS` (a workload of `workloads.SEED` on one engine) the engine's
step and PyTorch eager's step of the same workload are profiled side by side, in the same
process, each warmed first (the engine's first step traces the plan it replays); and for each
goal of `test_mixed.RATIO` (mixed precision on the processor), torch:cpu:mixed_bfloat16's step
beside its peer there, PyTorch's autocast step (`peer_name` says which peer):

- `step_us`: the median wall time of `--steps` steps (a few dozen), the two sides' steps taken
  in turn, so a burst of load falls on both; `ratio` is ours over PyTorch's.
- `python_calls`: Python calls a step (cProfile's total calls over a few steps, a step's share).
- `engine_calls`: calls into the engine object a step, counted at its door (a call the engine
  makes on itself is its own), and `engine_us` the time spent inside them.
- `kernel_us` and `top`: what the kernels take. On torch:cpu and on PyTorch, torch.profiler's
  self CPU time of the aten operations (their own work, not that of the aten operations they
  call), and `aten_calls` how many there were; on light, the time inside the engine's calls
  (NumPy's work and the engine's few lines around each), and `numpy_us` what cProfile sees
  inside NumPy's own functions (a ufunc called as an operator is its caller's time there).
  A profiler slows what it watches, so `kernel_us` is the kernels' share of a watched step
  (the median over a few) times the step's time unwatched; `top` gives the operations' time
  as watched. `outside_us` is the step's time less the kernels': Python around them.
- `floor`, where the workload has one (`Workload.floor`: the step written by hand in NumPy, no
  framework and no checks): its `step_us`, timed in turn with the other two, its
  `python_calls`, and its `ratio` to PyTorch's step.

Every thread pool gets one thread (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS
are set to 1 where the environment does not set them): on a shared machine libtorch's threads
wait on each other at every operation (docs/performance.md, "Threads on a shared machine"), and
the profile would show those waits rather than the work. Then each goal is timed again at two
threads, as the benchmarks run (`two_threads`: libtorch's, NumPy's BLAS and the light engine's
pool at 2), in the same rounds as at one: both sides' steps and their top operations, so the
page can say what a second core gives each side.

The figures go to a JSON file (`nox -s profiles -- --publish`: benchmarks/results/profiles.json;
run by hand, `deepsharp-benchmark-results/profiles.json` in the system's temporary folder, unless
told), with the machine and its load (the load averages, as `uptime` gives them);
`performance_doc.py` writes the page's "Where the time goes" section from it. `nox -s profiles`
runs it.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _name in ONE_THREAD:  # before NumPy and torch start their pools
    os.environ.setdefault(_name, "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_support import RESULTS, environment  # noqa: E402
from deepsharp.core import make_engine  # noqa: E402
from deepsharp.core.autodiff.plan import operations  # noqa: E402
from deepsharp.core.cli_arguments import at_least_one  # noqa: E402
from deepsharp.engines.light import LightEngine  # noqa: E402
from mixed_workloads import MIXED  # noqa: E402
from test_mixed import MIXED_SPEC, RATIO  # noqa: E402
from test_steps import LIMITS  # noqa: E402
from workloads import PYTORCH, SEED, Step, Workload  # noqa: E402

WARM = 5
"""Steps taken before anything is measured: the first traces the plan, the rest fill caches."""
PROFILED = 9
"""Steps each profiler watches, one at a time; its figures are the medians over them."""
TOP = 3
"""The operations named a side: the ones that take the most time."""


# --- counting the calls into an engine ------------------------------------------------------


class Door:
    """What crossed into one engine: each operation's calls and the time spent inside them.
    Only calls from outside count: one the engine makes on itself while working is its own."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.depth = 0
        self.on = False

    def clear(self) -> None:
        self.calls.clear()
        self.seconds.clear()


def counted(spec: str, threads: int | None = None) -> tuple[Any, Door]:
    """The engine `spec` names, its class swapped for a subclass whose every operation counts
    its calls and times them into the `Door` (on the class, not the instance: a compiled step's
    capture sets its own watches on the instance and takes them off again); a light engine on
    `threads` threads where that is given (libtorch's threads are the process's, set around
    each step by `two_threads`)."""
    engine = make_engine(spec)
    if threads is not None and isinstance(engine, LightEngine):
        engine = LightEngine(engine.precision, threads=threads)
    door = Door()
    kind = type(engine)

    def watched(name: str, own: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kw: Any) -> Any:
            if not door.on or door.depth:
                return own(self, *args, **kw)
            door.depth += 1
            started = time.perf_counter()
            try:
                return own(self, *args, **kw)
            finally:
                door.seconds[name] += time.perf_counter() - started
                door.calls[name] += 1
                door.depth -= 1

        return call

    names = operations(engine)
    # An operation the engine holds as its own (offered at some settings only, set on it when
    # made: the torch engine's LSTM over a sequence) is watched where it is held.
    held = {name: value for name, value in vars(engine).items() if name in names}
    methods = {name: watched(name, getattr(kind, name)) for name in names if name not in held}
    engine.__class__ = type(f"Counted{kind.__name__}", (kind,), methods)
    for name, bound in held.items():
        call = watched(name, lambda _self, *args, _bound=bound, **kw: _bound(*args, **kw))
        setattr(engine, name, functools.partial(call, engine))
    return engine, door


# --- the profilers --------------------------------------------------------------------------


def python_calls(step: Step) -> tuple[float, pstats.Stats]:
    """Python calls a step (cProfile's total calls over a few steps, a step's share), and the
    statistics."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(PROFILED):
        step()
    profile.disable()
    stats = pstats.Stats(profile)
    return stats.total_calls / PROFILED, stats  # type: ignore[attr-defined]


def numpy_us(stats: pstats.Stats) -> float:
    """A step's time inside NumPy's own functions, as cProfile sees them."""
    seconds = 0.0
    for (file, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if "numpy" in file or (file == "~" and "numpy" in name):
            seconds += row[2]  # the function's own time
    return seconds / PROFILED * 1e6


def aten(step: Step) -> tuple[float, int, list[dict[str, Any]]]:
    """torch.profiler over a few steps, one at a time: the share of a profiled step the aten
    operations' self CPU time is and how many aten calls it made (each level), the medians over
    the steps, and the operations that took the most (µs as profiled)."""
    from torch.profiler import ProfilerActivity, profile

    each: list[dict[str, tuple[float, int]]] = []
    walls = []
    for _ in range(PROFILED):
        with profile(activities=[ProfilerActivity.CPU]) as watched:
            started = time.perf_counter()
            step()
            walls.append((time.perf_counter() - started) * 1e6)
        each.append(
            {
                e.key: (e.self_cpu_time_total, e.count)
                for e in watched.key_averages()
                if e.key.startswith("aten::")
            }
        )
    share = statistics.median(
        sum(us for us, _ in ops.values()) / wall for ops, wall in zip(each, walls, strict=True)
    )
    calls = round(statistics.median(sum(n for _, n in ops.values()) for ops in each))
    return share, calls, _top(each)


def on_the_engine(step: Step, door: Door) -> tuple[float, float, list[dict[str, Any]]]:
    """Calls into the engine a step and the share of the step spent inside them (the medians
    over a few steps, one at a time), and the operations that took the most (µs as counted)."""
    each: list[dict[str, tuple[float, int]]] = []
    walls = []
    door.on = True
    try:
        for _ in range(PROFILED):
            door.clear()
            started = time.perf_counter()
            step()
            walls.append((time.perf_counter() - started) * 1e6)
            each.append({name: (door.seconds[name] * 1e6, door.calls[name]) for name in door.calls})
    finally:
        door.on = False
    calls = statistics.median(sum(n for _, n in ops.values()) for ops in each)
    share = statistics.median(
        sum(us for us, _ in ops.values()) / wall for ops, wall in zip(each, walls, strict=True)
    )
    return calls, share, _top(each)


def _top(each: Sequence[dict[str, tuple[float, int]]]) -> list[dict[str, Any]]:
    """The operations whose median time a step is the largest: name, µs and calls a step."""
    names = {name for ops in each for name in ops}
    found = [
        {
            "op": name,
            "us": round(statistics.median(ops.get(name, (0.0, 0))[0] for ops in each), 1),
            "calls": max(ops.get(name, (0.0, 0))[1] for ops in each),
        }
        for name in names
    ]
    return sorted(found, key=lambda op: op["us"], reverse=True)[:TOP]


def walls(sides: Sequence[Step], steps: int) -> list[float]:
    """Each side's median step time (µs), the sides' steps taken in turn."""
    times: list[list[float]] = [[] for _ in sides]
    for _ in range(steps):
        for side, step in enumerate(sides):
            started = time.perf_counter()
            step()
            times[side].append(time.perf_counter() - started)
    return [statistics.median(each) * 1e6 for each in times]


# --- one goal -------------------------------------------------------------------------------


def profiled(
    workload: Workload, spec: str, steps: int, goal: float, results: str = "steps"
) -> dict[str, Any]:
    """The workload's step on `spec` beside its peer's: the figures of both sides. `goal`: its
    ratio's goal; `results`: where the benchmarks' figures for it are (steps.json's section)."""
    engine, door = counted(spec)
    ours, peer = workload.step(engine), workload.peer()
    floor = workload.floor() if workload.floor is not None else None
    taken = [ours, peer] if floor is None else [ours, peer, floor]
    for _ in range(WARM):
        for step in taken:
            step()
    ours_us, peer_us, *floor_us = walls(taken, steps)
    sides: dict[str, dict[str, Any]] = {}
    for side, step, wall in ((spec, ours, ours_us), (PYTORCH, peer, peer_us)):
        calls, stats = python_calls(step)
        figures: dict[str, Any] = {"step_us": round(wall, 1), "python_calls": round(calls)}
        if side == spec:
            engine_calls, inside, top = on_the_engine(step, door)
            figures.update(engine_calls=round(engine_calls), engine_us=round(inside * wall, 1))
        if side == PYTORCH or spec.startswith("torch"):
            share, aten_calls, top = aten(step)
            figures.update(aten_calls=aten_calls)
        else:
            share = inside
            figures.update(numpy_us=round(numpy_us(stats), 1))
        kernels = share * wall
        figures.update(
            kernel_us=round(kernels, 1),
            outside_us=round(max(wall - kernels, 0.0), 1),
            top=top,
        )
        sides[side] = figures
    found = {
        "workload": workload.name,
        "title": workload.title,
        "engine": spec,
        "goal": goal,
        "peer_name": workload.peer_name,
        "results": results,
        "ratio": round(ours_us / peer_us, 3),
        "steps": steps,
        "ours": sides[spec],
        "peer": sides[PYTORCH],
    }
    if floor is not None:  # the step written by hand in NumPy: its time and calls alone
        found["floor"] = {
            "step_us": round(floor_us[0], 1),
            "python_calls": round(python_calls(floor)[0]),
            "ratio": round(floor_us[0] / peer_us, 3),
        }
    found["two_threads"] = two_threads(workload, spec, steps)
    return found


def two_threads(workload: Workload, spec: str, steps: int) -> dict[str, Any]:
    """Both sides' steps at one thread and at two (libtorch's threads, NumPy's BLAS, the light
    engine's pool), the four taken in turn, each round, so that what a second core gives is
    measured in the same rounds: their median times; and at two threads, each side's top
    operations (light's at its door, libtorch's by torch.profiler's self time)."""
    import torch
    from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

    blas = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    counts = [lib.get_num_threads() for lib in blas]
    before = torch.get_num_threads()

    def on(threads: int) -> None:
        torch.set_num_threads(threads)
        for library in blas:
            library.set_num_threads(threads)

    one, _ = counted(spec, threads=1)
    two, door = counted(spec, threads=2)
    peer = workload.peer()
    sides = [(workload.step(one), 1), (peer, 1), (workload.step(two), 2), (peer, 2)]
    times: list[list[float]] = [[] for _ in sides]
    try:
        for _ in range(WARM):
            for step, threads in sides:
                on(threads)
                step()
        for _ in range(steps):
            for index, (step, threads) in enumerate(sides):
                on(threads)
                started = time.perf_counter()
                step()
                times[index].append((time.perf_counter() - started) * 1e6)
        on(2)
        ours = sides[2][0]
        mine = aten(ours)[2] if spec.startswith("torch") else on_the_engine(ours, door)[2]
        theirs = aten(peer)[2]
    finally:
        torch.set_num_threads(before)
        for library, count in zip(blas, counts, strict=True):
            library.set_num_threads(count)
    ours_one, peer_one, ours_us, peer_us = (statistics.median(each) for each in times)
    return {
        "ours_one_us": round(ours_one, 1),
        "peer_one_us": round(peer_one, 1),
        "ours_us": round(ours_us, 1),
        "peer_us": round(peer_us, 1),
        "ratio": round(ours_us / peer_us, 3),
        "ours_top": mine,
        "peer_top": theirs,
    }


def load() -> dict[str, Any]:
    """The machine's load while it was measured: the load averages over 1, 5 and 15 minutes."""
    one, five, fifteen = os.getloadavg()
    return {"load_average": [round(one, 2), round(five, 2), round(fifteen, 2)]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "profiles.json")
    parser.add_argument(
        "--steps", type=at_least_one, default=30, help="steps a side for the wall time"
    )
    parser.add_argument("--only", nargs="*", default=None, help="workloads to profile")
    args = parser.parse_args(argv)
    workloads = {w.name: w for w in SEED}
    mixed = {w.name: w for w in MIXED}
    goals = [
        (workloads[name], spec, goal, "steps")
        for (name, spec), goal in LIMITS.items()
        if name in workloads
    ]
    goals += [
        (mixed[name], MIXED_SPEC, goal, "mixed")
        for name, (goal, _) in RATIO.items()
        if goal is not None and name in mixed
    ]
    unknown = sorted(set(args.only or ()) - {workload.name for workload, *_ in goals})
    if unknown:  # was a file of no profiles, and a page without "Where the time goes" (trial CP)
        names = ", ".join(dict.fromkeys(workload.name for workload, *_ in goals))
        parser.error(f"--only {', '.join(unknown)}: no goal of that workload; they are {names}")
    before = load()
    profiles = []
    for workload, spec, goal, results in goals:
        if args.only is not None and workload.name not in args.only:
            continue
        print(f"profiling {workload.name} on {spec} beside {workload.peer_name}", flush=True)
        profiles.append(profiled(workload, spec, args.steps, goal, results))
    after = load()
    found = {
        "environment": {
            **environment(),
            "command": "python benchmarks/profile_steps.py",
            "load_before": before["load_average"],
            "load_after": after["load_average"],
        },
        "profiles": profiles,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

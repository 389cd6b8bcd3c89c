"""What the benchmarks share (conftest puts this folder on the path): the engines present, a fair
way to time them beside their peer, the machine they ran on, and the results files.

The machine is shared and noisy, so no bare time is asserted: every side of a comparison (the
peer and each engine) is timed in the same rounds, one after another, each round of each side
resting first (`SETTLE`), the order turned from round to round; a side's ratio is the median,
over the rounds, of its time over the peer's time in the same round. A burst of load then moves
a round or two, not the median.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deepsharp.core import available_engines, make_engine
from deepsharp.core.engine import describe_engine, precision_named
from deepsharp.core.errors import EngineUnavailableError
from deepsharp.core.version import __version__ as deepsharp_version

HERE = Path(__file__).parent
RESULTS = Path(
    os.environ.get("DEEPSHARP_BENCHMARK_RESULTS")
    or Path(tempfile.gettempdir()) / "deepsharp-benchmark-results"
)
"""The folder the results files (steps.json, scaling.json) are written into: the nox sessions
name it (`results/`, which the docs are generated from, with `--publish`; their temporary
folder otherwise). A run by hand (`pytest benchmarks`) writes into the system's temporary
folder, never into the checkout's published figures."""

SETTLE = 0.15
"""Seconds of rest before each side's round: a thread pool that has just worked spins a while,
waiting for more (OpenBLAS's under NumPy about 0.1 s, libgomp's under torch a few ms), and would
take the cores from the next side's first calls. Rested, each side's round has the cores alone.
(0.3 s before: the rests were three quarters of the benchmarks' time, and no figure moved.)"""

ROUND_SECONDS = 0.1
"""About how long each side works in a round: as many calls as fill it (at least one)."""

LONG = 1.0
"""A side whose single call takes longer than this is timed in the first `LONG_ROUNDS` rounds only."""
LONG_ROUNDS = 3


def engine_specs(mixed: bool = False) -> list[str]:
    """Every engine installed here that can be made, at its default spec and at each other
    precision it offers (light, light:float32, torch:cpu, torch:cpu:strict, testbuffer); the
    mixed precisions only with `mixed` (their workloads name them, beside their own peer)."""
    specs = []
    for name in available_engines():
        try:
            description = describe_engine(name)
            make_engine(description.default_spec)
        except EngineUnavailableError:
            continue
        specs.append(description.default_spec)
        for other in description.precisions[1:]:
            if not mixed and precision_named(other).mixed:
                continue
            spec = description.spec_with(other)
            try:  # a precision offered on cards only (torch's mixed_float16) is left out here
                make_engine(spec)
            except EngineUnavailableError:
                continue
            specs.append(spec)
    return specs


BUSY = 0.2
"""A round is busy where other processes took more than this share of the machine's cores
while one of its sides was timed (read from /proc/stat beside this process's own CPU time)."""


@dataclass
class Timed:
    """One side's seconds a call round by round, and the share of the cores other processes
    took while it was timed (None where it sat the round out, or where that is unknown)."""

    calls: int
    seconds: list[float | None]
    others: list[float | None]


@dataclass
class Rounds:
    """Every side's timings in the same rounds, and which rounds were quiet.

    The figures come from the quiet rounds where at least half of the rounds (and 3) were
    quiet; otherwise from every round, and the comparison is `busy`: its figures say more about
    the other processes than about the code."""

    timed: dict[str, Timed]

    @property
    def count(self) -> int:
        return max(len(t.seconds) for t in self.timed.values())

    def others(self, round_: int) -> float:
        """The most of the cores other processes took while a side of this round was timed."""
        shares = [share for t in self.timed.values() if (share := t.others[round_]) is not None]
        return max(shares, default=0.0)

    @property
    def quiet(self) -> list[int]:
        return [r for r in range(self.count) if self.others(r) <= BUSY]

    @property
    def busy(self) -> bool:
        return len(self.quiet) < min(self.count, max(3, (self.count + 1) // 2))

    @property
    def kept(self) -> list[int]:
        return list(range(self.count)) if self.busy else self.quiet

    def seconds(self, name: str) -> list[float]:
        timed = self.timed[name].seconds
        return [s for r in self.kept if (s := timed[r]) is not None]

    def median(self, name: str) -> float:
        return statistics.median(self.seconds(name))

    def ratios(self, name: str, peer: str) -> list[float]:
        """The side's time over the peer's, round by round, where both were timed."""
        mine, theirs = self.timed[name].seconds, self.timed[peer].seconds
        return [
            a / b for r in self.kept if (a := mine[r]) is not None and (b := theirs[r]) is not None
        ]

    def each_round(self, name: str, peer: str) -> list[float | None]:
        """The side's time over the peer's in every kept round (None where either sat it out):
        two sides' lists line up round by round."""
        mine, theirs = self.timed[name].seconds, self.timed[peer].seconds
        return [
            a / b if (a := mine[r]) is not None and (b := theirs[r]) is not None else None
            for r in self.kept
        ]

    def load(self) -> dict[str, Any]:
        """What the other processes took, for the results: each round's share, and the verdict."""
        return {
            "others_share_each_round": [round(self.others(r), 3) for r in range(self.count)],
            "quiet_rounds": len(self.quiet),
            "busy": self.busy,
        }


def busy(load: Mapping[str, Any]) -> str:
    """What a busy comparison's load was, in words, for its messages."""
    shares = load["others_share_each_round"]
    return (
        f"other processes took up to {max(shares):.0%} of the cores; {load['quiet_rounds']} of "
        f"{len(shares)} rounds quiet: measure again on a quiet machine"
    )


def interleaved(sides: Mapping[str, Callable[[], object]], rounds: int) -> Rounds:
    """Each side's seconds a call, timed in `rounds` interleaved rounds (see the module);
    DEEPSHARP_BENCHMARK_ROUNDS sets another count for every comparison (a quick look: 2)."""
    rounds = int(os.environ.get("DEEPSHARP_BENCHMARK_ROUNDS", rounds))
    calls, long = {}, set()
    for name, work in sides.items():
        work()  # first calls trace, allocate and fill caches
        start = time.perf_counter()
        work()
        once = time.perf_counter() - start
        calls[name] = max(1, min(10_000, round(ROUND_SECONDS / max(once, 1e-7))))
        if once > LONG:
            long.add(name)
    timed = {name: Timed(calls[name], [], []) for name in sides}
    names = list(sides)
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            if name in long and round_ >= LONG_ROUNDS:
                timed[name].seconds.append(None)
                timed[name].others.append(None)
                continue
            work, number = sides[name], calls[name]
            time.sleep(SETTLE)
            before = _machine()
            for _ in range(number):
                work()
            after = _machine()
            timed[name].seconds.append((after[0] - before[0]) / number)
            timed[name].others.append(_others(before, after))
    return Rounds(timed)


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CORES = os.cpu_count() or 1


def _machine() -> tuple[float, float | None, float]:
    """Now: the wall clock, the CPU seconds every core has worked since boot (None where
    /proc/stat is missing), and this process's CPU seconds (all its threads)."""
    wall, own = time.perf_counter(), time.process_time()
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return wall, None, own
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return wall, (user + nice + system + irq + softirq + steal) / _TICKS, own


def _others(
    before: tuple[float, float | None, float], after: tuple[float, float | None, float]
) -> float | None:
    """The share of the machine's cores that other processes (or the hypervisor) took."""
    if before[1] is None or after[1] is None:
        return None
    others = (after[1] - before[1]) - (after[2] - before[2])
    return min(1.0, max(0.0, others / ((after[0] - before[0]) * _CORES)))


def compare(
    sides: Mapping[str, Callable[[], object]], peer: Callable[[], object], rounds: int
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every side beside the peer in the same rounds: each side's figures (median step, the
    median of its per-round ratios, the ratios themselves) and the peer's, with the load."""
    timed = interleaved({**sides, "": peer}, rounds)
    figures = {}
    for name in sides:
        each = timed.ratios(name, "")
        figures[name] = {
            "step_us": _us(timed.median(name)),
            "ratio": round(statistics.median(each), 3),
            "ratios": [round(r, 3) for r in each],
            "ratio_each_round": [
                None if r is None else round(r, 3) for r in timed.each_round(name, "")
            ],
            "calls_a_round": timed.timed[name].calls,
        }
    peer_figures = {"step_us": _us(timed.median("")), "calls_a_round": timed.timed[""].calls}
    return figures, {**peer_figures, **timed.load()}


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


# --- the machine ---------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    """What the figures were measured on and with: processor, cores, versions, thread counts,
    the command and the commit."""
    found: dict[str, Any] = {
        "processor": _processor(),
        "vector_extensions": _extensions(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "system": platform.platform(terse=True),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "deepsharp": deepsharp_version,
        "command": os.environ.get("DEEPSHARP_BENCHMARK_COMMAND")
        or "pytest " + " ".join(sys.argv[1:]),
        "commit": _commit(),
        "date": datetime.date.today().isoformat(),
        "threads": _threads(),
    }
    try:
        import torch

        found["torch"] = torch.__version__
        found["threads"]["torch (intra-op)"] = torch.get_num_threads()
        found["threads"]["torch (inter-op)"] = torch.get_num_interop_threads()
    except ImportError:
        found["torch"] = None
    return found


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


EXTENSIONS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")
"""The processor's vector extensions worth naming beside figures (bfloat16 needs the last three)."""


def has_amx() -> bool:
    """Whether the processor multiplies bfloat16 on AMX tiles (PyTorch's oneDNN uses them)."""
    return "amx_bf16" in (_extensions() or [])


def _extensions() -> list[str] | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return [name for name in EXTENSIONS if name in flags]
    except OSError:
        pass
    return None


def _threads() -> dict[str, Any]:
    """The thread pools loaded (NumPy's BLAS, libtorch's OpenMP), as threadpoolctl sees them."""
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]
    except ImportError:
        return {"note": "threadpoolctl is not installed: BLAS threads unknown"}
    pools = {}
    for pool in threadpool_info():
        label = f"{pool['internal_api']} {pool.get('version') or ''}".strip()
        pools[f"{label} ({Path(pool['filepath']).name})"] = pool["num_threads"]
    return pools


def _commit() -> str | None:
    try:
        said = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=10"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return said.stdout.strip() or None


# --- results -------------------------------------------------------------------------------

_recorded: dict[str, list[tuple[tuple[str, ...], dict[str, Any]]]] = {}


def record(file: str, path: Sequence[str], figures: Mapping[str, Any]) -> None:
    """Keep figures at `path` in the results file `file` (steps or scaling); the files are
    written when the session ends, with the machine they were measured on."""
    _recorded.setdefault(file, []).append((tuple(path), dict(figures)))
    shown = ", ".join(f"{k}={v}" for k, v in figures.items() if k not in ("ratios", "engines"))
    print(f"\n{file}: {' / '.join(path)}: {shown}")


def summary() -> list[str]:
    """One line a comparison or job measured in this session, for the terminal."""
    lines = []
    for records in _recorded.values():
        for path, found in records:
            where = " / ".join(path)
            if "engines" in found:
                ratios = ", ".join(
                    f"{spec} {each['ratio']:.2f}x" for spec, each in found["engines"].items()
                )
                lines.append(f"{where}: {ratios} (peer {found['peer_step_us']:.0f} us)")
            elif "rows_per_second" in found:
                lines.append(f"{where}: {found['rows_per_second']:,} rows/s")
            elif "seconds" in found:
                lines.append(f"{where}: {found['seconds']} s")
    return lines


def write_results() -> list[Path]:
    """Each results file measured in this session, with this session's machine: what it
    measured replaces what the file held at the same place, the rest is kept (a partial run)."""
    written: list[Path] = []
    if not _recorded:
        return written
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = environment()
    for file, records in _recorded.items():
        path = RESULTS / f"{file}.json"
        held = json.loads(path.read_text()) if path.exists() else {}
        for where, figures in records:
            place = held
            for key in where[:-1]:
                place = place.setdefault(key, {})
            place[where[-1]] = figures
        held["environment"] = machine
        path.write_text(json.dumps(held, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        written.append(path)
    return written

"""docs/performance.md's "Where the time goes (goals not met)": each goal not met, its profile
beside its peer's (PyTorch eager's; for mixed precision, PyTorch's autocast step's:
benchmarks/results/profiles.json, written by profile_steps.py) and a sentence saying where the
time goes. performance_doc.page puts it on the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from page_cells import duration, times
from workloads import FLOOR, PYTORCH

PROFILES = """\
Each goal not met was profiled by `python benchmarks/profile_steps.py` (`nox -s profiles`): the
engine's step and its peer's step of the same workload (PyTorch eager's; a mixed precision's,
PyTorch's autocast step) in one process, each warmed first,
their steps taken in turn, every thread pool (libtorch's, OpenBLAS's, light's) at one thread so
that the profile shows the work rather than threads waiting for a core. A table gives each
side's step (the median of {steps} steps; its ratio is not the benchmarks' figure, which is the
median of interleaved rounds), its Python calls a step (cProfile's total), its calls into the
engine (counted at the engine's door, the engine's calls on itself left out) or into libtorch
(aten operations, each level), the time its **kernels** take and the time **outside** them (the
step less the kernels: Python around them), and the operations that take the most. A kernel's
time is torch.profiler's self CPU time of the aten operations on torch:cpu and on PyTorch, and
on light the time inside the engine's calls (NumPy's work and the engine's own Python around
it). A profiler slows what it watches: the kernels' time is their share of a watched step times
the step's time unwatched, and the top operations' times are as watched. The machine's load
averages (1, 5, 15 minutes) were {load_before} before and {load_after} after.
"""


def profiles_section(
    profiles: Mapping[str, Any] | None, steps: Mapping[str, Any] | None
) -> list[str]:
    """Where the time goes, for each goal not met: the engine's step beside PyTorch's."""
    lines = ["## Where the time goes (goals not met)", ""]
    if not profiles:
        return [*lines, "Not profiled: `nox -s profiles` gives it.", ""]
    unmet = [found for found in profiles["profiles"] if not goal_met(found, steps)]
    if not unmet:
        return [*lines, "Every goal profiled is met.", ""]
    environment = profiles.get("environment", {})
    lines.append(
        PROFILES.format(
            steps=unmet[0]["steps"],
            load_before=_load(environment.get("load_before")),
            load_after=_load(environment.get("load_after")),
        )
    )
    for found in unmet:
        ours, peer, spec = found["ours"], found["peer"], found["engine"]
        peer_name = found.get("peer_name", PYTORCH)
        lines += [
            f"**{found['workload']} on {spec}** (goal ≤ {found['goal']:g}× {peer_name}; "
            f"{times(found['ratio'])} here)",
            "",
            "| | step | Python calls | calls into the kernels | kernels | outside kernels "
            "| top operations (self time, calls a step) |",
            "|---|---|---|---|---|---|---|",
            _profile_row(spec, ours),
            _profile_row(peer_name, peer),
            *([_floor_row(found["floor"])] if "floor" in found else []),
            "",
            where_it_goes(found),
            "",
        ]
        if "two_threads" in found:
            lines += [second_core(found), ""]
        if "floor" in found:
            lines += [floor_said(found, steps), ""]
        if found["workload"] == "lstm":
            lines += [recurrent_why(found), ""]
    return lines


def goal_met(found: Mapping[str, Any], steps: Mapping[str, Any] | None) -> bool:
    """Whether the goal is met: by the benchmarks' ratio where steps.json has it (in its section
    `results`: steps, or mixed; and was not busy), else by the profile's own."""
    measured = (steps or {}).get(found.get("results", "steps"), {}).get(found["workload"], {})
    figures = measured.get("engines", {}).get(found["engine"])
    if figures is not None and not measured.get("busy"):
        return bool(figures["ratio"] <= found["goal"])
    return bool(found["ratio"] <= found["goal"])


def _load(averages: Sequence[float] | None) -> str:
    return "—" if not averages else ", ".join(f"{value:.2f}" for value in averages)


def _profile_row(side: str, figures: Mapping[str, Any]) -> str:
    calls = []
    if "engine_calls" in figures:
        calls.append(f"{figures['engine_calls']:,} engine")
    if "aten_calls" in figures:
        calls.append(f"{figures['aten_calls']:,} aten")
    top = "; ".join(
        f"{op['op'].removeprefix('aten::')} {duration(op['us'])} ({op['calls']:,})"
        for op in figures["top"]
    )
    return (
        f"| {side} | {duration(figures['step_us'])} | {figures['python_calls']:,} | "
        f"{', '.join(calls)} | {duration(figures['kernel_us'])} | "
        f"{duration(figures['outside_us'])} | {top} |"
    )


def _floor_row(floor: Mapping[str, Any]) -> str:
    return f"| {FLOOR} | {duration(floor['step_us'])} | {floor['python_calls']:,} | — | — | — | — |"


def floor_said(found: Mapping[str, Any], steps: Mapping[str, Any] | None = None) -> str:
    """The step written by hand in NumPy beside ours and the goal: how far above that floor
    ours is, and what the goal leaves above it — by the benchmarks' rounds, where the goal is
    judged, when steps.json timed the floor, else by the profile's own steps."""
    measured = (steps or {}).get("steps", {}).get(found["workload"], {})
    hand = measured.get("references", {}).get(FLOOR)
    mine = measured.get("engines", {}).get(found["engine"])
    if hand is not None and mine is not None:
        where = "In the benchmarks' rounds, where the goal is judged"
        floor_us, floor_ratio, ours_us = hand["step_us"], hand["ratio"], mine["step_us"]
        peer_us = measured["peer_step_us"]
    else:
        where = "In this profile's steps"
        floor, ours = found["floor"], found["ours"]
        floor_us, floor_ratio, ours_us = floor["step_us"], floor["ratio"], ours["step_us"]
        peer_us = found["peer"]["step_us"]
    allowed = found["goal"] * peer_us - floor_us
    said = (
        f"{where}, the step written by hand in NumPy (the row *{FLOOR}*: `numpy_titanic_step` "
        "in benchmarks/workloads.py, the same network, slots, loss and Adam at float32, with no "
        f"framework and no check of the rows) takes {duration(floor_us)}, "
        f"{times(floor_ratio)} PyTorch's; ours takes {duration(ours_us)}, "
        f"{ours_us / floor_us:.2f}× that floor, {duration(ours_us - floor_us)} above it."
    )
    if allowed <= 0:
        return said + (
            f" The goal, ≤ {found['goal']:g}×, asks less than the hand-written step itself takes."
        )
    return said + (
        f" The goal, ≤ {found['goal']:g}×, leaves {duration(allowed)} above it for everything "
        "a library's step does beyond NumPy's arithmetic: the batch's checks (its shape, finite "
        "values, the targets), the plan's calls and, on light, strict's float64 totals."
    )


def where_it_goes(found: Mapping[str, Any]) -> str:
    """One sentence from the figures: the kernels' time beside PyTorch's, the rest, and what the
    goal asks."""
    ours, peer, spec = found["ours"], found["peer"], found["engine"]
    torch = spec.startswith("torch")
    kernels = (
        "libtorch's own work (aten's self time)"
        if torch
        else "the time inside light's calls (NumPy's work and the engine's Python around it; "
        f"{duration(ours.get('numpy_us', 0.0))} inside NumPy's own functions, as cProfile sees "
        "them)"
    )
    said = (
        f"On {spec}, {kernels} is {duration(ours['kernel_us'])} of our "
        f"{duration(ours['step_us'])} step, against {duration(peer['kernel_us'])} of PyTorch's "
        f"{duration(peer['step_us'])}; the rest, {duration(ours['outside_us'])} against "
        f"PyTorch's {duration(peer['outside_us'])}, is Python around the kernels "
        f"({ours['python_calls']:,} Python calls a step against {peer['python_calls']:,})."
    )
    over = ours["step_us"] - found["goal"] * peer["step_us"]
    if over <= 0:
        return said + " In this profile the step meets its goal."
    target = f" Meeting ≤ {found['goal']:g}× asks {duration(over)} less"
    if over <= ours["outside_us"]:
        share = over / ours["outside_us"]
        return said + f"{target}: {share:.0%} of the time outside the kernels."
    inside = "the kernels themselves" if torch else "the engine's calls themselves"
    return (
        said + f"{target}: more than all the time outside the kernels, so {inside} must take less."
    )


def second_core(found: Mapping[str, Any]) -> str:
    """What a second thread gives each side: the steps at two threads beside those at one, and
    the operations that take the most at two."""
    two = found["two_threads"]
    ours_one = two.get("ours_one_us", found["ours"]["step_us"])
    peer_one = two.get("peer_one_us", found["peer"]["step_us"])

    def top(operations: Sequence[Mapping[str, Any]]) -> str:
        return ", ".join(
            f"{op['op'].removeprefix('aten::')} {duration(op['us'])}" for op in operations
        )

    return (
        f"At two threads, as the benchmarks run (libtorch's threads and light's pool at 2, "
        f"NumPy's BLAS too where light does not hold it to one), our step takes "
        f"{duration(two['ours_us'])} against PyTorch's {duration(two['peer_us'])}, "
        f"{times(two['ratio'])}: with a second core ours runs "
        f"{ours_one / two['ours_us']:.2f} times as fast as on one, PyTorch's "
        f"{peer_one / two['peer_us']:.2f} times (both thread counts timed in the same rounds). "
        "The most time at two threads: ours "
        f"{top(two['ours_top'])}; PyTorch's {top(two['peer_top'])}."
    )


def recurrent_why(found: Mapping[str, Any]) -> str:
    """The LSTM step beside PyTorch's: whose kernels each side runs for the sequence."""
    from workloads import STEPS

    ours, peer = found["ours"], found["peer"]

    def kernels(side: Mapping[str, Any]) -> str:
        return ", ".join(
            f"{op['op'].removeprefix('aten::')} {duration(op['us'])}"
            for op in side["top"]
            if "lstm" in op["op"] or "rnn" in op["op"]
        )

    mine, theirs = kernels(ours), kernels(peer)
    if mine:
        how = (
            f"torch:cpu runs the LSTM's whole sequence of {STEPS} positions in oneDNN's kernel "
            f"each way, as PyTorch's `nn.LSTM` does ({mine}; PyTorch's {theirs or 'its own'}): "
            "the LSTM is one rule over its sequence, whose fast paths `lstm_sequence` and "
            "`lstm_sequence_back` the torch engine offers at float32 on the processor"
        )
    else:
        how = (
            f"the LSTM's {STEPS} positions run one at a time (the fast paths `lstm_cell` and "
            "`lstm_cell_back`), where PyTorch's `nn.LSTM` runs the whole sequence in one fused "
            f"operation each way ({theirs or 'its top operations above'})"
        )
    return (
        f"The LSTM: {how}; the step makes {ours['engine_calls']:,} engine calls and "
        f"{ours.get('aten_calls', 0):,} aten calls, PyTorch's {peer.get('aten_calls', 0):,}."
    )

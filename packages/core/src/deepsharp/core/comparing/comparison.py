"""What a comparison found: one row an operation of the step, and the first that broke its bound.

`Comparison` reads as a table (`str`), as a pandas DataFrame (`to_frame()`, pandas optional) and
as a plot of the ratios along the step (`plot(path)`, matplotlib optional).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from deepsharp.core.engine import EngineIdentity, Precision
from deepsharp.core.plotting import image_kind, new_figure

__all__ = ["Comparison", "Difference", "totals_bound"]

PHASES = ("batch", "forward", "way back", "update")
"""The parts of a step, in the order it takes them: the batch put on the engine, the forward
pass (the loss included), the way back towards the slots, the optimizer's update."""

_TOTALS = {
    "strict": "3u·Σ|terms|",
    "float32": "(n + 1)u·Σ|terms|",
}


def totals_bound(precision: Precision) -> str:
    """The bound a precision holds its totals to, in words (u = 2^-24, n the terms a total adds)."""
    if precision.mixed:
        return (
            f"((1 + u_h)³(1 + (n + 1)u) - 1)·Σ|terms| on products, u_h = {precision.half_unit:g} "
            f"({precision.half}), and (n + 1)u·Σ|terms| on sums"
        )
    return _TOTALS.get(precision.name, precision.name)


_LOOSENESS = ("strict", "float32", "mixed_float16", "mixed_bfloat16")


def looser(a: Precision, b: Precision) -> Precision:
    """Of two precisions, the one whose totals bound is wider (the same: either)."""
    rank = {name: index for index, name in enumerate(_LOOSENESS)}
    return b if rank.get(b.name, 0) > rank.get(a.name, 0) else a


@dataclass(frozen=True)
class Difference:
    """One operation of the step, done by both engines on the same inputs.

    `phase` ("batch", "forward", "way back", "update"), `layer` (its name; "loss" for the loss,
    "" where no layer asked), `rule` (the rulebook's operation it belongs to, where one does),
    `operation` (the engine's), `family` ("totals", "values", "moves", "transfers"; None where
    compare knows no bound for it), the shapes of its inputs and outputs; at its worst element,
    `difference` (|one engine's - the other's|), `bounds` (what each engine's precision allows
    there, in the engines' order) and `ratio` (the difference over the looser bound: past 1,
    the operation broke its bound; a move or a transfer allows none, so any difference is an
    infinite ratio). `detail` says which output or slot, and what else went wrong (an input
    changed, a transfer made). `vacuous`: an output's bound bounds nothing (infinite, or past
    every value of it: `bounds.bounds_nothing`), so being within it says nothing."""

    index: int
    phase: str
    layer: str
    rule: str | None
    operation: str
    family: str | None
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]
    difference: float
    bounds: tuple[float, float]
    ratio: float
    detail: str = ""
    vacuous: bool = False

    @property
    def bound(self) -> float:
        """The looser of the two bounds: what the difference is held to."""
        return max(self.bounds)

    @property
    def broken(self) -> bool:
        """Whether the difference is past its bound (a ratio over 1, or NaN)."""
        return not self.ratio <= 1.0

    @property
    def where(self) -> str:
        """Where in the step, in words: `matmul in layer 'dense' (forward, affine)`."""
        place = f"layer {self.layer!r}" if self.layer not in ("", "loss") else self.layer
        rule = f", {self.rule}" if self.rule and self.rule != self.operation else ""
        return f"{self.operation}{' in ' + place if place else ''} ({self.phase}{rule})"

    @property
    def shapes(self) -> str:
        """The input shapes and what the operation gave: `(32, 14) @ (14, 16) -> (32, 16)`."""
        shown, made = _shapes(self.inputs), _shapes(self.outputs)
        if not made:
            return shown
        return f"{shown} -> {made}" if shown else f"-> {made}"


def _shapes(shapes: tuple[tuple[int, ...], ...]) -> str:
    """Shapes in a line; many (an update of every slot) as the first two and the count."""
    if len(shapes) > 3:
        return f"{_shape(shapes[0])}, {_shape(shapes[1])}, ... ({len(shapes)} tensors)"
    return ", ".join(_shape(s) for s in shapes)


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _figure(value: float) -> str:
    if value == 0.0:
        return "0"
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:.3g}"


@dataclass
class Comparison:
    """One training step on two engines, operation by operation (`rows`, in the order the step
    took them): `engines` (the reference's identity, then the one that took the step), their
    `precisions`, and `first`, the first operation past its bound (None: every one within)."""

    engines: tuple[EngineIdentity, EngineIdentity]
    precisions: tuple[Precision, Precision]
    rows: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> Difference | None:
        """The first operation of the step whose difference is past its bound."""
        return next((row for row in self.rows if row.broken), None)

    @property
    def parted(self) -> Difference | None:
        """The first operation whose outputs differ at all between the engines (within its bound
        or not): where two engines that drift apart over a run first part."""
        return next((row for row in self.rows if row.difference != 0.0 or row.broken), None)

    @property
    def worst(self) -> Difference | None:
        """The operation whose difference comes nearest its bound, or furthest past it."""
        judged = [row for row in self.rows if row.family is not None]
        if not judged:
            return None
        return max(judged, key=lambda row: math.inf if math.isnan(row.ratio) else row.ratio)

    @property
    def ratio(self) -> float:
        """The worst ratio of the step (0: the engines agree bit for bit)."""
        worst = self.worst
        return 0.0 if worst is None else worst.ratio

    @property
    def within(self) -> bool:
        """Whether every operation is within its bound (see `vacuous` for bounds that bound
        nothing)."""
        return self.first is None

    @property
    def vacuous(self) -> list[Difference]:
        """The chains (fast paths held to the bound their reference propagates) within a bound
        that bounds nothing (infinite, or past every value the operation gives): for these
        compare cannot tell whether the engines agree (`bounds.bounds_nothing`)."""
        return [row for row in self.rows if row.vacuous]  # never a row past its bound

    def bounds(self) -> list[str]:
        """What each engine's precision holds totals to, and which bound the comparison uses."""
        (a, b), (pa, pb) = self.engines, self.precisions
        lines = [
            f"{identity}: totals within {totals_bound(precision)}"
            for identity, precision in ((a, pa), (b, pb))
        ]
        if pa.name != pb.name:
            loose = looser(pa, pb)
            lines.append(
                f"the precisions differ: each operation is held to the looser bound, "
                f"{loose.name}'s, element by element (both are stated on each row)"
            )
        lines.append(
            "value by value: 1e-5 + 1.3e-6·|ref| (the tails: 1.3e-6·|ref|); moves and transfers: "
            "bit for bit"
        )
        return lines

    def __str__(self) -> str:
        (a, b), (pa, pb) = self.engines, self.precisions
        lines = [
            f"one training step on {b}, each operation done again on {a} from the same inputs",
            *(f"  {line}" for line in self.bounds()),
            *(f"  {note}" for note in self.notes),
            "",
        ]
        heads = ["#", "phase", "layer", "operation", "shapes", "difference"]
        heads += [f"bound ({pa.name})"] + ([f"bound ({pb.name})"] if pa.name != pb.name else [])
        heads.append("ratio")
        table = [heads]
        for row in self.rows:
            cells = [
                str(row.index),
                row.phase,
                row.layer,
                row.operation
                if not row.rule or row.rule == row.operation
                else f"{row.operation} ({row.rule})",
                row.shapes,
                _figure(row.difference),
                _figure(row.bounds[0]),
            ]
            if pa.name != pb.name:
                cells.append(_figure(row.bounds[1]))
            cells.append("-" if row.family is None else _figure(row.ratio))
            if row.detail:
                cells[-1] += f"  {row.detail}"
            table.append(cells)
        widths = [max(len(line[i]) for line in table) for i in range(len(heads) - 1)]
        for line in table:
            lines.append(
                "  ".join(cell.ljust(width) for cell, width in zip(line, widths)) + "  " + line[-1]
            )
        lines.append("")
        lines.append(self.verdict())
        return "\n".join(line.rstrip() for line in lines)

    def verdict(self) -> str:
        """One line: every operation within its bound (and the worst ratio), or the first past it."""
        first = self.first
        if first is None:
            worst = self.worst
            if worst is None or worst.ratio == 0.0:
                return f"every operation within its bound: the engines agree bit for bit ({len(self.rows)} operations)"
            parted = self.parted
            apart = f"; the first apart, {parted.where}" if parted is not None else ""
            vacuous = self.vacuous
            if vacuous:
                named = ", ".join(dict.fromkeys(row.where for row in vacuous))
                return (
                    f"no operation past its bound ({len(self.rows)} operations), but "
                    f"{len(vacuous)} held to a bound that bounds nothing (infinite, or past "
                    f"every value the operation gives), so compare cannot tell whether the "
                    f"engines agree there: {named}. A chain's bound, carried through its "
                    f"operations with no cancellation, can outgrow its values (an LSTM's "
                    f"sequence over many positions, a LayerNorm's scale gradient over many "
                    f"rows): compare fewer rows, or shorter sequences, where the network allows"
                )
            return (
                f"every operation within its bound ({len(self.rows)} operations); the nearest, "
                f"{worst.where}, at {_figure(worst.ratio)} of it{apart}"
            )
        detail = f"; {first.detail}" if first.detail else ""
        if (
            first.detail
            and first.bounds == (0.0, 0.0)
            and first.family not in ("moves", "transfers")
        ):
            # outputs that cannot be held to the reference's (another shape or type, another
            # count, an input changed): no figures to give (trial CP4: 'difference inf, bound
            # 0', the cause at the line's end)
            return f"first past its bound: {first.where}, {first.shapes}: it {first.detail}"
        if math.isinf(first.difference) and any(p.half == "float16" for p in self.precisions):
            detail += (
                "; an infinity where float16's range (65,504) was passed, as a product on the "
                "way back can at a loss scale: a run skips such a step and lowers its scale, so "
                "compare at the scale the run has come down to (a later checkpoint's) to see "
                "past it"
                if first.phase == "way back"
                else "; an infinity where float16's range (65,504) was passed in the forward "
                "pass, where no loss scale reaches: scale the features or the targets (or "
                "train at mixed_bfloat16)"
                if first.phase == "forward"
                else f"; an infinity where float16's range (65,504) was passed ({first.phase})"
            )
        if first.bound == 0.0 and first.family in ("moves", "transfers"):
            return (
                f"first past its bound: {first.where}, {first.shapes}: difference "
                f"{_figure(first.difference)}, where a {first.family[:-1]} must give the same "
                f"bits on every engine (its bound is 0, so any difference is past it){detail}"
            )
        return (
            f"first past its bound: {first.where}, {first.shapes}: difference "
            f"{_figure(first.difference)}, bound {_figure(first.bound)} ({self._bound_named(first)}), "
            f"ratio {_figure(first.ratio)}{detail}"
        )

    def _bound_named(self, row: Difference) -> str:
        (pa, pb) = self.precisions
        if pa.name == pb.name:
            return pa.name
        return " / ".join(
            f"{precision.name} {_figure(bound)}" for precision, bound in zip((pa, pb), row.bounds)
        )

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas): one row an operation, with the bound
        at each precision and the ratio to the looser."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Comparison.to_frame needs pandas: pip install pandas") from None
        (pa, pb) = self.precisions
        names = (f"bound_{pa.name}", f"bound_{pb.name}") if pa.name != pb.name else ("bound", None)
        records = []
        for row in self.rows:
            record: dict[str, Any] = {
                "phase": row.phase,
                "layer": row.layer,
                "rule": row.rule,
                "operation": row.operation,
                "family": row.family,
                "inputs": [list(s) for s in row.inputs],
                "outputs": [list(s) for s in row.outputs],
                "difference": row.difference,
                names[0]: row.bounds[0],
            }
            if names[1] is not None:
                record[names[1]] = row.bounds[1]
            record["ratio"] = row.ratio
            record["vacuous"] = row.vacuous
            record["detail"] = row.detail
            records.append(record)
        return pandas.DataFrame.from_records(records, index=[row.index for row in self.rows])

    def plot(self, path: str | os.PathLike[str]) -> None:
        """Draw each operation's ratio to its bound along the step into an image file (needs
        matplotlib): a line at 1, the phases apart, the first past its bound named."""
        kind = image_kind(path, "Comparison.plot")
        floor = 1e-6
        figure = new_figure(figsize=(8, 4))
        axes = figure.subplots()
        for phase in PHASES:
            rows = [row for row in self.rows if row.phase == phase and row.family is not None]
            if rows:
                axes.scatter(
                    [row.index for row in rows],
                    [_shown(row.ratio, floor) for row in rows],
                    s=14,
                    label=phase,
                )
        axes.axhline(1.0, color="red", linestyle=":", label="the bound")
        first = self.first
        if first is not None:
            axes.annotate(
                first.where,
                (first.index, _shown(first.ratio, floor)),
                textcoords="offset points",
                xytext=(8, 8),
                fontsize=8,
            )
        axes.set_yscale("log")
        axes.set_xlabel("operation of the step")
        axes.set_ylabel(f"difference / bound (below {floor:g} shown at it)")
        (a, b) = self.engines
        axes.set_title(
            f"{b.name} against {a.name}, {self.precisions[1].name} / {self.precisions[0].name}"
        )
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(os.fspath(path), format=kind)


def _shown(ratio: float, floor: float) -> float:
    if math.isnan(ratio) or math.isinf(ratio):
        return 1e6
    return max(ratio, floor)

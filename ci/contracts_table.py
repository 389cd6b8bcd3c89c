"""Write the contract's measured worst roundings into docs/contracts.md.

    python ci/contracts_table.py [REPORT.json ...] [--doc docs/contracts.md]

Each REPORT is what `pytest --pyargs deepsharp.contracts --contracts-report REPORT` wrote
(`nox -s tests-3.11 torch -- --publish` writes them to docs/contracts/<engine>.json and runs
this; those are read when none is named). The tables go
between the `<!-- contracts-table:start -->` and `<!-- contracts-table:end -->` markers: the
worst of each family per engine and precision, the worst totals by their size, and the worst
of each operation. An engine expected but not measured keeps a placeholder row that says how to
measure it. Nothing here is written by hand, so the tables are the reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- contracts-table:start -->", "<!-- contracts-table:end -->"
EXPECTED = [
    "light",
    "light:float32",
    "light:mixed_bfloat16",
    "light:mixed_float16",
    "testbuffer",
    "torch:cpu",
    "torch:cpu:strict",
    "torch:cpu:mixed_bfloat16",
    "torch:cuda:0",
    "torch:cuda:0:strict",
    "torch:cuda:0:mixed_float16",
    "onnx",
]
"""The engines the tables should hold, in order (others measured follow them)."""
FAMILIES = [
    ("transfers", "transfers (bits)"),
    ("totals", "totals (u·Σ\\|terms\\|; of bound)"),
    ("values", "values (of tol.)"),
    ("tails", "tails (of 1.3e-6·\\|ref\\|)"),
    ("moves", "moves (bits)"),
    ("inputs", "inputs kept (bits)"),
    ("rules", "rules (of tol.)"),
    ("nudging", "nudging (of tol.)"),
    ("steps", "same bits (bits)"),
]
BITS = {"transfers", "moves", "inputs", "steps"}


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def _cell(family: str, entry: dict[str, Any] | None) -> str:
    """A worst in its family's unit; totals in u·Σ|terms| and, in brackets, as a fraction of
    the engine's precision's bound (what must stay within 1)."""
    if entry is None:
        return "-"
    if family in BITS:
        return str(int(entry["worst"]))
    if family == "totals":
        return f"{_number(entry['worst'])} ({_number(entry['of_bound'])})"
    return _number(entry["worst"])


def merge(paths: list[Path]) -> dict[str, Any]:
    """Every engine of every report (a later report's engine replaces an earlier one's), and
    the totals bound of each precision they state."""
    engines: dict[str, Any] = {}
    bounds: dict[str, str] = {}
    for path in paths:
        report = json.loads(path.read_text(encoding="utf-8"))
        engines.update(report["engines"])
        bounds.update(report.get("totals_bounds", {}))
    return {"engines": engines, "totals_bounds": bounds}


def _identity(entry: dict[str, Any]) -> str:
    identity = entry.get("identity") or {}
    return " · ".join(str(identity[k]) for k in ("name", "version", "device") if identity.get(k))


def _specs(engines: dict[str, Any]) -> list[str]:
    return [s for s in EXPECTED if s in engines] + sorted(s for s in engines if s not in EXPECTED)


def families_table(engines: dict[str, Any], bounds: dict[str, str]) -> list[str]:
    lines = [
        "| engine | identity | precision: totals bound | "
        + " | ".join(title for _, title in FAMILIES)
        + " |",
        "|---|---|---|" + "---:|" * len(FAMILIES),
    ]
    for spec in _specs(engines):
        entry = engines[spec]
        precision = entry.get("precision") or "-"
        cells = [_cell(family, entry["families"].get(family)) for family, _ in FAMILIES]
        bound = bounds.get(precision, "-").replace("|", "\\|")
        lines.append(
            f"| `{spec}` | {_identity(entry)} | {precision}: {bound} | " + " | ".join(cells) + " |"
        )
    for spec in EXPECTED:
        if spec not in engines:
            lines.append(
                f"| `{spec}` | not measured yet: `pytest --pyargs deepsharp.contracts "
                f"--engine {spec} --contracts-report "
                f"docs/contracts/{spec.replace(':', '-')}.json`, then "
                "`python ci/contracts_table.py` | - | " + " | ".join("-" for _ in FAMILIES) + " |"
            )
    return lines


def sizes_table(engines: dict[str, Any], sizes: list[str]) -> list[str]:
    lines = [
        "| engine | precision | " + " | ".join(sizes) + " |",
        "|---|---|" + "---:|" * len(sizes),
    ]
    for spec in _specs(engines):
        by_size = engines[spec].get("totals_by_size", {})
        cells = [
            f"{_number(by_size[s]['worst'])} ({_number(by_size[s]['of_bound'])})"
            if s in by_size
            else "-"
            for s in sizes
        ]
        precision = engines[spec].get("precision") or "-"
        lines.append(f"| `{spec}` | {precision} | " + " | ".join(cells) + " |")
    return lines


def operations_table(engines: dict[str, Any]) -> list[str]:
    specs = _specs(engines)
    operations = sorted({op for spec in specs for op in engines[spec]["operations"]})
    lines = [
        "| operation | family | " + " | ".join(f"`{spec}`" for spec in specs) + " |",
        "|---|---|" + "---:|" * len(specs),
    ]
    for op in operations:
        family = next(
            engines[s]["operations"][op]["family"] for s in specs if op in engines[s]["operations"]
        )
        cells = [_cell(family, engines[s]["operations"].get(op)) for s in specs]
        lines.append(f"| {op} | {family} | " + " | ".join(cells) + " |")
    return lines


def tables(merged: dict[str, Any]) -> str:
    engines, bounds = merged["engines"], merged["totals_bounds"]
    sizes = ["n ≤ 16", "n ≤ 256", "n ≤ 4096", "n > 4096"]
    return "\n".join(
        [
            "The worst of each family, per engine and precision (totals: the worst in "
            "u·Σ\\|terms\\| and, in brackets, the worst as a fraction of the precision's bound):",
            "",
            *families_table(engines, bounds),
            "",
            "Totals by their size (n, the terms one total adds): the worst in u·Σ\\|terms\\| "
            "and, in brackets, as a fraction of the bound:",
            "",
            *sizes_table(engines, sizes),
            "",
            "Worst per operation (in its family's unit):",
            "",
            *operations_table(engines),
        ]
    )


def fill(document: str, text: str) -> str:
    if START not in document or END not in document:
        raise SystemExit(f"the document has no {START} ... {END} markers to fill")
    before, rest = document.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{text}\n{END}{after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "contracts.md")
    args = parser.parse_args(argv)
    reports = args.reports or sorted((ROOT / "docs" / "contracts").glob("*.json"))
    merged = merge(reports)
    args.doc.write_text(
        fill(args.doc.read_text(encoding="utf-8"), tables(merged)), encoding="utf-8"
    )
    count = len(merged["engines"])
    print(f"{args.doc}: {count} engine(s) from {len(reports)} report(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

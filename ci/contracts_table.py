"""Write the contract's measured worst roundings into docs/contracts.md.

    python ci/contracts_table.py [REPORT.json ...] [--doc docs/contracts.md]

Each REPORT is what `pytest --pyargs deepsharp.contracts --contracts-report REPORT` wrote (nox
writes them to docs/contracts/<engine>.json; those are read when none is named). The tables go
between the `<!-- contracts-table:start -->` and `<!-- contracts-table:end -->` markers; an
engine expected but not measured keeps a placeholder row that says how to measure it.
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
    "testbuffer",
    "torch:cpu",
    "torch:cpu:strict",
    "torch:cuda:0",
]
FLOAT32_TOTALS = "float32"
"""An engine of this precision is held to (n + 1)u·Σ|terms|: its totals are that fraction."""
FAMILIES = [
    ("transfers", "transfers (bits)"),
    ("totals", "totals (u·Σ\\|terms\\|, ≤ 3)"),
    ("values", "values (x tolerance, ≤ 1)"),
    ("moves", "moves (bits)"),
    ("rules", "rules on the engine (x tolerance, ≤ 1)"),
    ("nudging", "nudging (x tolerance, ≤ 1)"),
    ("steps", "same bits (bits)"),
]


def _number(value: float | None, family: str) -> str:
    if value is None:
        return "-"
    if family in ("transfers", "moves", "steps"):
        return str(int(value))
    if value == 0:
        return "0"
    return f"{value:.3g}"


def merge(paths: list[Path]) -> dict[str, Any]:
    """Every engine of every report (a later report's engine replaces an earlier one's)."""
    engines: dict[str, Any] = {}
    for path in paths:
        engines.update(json.loads(path.read_text(encoding="utf-8"))["engines"])
    return engines


def _identity(entry: dict[str, Any]) -> str:
    identity = entry.get("identity") or {}
    keys = ("name", "version", "device", "precision")
    return " · ".join(str(identity[k]) for k in keys if identity.get(k)) or "-"


def _cell(entry: dict[str, Any], family: str, value: float | None) -> str:
    """A worst in its family's unit; an engine with float32 totals states its totals as a
    fraction of its own bound, (n + 1)u·Σ|terms|."""
    text = _number(value, family)
    precision = (entry.get("identity") or {}).get("precision")
    if family == "totals" and value is not None and precision == FLOAT32_TOTALS:
        return f"{text} of (n+1)u·Σ"
    return text


def table(engines: dict[str, Any]) -> str:
    specs = [s for s in EXPECTED if s in engines] + sorted(s for s in engines if s not in EXPECTED)
    lines = [
        "| engine | identity | " + " | ".join(title for _, title in FAMILIES) + " |",
        "|---|---|" + "---:|" * len(FAMILIES),
    ]
    for spec in specs:
        entry = engines[spec]
        cells = [_cell(entry, family, entry["families"].get(family)) for family, _ in FAMILIES]
        lines.append(f"| `{spec}` | {_identity(entry)} | " + " | ".join(cells) + " |")
    for spec in EXPECTED:
        if spec not in engines:
            lines.append(
                f"| `{spec}` | not measured yet: `pytest --pyargs deepsharp.contracts "
                f"--engine {spec} --contracts-report "
                f"docs/contracts/{spec.replace(':', '-')}.json`, then "
                "`python ci/contracts_table.py` | " + " | ".join("-" for _ in FAMILIES) + " |"
            )
    operations = sorted({op for spec in specs for op in engines[spec]["operations"]})
    lines += [
        "",
        "Worst per operation (in its family's unit):",
        "",
        "| operation | family | " + " | ".join(f"`{spec}`" for spec in specs) + " |",
        "|---|---|" + "---:|" * len(specs),
    ]
    for op in operations:
        family = next(
            engines[s]["operations"][op]["family"] for s in specs if op in engines[s]["operations"]
        )
        cells = [
            _cell(engines[s], family, engines[s]["operations"].get(op, {}).get("worst"))
            for s in specs
        ]
        lines.append(f"| {op} | {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fill(document: str, tables: str) -> str:
    if START not in document or END not in document:
        raise SystemExit(f"the document has no {START} ... {END} markers to fill")
    before, rest = document.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{tables}\n{END}{after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "contracts.md")
    args = parser.parse_args(argv)
    reports = args.reports or sorted((ROOT / "docs" / "contracts").glob("*.json"))
    engines = merge(reports)
    args.doc.write_text(
        fill(args.doc.read_text(encoding="utf-8"), table(engines)), encoding="utf-8"
    )
    print(f"{args.doc}: {len(engines)} engine(s) from {len(reports)} report(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

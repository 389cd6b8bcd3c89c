"""The samples' full runs, each held to the figure its docs publish (`nox -s figures`; about 20
minutes on 2 cores, so not in the default matrix, where `nox -s samples` runs short ones).

    python ci/sample_figures.py                       # every run below
    python ci/sample_figures.py resnet:light spam:torch:cpu

Each run prints its report and its time; the script ends with a table and a non-zero exit if a
figure is missed: the residual sample at least 0.985 test accuracy (docs/digits.md), the spam
sample at least 0.99 (docs/sequences.md), the Shakespeare sample's validation loss at most 1.65
nats a character after its 3,000 steps (docs/sequences.md).
"""

from __future__ import annotations

import json
import sys
import time
from importlib import import_module
from typing import Any

RUNS = {
    "resnet:light": ("resnet", "light", "accuracy", ">=", 0.985),
    "resnet:torch:cpu": ("resnet", "torch:cpu", "accuracy", ">=", 0.985),
    "spam:light": ("spam", "light", "accuracy", ">=", 0.99),
    "spam:torch:cpu": ("spam", "torch:cpu", "accuracy", ">=", 0.99),
    "shakespeare:torch:cpu": ("shakespeare", "torch:cpu", "validation_loss", "<=", 1.65),
}


def _figure(run: Any, measure: str) -> float:
    if measure == "validation_loss":
        return min(record.validation_loss for record in run.report.history)
    return float(run.report.measures[measure])


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in RUNS]
    if unknown:
        print(f"unknown runs {unknown}; known: {', '.join(RUNS)}", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    for name in names or list(RUNS):
        sample, engine, measure, way, goal = RUNS[name]
        start = time.perf_counter()
        run = import_module(f"deepsharp.core.samples.{sample}").run(engine=engine, progress=False)
        seconds = time.perf_counter() - start
        print(run.report, flush=True)
        figure = _figure(run, measure)
        met = figure >= goal if way == ">=" else figure <= goal
        results.append(
            {
                "run": name,
                measure: round(figure, 4),
                "goal": f"{way} {goal}",
                "met": met,
                "seconds": round(seconds, 1),
            }
        )
        print(
            f"{name}: {measure} {figure:.4f} ({way} {goal}: {'met' if met else 'MISSED'}) "
            f"in {seconds:.0f} s",
            flush=True,
        )
    print(json.dumps(results, indent=1))
    return 0 if all(result["met"] for result in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

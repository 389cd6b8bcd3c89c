"""What the streaming tests' processes run under deepsharp-distributed's `launch`: importable
(conftest puts this folder on the path, and spawned processes inherit the path)."""

from __future__ import annotations

import hashlib
from typing import Any

from deepsharp.core import Adam, BinaryCrossEntropy, FitOptions, fit, scan_csv
from deepsharp.core.samples import titanic


def streamed_run(path: str, parallel: bool) -> tuple[str, dict[str, float], int]:
    """A run on a scanned file (over the job's processes when `parallel`): the digest of its
    slots, its measures and its test rows."""
    options: dict[str, Any] = {"seed": 5, "epochs": 3, "patience": 100, "progress": False}
    if parallel:
        from deepsharp.distributed import DataParallel

        options["distributed"] = DataParallel()
    run = fit(
        titanic.pipeline(),
        scan_csv(path, read_rows=3_000, buffer_rows=2_048),
        titanic.network(),
        BinaryCrossEntropy(),
        Adam(0.01),
        FitOptions(**options),
    )
    slots = b"".join(v.tobytes() for v in run.trained.network.slots.values())
    return hashlib.sha256(slots).hexdigest(), run.report.measures, run.report.test_rows

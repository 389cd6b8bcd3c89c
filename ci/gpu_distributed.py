"""The data-parallel checks that need a card (`ci/gpu-check` runs them last), a minute at most.

1. NCCL on one card: a job of 1 process, backend "nccl", the torch engine on cuda:0. The ordered
   and fast sums go through NCCL's all_to_all, all_gather and all_reduce with no transfer
   counted; the ordered sum is the same bits as the same sum on the processor through gloo
   (one process: the weighted gradients themselves, so this checks the card's path, not the
   order of a sum of several); the starting slots are broadcast and checked on the card.
2. "auto" on a machine with a card starts "cpu:gloo,cuda:nccl": the light engine's tensors go
   through gloo and the card's through NCCL, in one job.
3. Two processes on the one card with backend "gloo": the card's tensors cross through the host
   (one get and one put a sum, counted), and the ordered sum is the rank-order sum, bit for bit.
4. fit with DataParallel on the card: the Titanic sample on torch:cuda:0 through NCCL (one
   process) reaches the one-process run's band (test accuracy within 3 of the 135 rows), and
   at two processes on the card (gloo) it is the same run again, bit for bit.

Where torch has no NCCL or finds no card it says so and exits 0: the other checks still count.
Writes its findings to --out/distributed.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from deepsharp.core import make_engine
from deepsharp.core.samples import titanic
from deepsharp.distributed import DataParallel, launch

SHAPES = [(14, 16), (16,), (16, 1), (1,), (32, 1, 3, 3), (32,)]
WEIGHT = 11 / 32


def gradients_of(rank: int) -> list[Any]:
    generator = np.random.default_rng(100 + rank)
    return [
        (generator.standard_normal(shape) * 10.0 ** generator.uniform(-3, 3, shape)).astype(
            np.float32
        )
        for shape in SHAPES
    ]


def rank_order_sum(world: int) -> list[Any]:
    weighted = [[g * np.float32(WEIGHT) for g in gradients_of(rank)] for rank in range(world)]
    total = weighted[0]
    for rank in range(1, world):
        total = [t + w for t, w in zip(total, weighted[rank])]
    return total


def sums(spec: str) -> dict[str, Any]:
    """Both sums of this rank's gradients on `spec`, with the transfers each cost."""
    job = DataParallel().join()
    engine = make_engine(spec)
    found: dict[str, Any] = {"job": repr(job)}
    for reduction in ("ordered", "fast"):
        job.config = DataParallel(reduction=reduction)
        grads = [engine.put(g) for g in gradients_of(job.rank)]
        before = (engine.counters.transfers_in, engine.counters.transfers_out)
        reduced = job.reduce_gradients(engine, grads, WEIGHT)
        after = (engine.counters.transfers_in, engine.counters.transfers_out)
        found[reduction] = [engine.get(h) for h in reduced]
        found[f"{reduction} transfers"] = (after[0] - before[0], after[1] - before[1])
    slots = {"w": engine.put(np.arange(12, dtype=np.float32).reshape(3, 4))}
    job.start_identical(engine, slots)
    found["means"] = job.means({"loss": 2.0}, 4)
    return found


def titanic_on(spec: str) -> dict[str, Any]:
    """The Titanic sample trained data-parallel on `spec`: its accuracy and slots (rank 0's)."""
    run = titanic.run(engine=spec, distributed=DataParallel(), progress=False)
    return {"accuracy": run.report.measures["accuracy"], "slots": run.trained.network.slots}


def fit_checks(spec: str, backend: str) -> dict[str, bool]:
    """Check 4 on `spec` (the card's; the processor's, to try this script without a card)."""
    alone = titanic.run(engine=spec, progress=False).report.measures["accuracy"]
    one = launch(titanic_on, 1, spec, backend=backend, timeout=60)
    first = launch(titanic_on, 2, spec, backend="gloo", timeout=60)
    again = launch(titanic_on, 2, spec, backend="gloo", timeout=60)
    return {
        f"fit, {backend}, 1 process: the one-process band": abs(one["accuracy"] - alone) <= 3 / 135,
        "fit, gloo, 2 processes: the one-process band": abs(first["accuracy"] - alone) <= 3 / 135,
        "fit, gloo, 2 processes: the same run again, bit for bit": same_bits(
            list(first["slots"].values()), list(again["slots"].values())
        ),
    }


def same_bits(got: list[Any], expected: list[Any]) -> bool:
    return all(
        g.shape == e.shape and np.array_equal(g.view(np.uint32), e.view(np.uint32))
        for g, e in zip(got, expected, strict=True)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/gpu"))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    if not (torch.cuda.is_available() and torch.distributed.is_nccl_available()):
        print("distributed: skipped, torch finds no card or has no NCCL here")
        return 0
    checks: dict[str, bool] = {}
    one = launch(sums, 1, "torch:cuda:0", backend="nccl", timeout=60)
    host = launch(sums, 1, "torch:cpu", backend="gloo", timeout=60)
    checks["nccl, 1 process: ordered sum the same bits as gloo's on the processor"] = same_bits(
        one["ordered"], host["ordered"]
    )
    checks["nccl, 1 process: ordered sum the weighted gradients, bit for bit"] = same_bits(
        one["ordered"], rank_order_sum(1)
    )
    checks["nccl, 1 process: fast sum the same"] = same_bits(one["fast"], rank_order_sum(1))
    checks["nccl: no transfer counted"] = one["ordered transfers"] == (0, 0) and one[
        "fast transfers"
    ] == (0, 0)
    checks["nccl: means on the card"] = one["means"] == {"loss": 0.5}
    auto = launch(sums, 1, "light", backend="auto", timeout=60)
    checks["auto with a card: gloo and nccl in one job"] = "cuda: nccl" in auto["job"]
    checks["auto: the light engine's ordered sum, bit for bit"] = same_bits(
        auto["ordered"], rank_order_sum(1)
    )
    two = launch(sums, 2, "torch:cuda:0", backend="gloo", timeout=60)
    checks["gloo, 2 processes on the card: the rank-order sum, bit for bit"] = same_bits(
        two["ordered"], rank_order_sum(2)
    )
    checks["gloo on a card: one get and one put a sum"] = two["ordered transfers"] == (1, 1)
    checks.update(fit_checks("torch:cuda:0", "nccl"))
    for name, passed in checks.items():
        print(f"distributed: {'ok  ' if passed else 'FAIL'} {name}")
    (out / "distributed.json").write_text(json.dumps(checks, indent=2) + "\n", encoding="utf-8")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""How cost grows with the work: the Titanic-shaped step at 1, 32, 256 and 4,096 rows and the
convolution step (8 filters) at 32, 64, 128 and 256 images, on each CPU engine and precision
beside plain PyTorch, all in the same interleaved rounds per size. Nothing is asserted beyond
the figures being there: `nox -s scaling -- --publish` (outside the default matrix) writes
them to results/scaling.json for docs/performance.md's tables.
"""

from __future__ import annotations

import pytest

from bench_support import compare, engine_specs, record
from workloads import SCALING, SCALING_ENGINES, Workload

pytest.importorskip("torch", reason="the peer is plain PyTorch: install torch")

pytestmark = pytest.mark.scaling

SPECS = [spec for spec in SCALING_ENGINES if spec in engine_specs()]


@pytest.mark.parametrize("workload", SCALING, ids=lambda workload: workload.name)
def test_how_cost_grows(workload: Workload) -> None:
    sides = {spec: workload.step(spec) for spec in SPECS}
    engines, peer = compare(sides, workload.peer(), workload.rounds)
    record(
        "scaling",
        ("scaling", workload.group, str(workload.size)),
        {
            "title": workload.title,
            "peer": workload.peer_name,
            "peer_step_us": peer["step_us"],
            "rounds": workload.rounds,
            **{key: peer[key] for key in ("others_share_each_round", "quiet_rounds", "busy")},
            "engines": engines,
        },
    )
    assert all(figures["ratio"] > 0 for figures in engines.values())

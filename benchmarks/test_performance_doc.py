"""docs/performance.md is written from the results files: what the page must say."""

from __future__ import annotations

import copy
from typing import Any

from performance_doc import crossovers, page


def _step(ratio: float, step_us: float, goal: float | None = None) -> dict[str, Any]:
    return {
        "ratio": ratio,
        "ratios": [ratio * 0.9, ratio, ratio * 1.2],
        "step_us": step_us,
        "goal": goal,
    }


ENVIRONMENT = {
    "processor": "Some Xeon",
    "cores": 2,
    "python": "3.11.7",
    "numpy": "2.4.6",
    "torch": "2.13.0+cpu",
    "threads": {"openblas": 2, "torch (intra-op)": 2},
    "command": "nox -s benchmarks",
}
STEPS = {
    "environment": ENVIRONMENT,
    "steps": {
        "conv-32x8": {
            "title": "Convolution: 32 images",
            "order": 1,
            "others_share_each_round": [0.0, 0.1, 0.0],
            "quiet_rounds": 3,
            "busy": False,
            "peer_step_us": 3000.0,
            "engines": {"light": _step(1.9, 5700.0), "light:float32": _step(1.1, 3300.0, 1.0)},
        },
        "titanic": {
            "title": "Titanic: 32 rows",
            "order": 0,
            "rounds": 11,
            "peer_step_us": 800.0,
            "engines": {"light": _step(0.25, 200.0, 0.3)},
        },
    },
    "jobs": {
        "serving": {
            "rows": 100_000,
            "seconds": 0.08,
            "rows_per_second": 1_250_000,
            "pipeline_share": 0.85,
            "sample_rows": 891,
            "sample_rows_per_second": 700_000,
            "goal": 1_000_000,
        }
    },
}


def _sizes(ratios: dict[int, tuple[float, float]]) -> dict[str, Any]:
    return {
        str(size): {
            "peer_step_us": 100.0,
            "title": "",
            "engines": {"light": _step(light, 10.0), "torch:cpu": _step(torch, 10.0)},
        }
        for size, (light, torch) in ratios.items()
    }


def test_the_page_gives_the_machine_the_command_and_every_figure_with_its_goal() -> None:
    text = page(STEPS, None)
    for said in ("Some Xeon", "2.13.0+cpu", "2.4.6", "torch (intra-op): 2", "`nox -s benchmarks`"):
        assert said in text
    assert (
        "| Titanic: 32 rows | 11 | light | 200 µs | 800 µs | **0.25×** | 0.23–0.30 | ≤ 0.3× — met |"
        in text
    )
    assert "| light:float32 | 3.3 ms | 3 ms | 1.10× | 0.99–1.32 | ≤ 1× — **not met** |" in text
    assert text.index("Titanic: 32 rows") < text.index("Convolution: 32 images")
    assert "| 3 of 3 quiet | light |" in text
    assert "light takes 1.73× on conv-32x8 of light:float32's time" in text
    assert "**1,250,000 rows/s** (80 ms; the pipeline 85% of it) | ≥ 1,000,000 rows/s — met" in text
    assert "`nox -s scaling` gives the tables" in text


def test_a_busy_comparison_is_marked_and_its_goals_not_judged() -> None:
    busy = copy.deepcopy(STEPS)
    busy["steps"]["conv-32x8"].update(
        others_share_each_round=[0.0, 0.5, 0.6], quiet_rounds=1, busy=True
    )
    text = page(busy, None)
    assert "| 1 of 3 quiet; *busy* (others took up to 60% of the cores) | light |" in text
    assert (
        "| light:float32 | 3.3 ms | 3 ms | 1.10× | 0.99–1.32 | ≤ 1× — not judged (busy) |" in text
    )


def test_the_page_holds_no_history() -> None:
    text = page(STEPS, None)
    for history in ("Earlier", "earlier run", "Since 20", "until 20", "previous"):
        assert history not in text


def test_the_page_says_what_torch_s_threads_cost_on_a_loaded_machine_and_what_to_set() -> None:
    text = page(STEPS, None)
    assert "## Threads on a shared machine" in text
    assert "OMP_NUM_THREADS=1" in text and "torch.set_num_threads(1)" in text


def test_where_torch_overtakes_light_is_said() -> None:
    sizes = _sizes({1: (0.3, 0.6), 32: (0.3, 0.5), 256: (0.5, 0.4), 4096: (0.6, 0.3)})
    said = " ".join(crossovers(sizes, ["1", "32", "256", "4096"], "rows"))
    assert "torch:cpu overtakes light at 256 rows and stays ahead." in said
    never = _sizes({1: (0.3, 0.6), 32: (0.3, 0.5)})
    assert "slower than light at every size" in " ".join(crossovers(never, ["1", "32"], "rows"))


def test_mixed_precision_gives_both_ratios_their_goals_and_pytorch_s_own_speed_up() -> None:
    mixed = copy.deepcopy(STEPS)
    mixed["mixed"] = {
        "mixed-dense-4096x1024": {
            "title": "Dense: 4,096 rows",
            "order": 0,
            "others_share_each_round": [0.0, 0.0, 0.1],
            "quiet_rounds": 3,
            "busy": False,
            "peer_step_us": 65_000.0,
            "engines": {
                "torch:cpu:mixed_bfloat16": _step(1.13, 73_500.0),
                "torch:cpu": _step(3.8, 247_000.0),
            },
            "speedup": 3.36,
            "speedups": [3.2, 3.36, 3.4],
            "pytorch_speedup": 3.7,
            "ratio_goal": 1.1,
            "speedup_goal": 2.5,
        }
    }
    text = page(mixed, None)
    assert (
        "| Dense: 4,096 rows | 3 of 3 quiet | 73.5 ms | 65 ms | 1.13× (1.02–1.36) | "
        "≤ 1.1× — **not met** | **3.36×** (3.20–3.40) | ≥ 2.5× — met | 3.70× |" in text
    )
    assert "Not measured: `nox -s benchmarks` gives it." in page(STEPS, None)

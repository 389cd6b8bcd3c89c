"""The regression guard's second look (test_steps.measured): a breach in rounds that read
quiet is measured again before it fails, and a regression fails both times."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch", reason="test_steps needs the peer's torch")

import test_steps


def _timings(*ratios: float, busy: bool = False) -> list[tuple[dict, dict, dict]]:
    return [
        (
            {"torch:cpu": {"ratio": r, "ratios": [r], "ratio_each_round": [r], "step_us": 1.0}},
            {},
            {"step_us": 1.0, "others_share_each_round": [0.0], "quiet_rounds": 1, "busy": busy},
        )
        for r in ratios
    ]


def _measure(monkeypatch: pytest.MonkeyPatch, timings: list) -> tuple[dict[str, Any], int]:
    calls = iter(timings)
    count = [0]

    def timed_once(workload: Any) -> Any:
        count[0] += 1
        return next(calls)

    monkeypatch.setattr(test_steps, "timed_once", timed_once)
    monkeypatch.setattr(test_steps, "record", lambda *args: None)
    test_steps.measured.cache_clear()
    try:
        return test_steps.measured("conv-32x8"), count[0]
    finally:
        test_steps.measured.cache_clear()


def test_a_quiet_breach_is_measured_again_and_the_second_figures_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures, count = _measure(monkeypatch, _timings(1.99, 0.94))
    assert count == 2
    assert figures["engines"]["torch:cpu"]["ratio"] == 0.94
    assert figures["engines"]["torch:cpu"]["first_ratio"] == 1.99


def test_a_regression_stays_over_its_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    figures, count = _measure(monkeypatch, _timings(1.99, 1.95))
    assert count == 2
    assert figures["engines"]["torch:cpu"]["ratio"] > test_steps.GUARDS[("conv-32x8", "torch:cpu")]


def test_within_the_guard_or_busy_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _measure(monkeypatch, _timings(0.94))[1] == 1
    figures, count = _measure(monkeypatch, _timings(1.99, busy=True))
    assert count == 1 and "first_ratio" not in figures["engines"]["torch:cpu"]

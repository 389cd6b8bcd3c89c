"""How a comparison's figures are drawn from its rounds (bench_support.Rounds)."""

from __future__ import annotations

from bench_support import Rounds, Timed


def _rounds(mine: list[float], theirs: list[float], others: list[float]) -> Rounds:
    return Rounds(
        {
            "engine": Timed(1, list(mine), list(others)),
            "": Timed(1, list(theirs), [0.0] * len(theirs)),
        }
    )


def test_the_ratio_is_the_median_of_the_per_round_ratios() -> None:
    rounds = _rounds([1.0, 2.0, 9.0], [2.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert rounds.ratios("engine", "") == [0.5, 1.0, 3.0]
    assert not rounds.busy and rounds.median("engine") == 2.0


def test_rounds_other_processes_crowded_are_left_out_while_half_are_quiet() -> None:
    rounds = _rounds([1.0, 1.0, 1.0, 5.0, 5.0], [2.0] * 5, [0.0, 0.1, 0.0, 0.9, 0.5])
    assert rounds.quiet == [0, 1, 2] and not rounds.busy
    assert rounds.ratios("engine", "") == [0.5, 0.5, 0.5]


def test_a_comparison_with_too_few_quiet_rounds_is_busy_and_keeps_them_all() -> None:
    rounds = _rounds([1.0, 5.0, 5.0, 5.0], [2.0] * 4, [0.0, 0.9, 0.5, 0.3])
    assert rounds.busy and rounds.ratios("engine", "") == [0.5, 2.5, 2.5, 2.5]
    assert rounds.load() == {
        "others_share_each_round": [0.0, 0.9, 0.5, 0.3],
        "quiet_rounds": 1,
        "busy": True,
    }


def test_a_side_that_sat_a_round_out_is_compared_where_it_was_timed() -> None:
    rounds = Rounds(
        {
            "slow": Timed(1, [4.0, 4.0, None], [0.0, 0.0, None]),
            "": Timed(1, [2.0, 1.0, 1.0], [0.0, 0.0, 0.0]),
        }
    )
    assert rounds.ratios("slow", "") == [2.0, 4.0]

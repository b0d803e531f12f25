"""A tournament that knows its noise: every score's standard error, parent sampling by
``(score - best) / SE``, replacement only by more than one paired SE, and the one-SE
ensemble's members."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.envs.stock_config import EnvConfig
from trainer.errors import ConfigError
from trainer.evaluation import evaluate_policy
from trainer.selection import score_standard_error, sharpe_standard_error, window_standard_error
from trainer.task import TaskSpec
from trainer.tournament import (
    KEEP_CURRENT,
    PARENT,
    Entry,
    beats_by_one_se,
    difference_se,
    one_se_members,
    select_parent,
    selection_probabilities,
)

QUARTERS = ("q1", "q2", "q3", "q4")


def _windows(*scores: float) -> tuple[tuple[str, float], ...]:
    return tuple(zip(QUARTERS, scores))


# --- the standard error of a score -----------------------------------------------------------


def test_the_se_of_four_sub_window_sharpes_is_their_sample_std_over_two():
    # mean 3; squared deviations 4, 1, 0, 9 sum to 14; std (ddof 1) sqrt(14/3); / sqrt(4)
    assert window_standard_error([1.0, 2.0, 3.0, 6.0]) == pytest.approx(math.sqrt(14 / 3) / 2, abs=1e-12)
    assert window_standard_error([1.0, None]) == pytest.approx(0.5, abs=1e-12)  # None is 0: std 0.7071, / sqrt(2)
    assert window_standard_error([0.7]) is None


def test_lo_2002_gives_a_sharpe_of_one_on_a_year_of_days_an_se_of_about_one():
    # sqrt(252) * sqrt((1 + (1/sqrt(252))^2 / 2) / 252) = sqrt(1 + 1/504)
    assert sharpe_standard_error(1.0, 252, 252) == pytest.approx(math.sqrt(1 + 1 / 504), abs=1e-12)
    # a quarter of the days doubles the SE; a Sharpe of 0 (or undefined) has the smallest
    assert sharpe_standard_error(0.0, 63, 252) == pytest.approx(2.0, abs=1e-12)
    assert sharpe_standard_error(None, 63, 252) == sharpe_standard_error(0.0, 63, 252)
    assert sharpe_standard_error(1.0, 1, 252) is None


def test_a_score_prefers_its_sub_windows_and_falls_back_to_lo_when_they_are_all_equal():
    assert score_standard_error([1.0, 2.0, 3.0, 6.0], full_sharpe=2.0, num_returns=252) == (
        pytest.approx(math.sqrt(14 / 3) / 2),
        "sub_windows",
    )
    # a policy that never trades: every sub-window's Sharpe is undefined (0), no dispersion
    se, source = score_standard_error([None] * 4, full_sharpe=None, num_returns=252)
    assert source == "lo_2002" and se == pytest.approx(1.0, abs=1e-12)
    assert score_standard_error([], full_sharpe=None, num_returns=1) == (None, "none")


def test_an_evaluation_stores_the_se_of_its_four_quarters(data_dir, tmp_path):
    torch.set_num_threads(1)
    task = demo_task_dict()
    task["data"]["tickers"] = ["AAPL", "MSFT", "JPM"]
    market = load_market_data(TaskSpec.from_dict(task).data, data_dir=data_dir, cache_dir=tmp_path)
    validation = market.slice("2020-01-01", "2020-12-31")

    metrics = evaluate_policy(lambda obs: torch.ones(obs.shape[0], 3), validation, EnvConfig(), random_windows=0)

    subs = [w["sharpe"] for w in metrics["sub_windows"]]
    assert metrics["score_se_source"] == "sub_windows"
    assert metrics["score_se"] == pytest.approx(np.std(subs, ddof=1) / 2, rel=1e-9)


# --- parent sampling -------------------------------------------------------------------------


def test_parents_are_sampled_by_their_gap_to_the_best_in_their_own_ses():
    # z = (s - 1.0) / SE = [0, -1, -8/3]; p = exp(z) / sum(exp(z))
    p = selection_probabilities([1.0, 0.8, 0.2], [0.1, 0.2, 0.3])
    weights = np.exp([0.0, -1.0, -8.0 / 3.0])
    assert p == pytest.approx(weights / weights.sum(), abs=1e-12)
    assert p == pytest.approx([0.6957, 0.2559, 0.0483], abs=5e-5)
    # a noisier runner-up is more plausible: the same gap in fewer of its SEs
    assert selection_probabilities([1.0, 0.8], [0.1, 0.4])[1] > selection_probabilities([1.0, 0.8], [0.1, 0.2])[1]


def test_an_entry_without_an_se_is_read_with_the_boards_spread_and_an_se_of_zero_below_the_best_gets_nothing():
    # no SE anywhere: (s - best) / std(s) is the z-score shifted, the same softmax as before
    assert selection_probabilities([1.0, 2.0, 3.0], [None, None, None]) == pytest.approx(
        selection_probabilities([1.0, 2.0, 3.0]), abs=1e-12
    )
    std = np.std([1.0, 0.5, 0.0])
    p = selection_probabilities([1.0, 0.5, 0.0], [0.5, None, 0.0])
    weights = np.array([1.0, math.exp(-0.5 / std), 0.0])
    assert p == pytest.approx(weights / weights.sum(), abs=1e-12)


def test_a_negative_se_or_a_short_list_of_ses_is_refused_by_name():
    with pytest.raises(ConfigError) as err:
        selection_probabilities([1.0, 2.0], [0.1, -0.1])
    assert err.value.details["field"] == "ses[1]"
    with pytest.raises(ConfigError) as err:
        selection_probabilities([1.0, 2.0], [0.1])
    assert err.value.details["field"] == "ses"


# --- replacement -----------------------------------------------------------------------------


def test_the_paired_se_is_the_se_of_the_per_window_differences():
    a = Entry("a", 1.0, 0, se=0.5, windows=(("w1", 1.0), ("w2", 2.0), ("w3", 0.5)))
    b = Entry("b", 0.8, 1, se=0.4, windows=(("w1", 0.6), ("w2", 1.4), ("w3", 0.3)))
    se, paired = difference_se(a, b)
    assert paired is True and se == pytest.approx(0.2 / math.sqrt(3), abs=1e-12)  # d = 0.4, 0.6, 0.2
    # other windows (another validation split): unpaired sqrt(0.5^2 + 0.4^2)
    c = Entry("c", 0.8, 2, se=0.4, windows=(("x1", 0.6), ("x2", 1.4), ("x3", 0.3)))
    assert difference_se(a, c) == (pytest.approx(math.hypot(0.5, 0.4)), False)
    assert difference_se(Entry("d", 1.0, 3), Entry("e", 0.9, 4)) == (None, None)


def test_a_candidate_better_by_less_than_one_paired_se_keeps_the_current_agent():
    # paired differences 0.1, 0.5, 0.1, 0.5: mean 0.3, SE = std(ddof 1) / 2 = 0.2309 / 2 = 0.1155
    current = _windows(0.9, 0.7, 1.1, 1.3)
    close = Entry("close", 1.1, 0, se=0.3, windows=_windows(1.0, 1.2, 1.2, 1.8))
    beats, se, paired = beats_by_one_se(close, Entry("own", 1.0, 1, se=0.3, windows=current))
    assert paired is True and se == pytest.approx(np.std([0.1, 0.5, 0.1, 0.5], ddof=1) / 2, abs=1e-12)
    assert not beats, "0.1 better with a paired SE of 0.115: within the noise"
    assert beats_by_one_se(
        Entry("far", 1.2, 0, windows=_windows(1.0, 1.2, 1.2, 1.8)), Entry("own", 1.0, 1, windows=current)
    )[0]

    rng = np.random.default_rng(0)
    choice = select_parent(
        [close], current_score=1.0, current_se=0.3, current_windows=current, fresh_probability=0.0, rng=rng
    )
    assert choice.action == KEEP_CURRENT and choice.candidate == close and choice.paired is True
    assert choice.difference_se == pytest.approx(se)


def test_without_shared_windows_the_margin_is_the_unpaired_se():
    board = [Entry("cand", 1.4, 0, se=0.3)]
    rng = np.random.default_rng(0)
    # 0.4 better; unpaired SE sqrt(0.3^2 + 0.3^2) = 0.424: keep
    keep = select_parent(board, current_score=1.0, current_se=0.3, fresh_probability=0.0, rng=rng)
    assert keep.action == KEEP_CURRENT and keep.paired is False
    assert keep.difference_se == pytest.approx(math.hypot(0.3, 0.3))
    # with a sharper own score (SE 0.1): sqrt(0.09 + 0.01) = 0.316 < 0.4, take the candidate
    take = select_parent(board, current_score=1.0, current_se=0.1, fresh_probability=0.0, rng=rng)
    assert take.action == PARENT and take.parent == board[0]


# --- the one-SE ensemble -----------------------------------------------------------------------


def test_the_one_se_members_are_every_entry_within_the_best_ones_se():
    board = [Entry("d", 0.5, 3, se=0.2), Entry("b", 0.8, 1, se=0.9), Entry("a", 1.0, 0, se=0.3), Entry("c", 0.7, 2)]
    assert [e.agent_id for e in one_se_members(board)] == ["a", "b", "c"]  # >= 1.0 - 0.3, best first
    # the best's SE counts, not the others': a sharp best keeps only itself and its ties
    sharp = [Entry("a", 1.0, 0, se=0.05), Entry("b", 0.9, 1, se=5.0), Entry("t", 1.0, 2)]
    assert [e.agent_id for e in one_se_members(sharp)] == ["a", "t"]
    assert [e.agent_id for e in one_se_members([Entry("a", 1.0, 0), Entry("b", 0.99, 1)])] == ["a"]
    assert one_se_members([Entry("u", None, 0)]) == []


def test_entries_from_stored_metrics_carry_the_se_and_pair_on_the_same_days():
    from trainer.tournament import entry_from_metrics, select_parent_for

    subs = [
        {"start": "2020-01-02", "end": "2020-03-31", "sharpe": 1.0},
        {"start": "2020-04-01", "end": "2020-06-30", "sharpe": None},
    ]
    stored = entry_from_metrics(7, 0.5, 3, 0.25, subs)
    assert stored.se == 0.25 and stored.windows == (("2020-01-02/2020-03-31", 1.0), ("2020-04-01/2020-06-30", 0.0))
    derived = entry_from_metrics(8, 0.5, 4, None, subs)
    assert derived.se == pytest.approx(0.5)  # std of (1, 0) over sqrt(2)
    assert entry_from_metrics(9, 0.5, 5, None, [{"start": "x"}, "unreadable"]).windows == ()
    # a pod keeps its own agent against a candidate better by less than the paired SE of the
    # difference (window differences -1 and +1: SE 1), and takes it when it has no agent
    swapped = [{**subs[0], "sharpe": 2.0}, {**subs[1], "sharpe": -1.0}]
    own = entry_from_metrics("own", 1.0, 1, 0.3, swapped)
    board = [entry_from_metrics("other", 1.6, 0, 0.3, subs)]  # unpaired SE 0.42 would switch
    choice = select_parent_for(board, own, fresh_probability=0.0, rng=np.random.default_rng(0))
    assert choice.action == "keep_current"
    assert select_parent_for(board, None, fresh_probability=0.0, rng=np.random.default_rng(0)).action == "parent"

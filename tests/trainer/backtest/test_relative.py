"""Statistics against 1/N on the same days: hand-computed figures and the bootstrap's behaviour.

The benchmark in the behaviour tests is the real cost-free daily-rebalanced 1/N of five Dow
tickers in 2021 (``dow_close``); the agents are that 1/N plus a planted edge, or plus noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from trainer.backtest.relative import active_statistics, deflated_information_ratio, vs_equal_weight
from trainer.errors import DataError
from trainer.selection import annual_sharpe, equal_weight_returns


@pytest.fixture(scope="module")
def one_over_n(dow_close) -> np.ndarray:
    return equal_weight_returns(dow_close.to_numpy())


def test_active_statistics_match_hand_values():
    # a = r - b = [0.02, 0, 0.02, 0]: mean 0.01, std(ddof=1) = sqrt(4 * 0.0001 / 3) = 0.0115470.
    r = np.array([0.03, 0.01, 0.01, -0.02])
    b = np.array([0.01, 0.01, -0.01, -0.02])
    out = active_statistics(r, b, periods_per_year=252)
    assert out["active_return_annual"] == pytest.approx(2.52)
    assert out["tracking_error"] == pytest.approx(0.0115470054 * math.sqrt(252))
    # IR = 0.01 / 0.0115470 * sqrt(252) = 0.8660254 * 15.874508 = 13.747727
    assert out["information_ratio"] == pytest.approx(13.747727, rel=1e-6)


def test_identical_series_differ_by_nothing_and_are_indistinguishable(one_over_n):
    out = vs_equal_weight(one_over_n, one_over_n, periods_per_year=252, reps=200)
    assert out["sharpe_difference"] == 0.0
    assert out["ci95"] == [0.0, 0.0]
    assert out["verdict"] == "indistinguishable"
    assert out["information_ratio"] is None and out["tracking_error"] == 0.0


def test_sharpe_difference_is_the_difference_of_the_annual_sharpes(one_over_n):
    agent = one_over_n * 1.1 + np.random.default_rng(3).normal(0, 0.004, one_over_n.size)
    out = vs_equal_weight(agent, one_over_n, periods_per_year=252, reps=200)
    expected = annual_sharpe(agent) - annual_sharpe(one_over_n)
    assert out["sharpe_difference"] == pytest.approx(expected, rel=1e-12)
    assert out["sharpe_ratio"] == pytest.approx(annual_sharpe(agent), rel=1e-12)
    assert out["ci95"][0] < out["sharpe_difference"] < out["ci95"][1]


def test_a_planted_edge_beats_and_its_mirror_trails(one_over_n):
    noise = np.random.default_rng(7).normal(0, 0.002, one_over_n.size)
    edge = one_over_n + 0.0015 + noise  # +38 % a year over 1/N with 3 % tracking error
    beats = vs_equal_weight(edge, one_over_n, periods_per_year=252, reps=500)
    trails = vs_equal_weight(one_over_n - 0.0015 + noise, one_over_n, periods_per_year=252, reps=500)
    assert beats["verdict"] == "beats" and beats["ci95"][0] > 0 and beats["p_value"] < 0.01
    assert trails["verdict"] == "trails" and trails["ci95"][1] < 0 and trails["p_value"] > 0.99


def test_iid_noise_around_one_over_n_rarely_beats_it(one_over_n):
    verdicts = []
    for seed in range(20):
        noise = np.random.default_rng(1000 + seed).normal(0, 0.003, one_over_n.size)
        verdicts.append(
            vs_equal_weight(one_over_n + noise, one_over_n, periods_per_year=252, reps=300, seed=seed)["verdict"]
        )
    assert verdicts.count("beats") <= 2, verdicts


def test_same_seed_same_result_and_the_seed_matters(one_over_n):
    agent = one_over_n + np.random.default_rng(5).normal(0, 0.003, one_over_n.size)
    first = vs_equal_weight(agent, one_over_n, periods_per_year=252, reps=200, seed=4)
    assert first == vs_equal_weight(agent, one_over_n, periods_per_year=252, reps=200, seed=4)
    assert first["ci95"] != vs_equal_weight(agent, one_over_n, periods_per_year=252, reps=200, seed=5)["ci95"]
    assert 1 <= first["block_length"] <= one_over_n.size // 8


@pytest.mark.parametrize(
    ("returns", "benchmark", "field"),
    [
        (np.zeros(30), np.zeros(31), "benchmark_returns"),
        (np.zeros(10), np.zeros(10), "returns"),
        (np.r_[np.zeros(29), np.nan], np.zeros(30), "returns"),
        (np.zeros(30), np.r_[np.inf, np.zeros(29)], "benchmark_returns"),
        (np.zeros((30, 2)), np.zeros(30), "returns"),
    ],
)
def test_bad_input_names_the_field(returns, benchmark, field):
    with pytest.raises(DataError) as caught:
        vs_equal_weight(returns, benchmark, periods_per_year=252)
    assert caught.value.details["field"] == field


def test_deflated_information_ratio_matches_hand_values():
    # a = [0.02, 0, 0.02, 0]: per-period IR = 0.01 / 0.0115470 = 0.8660254, skewness 0,
    # kurtosis 1 (two points), so the paper's denominator is 1 - 0 + (1 - 1) / 4 * IR^2 = 1.
    active = np.array([0.02, 0.0, 0.02, 0.0])
    # One trial: SR_0 = 0, DSR = Z(0.8660254 * sqrt(3)) = Z(1.5) = 0.9331928.
    assert deflated_information_ratio(active, num_trials=1, trial_variance=0.0, periods_per_year=252) == pytest.approx(
        0.9331928, abs=1e-6
    )
    # Ten trials whose annual IRs have variance 63 (0.25 per day): SR_0 = 0.5 * ((1 - g) Z^-1(0.9)
    # + g Z^-1(1 - 1/(10 e))) = 0.5 * (0.4227843 * 1.2815516 + 0.5772157 * 1.7898) = 0.7874.
    g = 0.5772156649
    sr0 = 0.5 * ((1 - g) * stats.norm.ppf(0.9) + g * stats.norm.ppf(1 - 1 / (10 * math.e)))
    assert sr0 == pytest.approx(0.7874, abs=2e-4)
    expected = stats.norm.cdf((0.8660254 - sr0) * math.sqrt(3))
    got = deflated_information_ratio(active, num_trials=10, trial_variance=63.0, periods_per_year=252)
    assert got == pytest.approx(expected, abs=1e-6)
    assert got < 0.9331928  # more trials, less confidence


def test_deflated_information_ratio_is_none_without_tracking_error():
    assert deflated_information_ratio(np.zeros(10), num_trials=3, trial_variance=1.0, periods_per_year=252) is None

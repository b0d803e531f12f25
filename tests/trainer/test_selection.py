"""Robust validation scores, baseline-relative results and the Deflated Sharpe Ratio by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer.errors import ConfigError
from trainer.selection import (
    SelectionRule,
    annual_sharpe,
    baseline_relative,
    deflated_sharpe_ratio,
    equal_weight_returns,
    expected_max_sharpe,
    robust_score,
    window_bounds,
)


def test_deflated_sharpe_ratio_matches_bailey_lopez_de_prado_worked_example():
    # The paper's example: annual SR 2.5 over 1,250 daily returns (250 a year), 100 trials whose
    # annualised Sharpe ratios have variance 0.5, skewness -3, kurtosis 10 -> SR_0 = 0.1132
    # per day and DSR = 0.9004.
    sr = 2.5 / math.sqrt(250)
    v = 0.5 / 250
    # By hand (normal tables): Z^-1(0.99) = 2.32635, Z^-1(1 - 1/(100 e)) = Z^-1(0.996321) = 2.68021
    sr0_hand = math.sqrt(v) * ((1 - 0.5772157) * 2.3263479 + 0.5772157 * 2.6802104)
    assert expected_max_sharpe(100, v) == pytest.approx(sr0_hand, rel=1e-4)
    assert expected_max_sharpe(100, v) == pytest.approx(0.1132, abs=1e-4)
    z = (sr - sr0_hand) * math.sqrt(1249) / math.sqrt(1 + 3 * sr + 9 / 4 * sr * sr)
    dsr_hand = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    dsr = deflated_sharpe_ratio(sr, num_trials=100, sharpe_variance=v, num_observations=1250, skewness=-3, kurtosis=10)
    assert dsr == pytest.approx(dsr_hand, rel=1e-4)
    assert dsr == pytest.approx(0.9004, abs=5e-4)


def test_more_trials_deflate_the_same_sharpe_ratio_more():
    kw = dict(sharpe_variance=0.002, num_observations=252)
    one = deflated_sharpe_ratio(0.1, num_trials=1, **kw)
    many = deflated_sharpe_ratio(0.1, num_trials=50, **kw)
    assert expected_max_sharpe(1, 0.002) == 0.0
    assert one == pytest.approx(0.5 * (1 + math.erf(0.1 * math.sqrt(251) / math.sqrt(1 + 0.5 * 0.01) / math.sqrt(2))))
    assert many < one


def test_sub_windows_are_contiguous_and_cover_every_day():
    assert window_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert window_bounds(252, 4) == [(0, 63), (63, 126), (126, 189), (189, 252)]
    with pytest.raises(ConfigError) as err:
        window_bounds(5, 4)
    assert err.value.details["field"] == "selection.windows"


def test_robust_scores_by_hand():
    rng = np.random.default_rng(0)
    r = rng.normal(0.001, 0.01, 40)
    subs = [annual_sharpe(r[i * 10 : (i + 1) * 10]) for i in range(4)]
    score, got = robust_score(r, SelectionRule("mean_minus_std", 4, 0.5))
    assert got == pytest.approx(subs)
    assert score == pytest.approx(np.mean(subs) - 0.5 * np.std(subs))
    assert robust_score(r, SelectionRule("worst_window", 4))[0] == pytest.approx(min(subs))
    sd = np.std(r, ddof=1)
    assert robust_score(r, SelectionRule("full_sharpe", 4))[0] == pytest.approx(r.mean() / sd * math.sqrt(252))


def test_a_policy_good_in_one_quarter_only_scores_below_a_steady_one_with_the_same_full_sharpe():
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, 252)
    steady = noise + 0.001
    lucky = noise.copy()
    lucky[:63] += 0.004
    rule = SelectionRule()
    assert abs(annual_sharpe(steady) - annual_sharpe(lucky)) < 0.5
    assert robust_score(lucky, rule)[0] < robust_score(steady, rule)[0]


def test_baseline_relative_results_and_equal_weight_returns_by_hand():
    close = np.array([[10.0, 20.0], [11.0, 20.0], [11.0, 22.0]])
    ew = equal_weight_returns(close)
    np.testing.assert_allclose(ew, [0.05, 0.05])
    rel = baseline_relative(np.array([0.1, 0.0]), ew)
    assert rel["excess_return"] == pytest.approx(0.1 - (1.05 * 1.05 - 1))
    assert rel["baseline_total_return"] == pytest.approx(0.1025)
    assert rel["sharpe_difference"] is None  # the baseline has no spread
    with pytest.raises(ValueError):
        baseline_relative(np.zeros(3), ew)


def test_selection_rule_errors_name_their_field():
    for data, field in (
        ({"rule": "best"}, "selection.rule"),
        ({"windows": 1}, "selection.windows"),
        ({"k": -1}, "selection.k"),
        ({"x": 1}, "selection.x"),
    ):
        with pytest.raises(ConfigError) as err:
            SelectionRule.from_dict(data)
        assert err.value.details["field"] == field
    assert SelectionRule.from_dict(None) == SelectionRule()
    assert "4 validation sub-windows" in SelectionRule().describe()

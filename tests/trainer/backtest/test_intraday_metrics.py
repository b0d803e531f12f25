"""Annualisation of intraday bar returns and the "daily" figures from session closes.

Expected values are worked out by hand from the formulas of the metric contract
(docs/reference/metrics.md): a year is 252 sessions; 5-minute bars of the regular session are 78 a session,
so 78 x 252 = 19,656 periods a year.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trainer.backtest.metrics import annual_volatility, compute_metrics, sharpe_ratio
from trainer.data.timestamps import infer_periods_per_year

# three sessions of two 5-minute bars each (bar-end stamps, naive exchange time)
STAMPS = pd.DatetimeIndex(
    [
        "2024-03-11 09:35",
        "2024-03-11 09:40",
        "2024-03-12 09:35",
        "2024-03-12 09:40",
        "2024-03-13 09:35",
        "2024-03-13 09:40",
    ]
)
BARS = pd.Series([0.02, 0.0, 0.01, -0.01, 0.0, 0.03], index=STAMPS)
# session returns by hand: 1.02 * 1.00 - 1, 1.01 * 0.99 - 1, 1.00 * 1.03 - 1
SESSIONS = [0.02, -0.0001, 0.03]
P5 = 78 * 252


def _sample_std(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def test_periods_per_year_follow_the_bars():
    assert infer_periods_per_year(STAMPS) == 19_656
    minutes = pd.date_range("2019-02-11 09:31", periods=5, freq="1min")
    assert infer_periods_per_year(minutes) == 390 * 252
    hours = pd.DatetimeIndex(["2024-03-11 10:30", "2024-03-11 11:30", "2024-03-11 12:30"])
    assert infer_periods_per_year(hours) == 7 * 252  # 6.5 hours: the last hourly bar is 30 minutes
    assert infer_periods_per_year(pd.DatetimeIndex(["2024-03-11", "2024-03-12"])) == 252


def test_bar_figures_are_annualised_with_bars_per_session_times_252():
    m = compute_metrics(BARS, start_date=pd.Timestamp("2024-03-11 09:30"))
    mean = sum(BARS) / 6  # 0.05 / 6
    sd = _sample_std(list(BARS))
    assert m["periods_per_year"] == 19_656 and m["num_periods"] == 6 and m["num_days"] == 3
    assert m["sharpe_ratio"] == pytest.approx(mean / sd * math.sqrt(P5))
    assert m["annual_volatility"] == pytest.approx(sd * math.sqrt(P5))
    downside = math.sqrt((0.01**2) / 6)  # one return below 0 among six
    assert m["sortino_ratio"] == pytest.approx(mean * P5 / (downside * math.sqrt(P5)))
    cumulative = 1.02 * 1.0 * 1.01 * 0.99 * 1.0 * 1.03 - 1
    assert m["cumulative_return"] == pytest.approx(cumulative)
    assert m["annual_return"] == pytest.approx((1 + cumulative) ** (P5 / 6) - 1)
    assert m["daily_mean_return"] == pytest.approx(mean)  # per bar
    assert m["win_rate"] == pytest.approx(3 / 6)
    # the one drawdown: -1 % on the bar ending 2024-03-12 09:40, recovered on 2024-03-13 09:40
    assert m["max_drawdown"] == pytest.approx(-0.01)
    assert (m["max_drawdown_peak"], m["max_drawdown_trough"], m["max_drawdown_recovery"]) == (
        "2024-03-12 09:35",
        "2024-03-12 09:40",
        "2024-03-13 09:40",
    )
    assert m["max_drawdown_duration_bars"] == 3 and m["max_drawdown_duration_days"] == 1
    assert m["calmar_ratio"] == pytest.approx(m["annual_return"] / 0.01)
    # the module functions take the same factor
    assert sharpe_ratio(BARS, periods_per_year=P5) == pytest.approx(m["sharpe_ratio"])
    assert annual_volatility(BARS, periods_per_year=390 * 252) == pytest.approx(sd * math.sqrt(390 * 252))


def test_daily_figures_come_from_session_closes():
    turnover = pd.Series([0.1, 0.0, 0.05, 0.05, 0.0, 0.0], index=STAMPS)
    bench = BARS / 2
    m = compute_metrics(BARS, bench, turnover=turnover, start_date=pd.Timestamp("2024-03-11 09:30"))
    d = m["daily"]
    mean, sd = sum(SESSIONS) / 3, _sample_std(SESSIONS)
    assert d["num_days"] == 3 and "periods_per_year" not in d and "daily" not in d
    assert (d["start"], d["end"]) == ("2024-03-11", "2024-03-13")
    assert d["sharpe_ratio"] == pytest.approx(mean / sd * math.sqrt(252))
    assert d["annual_volatility"] == pytest.approx(sd * math.sqrt(252))
    assert d["daily_mean_return"] == pytest.approx(mean)
    assert d["cumulative_return"] == pytest.approx(m["cumulative_return"])
    assert d["annual_return"] == pytest.approx((1 + m["cumulative_return"]) ** (252 / 3) - 1)
    assert d["max_drawdown"] == pytest.approx(-0.0001)
    # benchmark: half of each bar return, so beta 2 on bars; on sessions the compounding differs
    assert m["beta"] == pytest.approx(2.0)
    half = [1.01 * 1.0 - 1, 1.005 * 0.995 - 1, 1.0 * 1.015 - 1]
    b_mean = sum(half) / 3
    cov = sum((a - mean) * (b - b_mean) for a, b in zip(SESSIONS, half)) / 2
    assert d["beta"] == pytest.approx(cov / _sample_std(half) ** 2)
    # turnover: bars summed per session (0.1, 0.1, 0.0), then the daily mean and x 252
    assert m["turnover_daily_mean"] == pytest.approx(0.2 / 3) == d["turnover_daily_mean"]
    assert m["turnover_annual"] == pytest.approx(0.2 / 3 * 252)
    assert m["turnover_bar_mean"] == pytest.approx(0.2 / 6)


def test_daily_series_keep_the_daily_contract():
    days = pd.Series([0.01, -0.02, 0.015], index=pd.to_datetime(["2024-03-11", "2024-03-12", "2024-03-13"]))
    m = compute_metrics(days)
    assert "daily" not in m and "periods_per_year" not in m and "num_periods" not in m
    sd = _sample_std(list(days))
    assert m["sharpe_ratio"] == pytest.approx((0.005 / 3) / sd * math.sqrt(252))
    assert m["num_days"] == 3 and m["start"] == "2024-03-11"
    # an explicit factor is used as given
    assert compute_metrics(days, periods_per_year=252)["sharpe_ratio"] == m["sharpe_ratio"]


def test_short_window_counts_sessions_for_bars():
    stamps = pd.date_range("2024-03-11 09:35", periods=78, freq="5min")  # one session
    r = pd.Series(np.tile([0.001, -0.0005], 39), index=stamps)
    m = compute_metrics(r)
    assert m["num_days"] == 1 and m["num_periods"] == 78 and m["short_window"] is True


def test_bad_periods_per_year_is_refused():
    from trainer.errors import DataError

    with pytest.raises(DataError, match="periods_per_year must be a positive integer"):
        compute_metrics(BARS, periods_per_year=0)

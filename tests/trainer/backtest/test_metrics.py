"""Metrics follow empyrical's published contract and handle real QQQ prices the same way."""

from __future__ import annotations

import json

import empyrical
import numpy as np
import pandas as pd
import pytest

from trainer.backtest.contract import METRIC_CONTRACT
from trainer.backtest.engine import turnover_series
from trainer.backtest.metrics import (
    alpha_beta,
    calmar_from,
    compute_metrics,
    drawdown_details,
    information_ratio,
    returns_from_values,
    win_rate,
)
from trainer.errors import DataError

# Series from empyrical-reloaded's tests/test_stats.py (and quantopian/empyrical before it);
# the expected values in the tests below are the ones published there.
DAYS = pd.date_range("2000-1-30", periods=9, freq="D")
MIXED = pd.Series(np.array([np.nan, 1.0, 10.0, -4.0, 2.0, 3.0, 2.0, 1.0, -10.0]) / 100, index=DAYS)
NEGATIVE = pd.Series(np.array([0.0, -6.0, -7.0, -1.0, -9.0, -2.0, -6.0, -8.0, -5.0]) / 100, index=DAYS)
POSITIVE = pd.Series(np.array([1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]) / 100, index=DAYS)
FLAT_1 = pd.Series(np.full(9, 0.01), index=DAYS)
ONE = pd.Series([0.01], index=DAYS[:1])

TOL = 1e-9


def test_mixed_returns_match_empyricals_published_values():
    m = compute_metrics(MIXED)
    assert m["annual_return"] == pytest.approx(1.9135925373194231, abs=TOL)
    assert m["annual_volatility"] == pytest.approx(0.9136465399704637, abs=TOL)
    assert m["sharpe_ratio"] == pytest.approx(1.7238613961706866, abs=TOL)
    assert m["sortino_ratio"] == pytest.approx(2.605531251673693, abs=TOL)
    assert m["calmar_ratio"] == pytest.approx(19.135925373194233, abs=TOL)
    assert m["max_drawdown"] == pytest.approx(-0.1, abs=TOL)
    # published to 4 decimals only
    assert m["cumulative_return"] == pytest.approx(0.03893, abs=5e-6)


def test_negative_and_positive_returns_match_empyricals_published_values():
    neg = compute_metrics(NEGATIVE)
    assert neg["max_drawdown"] == pytest.approx(-0.36590730349873601, abs=TOL)
    assert neg["sharpe_ratio"] == pytest.approx(-24.406808633910085, abs=TOL)
    assert neg["sortino_ratio"] == pytest.approx(-13.532743075043401, abs=TOL)
    pos = compute_metrics(POSITIVE)
    assert pos["sharpe_ratio"] == pytest.approx(52.915026221291804, abs=TOL)
    # empyrical gives +inf (no downside); JSON has no inf, so it is reported as missing
    assert pos["sortino_ratio"] is None
    assert pos["max_drawdown"] == 0.0
    assert pos["calmar_ratio"] is None


def test_information_ratio_is_empyricals_per_day_excess_sharpe():
    zero = pd.Series(0.0, index=DAYS)
    assert information_ratio(MIXED, zero) == pytest.approx(0.10859306069076737, abs=TOL)
    assert information_ratio(MIXED, FLAT_1) == pytest.approx(-0.06515583641446039, abs=TOL)
    # per day, not annualised: it is the Sharpe ratio divided by sqrt(252) against a zero benchmark
    assert information_ratio(MIXED, zero) * np.sqrt(252) == pytest.approx(compute_metrics(MIXED)["sharpe_ratio"])


def test_alpha_and_beta_match_empyricals_published_values():
    # published for NEGATIVE[1:]; the first pair is dropped either way because MIXED[0] is NaN
    alpha, beta = alpha_beta(MIXED, NEGATIVE)
    assert alpha == pytest.approx(-0.9997853834885004, abs=TOL)
    assert beta == pytest.approx(-0.71296296296296313, abs=TOL)
    m = compute_metrics(MIXED, MIXED)
    assert m["alpha"] == pytest.approx(0.0, abs=TOL)
    assert m["beta"] == pytest.approx(1.0, abs=TOL)


def test_single_return_has_no_ratios_and_no_drawdown():
    m = compute_metrics(ONE)
    assert m["num_days"] == 1
    assert m["cumulative_return"] == pytest.approx(0.01)
    assert m["sharpe_ratio"] is None
    assert m["annual_volatility"] is None
    assert m["max_drawdown"] == 0.0
    assert m["max_drawdown_duration_days"] == 0


def test_flat_positive_returns_give_no_infinite_sharpe_in_the_output():
    assert compute_metrics(FLAT_1)["sharpe_ratio"] is None


def test_papers_table_calmar_is_annual_return_over_max_drawdown():
    # ElegantRL-Podracer (Liu et al. 2021, arXiv 2112.05923), stock trading table: 103.591 % annual return,
    # -17.187 % max drawdown, Calmar 6.027.
    assert round(calmar_from(1.03591, -0.17187), 3) == 6.027
    assert calmar_from(0.2, 0.0) is None


def test_drawdown_dates_and_duration_are_found_by_hand_example():
    idx = pd.date_range("2021-01-04", periods=5, freq="B")
    # wealth 1 -> 1.1 -> 0.55 -> 0.66 -> 1.32 -> 1.188
    r = pd.Series([0.1, -0.5, 0.2, 1.0, -0.1], index=idx)
    d = drawdown_details(r)
    assert d["max_drawdown"] == pytest.approx(-0.5)
    assert d["peak_date"] == "2021-01-04"
    assert d["trough_date"] == "2021-01-05"
    assert d["recovery_date"] == "2021-01-07"
    assert d["duration_days"] == 3
    assert d["recovered"] is True
    assert d["max_drawdown"] == pytest.approx(empyrical.max_drawdown(r), abs=1e-12)


def test_drawdown_from_the_starting_wealth_is_dated_at_the_start_date():
    idx = pd.date_range("2021-01-05", periods=3, freq="B")
    r = pd.Series([-0.1, 0.05, 0.1], index=idx)  # wealth 1 -> 0.9 -> 0.945 -> 1.0395
    d = drawdown_details(r, start_date=pd.Timestamp("2021-01-04"))
    assert (d["peak_date"], d["trough_date"], d["recovery_date"]) == ("2021-01-04", "2021-01-05", "2021-01-07")
    assert d["duration_days"] == 3


def test_unrecovered_drawdown_lasts_until_the_last_day():
    m = compute_metrics(MIXED)
    assert m["max_drawdown_peak"] == "2000-02-06"
    assert m["max_drawdown_trough"] == "2000-02-07"
    assert m["max_drawdown_recovery"] is None
    assert m["max_drawdown_duration_days"] == 1


def test_win_rate_counts_days_above_zero_among_known_days():
    assert win_rate(MIXED) == pytest.approx(6 / 8)
    assert win_rate(NEGATIVE) == 0.0


def test_turnover_is_traded_notional_over_account_value():
    idx = pd.date_range("2021-01-04", periods=3, freq="B")
    t = turnover_series(pd.Series([1000.0, 0.0, 500.0], index=idx), pd.Series([10_000.0, 10_000.0, 5_000.0], index=idx))
    assert t.tolist() == [0.1, 0.0, 0.1]
    m = compute_metrics(MIXED, turnover=t)
    assert m["turnover_daily_mean"] == pytest.approx(0.2 / 3)
    assert m["turnover_annual"] == pytest.approx(0.2 / 3 * 252)


def test_returns_from_values_are_simple_daily_returns():
    idx = pd.date_range("2021-01-04", periods=3, freq="B")
    r = returns_from_values(pd.Series([100.0, 110.0, 99.0], index=idx))
    assert list(r.index) == list(idx[1:])
    assert r.to_numpy() == pytest.approx([0.1, -0.1])


def test_bad_account_values_raise_data_errors_naming_the_date():
    idx = pd.date_range("2021-01-04", periods=3, freq="B")
    with pytest.raises(DataError, match="2021-01-05"):
        returns_from_values(pd.Series([100.0, 0.0, 99.0], index=idx))
    with pytest.raises(DataError, match="increasing"):
        returns_from_values(pd.Series([100.0, 101.0, 99.0], index=idx[::-1]))


def test_benchmark_missing_dates_is_a_data_error_naming_them():
    with pytest.raises(DataError, match="2000-01-30") as err:
        compute_metrics(NEGATIVE, NEGATIVE.iloc[1:])
    assert err.value.details["field"] == "benchmark_returns"


def test_metrics_are_strict_json_without_nan():
    text = json.dumps(compute_metrics(ONE, ONE, turnover=pd.Series([0.0])), allow_nan=False)
    assert "NaN" not in text


def test_metric_contract_names_the_conventions():
    for words in ("252", "ddof 1", "Calmar", "excess Sharpe", "before the"):
        assert words in METRIC_CONTRACT


@pytest.fixture(scope="module")
def qqq_2021(benchmark_path) -> pd.Series:
    frame = pd.read_csv(benchmark_path, parse_dates=["date"])
    qqq = frame[(frame["tic"] == "QQQ") & (frame["date"].dt.year == 2021)]
    return qqq.set_index("date")["adj_close"].astype("float64")


def test_qqq_2021_metrics_equal_empyricals_on_the_same_series(qqq_2021):
    r = returns_from_values(qqq_2021)
    assert len(r) == 251
    m = compute_metrics(r)
    assert m["cumulative_return"] == pytest.approx(empyrical.cum_returns_final(r), abs=TOL)
    assert m["cumulative_return"] == pytest.approx(qqq_2021.iloc[-1] / qqq_2021.iloc[0] - 1, abs=TOL)
    assert m["annual_return"] == pytest.approx(empyrical.annual_return(r), abs=TOL)
    assert m["annual_volatility"] == pytest.approx(empyrical.annual_volatility(r), abs=TOL)
    assert m["sharpe_ratio"] == pytest.approx(empyrical.sharpe_ratio(r), abs=TOL)
    assert m["sortino_ratio"] == pytest.approx(empyrical.sortino_ratio(r), abs=TOL)
    assert m["max_drawdown"] == pytest.approx(empyrical.max_drawdown(r), abs=TOL)
    assert m["calmar_ratio"] == pytest.approx(empyrical.calmar_ratio(r), abs=TOL)
    # independent numpy check of the Sharpe convention (ddof 1, sqrt(252))
    x = r.to_numpy()
    assert m["sharpe_ratio"] == pytest.approx(x.mean() / x.std(ddof=1) * np.sqrt(252), abs=TOL)
    # the drawdown dates bracket the worst fall of the adjusted close
    peak, trough = pd.Timestamp(m["max_drawdown_peak"]), pd.Timestamp(m["max_drawdown_trough"])
    assert qqq_2021[trough] / qqq_2021[peak] - 1 == pytest.approx(m["max_drawdown"], abs=1e-12)


def test_windows_shorter_than_63_days_are_flagged_with_per_day_figures_beside_the_annualised_ones():
    from trainer.backtest.contract import MIN_ANNUALISED_DAYS
    from trainer.backtest.metrics import compute_metrics

    days = pd.bdate_range("2021-01-04", periods=80)
    r = pd.Series(np.random.default_rng(3).normal(0.002, 0.01, 80), index=days)
    short, long = compute_metrics(r.iloc[:5]), compute_metrics(r.iloc[:MIN_ANNUALISED_DAYS])
    assert short["short_window"] is True and long["short_window"] is False
    assert short["min_annualised_days"] == MIN_ANNUALISED_DAYS == 63
    # values are kept (flagged), and the per-day figures are what a short window can say
    assert short["annual_return"] is not None
    assert short["daily_mean_return"] == pytest.approx(r.iloc[:5].mean(), rel=1e-12)
    assert short["daily_volatility"] == pytest.approx(r.iloc[:5].std(ddof=1), rel=1e-12)
    assert short["daily_sharpe_ratio"] == pytest.approx(r.iloc[:5].mean() / r.iloc[:5].std(ddof=1), rel=1e-12)

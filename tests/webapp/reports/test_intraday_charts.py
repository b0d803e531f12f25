"""Report charts of intraday backtests: a time axis without nights, weekends and holidays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.intraday import intraday_panel
from webapp.reports import charts


def _daily_frame(stamps: pd.DatetimeIndex) -> pd.DataFrame:
    value = 1e6 * np.cumprod(1 + np.random.default_rng(0).normal(0, 1e-3, len(stamps)))
    return pd.DataFrame(
        {"account_value": value, "cash": 0.0, "benchmark_QQQ": value * 0.99, "benchmark_equal_weight": value},
        index=pd.DatetimeIndex(stamps, name="date"),
    )


def test_intraday_charts_skip_nights_weekends_and_holidays(data_dir):
    # 2024-03-27 to 2024-04-02: Good Friday 2024-03-29 is an exchange holiday, then a weekend
    bars = intraday_panel(data_dir, ["AAPL"], "2024-03-27", "2024-04-02")
    daily = _daily_frame(pd.DatetimeIndex(bars["date"]))
    figures = charts.report_figures(daily)
    for key in ("equity-chart", "drawdown-chart"):
        breaks = figures[key].layout.xaxis.rangebreaks
        assert [b.bounds for b in breaks[:2]] == [("sat", "mon"), (16, 9.5)]
        assert breaks[1].pattern == "hour"
        assert breaks[2]["values"] == ("2024-03-29",)
    # the rolling Sharpe uses session closes: one point per day
    sharpe = figures["rolling-sharpe"].data[0]
    assert len(sharpe.x) == 4 and str(pd.Timestamp(sharpe.x[0]).date()) == "2024-03-27"


def test_daily_charts_keep_their_plain_date_axis():
    daily = _daily_frame(pd.bdate_range("2021-01-04", periods=80))
    assert not charts.report_figures(daily)["equity-chart"].layout.xaxis.rangebreaks
    assert charts.stamp_label(daily.index[0]) == "2021-01-04"
    assert charts.stamp_label(pd.Timestamp("2024-03-27 09:35")) == "2024-03-27 09:35"


def test_the_comparison_of_intraday_agents_skips_nights_too(data_dir):
    bars = intraday_panel(data_dir, ["AAPL"], "2024-03-27", "2024-04-02")
    equity = _daily_frame(pd.DatetimeIndex(bars["date"]))[["account_value"]].rename(columns={"account_value": "#1"})
    breaks = charts.compare_figure(equity / equity.iloc[0]).layout.xaxis.rangebreaks
    assert breaks[1].pattern == "hour" and breaks[2]["values"] == ("2024-03-29",)


def test_long_intraday_series_are_thinned_for_drawing_keeping_every_session_close(data_dir):
    bars = intraday_panel(data_dir, ["AAPL"], "2024-03-11", "2024-05-31")  # 58 sessions, 4,524 bars
    daily = _daily_frame(pd.DatetimeIndex(bars["date"]))
    assert len(daily) > charts.MAX_POINTS
    line = charts.equity_figure(daily).data[0]
    drawn = pd.DatetimeIndex(line.x)
    assert len(drawn) <= charts.MAX_POINTS + 58
    closes = daily.groupby(daily.index.normalize()).tail(1).index
    assert closes.isin(drawn).all() and drawn[-1] == daily.index[-1]
    # the drawdown is measured on every bar, then thinned (not recomputed from the drawn bars)
    under = charts.drawdown(daily["account_value"])
    line = charts.drawdown_figure(daily).data[0]
    assert list(line.y) == pytest.approx(under.loc[pd.DatetimeIndex(line.x)].to_list())
    assert len(charts.thin(daily.iloc[:100])) == 100  # short series are drawn whole

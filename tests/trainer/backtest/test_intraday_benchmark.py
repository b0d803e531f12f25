"""Intraday backtests against QQQ: its intraday bars when the data has them, else its daily
closes compared at session closes, and the result says which."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.intraday import intraday_panel
from trainer.backtest.benchmark import align_benchmark, load_benchmark_close
from trainer.backtest.engine import run_backtest
from trainer.data.pipeline import build_market_data
from trainer.data.sessions import session_close_mask
from trainer.envs.stock_config import EnvConfig
from trainer.errors import DataError

CAPITAL = 1e6
LAST = ("2024-03-11", "2024-04-08")


@pytest.fixture(scope="module")
def bars(data_dir):
    """AAPL, MSFT, NVDA, 2024-03-11 to 2024-04-08: 20 sessions of 78 five-minute bars, the fewest
    a backtest takes (``trainer.data.splits.MIN_RANGE_DAYS``; 2024-03-29 was Good Friday)."""
    return build_market_data(intraday_panel(data_dir, ["AAPL", "MSFT", "NVDA"], LAST[0], LAST[1]))


@pytest.fixture(scope="module")
def qqq_bars(data_dir):
    qqq = intraday_panel(data_dir, ["QQQ"], LAST[0], LAST[1])
    return pd.Series(qqq["close"].to_numpy(), index=pd.DatetimeIndex(qqq["date"]), name="QQQ")


def buy_once(num_stocks):
    state = {"first": True}

    def policy(obs):
        act = torch.full((1, num_stocks), 1.0 if state["first"] else 0.0)
        state["first"] = False
        return act

    return policy


def test_intraday_qqq_bars_are_compared_bar_by_bar(bars, qqq_bars):
    result = run_backtest(buy_once(3), bars, EnvConfig(initial_cash=CAPITAL, hmax=100), benchmark_close=qqq_bars)
    assert result.benchmark_basis == "bars"
    qqq = result.benchmarks["QQQ"]
    assert len(qqq) == 20 * 78 and qqq.index[0] == pd.Timestamp("2024-03-11 09:35")
    expected = CAPITAL * qqq_bars.to_numpy() / qqq_bars.iloc[0]
    np.testing.assert_allclose(qqq.to_numpy(), expected, rtol=1e-12)
    # one return per bar after the first (num_periods), over twenty sessions (num_days)
    assert result.metrics["QQQ"]["num_periods"] == 20 * 78 - 1 and result.metrics["QQQ"]["num_days"] == 20
    assert result.metrics["agent"]["beta"] is not None
    assert any("intraday bars" in n for n in result.notes)
    out = result.to_dict()
    assert out["benchmark_basis"] == "bars" and out["dates"][1] == "2024-03-11 09:40"


def test_daily_qqq_is_compared_at_session_closes_and_the_report_says_so(bars, benchmark_path):
    daily_qqq = load_benchmark_close(benchmark_path, "QQQ")
    result = run_backtest(buy_once(3), bars, EnvConfig(initial_cash=CAPITAL, hmax=100), benchmark_close=daily_qqq)
    assert result.benchmark_basis == "session_closes"
    assert any("session close" in n and "no intraday QQQ" in n for n in result.notes)
    closes = np.flatnonzero(session_close_mask(bars.dates))
    qqq = result.benchmarks["QQQ"].to_numpy()
    days = daily_qqq.loc[LAST[0] : LAST[1]].to_numpy()
    # a step that moves at each 16:00 bar, from the capital at the first session's close
    np.testing.assert_allclose(qqq[closes], CAPITAL * days / days[0], rtol=1e-12)
    assert np.all(qqq[: closes[0] + 1] == CAPITAL)
    assert np.all(qqq[closes[0] + 1 : closes[1]] == qqq[closes[0]])
    metrics = result.metrics
    assert metrics["QQQ"]["num_days"] == 19  # daily returns between the twenty session closes
    assert metrics["agent"]["num_periods"] == 20 * 78 - 1  # the agent's own figures use every bar
    assert metrics["agent"]["num_days"] == 20 and metrics["agent"]["daily"]["num_days"] == 20
    assert metrics["agent"]["relative_basis"] == "session_closes"
    agent_daily = result.daily["account_value"].to_numpy()[closes]
    assert metrics["agent"]["benchmark_cumulative_return"] == pytest.approx(days[-1] / days[0] - 1, rel=1e-9)
    assert agent_daily[-1] != agent_daily[0]


def test_a_missing_benchmark_bar_is_an_error_naming_it(bars, qqq_bars):
    gap = qqq_bars.drop(pd.Timestamp("2024-03-12 10:00"))
    with pytest.raises(DataError) as err:
        align_benchmark(gap, bars.dates)
    assert "lacks 1 bar(s)" in err.value.message and "2024-03-12 10:00:00" in err.value.message

"""A portfolio agent's backtest report (a really trained agent, 0.01 no-trade band) lists only
real trades: the days and tickers whose weight the env moved, not the costs it takes from every
position, and its count says so; series stored before that are read the same way."""

from __future__ import annotations

import numpy as np
import pytest
from bs4 import BeautifulSoup
from django.urls import reverse

from tests.webapp.conftest import SPLITS
from webapp.reports.charts import trade_rows
from webapp.reports.selectors import backtest_daily

pytestmark = pytest.mark.django_db


@pytest.fixture
def portfolio_backtest(portfolio_world, run_backtest_now):
    backtest = run_backtest_now(portfolio_world.agents[0], SPLITS["test"][0], SPLITS["test"][1])
    assert backtest.status == "done", backtest.error
    return backtest


def test_the_trades_table_counts_only_weights_the_band_let_move(client, user, portfolio_backtest):
    daily = backtest_daily(portfolio_backtest)
    tickers = [c.removeprefix("trades_") for c in daily.columns if c.startswith("trades_")]
    trades = daily[[f"trades_{t}" for t in tickers]].to_numpy()
    held = daily[[f"holdings_{t}" for t in tickers]].to_numpy()
    traded = int((trades != 0).sum())
    # every ticker's holdings change every day (costs come from every position), trades do not
    assert (np.diff(held, axis=0) != 0).sum() > 2 * traded > 0
    # a trade moves a weight by more than the band (or is a buy scaled to the cash available)
    value = daily["account_value"].to_numpy()[:, None]
    price = daily[[f"weight_{t}" for t in tickers]].to_numpy() * value / np.where(held > 0, held, np.nan)
    moved = np.abs(trades * np.nan_to_num(price, nan=0.0)) / value
    assert (moved[(trades != 0) & (held > 0)] > 1e-4).all()
    assert daily["costs"].to_numpy() == pytest.approx(1e-3 * daily["traded_value"].to_numpy(), rel=1e-9)
    client.force_login(user)
    page = BeautifulSoup(
        client.get(reverse("reports:backtest-detail", args=[portfolio_backtest.id])).content, "html.parser"
    )
    rows = page.select("#trades-table tbody tr")
    heading = page.select_one("#trades h2").get_text()
    assert len(rows) == min(traded, 200) and str(traded) in heading


def test_a_series_stored_with_cost_shares_as_trades_lists_the_same_trades(portfolio_backtest):
    daily = backtest_daily(portfolio_backtest)
    old = daily.copy()
    for column in [c for c in daily.columns if c.startswith("trades_")]:
        held = daily[column.replace("trades_", "holdings_")]
        old[column] = np.append(np.diff(held.to_numpy()), 0.0)  # how trades were stored before
    assert (old.filter(like="trades_") != 0).to_numpy().sum() > (daily.filter(like="trades_") != 0).to_numpy().sum()
    rows, total = trade_rows(daily, limit=10_000)
    old_rows, old_total = trade_rows(old, limit=10_000)
    assert old_total == total
    assert [(r["date"], r["ticker"]) for r in old_rows] == [(r["date"], r["ticker"]) for r in rows]

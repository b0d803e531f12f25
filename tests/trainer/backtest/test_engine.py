"""Backtests run the policy through the trading env without look-ahead and against fair benchmarks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from tests.trainer.backtest.conftest import market_from_close
from trainer.backtest.benchmark import load_benchmark_close
from trainer.backtest.engine import run_backtest
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_layout import CASH_SCALE, HOLDINGS_SCALE, PRICE_SCALE
from trainer.errors import ConfigError, DataError

CAPITAL = 1e6
HMAX = 100_000


def buy_equal_weights_then_hold(num_stocks: int, buy_cost: float):
    """A policy that, while it holds nothing, spends its cash in equal parts; then holds."""

    def policy(obs: torch.Tensor) -> torch.Tensor:
        o = obs[0].double()
        cash = float(o[0]) / CASH_SCALE
        prices = o[1 : 1 + num_stocks] / PRICE_SCALE
        held = o[1 + num_stocks : 1 + 2 * num_stocks] / HOLDINGS_SCALE
        if bool((held > 0).any()):
            return torch.zeros(1, num_stocks)
        # 0.999: float32 prices in the observation are within ~1e-7 of the real ones
        shares = torch.floor(0.999 * cash / num_stocks / (prices * (1 + buy_cost)))
        return ((shares + 0.5) / HMAX).float()[None]

    return policy


@pytest.fixture(scope="module")
def equal_weight_run(dow_market, qqq_close):
    config = EnvConfig(initial_cash=CAPITAL, hmax=HMAX, observation="finrl")  # the policy reads prices
    policy = buy_equal_weights_then_hold(dow_market.num_stocks, config.buy_cost_pct)
    return run_backtest(policy, dow_market, config, benchmark_close=qqq_close)


def test_first_row_is_the_initial_capital_on_the_first_day(equal_weight_run, dow_close):
    daily = equal_weight_run.daily
    assert daily.index[0] == dow_close.index[0]
    assert daily["account_value"].iloc[0] == CAPITAL and daily["cash"].iloc[0] == CAPITAL
    assert (equal_weight_run.benchmarks.iloc[0] == CAPITAL).all()
    assert list(daily.index) == list(dow_close.index)


def test_buying_equal_weights_and_holding_reproduces_equal_weight_buy_and_hold(equal_weight_run, dow_close):
    # Independent computation from the raw file: capital / N in each ticker at the first close.
    expected = CAPITAL * (dow_close / dow_close.iloc[0]).mean(axis=1)
    bench = equal_weight_run.benchmarks["equal_weight"]
    assert bench.to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-12)
    agent = equal_weight_run.daily["account_value"]
    # Differences come only from the 0.1 % buy cost, the 0.1 % cash kept back and whole shares.
    whole_share_slack = dow_close.iloc[0].max() * len(dow_close.columns) / CAPITAL
    gap = (agent / expected - 1).abs()
    assert gap.max() <= 0.001 + 0.001 + whole_share_slack
    assert gap.iloc[1:].max() > 1e-5  # costs really were paid
    # After day one the account is exactly cash plus the day-one shares at the raw close.
    shares = equal_weight_run.holdings.iloc[1]
    assert (equal_weight_run.holdings.iloc[1:] == shares).all().all()
    cash = equal_weight_run.daily["cash"].iloc[1]
    assert agent.iloc[1:].to_numpy() == pytest.approx((cash + dow_close.iloc[1:] @ shares).to_numpy(), rel=1e-12)


def test_costs_and_turnover_are_recorded_on_the_trading_day(equal_weight_run, dow_close):
    daily = equal_weight_run.daily
    bought = equal_weight_run.trades.iloc[0]
    notional = float((bought * dow_close.iloc[0]).sum())
    assert daily["traded_value"].iloc[0] == pytest.approx(notional, rel=1e-12)
    assert daily["costs"].iloc[0] == pytest.approx(notional * 1e-3, rel=1e-9)
    assert daily["turnover"].iloc[0] == pytest.approx(notional / CAPITAL, rel=1e-12)
    assert (daily[["traded_value", "costs", "turnover"]].iloc[1:] == 0).all().all()
    assert daily["cash"].iloc[1] == pytest.approx(CAPITAL - notional * 1.001, rel=1e-12)


def test_qqq_benchmark_is_buy_and_hold_over_the_same_dates(equal_weight_run, qqq_close, dow_close):
    qqq = qqq_close.reindex(dow_close.index)
    assert equal_weight_run.benchmarks["QQQ"].to_numpy() == pytest.approx(
        (CAPITAL * qqq / qqq.iloc[0]).to_numpy(), rel=1e-12
    )
    m = equal_weight_run.metrics
    assert set(m) == {"agent", "QQQ", "equal_weight", "vs_equal_weight", "vs_equal_weight_with_costs", "robustness"}
    assert m["QQQ"]["beta"] == pytest.approx(1.0) and m["QQQ"]["alpha"] == pytest.approx(0.0, abs=1e-12)
    assert m["QQQ"]["cumulative_return"] == pytest.approx(qqq.iloc[-1] / qqq.iloc[0] - 1, rel=1e-12)
    assert m["agent"]["turnover_daily_mean"] > 0


def test_result_is_strict_json_for_storage(equal_weight_run):
    stored = json.loads(json.dumps(equal_weight_run.to_dict(), allow_nan=False))
    assert stored["dates"][0] == "2021-01-04" and stored["end"] == "2021-12-31"
    assert stored["daily"]["account_value"][0] == CAPITAL
    assert stored["metrics"]["agent"]["num_days"] == len(stored["dates"]) - 1
    assert "empyrical" in stored["metric_contract"]


def test_holding_cash_keeps_the_capital_and_has_no_drawdown(dow_market):
    result = run_backtest(lambda obs: torch.zeros(1, dow_market.num_stocks), dow_market, EnvConfig())
    assert (result.daily["account_value"] == EnvConfig().initial_cash).all()
    assert result.metrics["agent"]["max_drawdown"] == 0.0
    assert result.metrics["agent"]["sharpe_ratio"] is None  # zero volatility
    assert "QQQ" not in result.benchmarks


def test_policy_on_day_t_does_not_see_prices_after_day_t(dow_close):
    market = market_from_close(dow_close)
    n = market.num_stocks

    def momentum(obs):
        # buy what trades above its 5-day average, sell what trades below (scales cancel)
        close, sma = obs[:, 1 : 1 + n], obs[:, 1 + 2 * n :]
        return torch.tanh(20 * (close / sma - 1))

    t = 120
    perturbed = dow_close.copy()
    noise = np.random.default_rng(0).uniform(0.8, 1.2, size=perturbed.iloc[t + 1 :].shape)
    perturbed.iloc[t + 1 :] *= noise
    config = EnvConfig(hmax=50, observation="finrl")  # the policy reads prices
    base = run_backtest(momentum, market, config)
    moved = run_backtest(momentum, market_from_close(perturbed), config)
    assert base.actions.iloc[: t + 1].equals(moved.actions.iloc[: t + 1])
    assert base.trades.iloc[: t + 1].equals(moved.trades.iloc[: t + 1])
    assert base.daily["account_value"].iloc[: t + 1].equals(moved.daily["account_value"].iloc[: t + 1])
    # the perturbation does reach the policy from day t + 1 on
    assert not base.actions.iloc[t + 1].equals(moved.actions.iloc[t + 1])


def test_start_and_end_select_an_inclusive_range(dow_market):
    result = run_backtest(lambda o: torch.zeros(1, 5), dow_market, EnvConfig(), start="2021-03-01", end="2021-03-31")
    assert str(result.daily.index[0].date()) == "2021-03-01"
    assert str(result.daily.index[-1].date()) == "2021-03-31"


def test_range_outside_the_data_is_a_data_error_naming_the_coverage(dow_market):
    hold = lambda o: torch.zeros(1, 5)  # noqa: E731
    with pytest.raises(DataError, match="covers 2021-01-04 to 2021-12-31") as err:
        run_backtest(hold, dow_market, EnvConfig(), start="2020-06-01")
    assert err.value.details["field"] == "start"
    with pytest.raises(DataError, match="outside"):
        run_backtest(hold, dow_market, EnvConfig(), end="2022-03-01")
    with pytest.raises(DataError, match="not a YYYY-MM-DD"):
        run_backtest(hold, dow_market, EnvConfig(), start="March 2021x")
    with pytest.raises(DataError, match="holds 1 trading day"):
        run_backtest(hold, dow_market, EnvConfig(), start="2021-06-01", end="2021-06-01")


def test_a_range_of_fewer_than_20_trading_days_is_a_data_error_naming_end(dow_market):
    # a Sharpe ratio of one or two returns means nothing: 2 days backtested until 2026-12
    hold = lambda o: torch.zeros(1, 5)  # noqa: E731
    with pytest.raises(DataError, match="holds 19 trading day.s.; at least 20 are needed") as err:
        run_backtest(hold, dow_market, EnvConfig(), start="2021-03-01", end="2021-03-25")
    assert err.value.details["field"] == "end"
    assert run_backtest(hold, dow_market, EnvConfig(), start="2021-03-01", end="2021-03-26").daily.shape[0] == 20


def test_unknown_ticker_is_a_data_error_naming_it(dow_market):
    with pytest.raises(DataError, match="TSLA") as err:
        run_backtest(lambda o: torch.zeros(1, 2), dow_market, EnvConfig(), tickers=["AAPL", "TSLA"])
    assert err.value.details["ticker"] == "TSLA"


def test_tickers_choose_and_order_the_traded_columns(dow_market, dow_close):
    result = run_backtest(lambda o: torch.ones(1, 2), dow_market, EnvConfig(hmax=10), tickers=["ko", "AAPL"])
    assert result.tickers == ("KO", "AAPL")
    assert result.trades.iloc[0].tolist() == [10.0, 10.0]
    expected = CAPITAL * (dow_close[["KO", "AAPL"]] / dow_close[["KO", "AAPL"]].iloc[0]).mean(axis=1)
    assert result.benchmarks["equal_weight"].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-12)


def test_benchmark_missing_a_trading_day_is_a_data_error_naming_it(dow_market, qqq_close):
    gappy = qqq_close.drop(pd.Timestamp("2021-07-06"))
    with pytest.raises(DataError, match="2021-07-06") as err:
        run_backtest(lambda o: torch.zeros(1, 5), dow_market, EnvConfig(), benchmark_close=gappy)
    assert err.value.details["field"] == "benchmark_close"


def test_policy_with_the_wrong_action_size_is_a_config_error(dow_market):
    with pytest.raises(ConfigError, match=r"\(1, 5\)"):
        run_backtest(lambda o: torch.zeros(1, 3), dow_market, EnvConfig())


def test_benchmark_close_loads_the_same_qqq_from_both_files(benchmark_path, data_dir, qqq_close):
    panel_qqq = load_benchmark_close(benchmark_path, "qqq")
    single = load_benchmark_close(data_dir / "QQQ_daily_eodhd_1999-03-10_2024-04-19.csv")
    days = qqq_close.index
    assert panel_qqq.name == "QQQ"
    assert panel_qqq.reindex(days).to_numpy() == pytest.approx(qqq_close.to_numpy(), rel=1e-12)
    assert single.reindex(days).to_numpy() == pytest.approx(qqq_close.to_numpy(), rel=1e-9)
    with pytest.raises(DataError, match="XYZ"):
        load_benchmark_close(benchmark_path, "XYZ")


def test_backtest_runs_on_the_data_pipelines_market_data(data_dir, benchmark_path, dow_close):
    from trainer.data.pipeline import load_market_data
    from trainer.data.spec import DataSpec

    spec = DataSpec(
        paths=["dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"], tickers=list(dow_close.columns), start="2020-06-01"
    )
    market = load_market_data(spec, data_dir=data_dir)
    qqq = load_benchmark_close(benchmark_path)
    result = run_backtest(
        lambda obs: torch.full((1, market.num_stocks), 0.2),
        market,
        EnvConfig(),
        benchmark_close=qqq,
        start="2021-01-04",
        end="2021-12-31",
    )
    assert list(result.daily.index) == list(dow_close.index)
    expected = CAPITAL * (dow_close / dow_close.iloc[0]).mean(axis=1)
    assert result.benchmarks["equal_weight"].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-9)
    # 20 shares of each ticker a day until the cash runs out: the account holds stocks at the end
    assert (result.holdings.iloc[-1] > 0).all()

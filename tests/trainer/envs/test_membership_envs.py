"""Both envs trade only each day's index members, and 1/N is over them (``MarketData.members``).

The panel: real prices of AAPL, JPM and MSFT in 2019 with the membership of
``tests/membership_files.py`` (MSFT leaves after 2019-02-28 and comes back on 2019-06-01, JPM
joins on 2019-07-01), so every rule shows on known days.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.membership_files import write_membership, write_prices
from trainer.backtest.equal_weight import traded_equal_weight_returns
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.selection import equal_weight_returns


@pytest.fixture(scope="module")
def market(data_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("membership")
    spec = DataSpec(paths=[str(write_prices(data_dir, folder))], start="2019-01-01", membership="members.csv")
    write_membership(folder)
    return load_market_data(spec, data_dir=folder)


def _rollout(env, actions):
    """Step ``env`` from day 0 through ``actions`` (T-1, E, A); returns each step's info."""
    env.reset(options={"start_day": 0})
    return [env.step(a)[4] for a in actions]


@pytest.mark.parametrize("band", [0.0, 0.01])
def test_the_portfolio_env_holds_exactly_zero_of_a_non_member_and_1_over_n_of_the_members(market, band):
    members = torch.as_tensor(market.members)
    steps = market.num_days - 1
    actions = torch.rand((steps, 3, 4), generator=torch.Generator().manual_seed(0)) * 2 - 1
    actions[:, 0] = 0.0  # env 0: the zero action
    env = PortfolioVecEnv(market, PortfolioConfig(rebalance_band=band), num_envs=3)
    for t, info in enumerate(_rollout(env, actions)):
        out = ~members[t]
        assert (info["target_weights"][:, :3][:, out] == 0).all(), f"day {t}: a non-member is held"
        assert (info["weights"][:, :3][:, out] == 0).all(), "and nothing of it drifts into the next day"
        if band == 0:  # the zero action: 1/M of the day's M members (cash e^-20 / (M + e^-20))
            count = int(members[t].sum())
            held = info["target_weights"][0, :3][members[t]]
            np.testing.assert_allclose(held.numpy(), np.full(count, 1.0 / count), rtol=1e-8)
    assert str(market.dates[np.flatnonzero(~market.members[:, market.tickers.index("MSFT")])[0]]) == "2019-03-01"


def test_the_portfolio_env_sync_free_path_applies_the_same_universe_bit_for_bit(market):
    market = market.slice("2019-02-15", "2019-07-15")  # MSFT leaves and comes back, JPM joins
    steps = market.num_days - 1
    actions = torch.rand((steps, 4, 4), generator=torch.Generator().manual_seed(1)) * 2 - 1
    infos = {}
    for sync_free in (False, True):
        env = PortfolioVecEnv(market, PortfolioConfig(rebalance_band=0.01), num_envs=4, sync_free=sync_free)
        infos[sync_free] = _rollout(env, actions)
    for a, b in zip(infos[False], infos[True], strict=True):
        assert torch.equal(a["target_weights"], b["target_weights"])
        assert torch.equal(a["portfolio_value"], b["portfolio_value"])


@pytest.mark.parametrize("sync_free", [False, True])
def test_the_stock_env_never_buys_a_non_member_and_sells_a_leaving_ticker_at_that_close(market, sync_free):
    steps = market.num_days - 1
    config = EnvConfig(randomize_initial=True, hmax=50)
    env = StockTradingVecEnv(market, config, num_envs=4, seed=3, sync_free=sync_free)
    _, info = env.reset(options={"start_day": 0})
    assert (info["holdings"][:, 1] == 0).all(), "random initial holdings only of day 0's members (not JPM)"
    before = info["holdings"]
    msft_out = int(np.flatnonzero(~market.members[:, 2])[0])
    for t, info in enumerate(_rollout(env, torch.ones((steps, 4, 3)))):  # buy everything every day
        out = ~torch.as_tensor(market.members[t])
        assert (info["holdings"][:, out] == 0).all(), f"day {t}: a non-member is held after the close"
        if t == msft_out:
            assert (before[:, 2] > 0).all() and (info["holdings"][:, 2] == 0).all(), "sold on its first day out"
        before = info["holdings"]
    assert (info["holdings"] > 0).all(), "members are bought"


def test_the_fair_1_over_n_and_the_headline_1_over_n_are_over_the_members(market):
    headline = equal_weight_returns(market.close, market.members)
    assert not np.allclose(headline, equal_weight_returns(market.close)), "the universe changes the benchmark"
    fair = traded_equal_weight_returns(market, PortfolioConfig(cost_pct=0.0, observation="finrl"))
    np.testing.assert_allclose(fair, headline, atol=1e-8)  # cost-free zero action = 1/M of the day's members


def test_a_held_row_still_sells_a_ticker_on_its_first_day_out_of_the_index(market):
    # The sync-free path holds a NaN action's row (no trade): a leaving ticker is sold all the same.
    env = PortfolioVecEnv(market, PortfolioConfig(), num_envs=2, sync_free=True)
    last_in = int(np.flatnonzero(market.dates == np.datetime64("2019-02-28"))[0])
    env.reset(options={"start_day": last_in})
    _, _, _, _, info = env.step(torch.zeros((2, 4)))
    assert info["weights"][:, 2].min() > 0.4, "MSFT held into its first day out"
    _, _, _, _, info = env.step(torch.full((2, 4), float("nan")))
    assert int(env.nonfinite_steps) == 1
    assert (info["target_weights"][:, 2] == 0).all() and (info["target_weights"][:, 0] > 0.4).all()

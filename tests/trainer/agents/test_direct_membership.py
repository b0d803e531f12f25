"""The direct learner on a point-in-time universe (``MarketData.members``): its windows, its
objective and its gate follow the env's membership rules, so it never learns from a ticker on a
day the env would not let it hold.

The panel: real prices of AAPL, JPM and MSFT in 2018-2019 with the membership of
``tests/membership_files.py`` (MSFT out from 2019-03-01 to 2019-05-31, JPM joins on 2019-07-01).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.membership_files import write_membership, write_prices
from trainer.agents import make_agent
from trainer.agents.cross_sectional import CrossSectionalPolicy
from trainer.agents.direct_objective import Penalties, WindowBatch, draw_windows, window_objective
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_dynamics import Dynamics


@pytest.fixture(scope="module")
def market(data_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("direct_membership")
    spec = DataSpec(paths=[str(write_prices(data_dir, folder))], start="2018-01-01", membership="members.csv")
    write_membership(folder)
    return load_market_data(spec, data_dir=folder)


def _policy(env) -> CrossSectionalPolicy:
    policy = CrossSectionalPolicy(env.num_features, (8,), kappa=1.0)
    with torch.no_grad():  # away from 1/N, so that the membership rules change what it holds
        policy.head.weight.normal_(0.0, 2.0, generator=torch.Generator().manual_seed(0))
        policy.weight_gain.fill_(-1.5)
    return policy


def _mean_log_return(policy, batch: WindowBatch, env_cfg: PortfolioConfig, **options) -> float:
    """The windows' mean daily net log return under the env's rules, no penalties."""
    terms = window_objective(
        policy,
        batch,
        Dynamics.from_config(env_cfg),
        Penalties(0.0, 0.0, 0.0),
        logit_scale=env_cfg.logit_scale,
        cash_bias=env_cfg.cash_bias,
        execution_lag=env_cfg.execution_lag,
        **options,
    )
    return terms.mean_log_return.item()


@pytest.mark.parametrize("lag", [0, 1])
def test_the_objective_pays_what_the_env_pays_across_a_ticker_leaving_joining_and_returning(market, lag):
    env_cfg = PortfolioConfig(rebalance_band=0.01, execution_lag=lag, random_start=False)
    env = PortfolioVecEnv(market, env_cfg, num_envs=1)
    policy = _policy(env)
    start = int(np.searchsorted(market.dates, np.datetime64("2019-02-01")))
    length = int(np.searchsorted(market.dates, np.datetime64("2019-08-01"))) - start
    obs = env.reset(options={"start_day": start})[0]
    for _ in range(length):
        obs, _, _, _, info = env.step(policy(obs).detach())
    env_growth = np.log(info["portfolio_value"][0].item() / env_cfg.initial_cash)
    features, gross, _ = env.market_tensors()
    members = env.market_members
    assert members is not None and not members[start : start + length].all()  # the rules are exercised
    days = torch.arange(start, start + length)
    window = members[days][:, None]
    batch = WindowBatch(features[days][:, None], gross[days][:, None], torch.zeros(length, 1), window)
    cash = torch.zeros(1, env.action_dim, dtype=torch.float64)
    cash[0, -1] = 1.0
    masked = _mean_log_return(policy, batch, env_cfg, start_weights=cash)
    assert masked * length == pytest.approx(env_growth, rel=1e-5, abs=1e-8)
    unmasked = _mean_log_return(policy, batch._replace(members=None), env_cfg, start_weights=cash)
    assert abs(unmasked * length - env_growth) > 1e-4  # without the mask it differs


def test_windows_carry_the_members_and_their_benchmark_is_1_over_m_of_the_members(market):
    env = PortfolioVecEnv(market, PortfolioConfig(), num_envs=1)
    features, gross, _ = env.market_tensors()
    members = env.market_members
    batch = draw_windows(
        features,
        gross,
        num_windows=64,
        length=20,
        subset=2,
        generator=torch.Generator().manual_seed(3),
        members=members,
    )
    assert batch.members is not None and batch.members.shape == batch.gross.shape
    assert not batch.members.all() and batch.members.any()
    count = batch.members.sum(dim=2)
    mean = torch.where(batch.members, batch.gross, 0.0).sum(dim=2) / count.clamp(min=1)
    expected = torch.where(count > 0, torch.log(mean), 0.0)
    torch.testing.assert_close(batch.benchmark, expected.to(batch.benchmark.dtype))


def test_a_default_start_holds_1_over_m_of_the_first_days_members(market):
    """A zero-tilt policy from the default start, over days with MSFT out: nothing of MSFT is
    ever held, so the window's log returns are those of 1/M over the members, less costs."""
    env = PortfolioVecEnv(market, PortfolioConfig(cost_pct=0.0), num_envs=1)
    features, gross, _ = env.market_tensors()
    members = env.market_members
    start = int(np.searchsorted(market.dates, np.datetime64("2019-03-04")))
    days = torch.arange(start, start + 40)  # MSFT out, JPM not yet in: AAPL alone
    assert members[days].sum(dim=1).eq(1).all()
    batch = WindowBatch(features[days][:, None], gross[days][:, None], torch.zeros(40, 1), members[days][:, None])
    policy = CrossSectionalPolicy(env.num_features, (8,), kappa=1.0)  # zero head: exactly 1/N
    aapl = market.tickers.index("AAPL")
    expected = torch.log(gross[days, aapl]).mean()
    assert _mean_log_return(policy, batch, PortfolioConfig(cost_pct=0.0)) == pytest.approx(expected.item(), rel=1e-6)


def test_the_gated_learner_trains_on_a_point_in_time_universe_and_reports_both_folds(market):
    train = market.slice("2018-01-01", "2019-12-31", name="train")
    env = PortfolioVecEnv(train, PortfolioConfig(), num_envs=2)
    config = {"num_envs": 16, "rollout_steps": 10, "hidden_sizes": [8], "subset_size": 2}
    agent = make_agent("direct", env.obs_dim, env.action_dim, config, seed=0)
    stats = agent.learn(env, env_steps=16 * 10 * 12)
    gate = stats["challenger"]
    assert "skipped" not in gate and len(gate["folds"]) == 2, gate
    assert np.isfinite(stats["objective"]) and np.isfinite(gate["sharpe_difference"])

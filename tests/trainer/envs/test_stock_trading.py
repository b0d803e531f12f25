"""StockTradingVecEnv on real Dow-30 prices: trade arithmetic, episodes, layout, reference defects."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from trainer.envs.episodes import MIN_EPISODE_STEPS
from trainer.envs.observations import fit_feature_stats, scale_free_market
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_layout import CASH_SCALE, build_observation
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.errors import ConfigError, DataError

COST = 1e-3  # default buy and sell cost rate


def fixed(data, num_envs=1, **config):
    """An env that starts every episode on day 0 with the default 1,000,000 USD."""
    env = StockTradingVecEnv(data, EnvConfig(random_start=False, **config), num_envs=num_envs)
    env.reset(options={"start_day": 0})
    return env


def act(*rows):
    return torch.tensor(rows, dtype=torch.float32)


# ---------------------------------------------------------------- trade arithmetic (AAPL, MSFT)


def test_buy_then_sell_moves_cash_holdings_costs_and_reward_by_hand_computed_amounts(two_stocks):
    p = two_stocks.close  # (T, 2) USD
    env = fixed(two_stocks)

    # Day 0: +0.5 of hmax=100 AAPL -> 50 shares; -1 MSFT sells nothing (none held).
    obs, reward, _, _, info = env.step(act([0.5, -1.0]))
    cash = 1e6 - 50 * p[0, 0] * (1 + COST)
    assert info["holdings"][0].tolist() == [50.0, 0.0]
    assert info["cash"][0].item() == pytest.approx(cash, rel=1e-12)
    assert info["costs"][0].item() == pytest.approx(50 * p[0, 0] * COST, rel=1e-12)
    value = cash + 50 * p[1, 0]
    assert info["portfolio_value"][0].item() == pytest.approx(value, rel=1e-12)
    assert reward[0].item() == pytest.approx((value - 1e6) * 1e-4, rel=1e-5)

    # Day 1: sell 30 AAPL and buy 99 MSFT (0.999 * 100 truncates toward zero).
    obs, reward, _, _, info = env.step(act([-0.3, 0.999]))
    proceeds = 30 * p[1, 0]
    spent = 99 * p[1, 1]
    cash = cash + proceeds * (1 - COST) - spent * (1 + COST)
    assert info["holdings"][0].tolist() == [20.0, 99.0]
    assert info["cash"][0].item() == pytest.approx(cash, rel=1e-12)
    assert info["costs"][0].item() == pytest.approx((proceeds + spent) * COST, rel=1e-12)
    new_value = cash + 20 * p[2, 0] + 99 * p[2, 1]
    assert reward[0].item() == pytest.approx((new_value - value) * 1e-4, rel=1e-5)

    # Day 2: asking to sell 100 AAPL sells only the 20 held; small negative actions sell nothing.
    _, _, _, _, info = env.step(act([-1.0, -0.009]))
    assert info["holdings"][0].tolist() == [0.0, 99.0]
    assert info["cash"][0].item() == pytest.approx(cash + 20 * p[2, 0] * (1 - COST), rel=1e-12)


def test_buys_beyond_cash_are_scaled_down_together_and_floored_to_whole_shares(two_stocks):
    p = two_stocks.close
    env = fixed(two_stocks, initial_cash=5000.0)
    _, _, _, _, info = env.step(act([1.0, 1.0]))  # wants 100 AAPL + 100 MSFT, about 15,000 USD

    wanted = 100 * (p[0, 0] + p[0, 1]) * (1 + COST)
    factor = 5000.0 / wanted
    expected = [math.floor(100 * factor), math.floor(100 * factor)]
    spent = (expected[0] * p[0, 0] + expected[1] * p[0, 1]) * (1 + COST)
    assert info["holdings"][0].tolist() == expected
    assert expected[0] > 0
    assert info["cash"][0].item() == pytest.approx(5000.0 - spent, rel=1e-12)
    assert info["cash"][0].item() >= 0.0


def test_sells_execute_before_buys_so_sale_proceeds_fund_the_same_days_buys(two_stocks):
    p = two_stocks.close
    env = fixed(two_stocks, initial_cash=2000.0)
    _, _, _, _, info = env.step(act([0.0, 0.15]))  # 15 MSFT, about 1,460 USD
    cash = 2000.0 - 15 * p[0, 1] * (1 + COST)
    assert info["holdings"][0].tolist() == [0.0, 15.0]

    # Day 1: sell all MSFT and ask for 100 AAPL (about 3,400 USD): the buy is capped by the
    # cash after the sale, which buys far more than the cash alone would.
    _, _, _, _, info = env.step(act([1.0, -1.0]))
    available = cash + 15 * p[1, 1] * (1 - COST)
    wanted = 100 * p[1, 0] * (1 + COST)
    shares = math.floor(100 * available / wanted)
    assert shares > cash / (p[1, 0] * (1 + COST)) + 10
    assert info["holdings"][0].tolist() == [float(shares), 0.0]
    assert info["cash"][0].item() == pytest.approx(available - shares * p[1, 0] * (1 + COST), rel=1e-12)


def test_out_of_range_actions_are_clipped(two_stocks):
    env = fixed(two_stocks)
    _, _, _, _, info = env.step(act([-3.0, 7.0]))
    assert info["holdings"][0].tolist() == [0.0, 100.0]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_actions_are_refused_and_leave_the_env_as_it_was(two_stocks, bad):
    # A diverged policy emits NaN; the env used to hold in its place, so such a policy scored a
    # quiet 0 (issue 20). Now the step is refused and the env's state is unchanged.
    env = fixed(two_stocks)
    _, _, _, _, before = env.step(act([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"NaN or infinite values in env row\(s\) 0"):
        env.step(act([bad, 0.2]))
    _, _, _, _, after = env.step(act([0.0, 0.0]))
    assert after["holdings"][0].tolist() == before["holdings"][0].tolist()
    assert after["cash"][0].item() == before["cash"][0].item()


# ---------------------------------------------------------------- defects of the reference env


def test_each_env_trades_exactly_its_own_action_not_a_constant(dow30_market):
    n = dow30_market.num_stocks
    env = fixed(dow30_market, num_envs=4)
    action = torch.rand(4, n, generator=torch.Generator().manual_seed(1)) * 2 - 1
    _, _, _, _, info = env.step(action)
    expected = torch.trunc(action * 100).clamp(min=0).double()
    assert torch.equal(info["holdings"], expected)
    assert len({tuple(row.tolist()) for row in info["holdings"]}) == 4


def test_sells_are_limited_per_env_and_per_stock(two_stocks):
    p = two_stocks.close
    env = fixed(two_stocks, num_envs=3)
    env.step(act([0.1, 0.7], [0.6, 0.05], [0.0, 0.3]))  # 3 envs with different holdings
    _, _, _, _, info = env.step(act([-0.2, -0.2], [-0.2, -0.2], [-0.2, -0.2]))
    assert info["holdings"].tolist() == [[0.0, 50.0], [40.0, 0.0], [0.0, 10.0]]
    before = env.step(act([0, 0], [0, 0], [0, 0]))[4]
    held = before["holdings"].numpy()
    after = env.step(act([-1, -1], [-1, -1], [-1, -1]))[4]
    assert after["holdings"].abs().sum().item() == 0.0
    proceeds = held @ p[3] * (1 - COST)
    np.testing.assert_allclose(after["cash"].numpy(), before["cash"].numpy() + proceeds, rtol=1e-12)


def test_envs_keep_their_own_days_and_do_not_all_finish_together(dow30_market):
    year = dow30_market.slice("2019-01-01", "2019-12-31")
    env = StockTradingVecEnv(year, EnvConfig(), num_envs=64, seed=5)
    start = env.day
    assert len(set(start.tolist())) > 20
    assert start.max().item() <= year.num_days - 1 - MIN_EPISODE_STEPS
    hold = torch.zeros(64, year.num_stocks)
    step, truncated = 0, torch.zeros(64, dtype=torch.bool)
    while not truncated.any() and step < year.num_days:
        _, _, _, truncated, info = env.step(hold)
        step += 1
    first_done = truncated.clone()
    assert 0 < first_done.sum().item() < 64
    assert step == year.num_days - 1 - start.max().item()
    assert torch.equal(info["day"], start + step)
    # Finished envs restarted; the others moved on one day.
    assert torch.equal(env.day[~first_done], start[~first_done] + step)
    assert (env.day[first_done] <= year.num_days - 1 - MIN_EPISODE_STEPS).all()


def test_cash_enters_the_observation_scaled_down_by_two_to_the_sixteen(dow30_market):
    env = StockTradingVecEnv(dow30_market, EnvConfig(observation="finrl"), num_envs=8, seed=2)
    obs, info = env.reset(seed=2)
    assert torch.allclose(obs[:, 0].double(), info["cash"] * 2.0**-16)
    assert CASH_SCALE == 2.0**-16
    for _ in range(20):
        obs, *_ = env.step(torch.rand(8, dow30_market.num_stocks) * 2 - 1)
    assert obs.abs().max().item() < 100.0


# ---------------------------------------------------------------- episodes


def test_truncated_envs_report_their_last_observation_and_return_then_restart(two_stocks):
    env = fixed(two_stocks, num_envs=2, episode_length=5, observation="finrl")
    first_obs, _ = env.reset(options={"start_day": 3})
    rewards = []
    for step in range(5):
        obs, reward, terminated, truncated, info = env.step(act([0.2, -0.1], [0.0, 0.3]))
        rewards.append(reward)
        assert not terminated.any()
        assert truncated.all() == (step == 4)
    assert torch.equal(info["day"], torch.tensor([8, 8]))
    last = build_observation(
        env.observation_layout(),
        info["cash"].numpy(),
        info["holdings"].numpy(),
        two_stocks.close[[8, 8]],
        two_stocks.features[[8, 8]],
    )
    np.testing.assert_allclose(info["final_observation"].numpy(), last, rtol=1e-6)
    assert torch.equal(obs, first_obs)  # restarted on the fixed start day with fresh cash
    assert torch.allclose(info["episode_return"], torch.stack(rewards).sum(0))
    expected_return = (info["final_portfolio_value"] - 1e6) * 1e-4
    assert torch.allclose(info["episode_return"].double(), expected_return, rtol=1e-4)
    assert torch.equal(env.day, torch.tensor([3, 3]))
    _, _, _, _, info = env.step(act([0, 0], [0, 0]))
    assert torch.allclose(info["episode_return"].double(), (info["portfolio_value"] - 1e6) * 1e-4, atol=1e-6)


def test_episode_runs_to_the_last_day_of_the_data_by_default(two_stocks):
    env = fixed(two_stocks)
    for _ in range(two_stocks.num_days - 2):
        *_, truncated, info = env.step(act([0.0, 0.0]))
        assert not truncated.any()
    *_, truncated, info = env.step(act([0.0, 0.0]))
    assert truncated.all()
    assert info["day"].item() == two_stocks.num_days - 1


def test_rewards_add_up_to_the_change_in_value_and_accounts_stay_valid(dow30_market):
    env = StockTradingVecEnv(dow30_market, EnvConfig(initial_cash=2e5), num_envs=128, seed=3)
    _, info = env.reset()
    start_value = info["portfolio_value"]
    total = torch.zeros(128, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        _, reward, _, truncated, info = env.step(torch.rand(128, dow30_market.num_stocks, generator=g) * 2 - 1)
        assert not truncated.any()
        total += reward.double()
        close = torch.from_numpy(dow30_market.close[info["day"].numpy()])
        assert torch.allclose(info["portfolio_value"], info["cash"] + (info["holdings"] * close).sum(1), rtol=1e-12)
        assert (info["cash"] >= 0).all() and (info["holdings"] >= 0).all()
        assert torch.equal(info["holdings"], info["holdings"].floor())
    assert torch.allclose(total / 1e-4, info["portfolio_value"] - start_value, atol=0.05)
    assert total.abs().sum() > 0


def test_returned_tensors_are_not_overwritten_by_later_steps(two_stocks):
    env = fixed(two_stocks, num_envs=2)
    obs, _, _, _, info = env.step(act([0.5, 0.5], [0.1, 0.0]))
    kept = {k: v.clone() for k, v in info.items()} | {"obs": obs.clone()}
    env.step(act([0.5, 0.5], [0.5, 0.5]))
    for key, value in ({"obs": obs} | info).items():
        assert torch.equal(value, kept[key]), key


def test_turbulent_days_liquidate_all_holdings_and_refuse_buys(two_stocks):
    turbulence = two_stocks.turbulence
    threshold = float(np.quantile(turbulence, 0.9))
    calm_then_storm = [d for d in range(1, len(turbulence)) if turbulence[d - 1] < threshold <= turbulence[d]]
    day = calm_then_storm[0]
    p = two_stocks.close
    env = StockTradingVecEnv(two_stocks, EnvConfig(turbulence_threshold=threshold), num_envs=1)
    env.reset(options={"start_day": day - 1})
    _, _, _, _, info = env.step(act([0.3, 0.2]))  # a calm day: buys go through
    assert info["holdings"][0].tolist() == [30.0, 20.0]
    cash = info["cash"][0].item()
    _, _, _, _, info = env.step(act([1.0, 1.0]))  # turbulent: sell everything, buy nothing
    assert info["holdings"][0].tolist() == [0.0, 0.0]
    proceeds = 30 * p[day, 0] + 20 * p[day, 1]
    assert info["cash"][0].item() == pytest.approx(cash + proceeds * (1 - COST), rel=1e-12)
    assert info["costs"][0].item() == pytest.approx(proceeds * COST, rel=1e-12)


def test_randomized_initial_wealth_is_valid_and_differs_between_envs(dow30_market):
    cfg = EnvConfig(randomize_initial=True)
    env = StockTradingVecEnv(dow30_market, cfg, num_envs=256, seed=4)
    _, info = env.reset()
    value, cash, holdings = info["portfolio_value"], info["cash"], info["holdings"]
    assert (value >= 0.5e6).all() and (value <= 1.5e6).all()
    assert (cash >= 0).all() and (holdings >= 0).all()
    assert torch.equal(holdings, holdings.floor())
    assert (holdings.sum(1) > 0).float().mean() > 0.9
    assert value.std() > 1e5
    invested = 1 - cash / value
    assert invested.max() <= 0.5 and invested.min() >= 0


# ---------------------------------------------------------------- reproducibility, devices


def _rollout(env, steps, seed):
    g = torch.Generator().manual_seed(seed)
    out = [env.reset(seed=seed)[0]]
    for _ in range(steps):
        obs, reward, _, _, info = env.step(torch.rand(env.num_envs, env.action_dim, generator=g) * 2 - 1)
        out += [obs, reward, info["portfolio_value"]]
    return out


def test_same_seed_gives_identical_rollouts_and_another_seed_does_not(dow30_market):
    cfg = EnvConfig(episode_length=20, randomize_initial=True)
    a = _rollout(StockTradingVecEnv(dow30_market, cfg, num_envs=16, seed=7), 45, seed=7)
    b = _rollout(StockTradingVecEnv(dow30_market, cfg, num_envs=16, seed=7), 45, seed=7)
    c = _rollout(StockTradingVecEnv(dow30_market, cfg, num_envs=16, seed=8), 45, seed=8)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_env_matches_the_cpu_env(dow30_market):
    cpu = StockTradingVecEnv(dow30_market, EnvConfig(random_start=False), num_envs=64)
    gpu = StockTradingVecEnv(dow30_market, EnvConfig(random_start=False), num_envs=64, device="cuda")
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        action = torch.rand(64, dow30_market.num_stocks, generator=g) * 2 - 1
        *_, info_cpu = cpu.step(action)
        *_, info_gpu = gpu.step(action.cuda())
        assert info_gpu["portfolio_value"].device.type == "cuda"
    torch.testing.assert_close(info_gpu["portfolio_value"].cpu(), info_cpu["portfolio_value"], rtol=1e-9, atol=1e-6)


# ---------------------------------------------------------------- layout, config, data errors


def test_observation_layout_is_json_and_rebuilds_the_envs_observations(dow30_market):
    env = StockTradingVecEnv(dow30_market, EnvConfig(randomize_initial=True, observation="finrl"), num_envs=5, seed=1)
    obs, info = env.reset()
    layout = json.loads(json.dumps(env.observation_layout()))
    assert layout["obs_dim"] == env.obs_dim == 1 + 2 * 29 + 29 * 8
    assert [b["name"] for b in layout["blocks"]] == ["cash", "close", "holdings", "features"]
    assert layout["tickers"] == list(dow30_market.tickers)
    day = info["day"].numpy()
    rebuilt = build_observation(
        layout, info["cash"].numpy(), info["holdings"].numpy(), dow30_market.close[day], dow30_market.features[day]
    )
    np.testing.assert_allclose(obs.numpy(), rebuilt, rtol=1e-6)
    single = build_observation(
        layout,
        info["cash"][0].item(),
        info["holdings"][0].numpy(),
        dow30_market.close[day[0]],
        dow30_market.features[day[0]],
    )
    np.testing.assert_allclose(obs[0].numpy(), single, rtol=1e-6)
    with pytest.raises(DataError, match="holdings"):
        build_observation(layout, 1.0, np.zeros(3), dow30_market.close[0], dow30_market.features[0])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("initial_cash", 0.0),
        ("hmax", 0),
        ("hmax", 2.5),
        ("buy_cost_pct", 1.5),
        ("sell_cost_pct", -0.1),
        ("reward_scaling", float("nan")),
        ("turbulence_threshold", -1.0),
        ("episode_length", 0),
        ("random_start", "yes"),
    ],
)
def test_invalid_config_values_raise_config_error_naming_the_field(field, value):
    with pytest.raises(ConfigError) as err:
        EnvConfig(**{field: value}).validate()
    assert err.value.details["field"] == f"env.{field}"


def test_config_round_trips_through_a_dict_and_rejects_unknown_keys():
    cfg = EnvConfig(hmax=50, turbulence_threshold=120.0, episode_length=250)
    assert EnvConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ConfigError) as err:
        EnvConfig.from_dict({"hmax": 10, "max_shares": 3}, prefix="task.env")
    assert err.value.details["field"] == "task.env.max_shares"


def test_episodes_longer_than_the_data_and_bad_start_days_are_rejected(two_stocks):
    with pytest.raises(ConfigError) as err:
        StockTradingVecEnv(two_stocks, EnvConfig(episode_length=two_stocks.num_days), num_envs=1)
    assert err.value.details["field"] == "env.episode_length"
    env = StockTradingVecEnv(two_stocks, EnvConfig(), num_envs=1)
    with pytest.raises(ConfigError) as err:
        env.reset(options={"start_day": two_stocks.num_days - 1})
    assert err.value.details["field"] == "start_day"


def test_a_non_positive_price_is_reported_with_its_ticker_and_date(two_stocks):
    close = two_stocks.close.copy()
    close[10, 1] = 0.0
    broken = dataclasses.replace(two_stocks, close=close)
    with pytest.raises(DataError) as err:
        StockTradingVecEnv(broken, EnvConfig(), num_envs=1)
    assert err.value.details == {"ticker": "MSFT", "date": str(two_stocks.dates[10])}


def test_actions_of_the_wrong_shape_are_refused(two_stocks):
    env = fixed(two_stocks, num_envs=2)
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        env.step(torch.zeros(2, 3))


def test_default_observation_is_scale_free_with_value_fractions_and_rebuilds_from_raw_values(dow30_market):
    market = scale_free_market(dow30_market)
    train, later = market.slice("2010-01-01", "2016-12-31"), market.slice("2017-01-01", "2019-12-31")
    stats = fit_feature_stats(train)
    env = StockTradingVecEnv(later, EnvConfig(randomize_initial=True), num_envs=4, seed=5, feature_stats=stats)
    assert env.feature_stats is stats
    obs, info = env.reset()
    n, k = 29, len(market.feature_names)
    assert env.obs_dim == 1 + n + n * k == 1 + 29 + 29 * 13
    value = info["portfolio_value"].numpy()
    np.testing.assert_allclose(obs[:, 0].numpy(), info["cash"].numpy() / value, rtol=1e-6)
    day = info["day"].numpy()
    held = info["holdings"].numpy() * later.close[day]
    np.testing.assert_allclose(obs[:, 1 : 1 + n].numpy(), held / value[:, None], rtol=1e-5, atol=1e-7)
    layout = json.loads(json.dumps(env.observation_layout()))
    assert (
        layout["observation"] == "scale_free" and layout["blocks"][2]["feature_stats"]["fitted_on"][1] == "2016-12-30"
    )
    rebuilt = build_observation(
        layout, info["cash"].numpy(), info["holdings"].numpy(), later.close[day], later.features[day]
    )
    np.testing.assert_allclose(obs.numpy(), rebuilt, rtol=1e-5, atol=1e-6)
    # The same market situation at five times the prices gives the same observation.
    scaled = dataclasses.replace(dow30_market, close=dow30_market.close * 5.0, features=dow30_market.features.copy())
    for name in ("macd", "boll_ub", "boll_lb", "close_30_sma", "close_60_sma"):
        scaled.features[:, :, dow30_market.feature_names.index(name)] *= 5.0
    again = StockTradingVecEnv(
        scale_free_market(scaled).slice("2017-01-01", "2019-12-31"), EnvConfig(random_start=False), feature_stats=stats
    )
    base = StockTradingVecEnv(later, EnvConfig(random_start=False), feature_stats=stats)
    np.testing.assert_allclose(again.reset()[0].numpy(), base.reset()[0].numpy(), rtol=1e-4, atol=1e-4)

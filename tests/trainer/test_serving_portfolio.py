"""Market states of a portfolio agent (no Django): the observation, target weights and the
no-trade band's rebalanced weights are the portfolio env's own, for a fresh start and for a
portfolio the env really reached; bad weights, cash and holdings are errors naming the field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.trainer.test_serving import TINY as SERVING_TINY
from trainer.artifacts.bundle_reader import load_agent
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.errors import DataError
from trainer.serving.answers import answer
from trainer.serving.policy import ServedPolicy

TICKERS = ["AAPL", "MSFT", "JPM"]
# test_serving's tiny PPO run (the same three tickers) as a portfolio task with a 0.01 band
TINY = ["--env", "portfolio", "--algo", "ppo", "--rebalance-band", "0.01", *SERVING_TINY]
START = "2021-06-01"  # a trading day of the test split


@pytest.fixture(scope="module")
def bundle(data_dir, tmp_path_factory):
    """A tiny PPO portfolio agent with a 0.01 no-trade band on three Dow tickers."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("portfolio-bundle")
    assert main(["train", "--data-dir", str(data_dir), "--out", str(folder), "--seed", "0", *TINY]) == 0
    return next(folder.glob("*.zip"))


@pytest.fixture(scope="module")
def policy(bundle) -> ServedPolicy:
    return ServedPolicy.load(bundle)


@pytest.fixture(scope="module")
def market(policy, data_dir):
    return load_market_data(DataSpec.from_dict(policy.config["task"]["data"]), data_dir=data_dir)


@pytest.fixture
def walk(bundle, market):
    """The env from START with the agent's own actions for 10 days: the state it reached (info
    before the 11th step), the observation it shows, and what its 11th step did."""
    agent = load_agent(bundle)
    env = agent.make_env(agent.prepare_market(market).slice(START, None))
    obs, info = env.reset(options={"start_day": 0})
    for _ in range(10):
        obs, _, _, _, info = env.step(torch.as_tensor(agent.act(obs.numpy())))
    day = str(env.data.dates[int(info["day"][0])])[:10]
    return {"env": env, "obs": obs[0].numpy(), "info": info, "day": day}


def _vector(named: dict, tickers: list[str]) -> np.ndarray:
    return np.array([named[t] for t in [*tickers, "cash"]])


def test_a_fresh_start_is_the_envs_first_observation_and_step(policy, bundle, market):
    agent = load_agent(bundle)
    out = answer(policy, {"date": START}, load_market=lambda: market)
    env = agent.make_env(agent.prepare_market(market).slice(START, None))
    obs, _ = env.reset(options={"start_day": 0})
    np.testing.assert_allclose(out["observation"], obs[0].numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out["action"], agent.act(obs[0].numpy()), atol=1e-5)
    assert out["weights"] == {"AAPL": 0.0, "MSFT": 0.0, "JPM": 0.0, "cash": 1.0}
    assert out["cash"] == policy.config["env_config"]["initial_cash"] and out["rebalance_band"] == 0.01
    _, _, _, _, info = env.step(torch.as_tensor([out["action"]], dtype=torch.float32))
    np.testing.assert_allclose(_vector(out["rebalanced_weights"], TICKERS), info["target_weights"][0], atol=1e-12)
    assert out["costs"] == pytest.approx(float(info["costs"][0]), rel=1e-9)


@pytest.mark.parametrize("form", ["weights", "cash_and_holdings"])
def test_a_portfolio_the_env_reached_gets_the_envs_observation_and_band(policy, market, walk, form):
    info, n = walk["info"], len(TICKERS)
    weights = info["weights"][0].numpy()
    if form == "weights":
        body = {"date": walk["day"], "weights": dict(zip([*TICKERS, "cash"], weights.tolist()))}
    else:
        body = {
            "date": walk["day"],
            "cash": float(info["cash"][0]),
            "holdings": dict(zip(TICKERS, info["holdings"][0].tolist())),  # fractional shares
        }
    out = answer(policy, body, load_market=lambda: market)
    assert out["date"] == walk["day"]
    np.testing.assert_allclose(out["observation"], walk["obs"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_vector(out["weights"], TICKERS), weights, atol=1e-12)
    # the env's next step with the served action trades to the served rebalanced weights
    _, _, _, _, after = walk["env"].step(torch.as_tensor([out["action"]], dtype=torch.float32))
    traded = after["target_weights"][0].numpy()
    np.testing.assert_allclose(_vector(out["rebalanced_weights"], TICKERS), traded, atol=1e-9)
    moved = np.abs(_vector(out["target_weights"], TICKERS)[:n] - weights[:n]) > 0.01
    assert ((traded[:n] == weights[:n]) | moved).all()  # the band held every weight it did not move
    assert out["turnover"] == pytest.approx(float(after["turnover"][0]), rel=1e-9)
    if form == "cash_and_holdings":
        value = float(info["portfolio_value"][0])
        assert out["value"] == pytest.approx(value, rel=1e-12)
        assert out["costs"] == pytest.approx(float(after["costs"][0]), rel=1e-9)
        # the holdings entering the next day are the post-trade ones less the costs, pro rata
        kept = 1.0 - out["costs"] / value
        shares = np.array([o["shares"] for o in out["orders"]])
        expected = after["holdings"][0].numpy() / kept - info["holdings"][0].numpy()
        np.testing.assert_allclose(shares, expected, rtol=1e-9, atol=1e-9)
    else:
        assert "orders" not in out and "value" not in out


def test_weights_without_cash_leave_the_rest_in_cash_and_rounded_weights_are_normalised(policy, market):
    out = answer(policy, {"date": START, "weights": {"AAPL": 0.5, "MSFT": 0.2}}, load_market=lambda: market)
    assert out["weights"] == pytest.approx({"AAPL": 0.5, "MSFT": 0.2, "JPM": 0.0, "cash": 0.3})
    body = {"date": START, "weights": {"AAPL": 0.3333, "MSFT": 0.3333, "JPM": 0.3333, "cash": 0.0}}
    out = answer(policy, body, load_market=lambda: market)
    assert sum(out["weights"].values()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"date": START, "weights": {"AAPL": 0.5}, "cash": 10}, "weights", "not both"),
        ({"date": START, "weights": [0.5, 0.5]}, "weights", "object"),
        ({"date": START, "weights": {"AAPL": 0.5, "cash": 0.2}}, "weights", "sum to 0.7"),
        ({"date": START, "weights": {"AAPL": 0.9, "MSFT": 0.9}}, "weights", "sum to 1.8"),
        ({"date": START, "weights": {"TSLA": 1.0}}, "weights", "TSLA"),
        ({"date": START, "weights": {"AAPL": -0.1, "cash": 1.1}}, "weights.AAPL", "long only"),
        ({"date": START, "weights": {"KO": "x"}}, "weights", "KO"),
        ({"date": START, "weights": {"MSFT": "x"}}, "weights.MSFT", "finite number"),
        ({"date": START, "holdings": {"AAPL": -2}}, "holdings.AAPL", ">= 0"),
        ({"date": START, "cash": 0}, "cash", "worth nothing"),
        ({"date": "2021-06-05"}, "date", "not a trading day"),
    ],
)
def test_bad_portfolio_states_raise_data_errors_naming_the_field(policy, market, body, field, words):
    with pytest.raises(DataError) as err:
        answer(policy, body, load_market=lambda: market)
    assert err.value.details["field"] == field
    assert words in err.value.message


def test_fractional_shares_are_a_portfolio_agents_holdings(policy, market):
    out = answer(policy, {"date": START, "cash": 0, "holdings": {"AAPL": 2.5}}, load_market=lambda: market)
    assert out["holdings"]["AAPL"] == 2.5 and out["weights"]["AAPL"] == pytest.approx(1.0)
    assert out["value"] == pytest.approx(2.5 * out["prices"]["AAPL"])


def test_the_fewest_bars_accepted_give_the_dataset_days_target_weights_within_the_tolerance(policy, market, data_dir):
    """252 real daily bars (the minimum) give the date path's observation and target weights
    within BARS_TOLERANCE; 251 are refused naming the ticker."""
    from trainer.data.loading import load_panel
    from trainer.serving.bodies import BARS_MIN_DAYS, BARS_TOLERANCE

    spec = DataSpec.from_dict(policy.config["task"]["data"])
    panel = load_panel([data_dir / p for p in spec.paths], tickers=policy.tickers)
    day = "2016-03-01"

    def bars(days: int) -> dict:
        out = {}
        for t in policy.tickers:
            rows = panel[(panel["tic"] == t) & (panel["date"] <= day)].tail(days)
            out[t] = [
                {"date": str(r.date)[:10], "open": r.open, "high": r.high, "low": r.low, "close": r.close,
                 "volume": r.volume}
                for r in rows.itertuples()
            ]  # fmt: skip
        return out

    weights = {"cash": 0.5, policy.tickers[0]: 0.5}
    full = answer(policy, {"date": day, "weights": weights}, load_market=lambda: market)
    out = answer(policy, {"bars": bars(BARS_MIN_DAYS), "weights": weights})
    assert np.abs(np.array(out["observation"]) - np.array(full["observation"])).max() < BARS_TOLERANCE
    for key, value in full["target_weights"].items():
        assert abs(out["target_weights"][key] - value) < BARS_TOLERANCE
    with pytest.raises(DataError) as err:
        answer(policy, {"bars": bars(BARS_MIN_DAYS - 1)})
    assert err.value.details["field"] == f"bars.{policy.tickers[0]}"


def test_a_served_portfolio_over_a_point_in_time_universe_trades_as_the_env_does(policy, bundle, market):
    import dataclasses

    members = np.ones(market.close.shape, dtype=bool)
    members[:, TICKERS.index("MSFT")] = market.dates < np.datetime64(START)  # MSFT left before START
    universe = dataclasses.replace(market, members=members)
    out = answer(policy, {"date": START}, load_market=lambda: universe)
    agent = load_agent(bundle)
    env = agent.make_env(agent.prepare_market(universe).slice(START, None))
    obs, _ = env.reset(options={"start_day": 0})
    _, _, _, _, info = env.step(torch.as_tensor([out["action"]], dtype=torch.float32))
    served = _vector(out["rebalanced_weights"], TICKERS)
    assert served[TICKERS.index("MSFT")] == 0.0 and out["rebalanced_weights"]["cash"] < 1.0
    np.testing.assert_allclose(served, info["target_weights"][0], atol=1e-12)

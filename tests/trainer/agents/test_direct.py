"""The direct learner: its objective's gradient, its settings' errors, exact resume, and the CLI end to end."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.agents import make_agent
from trainer.agents.cross_sectional import CrossSectionalPolicy
from trainer.agents.direct import DirectConfig
from trainer.agents.direct_objective import Penalties, WindowBatch, draw_windows, window_objective
from trainer.artifacts.bundle_reader import load_agent
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.envs.kinds import fit_stats, make_env, prepare_market
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_dynamics import Dynamics
from trainer.errors import ConfigError
from trainer.task import TaskSpec

TICKERS = ["AAPL", "MSFT", "JPM", "KO", "CVX", "WMT"]
SMALL = {"num_envs": 16, "rollout_steps": 10, "hidden_sizes": [8]}


def direct_task(**changes) -> dict:
    task = demo_task_dict()
    task.update(kind="portfolio", algorithm="direct", env={"rebalance_band": 0.01})
    task["data"]["tickers"] = list(TICKERS)
    task["hyperparameters"] = dict(SMALL)
    task.update(changes)
    return task


@pytest.fixture(scope="module")
def train_env(data_dir):
    task = TaskSpec.from_dict(direct_task())
    market = prepare_market(load_market_data(task.data, data_dir=data_dir), task.env)
    train = market.slice(*task.train, name="train")
    return make_env(train, task.env, num_envs=2, feature_stats=fit_stats(train, task.env), state_info=False)


def test_the_objective_gradient_matches_finite_differences_on_a_tiny_panel():
    torch.manual_seed(0)
    t_days, n, k = 40, 4, 3
    features = torch.randn(t_days, n, k, dtype=torch.float64)
    gross = torch.exp(0.01 * torch.randn(t_days, n, dtype=torch.float64))
    policy = CrossSectionalPolicy(k, (5,), kappa=0.8).double()
    with torch.no_grad():  # away from the zero head, where every term is active
        policy.head.weight.normal_(0.0, 0.5)
        policy.weight_gain.fill_(0.4)
    batch = draw_windows(features, gross, num_windows=3, length=6, subset=3, generator=torch.Generator().manual_seed(1))
    dynamics = Dynamics.from_config(PortfolioConfig(cost_pct=2e-3))  # no band: its switch has no gradient
    penalties = Penalties(variance=2.0, tracking=5.0, turnover=0.05)

    def objective() -> torch.Tensor:
        return window_objective(policy, batch, dynamics, penalties, logit_scale=4.0, cash_bias=20.0).objective

    params = [policy.head.weight, policy.weight_gain, policy.embed[0][0].weight]
    grads = torch.autograd.grad(objective(), params)
    eps = 1e-6
    for param, grad in zip(params, grads):
        flat = param.data.view(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            with torch.no_grad():
                flat[i] = old + eps
                up = objective().item()
                flat[i] = old - eps
                down = objective().item()
                flat[i] = old
            assert grad.view(-1)[i].item() == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-10)
    assert max(g.abs().max().item() for g in grads) > 1e-6  # a gradient that is there


@pytest.mark.parametrize("lag", [0, 1])
def test_the_objective_sees_the_returns_the_env_pays_for_the_same_policy(train_env, lag):
    """One window over all tickers from all cash, through window_objective and through the env's
    own steps (band, costs, execution lag): the same log growth."""
    env_cfg = PortfolioConfig(rebalance_band=0.01, execution_lag=lag, random_start=False)
    data, stats = train_env.data, train_env.feature_stats
    env = make_env(data, env_cfg, num_envs=1, feature_stats=stats)
    policy = CrossSectionalPolicy(env.num_features, (8,), kappa=1.0)
    with torch.no_grad():
        policy.head.weight.normal_(0.0, 2.0, generator=torch.Generator().manual_seed(0))
        policy.weight_gain.fill_(-1.5)
    start, length = 300, 40
    obs = env.reset(options={"start_day": start})[0]
    for _ in range(length):
        obs, _, _, _, info = env.step(policy(obs).detach())
    env_growth = np.log(info["portfolio_value"][0].item() / env_cfg.initial_cash)
    features, gross, _ = env.market_tensors()
    days = torch.arange(start, start + length)
    gross = gross[days][:, None, :]
    batch = WindowBatch(features[days][:, None], gross, torch.log(gross.mean(dim=2)))
    cash = torch.zeros(1, env.action_dim, dtype=torch.float64)
    cash[0, -1] = 1.0
    terms = window_objective(
        policy,
        batch,
        Dynamics.from_config(env_cfg),
        Penalties(0.0, 0.0, 0.0),
        logit_scale=env_cfg.logit_scale,
        cash_bias=env_cfg.cash_bias,
        execution_lag=lag,
        start_weights=cash,
    )
    assert terms.turnover.item() > 0.01  # the policy trades: the comparison means something
    assert terms.mean_log_return.item() * length == pytest.approx(env_growth, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kappa": 0.0}, "direct.kappa"),
        ({"kappa": -1.0}, "direct.kappa"),
        ({"rollout_steps": 1}, "direct.rollout_steps"),
        ({"subset_size": 1}, "direct.subset_size"),
        ({"num_envs": 0}, "direct.num_envs"),
        ({"turnover_penalty": -0.1}, "direct.turnover_penalty"),
    ],
)
def test_impossible_settings_raise_config_error_naming_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        DirectConfig.from_dict(changes)
    assert err.value.details["field"] == field


@pytest.mark.parametrize(
    ("task", "field"),
    [
        (direct_task(hyperparameters={"subset_size": 7}), "hyperparameters.subset_size"),  # 6 tickers
        (direct_task(hyperparameters={"kappa": 2.5}), "hyperparameters.kappa"),  # logit_scale 4: at most 2
        (direct_task(kind="stock_trading", env={}), "algorithm"),
        # one ticker and no cash head: the only portfolio is all in it
        (direct_task(data={**demo_task_dict()["data"], "tickers": ["AAPL"]}), "tickers"),
        (
            direct_task(
                algorithm="ppo",
                data={**demo_task_dict()["data"], "tickers": ["AAPL"]},
                hyperparameters={"policy": "cross_sectional"},
            ),
            "tickers",
        ),
    ],
)
def test_a_task_the_direct_learner_cannot_train_is_refused_naming_the_field(task, field):
    with pytest.raises(ConfigError) as err:
        TaskSpec.from_dict(task)
    assert err.value.details["field"] == field


def test_one_ticker_trains_with_the_cash_head_or_with_ppos_flat_policy():
    """What a single ticker leaves to learn is when to hold cash: allowed where there is a cash
    decision (direct with ``cash: true``, PPO's flat MLP)."""
    one = {**demo_task_dict()["data"], "tickers": ["AAPL"]}
    assert TaskSpec.from_dict(direct_task(data=one, hyperparameters={**SMALL, "cash": True})).data.tickers == ["AAPL"]
    TaskSpec.from_dict(direct_task(algorithm="ppo", data=one, hyperparameters={}))


def test_a_subset_above_the_universe_is_refused_by_the_agent_too(train_env):
    with pytest.raises(ConfigError) as err:
        make_agent("direct", train_env.obs_dim, train_env.action_dim, {"subset_size": 7})
    assert err.value.details["field"] == "direct.subset_size"


def test_learning_in_two_calls_equals_learning_once_with_a_save_and_load_between(train_env):
    one = make_agent("direct", train_env.obs_dim, train_env.action_dim, SMALL, seed=3)
    one.learn(train_env, 320)
    saved = copy.deepcopy(one.state_dict())  # the live tensors move on with the next call
    stats = one.learn(train_env, 320)
    other = make_agent("direct", train_env.obs_dim, train_env.action_dim, SMALL, seed=9)
    other.load_state_dict(saved)
    other.learn(train_env, 320)
    assert stats["updates"] == 4 and stats["env_steps"] == 320 and np.isfinite(stats["objective"])
    for a, b in zip(one.policy.state_dict().values(), other.policy.state_dict().values()):
        assert torch.equal(a, b)
    assert not torch.equal(one.policy.head.weight, torch.zeros_like(one.policy.head.weight))  # it learned


def test_cli_trains_direct_with_risk_features_into_a_bundle_that_loads_and_acts(data_dir, tmp_path, capsys):
    argv = ["train", "--algo", "direct", "--env", "portfolio", "--observation", "scale_free_risk"]
    argv += ["--tickers", ",".join(TICKERS)]
    argv += ["--data-dir", str(data_dir), "--out", str(tmp_path), "--json", "--env-steps", "640", "--no-progress"]
    argv += ["--num-envs", "16", "--hp", "rollout_steps=20", "--hp", "hidden_sizes=[8]"]
    assert main(argv) == 0, capsys.readouterr().err
    run = json.loads(capsys.readouterr().out)
    state = load_checkpoint(Path(run["checkpoint"]))
    assert state["algorithm"] == "direct" and state["agent"]["updates"] == 2
    assert state["observation_layout"]["blocks"][0]["feature_names"][-1] == "mom_12_1"
    trained, loaded = build_agent(state), load_agent(Path(run["bundle"]))
    obs = torch.randn(8, loaded.obs_dim) * 2
    np.testing.assert_array_equal(loaded.act(obs.numpy()), trained.act(obs).numpy())
    assert np.isfinite(run["score"])


def test_cli_refuses_a_bad_direct_setting_with_exit_2_naming_it(data_dir, tmp_path, capsys):
    argv = ["train", "--algo", "direct", "--env", "portfolio", "--tickers", ",".join(TICKERS)]
    argv += ["--data-dir", str(data_dir), "--out", str(tmp_path), "--hp", "kappa=0"]
    assert main(argv) == 2
    assert "hyperparameters.kappa" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("hp", "says"),
    [
        # a non-finite value says "finite", for kappa as for challenger_kappa ("must be > 0, got inf")
        ("kappa=inf", "hyperparameters.kappa: must be a finite number, got inf"),
        ("learning_rate=nan", "hyperparameters.learning_rate: must be a finite number, got nan"),
        ("challenger_kappa=inf", "hyperparameters.challenger_kappa: must be a finite number, got inf"),
        # the value as typed: YAML 1.1 read "yes" and "on" as true ("got True")
        ("challenger_alpha=yes", "hyperparameters.challenger_alpha: must be a number, got 'yes'"),
        ("cash=on", "hyperparameters.cash: must be true or false, got 'on'"),
    ],
)
def test_cli_echoes_a_bad_direct_setting_as_typed_and_says_finite_for_inf(data_dir, tmp_path, capsys, hp, says):
    argv = ["train", "--algo", "direct", "--env", "portfolio", "--tickers", ",".join(TICKERS)]
    argv += ["--data-dir", str(data_dir), "--out", str(tmp_path), "--hp", hp]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_cli_names_a_subset_above_the_loaded_universe_as_a_hyperparameter(data_dir, tmp_path, capsys):
    # without --tickers the universe is known once the data is loaded; the agent named the
    # field "direct.subset_size" there, while every other door says "hyperparameters.subset_size"
    argv = ["train", "--algo", "direct", "--env", "portfolio", "--data-dir", str(data_dir), "--out", str(tmp_path)]
    argv += [
        "--env-steps",
        "64",
        "--num-envs",
        "1",
        "--hp",
        "rollout_steps=8",
        "--hp",
        "subset_size=50",
        "--no-progress",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error: hyperparameters.subset_size: 50 tickers per window, but the universe has 29" in err

"""PPO's and A2C's cross-sectional actor (``policy="cross_sectional"``): 1/N untrained, the
same action for shuffled tickers, learning on real Dow data, exact resume, bundles, a smaller
universe, and the settings it refuses, each naming its field."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from trainer.agents import make_agent
from trainer.artifacts.bundle_reader import load_agent
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.backtest.engine import run_backtest
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.envs.kinds import fit_stats, make_env, prepare_market
from trainer.envs.portfolio_dynamics import target_weights
from trainer.errors import ConfigError
from trainer.mutation import mutate
from trainer.task import TaskSpec

TICKERS = ["AAPL", "MSFT", "JPM", "KO", "CVX", "WMT"]
SMALL = {
    "policy": "cross_sectional",
    "num_envs": 4,
    "rollout_steps": 8,
    "hidden_sizes": [8],
    "num_minibatches": 2,
    "update_epochs": 2,
}
A2C_SMALL = {"policy": "cross_sectional", "num_envs": 4, "rollout_steps": 8, "hidden_sizes": [8]}


def portfolio_task(**changes) -> dict:
    task = demo_task_dict()
    task.update(kind="portfolio", algorithm="ppo", env={"rebalance_band": 0.01})
    task["data"]["tickers"] = list(TICKERS)
    task["hyperparameters"] = dict(SMALL)
    task.update(changes)
    return task


@pytest.fixture(scope="module")
def train_env(data_dir):
    """The six-ticker Dow portfolio env over the train split, four envs."""
    task = TaskSpec.from_dict(portfolio_task())
    market = prepare_market(load_market_data(task.data, data_dir=data_dir), task.env)
    train = market.slice(*task.train, name="train")
    return make_env(train, task.env, num_envs=4, feature_stats=fit_stats(train, task.env), state_info=False)


def shuffled(obs: torch.Tensor, n: int, perm: torch.Tensor) -> torch.Tensor:
    """Portfolio observations (B, N K + N + 1) with the tickers in ``perm`` order (every feature
    row's columns and the stock weights alike; cash stays last)."""
    k = (obs.shape[1] - n - 1) // n
    market = obs[:, : k * n].reshape(obs.shape[0], k, n)[:, :, perm].reshape(obs.shape[0], k * n)
    weights = obs[:, k * n :]
    return torch.cat([market, weights[:, :n][:, perm], weights[:, n:]], dim=1)


def trained_looking(agent) -> None:
    """Give the cross-sectional mean a non-zero head, as training does."""
    policy = agent.actor.mean
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        policy.head.weight.copy_(torch.randn(policy.head.weight.shape, generator=g))
        policy.head.bias.fill_(0.3)
        policy.weight_gain.fill_(-0.7)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_an_untrained_agent_acts_exactly_the_zero_action_the_env_holds_at_one_over_n(train_env, algo):
    agent = make_agent(algo, train_env.obs_dim, train_env.action_dim, SMALL if algo == "ppo" else A2C_SMALL)
    obs, _ = train_env.reset(seed=0)
    action = agent.act(obs)
    assert torch.equal(action, torch.zeros_like(action))  # bit for bit, whatever the observation
    assert torch.equal(agent.policy_module()(obs), action)
    weights = target_weights(action, logit_scale=train_env.config.logit_scale, cash_bias=train_env.config.cash_bias)
    n = train_env.action_dim - 1
    torch.testing.assert_close(weights[:, :n], torch.full_like(weights[:, :n], 1.0 / n), rtol=0, atol=1e-8)


def test_shuffling_the_tickers_shuffles_the_ppo_mean_action_the_same_way(train_env):
    agent = make_agent("ppo", train_env.obs_dim, train_env.action_dim, SMALL)
    trained_looking(agent)
    n = train_env.action_dim - 1
    obs = train_env.reset(seed=1)[0]
    obs = torch.cat([obs, obs + 0.5 * torch.randn(obs.shape, generator=torch.Generator().manual_seed(2))])
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    action, action_shuffled = agent.act(obs), agent.act(shuffled(obs, n, perm))
    assert action[:, :n].abs().max() > 1e-3  # the test means something
    torch.testing.assert_close(action_shuffled[:, :n], action[:, :n][:, perm], rtol=0, atol=1e-6)
    torch.testing.assert_close(action_shuffled[:, n], action[:, n], rtol=0, atol=1e-6)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_learning_on_dow_data_moves_the_policy_and_resumes_bit_identically(train_env, algo):
    hp = SMALL if algo == "ppo" else A2C_SMALL
    one = make_agent(algo, train_env.obs_dim, train_env.action_dim, hp, seed=3)
    before = copy.deepcopy(one.actor.state_dict())
    one.learn(train_env, 64)
    saved = copy.deepcopy(one.state_dict())  # the live tensors move on with the next call
    stats = one.learn(train_env, 64)
    other = make_agent(algo, train_env.obs_dim, train_env.action_dim, hp, seed=9)
    other.load_state_dict(saved)
    other.learn(train_env, 64)
    assert stats["env_steps"] == 64 and np.isfinite(stats["policy_loss"]) and np.isfinite(stats["value_loss"])
    for name, value in one.actor.state_dict().items():
        assert torch.equal(value, other.actor.state_dict()[name]), name
    for a, b in zip(one.critic.state_dict().values(), other.critic.state_dict().values()):
        assert torch.equal(a, b)
    head = one.actor.mean.head.weight
    assert not torch.equal(head, before["mean.head.weight"])  # the head left zero: it learned
    assert not torch.equal(one.actor.log_std, before["log_std"])
    obs = train_env.reset(seed=5)[0]
    assert torch.equal(one.act(obs), other.act(obs))
    assert one.obs_rms is not None and one.obs_rms.count > 100  # the critic's statistics kept up
    if algo == "ppo":
        assert not one.net.fast  # the autograd reference: the fast path has no such actor


def test_policy_and_kappa_cannot_change_after_the_agent_exists_nor_be_mutated(train_env):
    agent = make_agent("ppo", train_env.obs_dim, train_env.action_dim, SMALL)
    for change, field in (({"policy": "mlp"}, "ppo.policy"), ({"kappa": 0.3}, "ppo.kappa")):
        with pytest.raises(ConfigError) as err:
            agent.set_hyperparameters(**change)
        assert err.value.details["field"] == field
    agent.set_hyperparameters(learning_rate=1e-3)  # the step size still moves
    hp = agent.hyperparameters()
    new, changed = mutate(hp, {"learning_rate": (1e-5, 1e-2)}, rng=np.random.default_rng(0))
    assert new["policy"] == "cross_sectional" and set(changed) == {"learning_rate"}
    with pytest.raises(ConfigError) as err:
        mutate(hp, {"policy": (0, 1)}, rng=np.random.default_rng(0))
    assert err.value.details["field"] == "hyperparameters.policy"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kappa": 0.0}, "ppo.kappa"),
        ({"kappa": -1.0}, "ppo.kappa"),
        ({"kappa": float("nan")}, "ppo.kappa"),
        ({"policy": "transformer"}, "ppo.policy"),
    ],
)
def test_impossible_settings_raise_config_error_naming_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        make_agent("ppo", 43, 7, changes)
    assert err.value.details["field"] == field


@pytest.mark.parametrize(
    ("task", "field"),
    [
        (portfolio_task(kind="stock_trading", env={}), "hyperparameters.policy"),
        (
            portfolio_task(algorithm="a2c", kind="stock_trading", env={}, hyperparameters=A2C_SMALL),
            "hyperparameters.policy",
        ),
        (portfolio_task(hyperparameters={**SMALL, "kappa": 0}), "hyperparameters.kappa"),
        (portfolio_task(hyperparameters={**SMALL, "kappa": 2.5}), "hyperparameters.kappa"),  # logit_scale 4
    ],
)
def test_a_task_the_cross_sectional_actor_cannot_train_is_refused_naming_the_field(task, field):
    with pytest.raises(ConfigError) as err:
        TaskSpec.from_dict(task)
    assert err.value.details["field"] == field


def test_the_actor_is_refused_on_sizes_and_envs_that_are_not_a_portfolios(data_dir):
    with pytest.raises(ConfigError) as err:
        make_agent("ppo", 3, 1, {"policy": "cross_sectional"})  # Pendulum's sizes
    assert err.value.details["field"] == "ppo.policy"
    task = TaskSpec.from_dict(portfolio_task(kind="stock_trading", env={}, hyperparameters={}))
    data = load_market_data(task.data, data_dir=data_dir).slice(*task.train, name="train")
    stock = make_env(data, task.env, num_envs=2)
    try:  # sizes that happen to split as a portfolio's: the env itself is refused when learning
        agent = make_agent("ppo", stock.obs_dim, stock.action_dim, {**SMALL, "num_envs": 2})
    except ConfigError as exc:
        assert exc.details["field"] == "ppo.policy"
    else:
        with pytest.raises(ConfigError) as err:
            agent.learn(stock, 16)
        assert err.value.details["field"] == "ppo.policy"


def test_a_mlp_ppo_agent_is_unchanged_by_the_new_settings(train_env):
    """The default policy keeps the fast update and the normalised actor input."""
    agent = make_agent(
        "ppo", train_env.obs_dim, train_env.action_dim, {k: v for k, v in SMALL.items() if k != "policy"}
    )
    assert agent.config.policy == "mlp" and agent.net.fast and agent.actor_normalizer is agent.obs_rms


def test_a_generation_and_its_child_train_the_actor_and_keep_it(data_dir, tmp_path):
    """The pod's paths: a fresh agent scored on validation, then a child with a changed step size."""
    from trainer.pod import run_generation

    task = portfolio_task()
    first = run_generation(task, env_steps=64, out_path=tmp_path / "g1.pt", seed=1, data_dir=data_dir)
    child = run_generation(
        task,
        env_steps=64,
        out_path=tmp_path / "g2.pt",
        parent=first.checkpoint_path,
        hyperparameters={"learning_rate": 1e-3},
        seed=2,
        data_dir=data_dir,
    )
    assert np.isfinite(first.score) and np.isfinite(child.score)
    assert child.hyperparameters["policy"] == "cross_sectional" and child.hyperparameters["learning_rate"] == 1e-3
    assert child.total_env_steps == 128 and child.generation == 2


@pytest.fixture(scope="module")
def cli_run(data_dir, tmp_path_factory):
    """``python -m trainer train --algo ppo --hp policy=cross_sectional`` on the six tickers."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("xs-ppo")
    argv = ["train", "--algo", "ppo", "--env", "portfolio", "--tickers", ",".join(TICKERS), "--seed", "0"]
    argv += ["--data-dir", str(data_dir), "--out", str(out), "--json", "--env-steps", "96", "--no-progress"]
    argv += ["--num-envs", "4", "--hp", "policy=cross_sectional", "--hp", "rollout_steps=8"]
    argv += ["--hp", "hidden_sizes=[8]", "--hp", "num_minibatches=2", "--hp", "kappa=0.75"]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(argv) == 0
    return json.loads(text.getvalue())


def test_the_cli_trains_it_into_a_bundle_whose_torch_and_onnx_policies_agree(cli_run):
    state = load_checkpoint(Path(cli_run["checkpoint"]))
    assert state["hyperparameters"]["policy"] == "cross_sectional" and state["hyperparameters"]["kappa"] == 0.75
    trained, loaded = build_agent(state), load_agent(Path(cli_run["bundle"]))
    assert not torch.equal(trained.actor.mean.head.weight, torch.zeros_like(trained.actor.mean.head.weight))
    g = torch.Generator().manual_seed(0)
    obs = torch.randn((8, loaded.obs_dim), generator=g)
    obs[:, -loaded.action_dim :] = torch.softmax(obs[:, -loaded.action_dim :], dim=1)  # weights sum to 1
    action = loaded.act(obs.numpy())
    np.testing.assert_array_equal(action, trained.act(obs).numpy())
    assert np.abs(action).max() > 0  # a trained tilt, not the zero action
    with zipfile.ZipFile(cli_run["bundle"]) as zf:
        config = json.loads(zf.read("config.json"))
        session = ort.InferenceSession(zf.read("policy.onnx"), providers=["CPUExecutionProvider"])
    assert config["normalization"]["applied_in_policy"] is False  # the actor reads raw observations
    assert config["architecture"]["policy"].startswith("raw obs -> cross-sectional policy")
    (onnx_action,) = session.run(["action"], {"obs": obs.numpy()})
    np.testing.assert_allclose(onnx_action, action, rtol=1e-5, atol=1e-6)


def test_a_backtest_of_the_bundle_over_the_test_split_trades_its_tilt(cli_run, data_dir):
    loaded = load_agent(Path(cli_run["bundle"]))
    task = TaskSpec.from_dict(loaded.config["task"])
    market = load_market_data(task.data, data_dir=data_dir)
    start, end = task.test
    result = run_backtest(loaded.policy_fn(), market, loaded.env_config(), start=start, end=end, tickers=loaded.tickers)
    assert len(result.daily) > 400 and np.isfinite(result.metrics["agent"]["sharpe_ratio"])
    assert result.tickers == tuple(TICKERS) and result.actions.abs().to_numpy().max() > 0  # a tilt, traded


def test_the_policy_server_answers_with_the_bundles_own_action(cli_run, data_dir):
    from trainer.serving.answers import answer
    from trainer.serving.policy import ServedPolicy

    served, loaded = ServedPolicy.load(Path(cli_run["bundle"])), load_agent(Path(cli_run["bundle"]))
    market = load_market_data(TaskSpec.from_dict(loaded.config["task"]).data, data_dir=data_dir)
    weights = dict(zip([*TICKERS, "cash"], [0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.1]))
    out = answer(served, {"date": "2021-06-01", "weights": weights}, load_market=lambda: market)
    np.testing.assert_allclose(out["action"], loaded.act(np.asarray(out["observation"], dtype=np.float32)), atol=1e-6)
    assert sum(out["target_weights"].values()) == pytest.approx(1.0)


def test_the_bundles_policy_acts_on_a_smaller_universe_as_on_its_tickers(cli_run):
    """The served policy module reads N from the observation's width: on the first three
    tickers alone it acts as the cross-sectional policy does on any universe (the REST server
    and ``LoadedAgent.act`` still check the bundle's own tickers; the ONNX graph is traced at
    the trained width)."""
    loaded = load_agent(Path(cli_run["bundle"]))
    n, small = len(TICKERS), 3
    k = (loaded.obs_dim - n - 1) // n
    g = torch.Generator().manual_seed(4)
    market = torch.randn((5, k, small), generator=g)
    weights = torch.softmax(torch.randn((5, small + 1), generator=g), dim=1)
    obs = torch.cat([market.reshape(5, k * small), weights], dim=1)
    with torch.no_grad():
        action = loaded.policy(obs)
        perm = torch.tensor([2, 0, 1])
        action_shuffled = loaded.policy(shuffled(obs, small, perm))
    assert action.shape == (5, small + 1) and action.abs().max() <= 1.0
    assert action[:, :small].abs().max() > 0
    torch.testing.assert_close(action_shuffled[:, :small], action[:, :small][:, perm], rtol=0, atol=1e-6)


def test_the_cli_refuses_the_actor_on_a_stock_trading_task_with_exit_2_naming_it(data_dir, tmp_path, capsys):
    argv = ["train", "--algo", "ppo", "--env", "stock_trading", "--tickers", ",".join(TICKERS)]
    argv += ["--data-dir", str(data_dir), "--out", str(tmp_path), "--hp", "policy=cross_sectional"]
    assert main(argv) == 2
    assert "hyperparameters.policy" in capsys.readouterr().err

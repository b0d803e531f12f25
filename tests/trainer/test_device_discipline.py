"""Device discipline of the accelerator path, on a stand-in accelerator (``tests/trainer/discipline.py``).

Every tensor of the env, the agents, evaluation, checkpoints and bundles is placed on the
``fakegpu`` device; the harness fails on a CPU tensor (dim > 0) meeting a device tensor, a
generator drawing for another device type and ``.numpy()`` on a device tensor, and counts host
syncs per phase. The budgets asserted here are today's:

* env step (both market envs, through episode ends): 0 host syncs (host-to-device copies
  included) and no float64 allocation arithmetic (float64 tensors of 2+ dimensions);
* PPO and A2C ``learn``: 1 per call (the env seed drawn from the agent's generator) and 2 per
  rollout (the finished episodes' returns and the update's mean losses), with the MLP actor
  and with the cross-sectional one (PPO's autograd update) alike;
* one SAC or TD3 gradient update: 0, and 0 per vector step of their ``learn`` (the divergence
  check of the losses is flagged on the device); per ``learn`` call: 1 (env seed), 2 per 64 env
  steps and at the end (finished episodes' returns; the losses and their divergence flag) and 1
  at the end (the parameters' divergence check);
* evaluation runs on the CPU: after copying the policy off the device, no device operation.

These tests run in a fresh interpreter (``test_device_discipline_isolated.py`` starts one):
torch's autograd engine sizes its per-device queues the first time it runs, so a backward pass
on the stand-in device fails in a process where autograd already ran on the CPU (as it has by
then in a whole-suite run). Set ``PADDOCK_DISCIPLINE_CHILD=1`` to run this file directly.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from tests.trainer.discipline import DEVICE_TYPE, DisciplineError, stand_in_accelerator
from trainer.agents import make_agent
from trainer.agents._off_policy import DRAIN_EVERY
from trainer.artifacts.bundle import export_bundle
from trainer.artifacts.bundle_reader import load_agent
from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.errors import Diverged
from trainer.pod import run_generation
from trainer.task import TaskSpec

pytestmark = pytest.mark.skipif(
    os.environ.get("PADDOCK_DISCIPLINE_CHILD") != "1",
    reason="runs in a fresh interpreter (tests/trainer/test_device_discipline_isolated.py)",
)

TICKERS = ["AAPL", "MSFT", "JPM"]
COPY_OPS = {"aten.copy_.default", "aten._to_copy.default", "host-to-device copy (aten._copy_from)"}
SMALL = {"num_envs": 16, "hidden_sizes": [16, 16]}
ON_POLICY = {**SMALL, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 2}
A2C = {**SMALL, "rollout_steps": 8}
OFF_POLICY = {**SMALL, "batch_size": 32, "buffer_size": 1024, "learning_starts": 64}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def task() -> TaskSpec:
    d = demo_task_dict()
    d["data"]["tickers"] = TICKERS
    d["hyperparameters"] = dict(ON_POLICY)
    return TaskSpec.from_dict(d)


@pytest.fixture(scope="module")
def market(task, data_dir, tmp_path_factory):
    return load_market_data(task.data, data_dir=data_dir, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def train(task, market):
    return market.slice(*task.train, name="train")


def _env_config(train) -> EnvConfig:
    # turbulent days, random wealth and short episodes: every branch of the step runs
    threshold = float(np.quantile(train.turbulence[train.turbulence > 0], 0.9))
    return EnvConfig(turbulence_threshold=threshold, randomize_initial=True, episode_length=5)


def _count_tensors(value) -> int:
    if isinstance(value, torch.Tensor):
        return 1
    if isinstance(value, dict):
        return sum(_count_tensors(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_count_tensors(v) for v in value)
    return 0


@pytest.fixture
def accelerator(monkeypatch):
    with stand_in_accelerator(monkeypatch) as (device, mode):
        yield device, mode


def test_an_env_step_on_the_accelerator_needs_no_host_sync(accelerator, train):
    device, mode = accelerator
    env = StockTradingVecEnv(train, _env_config(train), num_envs=16, device=device, seed=0)
    assert env.sync_free and env.share_dtype == torch.float32
    actions = torch.rand((12, 16, len(TICKERS)), device=device) * 2.2 - 1.0
    ends = torch.zeros((), dtype=torch.long, device=device)
    with mode.in_phase("env step"):
        for a in actions:
            obs, reward, terminated, truncated, info = env.step(a)
            ends = ends + truncated.sum()
    assert obs.device.type == DEVICE_TYPE and info["holdings"].device.type == DEVICE_TYPE
    assert mode.device_ops["env step"] > 0
    assert mode.syncs["env step"] == 0, dict(mode.sync_ops["env step"])
    assert not mode.float64_ops["env step"], dict(mode.float64_ops["env step"])
    assert int(ends.cpu()) >= 16 * 2, "episodes of 5 steps ended and restarted"


@pytest.mark.parametrize("reward", ["log_return", "differential_sharpe"])
def test_a_portfolio_env_step_through_episode_ends_needs_no_host_sync_and_no_float64(accelerator, train, reward):
    from trainer.envs.portfolio import PortfolioVecEnv
    from trainer.envs.portfolio_config import PortfolioConfig

    device, mode = accelerator
    config = PortfolioConfig(episode_length=4, reward=reward, rebalance_band=0.01)
    env = PortfolioVecEnv(train, config, num_envs=16, device=device, seed=0)
    assert env.sync_free and env.dtype == torch.float32
    actions = torch.rand((13, 16, len(TICKERS) + 1), device=device) * 2.2 - 1.0
    ends = torch.zeros((), dtype=torch.long, device=device)
    with mode.in_phase("portfolio step"):
        for a in actions:
            obs, reward_, terminated, truncated, info = env.step(a)
            ends = ends + truncated.sum()
    assert mode.device_ops["portfolio step"] > 0 and info["weights"].dtype == torch.float32
    assert mode.syncs["portfolio step"] == 0, dict(mode.sync_ops["portfolio step"])
    assert not mode.float64_ops["portfolio step"], dict(mode.float64_ops["portfolio step"])
    assert int(ends.cpu()) == 16 * 3, "every env ended three episodes"


def test_both_envs_over_a_point_in_time_universe_step_without_host_sync_or_float64(accelerator, train):
    import dataclasses

    from trainer.envs.portfolio import PortfolioVecEnv
    from trainer.envs.portfolio_config import PortfolioConfig

    device, mode = accelerator
    rng = np.random.default_rng(0)
    members = rng.random(train.close.shape) < 0.7  # a ticker leaves and joins often
    universe = dataclasses.replace(train, members=members)
    stock = StockTradingVecEnv(universe, _env_config(universe), num_envs=16, device=device, seed=0)
    portfolio = PortfolioVecEnv(
        universe, PortfolioConfig(episode_length=4, rebalance_band=0.01), num_envs=16, device=device
    )
    buys = torch.ones((16, len(TICKERS)), device=device)
    weights = torch.zeros((16, len(TICKERS) + 1), device=device)
    with mode.in_phase("membership steps"):
        for _ in range(10):
            stock.step(buys)
            *_, info = portfolio.step(weights)
    assert mode.device_ops["membership steps"] > 0
    assert mode.syncs["membership steps"] == 0, dict(mode.sync_ops["membership steps"])
    assert not mode.float64_ops["membership steps"], dict(mode.float64_ops["membership steps"])
    held = info["target_weights"][:, : len(TICKERS)].cpu()
    out = ~torch.as_tensor(members)[info["day"].cpu() - 1]
    assert (held[out] == 0).all(), "the sync-free step holds no non-member"


def test_the_portfolio_dynamics_settings_step_without_host_sync_or_float64(accelerator, train):
    from trainer.envs.portfolio import PortfolioVecEnv
    from trainer.envs.portfolio_config import PortfolioConfig

    device, mode = accelerator
    config = PortfolioConfig(episode_length=4, rebalance_band=0.01, band_mode="edge", trade_rate=0.5, execution_lag=1)
    env = PortfolioVecEnv(train, config, num_envs=16, device=device, seed=0)
    actions = torch.rand((9, 16, len(TICKERS) + 1), device=device) * 2.2 - 1.0
    with mode.in_phase("dynamics step"):
        for a in actions:
            env.step(a)
    assert mode.device_ops["dynamics step"] > 0
    assert mode.syncs["dynamics step"] == 0, dict(mode.sync_ops["dynamics step"])
    assert not mode.float64_ops["dynamics step"], dict(mode.float64_ops["dynamics step"])


def test_intraday_envs_flattening_at_the_close_step_without_host_sync(accelerator, data_dir):
    from tests.intraday import intraday_panel
    from trainer.data.pipeline import build_market_data
    from trainer.envs.portfolio import PortfolioVecEnv
    from trainer.envs.portfolio_config import PortfolioConfig

    device, mode = accelerator
    bars = build_market_data(intraday_panel(data_dir, ["AAPL", "MSFT"], "2024-03-11", "2024-03-13"))
    stock = StockTradingVecEnv(bars, EnvConfig(flatten_at_close=True, episode_length=90), num_envs=8, device=device)
    portfolio = PortfolioVecEnv(bars, PortfolioConfig(flatten_at_close=True), num_envs=8, device=device)
    stock.reset(options={"start_day": 70})  # crosses the first session's 16:00 bar
    portfolio.reset(options={"start_day": 70})
    with mode.in_phase("intraday env step"):
        for _ in range(12):
            stock.step(torch.ones((8, 2), device=device))
    assert mode.syncs["intraday env step"] == 0, dict(mode.sync_ops["intraday env step"])
    zeros = torch.zeros((8, 3), device=device)
    with mode.in_phase("intraday portfolio step"):
        for _ in range(12):
            portfolio.step(zeros)
    assert mode.syncs["intraday portfolio step"] == 0, dict(mode.sync_ops["intraday portfolio step"])


def test_the_cpu_shortcuts_would_sync_on_the_accelerator(accelerator, train):
    # The harness counts what a GPU would wait for: the CPU path's branches sync every step.
    device, mode = accelerator
    env = StockTradingVecEnv(train, _env_config(train), num_envs=16, device=device, seed=0, sync_free=False)
    with mode.in_phase("env step, CPU shortcuts"):
        for _ in range(6):
            env.step(torch.zeros((16, len(TICKERS)), device=device))
    assert mode.syncs["env step, CPU shortcuts"] >= 6 * 2


@pytest.mark.parametrize("algorithm", ["ppo", "a2c"])
def test_on_policy_learning_syncs_once_per_call_and_twice_per_rollout(accelerator, train, algorithm):
    device, mode = accelerator
    env = StockTradingVecEnv(train, _env_config(train), num_envs=16, device=device, seed=0)
    hyperparameters = dict(ON_POLICY if algorithm == "ppo" else A2C)
    agent = make_agent(algorithm, env.obs_dim, env.action_dim, hyperparameters, device=device, seed=0)
    rollouts = 3
    with mode.in_phase("learn"):
        stats = agent.learn(env, rollouts * 16 * 8)
    assert stats["env_steps"] == rollouts * 16 * 8 and stats["episodes"] > 0
    assert mode.syncs["learn"] == 1 + 2 * rollouts, dict(mode.sync_ops["learn"])
    assert all(p.device.type == DEVICE_TYPE for p in agent.actor.parameters())


@pytest.mark.parametrize("algorithm", ["ppo", "a2c"])
def test_the_cross_sectional_actor_learns_with_the_same_syncs_as_the_mlp(accelerator, train, algorithm):
    from trainer.envs.portfolio import PortfolioVecEnv
    from trainer.envs.portfolio_config import PortfolioConfig

    device, mode = accelerator
    env = PortfolioVecEnv(train, PortfolioConfig(episode_length=5), num_envs=16, device=device, seed=0)
    hyperparameters = {**(ON_POLICY if algorithm == "ppo" else A2C), "policy": "cross_sectional"}
    agent = make_agent(algorithm, env.obs_dim, env.action_dim, hyperparameters, device=device, seed=0)
    rollouts = 3
    with mode.in_phase("learn"):
        stats = agent.learn(env, rollouts * 16 * 8)
    assert stats["env_steps"] == rollouts * 16 * 8 and stats["episodes"] > 0
    assert mode.syncs["learn"] == 1 + 2 * rollouts, dict(mode.sync_ops["learn"])
    assert all(p.device.type == DEVICE_TYPE for p in agent.actor.parameters())


@pytest.mark.parametrize("algorithm", ["sac", "td3"])
def test_off_policy_gradient_updates_need_no_host_sync(accelerator, train, algorithm):
    device, mode = accelerator
    env = StockTradingVecEnv(train, _env_config(train), num_envs=16, device=device, seed=0)
    agent = make_agent(algorithm, env.obs_dim, env.action_dim, dict(OFF_POLICY), device=device, seed=0)
    vector_steps = DRAIN_EVERY + 2
    with mode.in_phase("learn"):
        agent.learn(env, vector_steps * 16)
    # the env seed; every 64 steps and at the end, the finished-episode returns and the losses
    # with their divergence flag; the parameters' divergence check at the end. Nothing per step.
    budget = 1 + 2 * math.ceil(vector_steps / DRAIN_EVERY) + 1
    assert mode.syncs["learn"] == budget, dict(mode.sync_ops["learn"])
    with mode.in_phase("gradient updates"):
        for _ in range(3):
            agent._update()
    assert mode.device_ops["gradient updates"] > 0
    assert mode.syncs["gradient updates"] == 0, dict(mode.sync_ops["gradient updates"])


def test_off_policy_divergence_found_on_the_device_names_the_same_update_as_on_the_cpu(accelerator, train):
    # The device flag is read every DRAIN_EVERY steps, yet the error names the first bad update.
    device, mode = accelerator
    exploding = {**OFF_POLICY, "actor_learning_rate": 1e6, "critic_learning_rate": 1e6}
    errors = []
    for dev in (torch.device("cpu"), device):
        env = StockTradingVecEnv(train, _env_config(train), num_envs=16, device=dev, seed=0)
        agent = make_agent("sac", env.obs_dim, env.action_dim, dict(exploding), device=dev, seed=0)
        with pytest.raises(Diverged) as caught:
            agent.learn(env, 3 * DRAIN_EVERY * 16)
        errors.append(caught.value)
    on_cpu, on_device = (e.details for e in errors)
    assert on_device["update"] < agent.updates  # found after later updates had run
    assert str(errors[1]) == str(errors[0])
    assert [on_device[k] for k in ("update", "quantity", "value")] == [
        on_cpu[k] for k in ("update", "quantity", "value")
    ]


def test_a_generation_trains_on_the_accelerator_evaluates_on_the_cpu_and_checkpoints(
    accelerator, task, market, tmp_path
):
    device, mode = accelerator
    phases = []

    def progress(payload):
        phases.append(payload["phase"])
        mode.phase = payload["phase"]

    result = run_generation(
        task, env_steps=256, out_path=tmp_path / "g1.pt", seed=0, device=device, market_data=market, progress=progress
    )
    assert "train" in phases and "evaluate" in phases
    state = load_checkpoint(result.checkpoint_path)
    policy_tensors = len(build_agent(state).policy_module().state_dict())
    # After "evaluate" the pod copies the policy off the device, evaluates on the CPU and saves
    # the checkpoint: device-to-host copies only, one per tensor.
    copies = policy_tensors + _count_tensors(state["agent"])
    assert set(mode.sync_ops["evaluate"]) <= {"aten._to_copy.default"}, dict(mode.sync_ops["evaluate"])
    assert mode.syncs["evaluate"] <= copies, (mode.syncs["evaluate"], copies)
    assert state["agent"]["generator_device"] == DEVICE_TYPE and state["agent"]["generator"].numel() == 16
    assert all(t.device.type == "cpu" for t in state["agent"]["actor"].values())
    assert math.isfinite(result.score) or result.score is None

    # bundle export of the accelerator-trained checkpoint: the agent is rebuilt on the CPU (with
    # the mode, no device operation), then the ONNX exporter runs without it (see ``suspended``)
    with mode.in_phase("bundle export"):
        agent = build_agent(state)
        agent.policy_module()(torch.zeros(1, agent.obs_dim))
        with mode.suspended():
            export_bundle(result.checkpoint_path, tmp_path / "agent.zip")
    assert mode.device_ops["bundle export"] == 0
    loaded = load_agent(tmp_path / "agent.zip")
    assert loaded.act(np.zeros(loaded.obs_dim, dtype=np.float32)).shape == (len(TICKERS),)


def test_checkpoints_resume_exactly_on_the_accelerator_and_reseed_from_a_cpu_state(accelerator, train, tmp_path):
    device, mode = accelerator
    env = StockTradingVecEnv(train, EnvConfig(), num_envs=16, device=device, seed=0)
    agent = make_agent("ppo", env.obs_dim, env.action_dim, dict(ON_POLICY), device=device, seed=0)
    agent.learn(env, 128)
    with mode.in_phase("checkpoint save"):
        save_checkpoint({"agent": agent.state_dict()}, tmp_path / "a.pt")
    again = make_agent("ppo", env.obs_dim, env.action_dim, dict(ON_POLICY), device=device, seed=1)
    with mode.in_phase("checkpoint load"):
        state = torch.load(tmp_path / "a.pt", weights_only=True)
        again.load_state_dict(state["agent"])
    # loading copies each saved tensor to the device once (host-to-device copies), nothing else
    assert set(mode.sync_ops["checkpoint load"]) <= COPY_OPS, dict(mode.sync_ops["checkpoint load"])
    assert 0 < mode.syncs["checkpoint load"] <= _count_tensors(state["agent"]), mode.syncs["checkpoint load"]
    draw = lambda a: torch.rand(4, device=device, generator=a.generator).cpu()  # noqa: E731
    assert torch.equal(draw(agent), draw(again)), "same device type: the stream continues exactly"
    assert all(torch.equal(p.cpu(), q.cpu()) for p, q in zip(agent.actor.parameters(), again.actor.parameters()))

    # a CPU-trained checkpoint on the accelerator (the reverse of a GPU checkpoint on a CPU)
    cpu_agent = make_agent("ppo", env.obs_dim, env.action_dim, dict(ON_POLICY), device="cpu", seed=0)
    from_cpu = make_agent("ppo", env.obs_dim, env.action_dim, dict(ON_POLICY), device=device, seed=2)
    from_cpu.load_state_dict(cpu_agent.state_dict())
    twin = make_agent("ppo", env.obs_dim, env.action_dim, dict(ON_POLICY), device=device, seed=3)
    twin.load_state_dict(cpu_agent.state_dict())
    assert torch.equal(draw(from_cpu), draw(twin)), "reseeded deterministically from the CPU state"
    assert from_cpu.generator.device.type == DEVICE_TYPE


def test_the_harness_catches_device_mistakes(accelerator):
    device, _ = accelerator
    x = torch.ones(4, device=device)
    with pytest.raises(DisciplineError, match="CPU tensor of shape"):
        x + torch.ones(4)  # a CPU tensor meets a device tensor
    x + torch.tensor(2.0)  # a CPU scalar may (CUDA allows it too)
    with pytest.raises(DisciplineError, match="generator draws"):
        torch.rand(4, device=device, generator=torch.Generator())  # a CPU generator for device numbers
    with pytest.raises(DisciplineError, match="numpy"):
        x.numpy()


def test_the_harness_counts_host_to_device_copies_and_float64_arithmetic(accelerator):
    device, mode = accelerator
    with mode.in_phase("copies"):
        torch.tensor(2.0, device=device)  # a fresh device tensor from a Python number
        torch.ones(3).to(device)
        torch.ones(3, device=device).add_(1.0)  # a Python number: no copy
    assert mode.syncs["copies"] == 2, dict(mode.sync_ops["copies"])
    with mode.in_phase("float64"):
        torch.ones(4, dtype=torch.float64, device=device) * 2.0  # a per-env vector: allowed
        torch.ones((4, 3), device=device).double()
    assert sum(mode.float64_ops["float64"].values()) == 1, dict(mode.float64_ops["float64"])

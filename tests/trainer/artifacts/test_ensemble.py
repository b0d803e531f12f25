"""Portfolio agents and their top-K ensemble end to end in the trainer: checkpoint, validation
score, bundle (safetensors + ONNX + SHA256SUMS), loading and a backtest against the baselines."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnxruntime as ort
import pytest
import torch

from trainer.artifacts.bundle import export_bundle
from trainer.artifacts.bundle_reader import load_agent
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.ensemble import EnsembleAgent, build_ensemble
from trainer.artifacts.rebuild import build_agent
from trainer.backtest.benchmark import load_benchmark_close
from trainer.backtest.engine import run_backtest
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.envs.kinds import prepare_market
from trainer.envs.observations import FeatureStats
from trainer.errors import BundleError, ConfigError
from trainer.evaluation import evaluate_checkpoint_state
from trainer.pod import run_generation
from trainer.task import TaskSpec

TICKERS = ["AAPL", "MSFT", "JPM", "KO", "WMT"]
SMALL_PPO = {"num_envs": 16, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16, 16]}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def task() -> TaskSpec:
    spec = demo_task_dict()
    spec.update(kind="portfolio", hyperparameters=dict(SMALL_PPO))
    spec["data"]["tickers"] = list(TICKERS)
    return TaskSpec.from_dict(spec)


@pytest.fixture(scope="module")
def market(task, data_dir):
    return load_market_data(task.data, data_dir=data_dir)


@pytest.fixture(scope="module")
def members(task, market, tmp_path_factory):
    folder = tmp_path_factory.mktemp("members")
    return [
        run_generation(
            task, env_steps=512, out_path=folder / f"a{seed}.pt", seed=seed, device="cpu", market_data=market
        )
        for seed in (1, 2, 3)
    ]


@pytest.fixture(scope="module")
def ensemble(members, market, tmp_path_factory):
    out = tmp_path_factory.mktemp("ens") / "ensemble.pt"

    def evaluate(agent, state):
        return evaluate_checkpoint_state(agent, state, market_data=market)

    digest, state = build_ensemble([m.checkpoint_path for m in members], out, evaluate=evaluate)
    return out, digest, state


def test_the_ensemble_acts_with_the_mean_action_of_its_members(members, ensemble):
    path, _, state = ensemble
    agent = build_agent(load_checkpoint(path))
    assert isinstance(agent, EnsembleAgent) and len(agent.members) == 3
    singles = [build_agent(load_checkpoint(m.checkpoint_path)) for m in members]
    obs = torch.randn(7, state["obs_dim"])
    expected = torch.stack([a.act(obs, deterministic=True) for a in singles]).mean(0)
    torch.testing.assert_close(agent.act(obs), expected)
    torch.testing.assert_close(agent.policy_module()(obs), expected)
    assert (
        state["kind"] == "portfolio"
        and state["feature_stats"] == load_checkpoint(members[0].checkpoint_path)["feature_stats"]
    )
    assert state["metrics"]["selection"]["rule"] == "mean_minus_std"
    assert state["score"] == pytest.approx(state["metrics"]["score"])
    assert "vs_equal_weight" in state["metrics"]


def test_the_ensemble_bundle_loads_and_its_onnx_policy_agrees(ensemble, tmp_path):
    path, _, state = ensemble
    bundle = tmp_path / "ensemble.zip"
    export_bundle(path, bundle)
    with zipfile.ZipFile(bundle) as zf:
        assert set(zf.namelist()) == {"policy.safetensors", "config.json", "policy.onnx", "README.md", "SHA256SUMS"}
        onnx_bytes = zf.read("policy.onnx")
        card = zf.read("README.md").decode()
    assert "Ensemble of 3 agents" in card and "equal weight" in card
    loaded = load_agent(bundle)
    assert loaded.algorithm == "ensemble" and loaded.kind == "portfolio"
    assert loaded.feature_stats == FeatureStats.from_dict(state["feature_stats"])
    obs = np.random.default_rng(0).normal(size=(4, loaded.obs_dim)).astype(np.float32)
    expected = build_agent(load_checkpoint(path)).act(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(loaded.act(obs), expected, rtol=1e-5, atol=1e-6)
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["action"], {"obs": obs})[0], expected, rtol=1e-4, atol=1e-5)


def test_a_portfolio_bundle_backtests_against_qqq_and_equal_weight(members, market, benchmark_path, tmp_path):
    bundle = tmp_path / "agent.zip"
    export_bundle(members[0].checkpoint_path, bundle)
    loaded = load_agent(bundle)
    result = run_backtest(
        loaded.policy_fn("cpu"),
        market,
        loaded.env_config(),
        benchmark_close=load_benchmark_close(benchmark_path),
        start="2021-01-01",
        end="2022-11-15",
        tickers=loaded.tickers,
    )  # the statistics come with loaded.policy_fn
    assert list(result.actions.columns) == [*TICKERS, "cash"]
    assert set(result.metrics) == {
        "agent",
        "equal_weight",
        "QQQ",
        "vs_equal_weight",
        "vs_equal_weight_with_costs",
        "robustness",
    }
    assert result.daily["account_value"].iloc[0] == 1e6 and (result.daily["account_value"] > 0).all()
    # The same policy through the pod's evaluation loop gives the same values on the same days.
    # The same policy through the pod's evaluation loop, on the panel prepared over the whole
    # history (as the backtest does), ends with the same value.
    prepared = prepare_market(market, loaded.env_config()).slice("2021-01-01", "2022-11-15")
    metrics = loaded.evaluate(prepared, random_windows=0)
    assert metrics["final_value"] == pytest.approx(result.daily["account_value"].iloc[-1], rel=1e-9)


def test_an_ensemble_needs_two_agents_of_one_observation(members, tmp_path):
    with pytest.raises(ConfigError) as err:
        build_ensemble([members[0].checkpoint_path], tmp_path / "e.pt")
    assert err.value.details["field"] == "agents"


def _bundle_files(path):
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read("config.json")), zf.read("README.md").decode()


def test_an_ensemble_bundle_names_its_members_and_has_no_generation_of_its_own(members, tmp_path):
    paths = [m.checkpoint_path for m in members]
    _, state = build_ensemble(paths, tmp_path / "e.pt", member_ids=[48, 46, 47], total_env_steps=1024)
    assert state["generation"] is None and state["total_env_steps"] == 1024
    assert [m["id"] for m in state["agent"]["members"]] == [48, 46, 47]

    export_bundle(tmp_path / "e.pt", tmp_path / "e.zip")
    config, card = _bundle_files(tmp_path / "e.zip")
    assert config["generation"] is None and config["total_env_steps"] == 1024
    assert config["ensemble"]["total_env_steps"] == 1024
    assert [(m["id"], m["generation"]) for m in config["ensemble"]["members"]] == [(48, 1), (46, 1), (47, 1)]
    assert "Ensemble of 3 agents (#48 generation 1, #46 generation 1, #47 generation 1)" in card
    assert "Env steps trained: 1024 (the members' lines, each agent counted once)" in card
    assert "generation 1." not in card and "no generation of its own" in card
    assert "A deep-RL portfolio-allocation policy" in card and "stock-trading" not in card

    # the web app's records replace the stored ids, generations and env steps
    given = [{"id": 7, "generation": 3}, {"id": 5, "generation": 2}, {"id": 6, "generation": 2}]
    export_bundle(tmp_path / "e.pt", tmp_path / "f.zip", ensemble_members=given, total_env_steps=900)
    config, card = _bundle_files(tmp_path / "f.zip")
    assert [(m["id"], m["generation"]) for m in config["ensemble"]["members"]] == [(7, 3), (5, 2), (6, 2)]
    assert config["total_env_steps"] == 900 and "#7 generation 3, #5 generation 2" in card


def test_ensemble_members_are_refused_for_a_trained_agent_and_in_the_wrong_number(members, ensemble, tmp_path):
    with pytest.raises(BundleError) as err:
        export_bundle(members[0].checkpoint_path, tmp_path / "a.zip", ensemble_members=[{"id": 1}])
    assert err.value.details["field"] == "ensemble_members"
    with pytest.raises(BundleError) as err:
        export_bundle(ensemble[0], tmp_path / "b.zip", ensemble_members=[{"id": 1}])
    assert "1 given for an ensemble of 3 members" in err.value.message
    with pytest.raises(ConfigError) as caught:
        build_ensemble([m.checkpoint_path for m in members], tmp_path / "c.pt", member_ids=[1, 2])
    assert caught.value.details["field"] == "member_ids"

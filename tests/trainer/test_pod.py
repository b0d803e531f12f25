"""One pod generation on real Dow-30 data: task validation, checkpoints, resuming, cancelling."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from trainer.agents import make_agent
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.backtest.engine import run_backtest
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.demo import demo_task_dict
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.errors import BundleError, ConfigError
from trainer.evaluation import evaluate_checkpoint_state, evaluate_policy
from trainer.lineage import branch_seed
from trainer.pod import run_generation
from trainer.selection import SelectionRule
from trainer.task import TaskSpec
from trainer.util.files import sha256_file

TICKERS = ["AAPL", "MSFT", "JPM"]
SMALL_PPO = {"num_envs": 32, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [32, 32]}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


def small_task_dict() -> dict:
    task = demo_task_dict()
    task["data"]["tickers"] = list(TICKERS)
    task["hyperparameters"] = dict(SMALL_PPO)
    return task


@pytest.fixture(scope="module")
def task() -> TaskSpec:
    return TaskSpec.from_dict(small_task_dict())


@pytest.fixture(scope="module")
def market(task, data_dir, tmp_path_factory):
    return load_market_data(task.data, data_dir=data_dir, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def first_generation(task, market, tmp_path_factory):
    calls = []
    out = tmp_path_factory.mktemp("gen") / "g1.pt"
    result = run_generation(
        task, env_steps=512, out_path=out, seed=3, device="cpu", market_data=market, progress=calls.append
    )
    return result, calls


# ---------------------------------------------------------------------------- TaskSpec
def test_demo_task_round_trips_through_its_dict():
    spec = TaskSpec.from_dict(demo_task_dict())
    again = TaskSpec.from_dict(spec.to_dict())
    assert again == spec
    assert spec.train == ("2010-01-01", "2019-12-31")
    assert spec.validation == ("2020-01-01", "2020-12-31")
    assert spec.test == ("2021-01-01", "2022-11-15")
    assert spec.algorithm == "ppo"
    assert spec.hyperparameters["learning_rate"] > 0  # defaults filled in


def _set(task: dict, path: str, value) -> dict:
    task = copy.deepcopy(task)
    *parents, leaf = path.split(".")
    node = task
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return task


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("hyperparameters.learning_rate", -1.0, "hyperparameters.learning_rate"),
        ("hyperparameters.no_such_knob", 1, "hyperparameters.no_such_knob"),
        ("hyperparameters.num_envs", "many", "hyperparameters.num_envs"),
        ("validation.start", "2019-06-01", "validation.start"),
        ("validation.start", "2020-13-01", "validation.start"),
        ("test.start", "2020-12-31", "test.start"),
        ("train.end", "2009-12-31", "train.end"),
        ("env.hmax", 0, "env.hmax"),
        ("env.buy_cost_pct", 5, "env.buy_cost_pct"),
        ("data.paths", _DELETE, "data.paths"),
        ("data.tickers", "AAPL", "data.tickers"),
        ("data.start", "2015-01-01", "train.start"),
        ("algorithm", "dqn", "algorithm"),
        ("colour", "blue", "colour"),
    ],
)
def test_task_errors_name_the_dotted_field(path, value, field):
    bad = _set(small_task_dict(), path, value)
    with pytest.raises(ConfigError) as info:
        TaskSpec.from_dict(bad)
    assert info.value.details["field"] == field
    assert field in info.value.message


def test_splits_given_as_pairs_are_accepted():
    task = small_task_dict()
    task["train"] = ["2010-01-01", "2019-12-31"]
    assert TaskSpec.from_dict(task).train == ("2010-01-01", "2019-12-31")


# ---------------------------------------------------------------------------- generation
def test_generation_writes_a_checkpoint_whose_sha256_matches_the_file(first_generation, task):
    result, _ = first_generation
    assert result.checkpoint_path.is_file()
    assert sha256_file(result.checkpoint_path) == result.sha256
    assert not [p for p in result.checkpoint_path.parent.iterdir() if p.name.endswith(".tmp")]
    state = load_checkpoint(result.checkpoint_path, expected_sha256=result.sha256)
    assert state["task"] == task.to_dict()
    assert state["observation_layout"]["tickers"] == TICKERS
    assert state["data_window"]["validation"] == ["2020-01-02", "2020-12-31"]
    assert state["score"] == result.score
    assert result.env_steps >= 512 and state["total_env_steps"] == result.env_steps
    assert result.generation == 1 and not result.cancelled


def test_score_is_the_validation_sharpe_of_the_checkpointed_policy(first_generation, task, market):
    result, _ = first_generation
    m = result.metrics
    assert m["num_days"] == 252  # 253 trading days in 2020 give 252 daily returns
    assert m["start"] == "2020-01-03" and m["end"] == "2020-12-31"
    # the task's rule: mean - 1 x std of the Sharpe ratios of the 4 validation quarters (an
    # agent this young may not trade at all: its sub-window Sharpe ratios count as 0 then)
    subs = [w["sharpe"] or 0.0 for w in m["sub_windows"]]
    assert result.score == pytest.approx(np.mean(subs) - np.std(subs), rel=1e-12, abs=1e-12)
    assert m["total_return"] == pytest.approx(m["final_value"] / m["initial_value"] - 1)
    assert m["random_windows"]["count"] == 4 and m["random_windows"]["days"] == 63
    # the policy saved in the checkpoint scores exactly the reported score
    state = load_checkpoint(result.checkpoint_path)
    again = evaluate_checkpoint_state(build_agent(state), state, market_data=market)
    assert again["score"] == result.score
    assert again["random_windows"] == m["random_windows"]


def test_a_backtest_over_the_validation_dates_reproduces_the_validation_metrics_exactly(first_generation, task, market):
    """The validation score and the backtest run the policy through one loop
    (``trainer.backtest.policy_run.run_policy``): over the same dates they agree to the bit."""
    result, _ = first_generation
    agent = build_agent(load_checkpoint(result.checkpoint_path))
    start, end = task.validation
    backtest = run_backtest(lambda obs: agent.act(obs, deterministic=True), market, task.env, start=start, end=end)
    agent_metrics = backtest.metrics["agent"]
    shared = set(agent_metrics) & set(result.metrics)
    assert {"sharpe_ratio", "cumulative_return", "max_drawdown", "num_days", "start", "end"} <= shared
    assert {k: agent_metrics[k] for k in shared} == {k: result.metrics[k] for k in shared}
    assert backtest.daily["account_value"].iloc[-1] == result.metrics["final_value"]


def test_progress_reports_training_then_evaluation_then_the_score(first_generation):
    result, calls = first_generation
    phases = [c["phase"] for c in calls]
    assert phases[0] == "train" and phases[-2:] == ["evaluate", "done"]
    steps = [c["generation_env_steps"] for c in calls if c["phase"] == "train"]
    assert steps == sorted(steps) and steps[-1] <= result.env_steps
    assert calls[-1]["score"] == result.score
    assert all(c["env_steps_budget"] == 512 for c in calls)


def test_resuming_continues_the_counters_and_matches_training_in_one_process(first_generation, task, market, tmp_path):
    result, _ = first_generation
    parent = load_checkpoint(result.checkpoint_path)
    child = run_generation(
        task,
        env_steps=256,
        out_path=tmp_path / "g2.pt",
        parent=result.checkpoint_path,
        hyperparameters={"learning_rate": 1e-4},
        seed=3,
        device="cpu",
        market_data=market,
    )
    state = load_checkpoint(child.checkpoint_path)
    assert child.generation == 2
    assert child.total_env_steps == result.env_steps + child.env_steps
    assert state["agent"]["env_steps"] == child.total_env_steps
    assert state["agent"]["updates"] > parent["agent"]["updates"]
    assert state["parent_sha256"] == result.sha256
    assert child.hyperparameters["learning_rate"] == 1e-4
    assert state["agent"]["optimizer"]["param_groups"][0]["lr"] == 1e-4

    # The same agent trained on in one process, without a checkpoint in between (its random
    # stream branched with the child's seed, as the pod does), ends identical.
    train = market.slice(*task.train)
    env = StockTradingVecEnv(train, task.env, num_envs=SMALL_PPO["num_envs"], device="cpu", seed=3)
    agent = make_agent("ppo", env.obs_dim, env.action_dim, task.hyperparameters, device="cpu", seed=3)
    agent.learn(env, 512)
    agent.set_hyperparameters(learning_rate=1e-4)
    agent.generator.manual_seed(branch_seed(parent["agent"], 3))
    env = StockTradingVecEnv(train, task.env, num_envs=SMALL_PPO["num_envs"], device="cpu", seed=3)
    agent.learn(env, 256)
    straight = agent.state_dict()
    for key in ("actor", "critic", "obs_rms"):
        for name, tensor in straight[key].items():
            assert torch.equal(tensor, state["agent"][key][name]), f"{key}.{name}"


def test_checkpoint_state_round_trips_into_a_fresh_agent(first_generation):
    result, _ = first_generation
    state = load_checkpoint(result.checkpoint_path)
    agent = build_agent(state)
    again = agent.state_dict()
    assert again["env_steps"] == state["agent"]["env_steps"]
    assert torch.equal(again["generator"], state["agent"]["generator"])
    for key in ("actor", "critic", "obs_rms"):
        for name, tensor in state["agent"][key].items():
            assert torch.equal(again[key][name], tensor)


def test_should_stop_ends_training_early_and_still_writes_a_checkpoint(task, market, tmp_path):
    asked = []

    def stop() -> bool:  # let the first update run, then ask to stop
        asked.append(1)
        return len(asked) > 1

    result = run_generation(
        task, env_steps=100_000, out_path=tmp_path / "c.pt", seed=1, device="cpu", market_data=market, should_stop=stop
    )
    assert asked
    assert result.cancelled
    assert 0 < result.env_steps < 100_000
    state = load_checkpoint(result.checkpoint_path, expected_sha256=result.sha256)
    assert state["cancelled"] is True
    assert np.isfinite(result.score)


def test_parent_trained_on_other_tickers_is_refused(first_generation, data_dir, tmp_path):
    result, _ = first_generation
    other = small_task_dict()
    other["data"]["tickers"] = ["AAPL", "MSFT"]
    with pytest.raises(BundleError) as info:
        run_generation(
            other,
            env_steps=256,
            out_path=tmp_path / "x.pt",
            parent=result.checkpoint_path,
            device="cpu",
            data_dir=data_dir,
        )
    assert "3 tickers" in info.value.message
    assert info.value.details["file"] == str(result.checkpoint_path)


def test_a_policy_that_never_trades_scores_zero_with_an_undefined_sharpe(market):
    validation = market.slice("2020-01-01", "2020-12-31")
    metrics = evaluate_policy(lambda obs: -torch.ones(obs.shape[0], 3), validation, EnvConfig(), random_windows=2)
    assert metrics["total_return"] == 0.0
    assert metrics["final_value"] == 1e6
    assert metrics["score_defined"] is False and metrics["score"] == 0.0
    assert metrics["random_windows"]["total_return_mean"] == 0.0


def test_a_policy_that_buys_scores_the_sharpe_ratio_of_its_daily_returns(market):
    validation = market.slice("2020-01-01", "2020-12-31")
    full = SelectionRule(rule="full_sharpe")
    metrics = evaluate_policy(
        lambda obs: torch.ones(obs.shape[0], 3), validation, EnvConfig(), random_windows=0, selection=full
    )
    assert metrics["score_defined"] is True
    assert metrics["score"] == pytest.approx(metrics["sharpe_ratio"], rel=1e-9)
    assert metrics["random_windows"] == {"count": 0}
    assert metrics["selection"]["description"] == "Sharpe ratio of the whole validation window"
    # buying 100 shares of each ticker every day until the cash runs out ends mostly invested:
    # its 2020 return lies between cash (0 %) and the tickers' own returns
    close = validation.close
    assert 0.0 < metrics["total_return"] < float((close[-1] / close[0] - 1).max())


def test_bad_budget_is_a_config_error(task, market, tmp_path):
    with pytest.raises(ConfigError) as info:
        run_generation(task, env_steps=0, out_path=tmp_path / "x.pt", market_data=market, device="cpu")
    assert info.value.details["field"] == "env_steps"


def test_data_spec_inside_the_task_keeps_its_validation(task):
    assert isinstance(task.data, DataSpec)
    assert task.data.tickers == TICKERS


def test_a_sac_task_trains_resumes_and_exports(market, tmp_path):
    from trainer.artifacts.bundle import export_bundle
    from trainer.artifacts.bundle_reader import load_agent

    d = small_task_dict()
    d["algorithm"] = "sac"
    d["hyperparameters"] = {
        "num_envs": 16,
        "batch_size": 64,
        "buffer_size": 4096,
        "learning_starts": 128,
        "updates_per_step": 1,
        "hidden_sizes": [32, 32],
    }
    sac = TaskSpec.from_dict(d)
    first = run_generation(sac, env_steps=256, out_path=tmp_path / "s1.pt", device="cpu", market_data=market)
    second = run_generation(
        sac,
        env_steps=128,
        out_path=tmp_path / "s2.pt",
        parent=first.checkpoint_path,
        hyperparameters={"actor_learning_rate": 1e-4},
        device="cpu",
        market_data=market,
    )
    assert second.total_env_steps == first.env_steps + second.env_steps
    assert second.hyperparameters["actor_learning_rate"] == 1e-4
    export_bundle(second.checkpoint_path, tmp_path / "s.zip")
    loaded = load_agent(tmp_path / "s.zip")
    agent = build_agent(load_checkpoint(second.checkpoint_path))
    obs = torch.randn(16, loaded.obs_dim) * 3
    np.testing.assert_array_equal(loaded.act(obs.numpy()), agent.act(obs, deterministic=True).numpy())


def test_children_of_one_parent_with_different_seeds_explore_differently(first_generation, task, market, tmp_path):
    result, _ = first_generation

    def child(seed: int, name: str):
        out = run_generation(
            task,
            env_steps=256,
            out_path=tmp_path / name,
            parent=result.checkpoint_path,
            seed=seed,
            device="cpu",
            market_data=market,
        )
        return load_checkpoint(out.checkpoint_path)["agent"]["actor"]

    first, twin, sibling = child(5, "a.pt"), child(5, "b.pt"), child(6, "c.pt")

    assert all(torch.equal(first[k], twin[k]) for k in first)  # same parent and seed: reproducible
    assert any(not torch.equal(first[k], sibling[k]) for k in first)  # another seed: another branch


def test_the_default_score_is_mean_minus_spread_of_quarterly_sharpes_next_to_equal_weight(market):
    validation = market.slice("2020-01-01", "2020-12-31")
    metrics = evaluate_policy(lambda obs: torch.ones(obs.shape[0], 3), validation, EnvConfig(), random_windows=0)
    subs = [w["sharpe"] for w in metrics["sub_windows"]]
    assert len(subs) == 4 and metrics["sub_windows"][0]["start"] == "2020-01-02"
    assert metrics["sub_windows"][-1]["end"] == "2020-12-31"
    assert metrics["score"] == pytest.approx(np.mean(subs) - np.std(subs), rel=1e-9)
    ew = (validation.close[1:] / validation.close[:-1]).mean(axis=1) - 1
    rel = metrics["vs_equal_weight"]
    assert rel["baseline_total_return"] == pytest.approx(np.prod(1 + ew) - 1, rel=1e-9)
    assert rel["excess_return"] == pytest.approx(metrics["total_return"] - rel["baseline_total_return"], rel=1e-9)


def test_generation_telemetry_is_bounded_and_plotted_against_the_lineage_env_steps(
    first_generation, task, market, tmp_path
):
    result, _ = first_generation
    assert 1 <= len(result.telemetry) <= 50
    assert result.telemetry[-1]["total_env_steps"] == result.total_env_steps
    streamed = []
    child = run_generation(
        task,
        env_steps=256,
        out_path=tmp_path / "g2.pt",
        parent=result.checkpoint_path,
        seed=4,
        device="cpu",
        market_data=market,
        telemetry=streamed.append,
    )
    assert streamed == child.telemetry  # streamed as recorded, the same points as returned
    xs = [p["total_env_steps"] for p in child.telemetry]
    # the child's curve continues where the parent's ended
    assert xs[0] > result.total_env_steps and xs[-1] == child.total_env_steps
    assert all(p["generation"] == 2 for p in child.telemetry)
    assert all(p["episode_return_mean"] is None or np.isfinite(p["episode_return_mean"]) for p in child.telemetry)


def test_the_lines_untrained_policy_is_scored_on_the_same_days_and_inherited(first_generation, task, market, tmp_path):
    result, _ = first_generation
    untrained = result.metrics["untrained"]
    assert set(untrained) == {"score", "sharpe_ratio", "total_return", "seed"}
    assert untrained["seed"] == load_checkpoint(result.checkpoint_path)["seed"]  # the line's first seed
    child = run_generation(
        task,
        env_steps=128,
        out_path=tmp_path / "c.pt",
        parent=result.checkpoint_path,
        seed=9,
        device="cpu",
        market_data=market,
    )
    assert child.metrics["untrained"] == untrained  # the line's starting policy, not re-evaluated
    assert np.isfinite(untrained["score"]) and untrained["score"] != result.score

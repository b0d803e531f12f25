"""The web's door to the trainer for a portfolio task: a generation scored against 1/N and QQQ,
a backtest of its checkpoint and of its bundle against QQQ and equal weight (no database)."""

from __future__ import annotations

import pytest

from tests.conftest import BENCHMARK_FILE, DOW30_FILE
from webapp import engine

TASK = {
    "data": {
        "paths": [DOW30_FILE],
        "tickers": ["AAPL", "MSFT", "KO", "JPM"],
        "start": "2010-01-01",
        "end": "2022-11-15",
    },
    "train": ["2010-01-01", "2019-12-31"],
    "validation": ["2020-01-01", "2020-12-31"],
    "test": ["2021-01-01", "2022-11-15"],
    "kind": "portfolio",
    "env": {"reward": "excess_log_return"},
    "algorithm": "ppo",
    "hyperparameters": {"num_envs": 16, "rollout_steps": 8, "num_minibatches": 2, "hidden_sizes": [16, 16]},
}


@pytest.fixture(scope="module")
def generation(data_dir, tmp_path_factory):
    task = engine.validate_task({**TASK, "data": {**TASK["data"], "paths": [str(data_dir / DOW30_FILE)]}})
    out = tmp_path_factory.mktemp("gen") / "agent.pt"
    result = engine.train_generation(
        task,
        env_steps=256,
        out_path=str(out),
        parent_path=None,
        hyperparameters=None,
        seed=0,
        device="cpu",
        benchmark_path=str(data_dir / BENCHMARK_FILE),
    )
    return task, out, result


def test_a_portfolio_generation_is_scored_by_its_rule_next_to_equal_weight_and_qqq(generation):
    _, _, result = generation
    metrics = result.metrics
    assert metrics["selection"]["rule"] == "mean_minus_std" and len(metrics["sub_windows"]) == 4
    assert set(metrics["vs_equal_weight"]) >= {"excess_return", "sharpe_difference"}
    assert metrics["vs_QQQ"]["baseline_total_return"] == pytest.approx(0.48, abs=0.05)  # QQQ in 2020


def test_a_portfolio_checkpoint_and_its_bundle_backtest_against_qqq_and_equal_weight(generation, data_dir, tmp_path):
    task, checkpoint, result = generation
    common = {
        "task": task,
        "start": "2021-01-01",
        "end": "2022-11-15",
        "benchmark_path": str(data_dir / BENCHMARK_FILE),
    }
    from_checkpoint = engine.backtest_agent(agent_path=checkpoint, expected_sha256=result.sha256, **common)
    assert set(from_checkpoint.metrics) == {
        "agent",
        "equal_weight",
        "QQQ",
        "vs_equal_weight",
        "vs_equal_weight_with_costs",
        "robustness",
    }
    assert from_checkpoint.env_config["reward"] == "excess_log_return"
    bundle = tmp_path / "agent.zip"
    engine.export_bundle(checkpoint, bundle)
    from_bundle = engine.backtest_agent(agent_path=bundle, **common)
    assert from_bundle.daily["account_value"].iloc[-1] == pytest.approx(
        from_checkpoint.daily["account_value"].iloc[-1], rel=1e-6
    )

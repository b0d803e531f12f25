"""A portfolio task through the pod: scale-free observations with train-only statistics, continuation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from trainer.artifacts.checkpoints import load_checkpoint
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.envs.kinds import prepare_market
from trainer.envs.observations import fit_feature_stats
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.errors import ConfigError
from trainer.pod import run_generation
from trainer.task import TaskSpec

TICKERS = ["AAPL", "MSFT", "JPM", "KO"]
SMALL_PPO = {"num_envs": 16, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16, 16]}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


def portfolio_task_dict() -> dict:
    task = demo_task_dict()
    task["kind"] = "portfolio"
    task["data"]["tickers"] = list(TICKERS)
    task["hyperparameters"] = dict(SMALL_PPO)
    return task


@pytest.fixture(scope="module")
def market(data_dir):
    return load_market_data(TaskSpec.from_dict(portfolio_task_dict()).data, data_dir=data_dir)


def test_portfolio_task_parses_its_env_with_the_portfolio_config():
    task = TaskSpec.from_dict({**portfolio_task_dict(), "env": {"reward": "differential_sharpe"}})
    assert isinstance(task.env, PortfolioConfig) and task.env.reward == "differential_sharpe"
    assert TaskSpec.from_dict(task.to_dict()) == task
    with pytest.raises(ConfigError) as err:
        TaskSpec.from_dict({**portfolio_task_dict(), "env": {"hmax": 10}})
    assert err.value.details["field"] == "env.hmax"
    with pytest.raises(ConfigError) as err:
        TaskSpec.from_dict({**portfolio_task_dict(), "kind": "options"})
    assert err.value.details["field"] == "kind"


def test_a_generation_stores_train_only_statistics_that_later_splits_cannot_change(market, tmp_path):
    task = TaskSpec.from_dict(portfolio_task_dict())
    result = run_generation(task, env_steps=256, out_path=tmp_path / "g1.pt", device="cpu", market_data=market)
    state = load_checkpoint(result.checkpoint_path)
    assert state["kind"] == "portfolio" and state["action_dim"] == len(TICKERS) + 1
    stats = state["feature_stats"]
    expected = fit_feature_stats(prepare_market(market, task.env).slice(*task.train))
    assert stats == expected.to_dict()
    assert stats["fitted_on"] == ["2010-01-04", "2019-12-31"]
    # The same generation on a panel whose validation and test prices are wildly different
    # stores the very same statistics: nothing after the train split goes into them.
    close = market.close.copy()
    later = market.dates > np.datetime64("2019-12-31")
    close[later] *= np.linspace(1.0, 5.0, later.sum())[:, None]
    wild = dataclasses.replace(market, close=close)
    other = run_generation(task, env_steps=256, out_path=tmp_path / "w.pt", device="cpu", market_data=wild)
    assert load_checkpoint(other.checkpoint_path)["feature_stats"] == stats
    assert result.metrics["vs_equal_weight"]["excess_return"] is not None
    assert len(result.metrics["sub_windows"]) == 4
    # A child keeps its lineage's statistics and layout.
    child = run_generation(
        task,
        env_steps=256,
        out_path=tmp_path / "g2.pt",
        device="cpu",
        market_data=market,
        parent=result.checkpoint_path,
    )
    assert child.generation == 2
    assert load_checkpoint(child.checkpoint_path)["feature_stats"] == stats

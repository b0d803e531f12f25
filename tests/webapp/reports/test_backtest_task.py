"""The backtest task, run in-process as a worker would run it, on real market data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from django.core.files.storage import default_storage

from tests.webapp.conftest import SPLITS, TICKERS
from tests.webapp.reports.conftest import qqq_close
from trainer.backtest.metrics import compute_metrics, returns_from_values
from webapp.reports import services, tasks
from webapp.reports.models import Backtest
from webapp.reports.selectors import backtest_daily

pytestmark = pytest.mark.django_db


def test_backtest_task_stores_metrics_config_and_daily_series(done_backtest, data_dir):
    daily = backtest_daily(done_backtest)

    assert set(done_backtest.metrics) == {
        "agent",
        "equal_weight",
        "QQQ",
        "vs_equal_weight",
        "vs_equal_weight_with_costs",
        "robustness",
    }
    assert done_backtest.num_days == len(daily)
    # Every QQQ trading day of the test split, and nothing else.
    qqq = qqq_close(data_dir).loc[SPLITS["test"][0] : SPLITS["test"][1]]
    assert list(daily.index) == list(qqq.index)
    assert {"account_value", "cash", "turnover", "benchmark_QQQ", "benchmark_equal_weight"} <= set(daily.columns)
    assert {f"holdings_{t}" for t in TICKERS} <= set(daily.columns)
    assert daily["account_value"].iloc[0] == pytest.approx(done_backtest.config["costs"]["initial_cash"])
    assert done_backtest.config["data"]["window"] == [SPLITS["test"][0], "2020-12-31"]
    assert done_backtest.config["agent"]["id"] == done_backtest.agent_id
    assert "empyrical" in done_backtest.config["metric_contract"]
    assert default_storage.exists(done_backtest.daily_csv)


def test_the_report_names_the_agents_own_algorithm_in_a_mixed_run(make_agent, run_backtest_now):
    """A mixed run's task lists several algorithms, its first one in ``algorithm``: the report
    says what this agent was trained with, not the task's first algorithm."""
    from webapp.runs.models import Agent, Task

    agent = make_agent()
    # a2c first (default hyperparameters), ppo allowed too
    Task.objects.filter(pk=agent.run.task_id).update(algorithm="a2c", hyperparameters={}, algorithms=["a2c", "ppo"])
    Agent.objects.filter(pk=agent.pk).update(algorithm="ppo")  # the checkpoint is a PPO agent's
    agent.refresh_from_db()
    backtest = run_backtest_now(agent, SPLITS["test"][0], SPLITS["test"][1])
    assert backtest.status == "done", backtest.error
    assert backtest.config["agent"]["algorithm"] == "ppo"


def test_qqq_metrics_equal_trainer_metrics_on_the_same_dates(done_backtest, data_dir):
    daily = backtest_daily(done_backtest)
    qqq = qqq_close(data_dir).reindex(daily.index)
    expected = compute_metrics(returns_from_values(qqq), returns_from_values(qqq), start_date=qqq.index[0])

    stored = done_backtest.metrics["QQQ"]
    assert stored["sharpe_ratio"] == pytest.approx(expected["sharpe_ratio"], rel=1e-12)
    assert stored["calmar_ratio"] == pytest.approx(expected["calmar_ratio"], rel=1e-12)
    assert stored["cumulative_return"] == pytest.approx(qqq.iloc[-1] / qqq.iloc[0] - 1, rel=1e-12)


def test_agent_metrics_are_those_of_its_account_value(done_backtest):
    values = backtest_daily(done_backtest)["account_value"]
    growth = values.iloc[-1] / values.iloc[0] - 1

    assert done_backtest.metrics["agent"]["cumulative_return"] == pytest.approx(growth, rel=1e-9)
    assert np.isfinite(done_backtest.metrics["agent"]["turnover_annual"])


def test_a_claimed_backtest_is_not_run_twice(done_backtest):
    assert tasks.run_backtest(done_backtest.id) == "skipped"
    done_backtest.refresh_from_db()
    assert done_backtest.status == Backtest.Status.DONE


def test_missing_checkpoint_fails_the_backtest_with_a_message(user, agent):
    default_storage.delete(agent.checkpoint)
    backtest = services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31")

    assert tasks.run_backtest(backtest.id) == "failed"

    backtest.refresh_from_db()
    assert backtest.status == Backtest.Status.FAILED
    assert "missing" in backtest.error


def test_tampered_checkpoint_fails_the_backtest(user, agent):
    with default_storage.open(agent.checkpoint, "wb") as fh:
        fh.write(b"not a checkpoint")
    backtest = services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31")

    tasks.run_backtest(backtest.id)

    backtest.refresh_from_db()
    assert backtest.status == Backtest.Status.FAILED
    assert "SHA-256" in backtest.error


def test_daily_csv_round_trips_through_pandas(done_backtest):
    daily = backtest_daily(done_backtest)

    assert isinstance(daily.index, pd.DatetimeIndex)
    assert (daily["account_value"] > 0).all()


def test_checkpoint_with_nan_parameters_fails_the_backtest_naming_the_agent(user, agent, tmp_path):
    # A diverged agent (issue 20) must not be backtested as if NaN actions meant "hold".
    from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint

    local = tmp_path / "agent.pt"
    with default_storage.open(agent.checkpoint, "rb") as fh:
        local.write_bytes(fh.read())
    state = load_checkpoint(local)
    weight = next(k for k in state["agent"]["actor"] if k.endswith("weight"))
    state["agent"]["actor"][weight].fill_(float("nan"))
    agent.sha256 = save_checkpoint(state, local)
    agent.save(update_fields=["sha256"])
    default_storage.delete(agent.checkpoint)
    with open(local, "rb") as src, default_storage.open(agent.checkpoint, "wb") as out:
        out.write(src.read())
    backtest = services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31")

    assert tasks.run_backtest(backtest.id) == "failed"

    backtest.refresh_from_db()
    assert backtest.status == Backtest.Status.FAILED
    assert backtest.error.startswith(f"agent {agent.pk}: the agent state holds NaN or infinite parameters")
    assert backtest.metrics in ({}, None) and not backtest.daily_csv

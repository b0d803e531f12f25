"""Fixtures of the reports tests: agents of a finished run holding the really trained
checkpoint (``trained_checkpoint``, stored like the runs app stores them), and backtests run in
this process. Users, the dataset and the checkpoint come from ``tests/webapp/conftest.py``.

Who may see what: ``user`` owns the dataset, task, run, agent and every backtest;
``other_user`` owns nothing and must get 404 for all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files import File
from django.core.files.storage import default_storage

from tests.webapp.conftest import SPLITS, TRADING_ENV, create_task


@pytest.fixture
def task(user, dataset):
    """The tiny task with the trading env the checkpoint was trained in (trades to report)."""
    return create_task(user, dataset, env=TRADING_ENV)


@pytest.fixture
def make_agent(user, task, trained_checkpoint) -> Callable:
    """Create a finished run's agent holding the trained checkpoint (stored in the default
    storage as the runs app does). ``make_agent(score=..., on_leaderboard=..., score_se=...)``
    (``score_se`` ``None``: read from the checkpoint's sub-windows)."""
    from webapp.runs import services
    from webapp.runs.models import Agent, Generation, Pod

    budget = services.budget_create(actor=user, name="budget", max_concurrent_pods=1)
    run = services.run_create(owner=user, task=task, budget=budget, num_pods=1, generation_steps=256, device="cpu")
    pod = Pod.objects.create(run=run, index=0)
    seq = {"n": 0}

    def make(score: float = 1.0, on_leaderboard: bool = True, score_se: float | None = None) -> Agent:
        seq["n"] += 1
        gen = Generation.objects.create(run=run, pod=pod, number=seq["n"], env_steps=256, status=Generation.Status.DONE)
        with open(trained_checkpoint["path"], "rb") as fh:
            name = default_storage.save(f"test-checkpoints/run{run.id}-agent{seq['n']}.pt", File(fh))
        return Agent.objects.create(
            run=run,
            generation=gen,
            pod=pod,
            score=score,
            score_se=score_se,
            metrics=trained_checkpoint["metrics"],
            hyperparameters=trained_checkpoint["hyperparameters"],
            tickers=trained_checkpoint["tickers"],
            checkpoint=name,
            sha256=trained_checkpoint["sha256"],
            created_seq=seq["n"],
            on_leaderboard=on_leaderboard,
        )

    return make


@pytest.fixture
def agent(make_agent):
    return make_agent()


@pytest.fixture
def run_backtest_now(user) -> Callable:
    """Create a backtest and run the Celery task function in this process (ids only, as a
    worker would); returns the refreshed row."""
    from webapp.reports import services, tasks

    def run(agent, start: str, end: str, **options):
        backtest = services.backtest_create(user=user, agent=agent, start=start, end=end, **options)
        tasks.run_backtest(backtest.id)
        backtest.refresh_from_db()
        return backtest

    return run


@pytest.fixture
def done_backtest(agent, run_backtest_now):
    """A finished backtest of the agent on the task's test split."""
    backtest = run_backtest_now(agent, SPLITS["test"][0], SPLITS["test"][1])
    assert backtest.status == "done", backtest.error
    return backtest


def qqq_close(data_dir: Path):
    from trainer.backtest.benchmark import load_benchmark_close

    return load_benchmark_close(data_dir / "benchmark_etfs_daily_eodhd.csv.gz", "QQQ")

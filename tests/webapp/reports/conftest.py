"""Fixtures of the reports tests: two users, a real Dow-30 dataset, a tiny task, and an agent
whose checkpoint was really trained (a few hundred env steps of PPO) and stored like the
runs app stores them.

Who may see what: ``user`` owns the dataset, task, run, agent and every backtest;
``other_user`` owns nothing and must get 404 for all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.files import File
from django.core.files.storage import default_storage

from tests.conftest import DOW30_FILE

TICKERS = ["AAPL", "MSFT", "JPM"]
SPLITS = {
    "train": ["2018-06-01", "2019-12-31"],
    "validation": ["2020-01-01", "2020-06-30"],
    "test": ["2020-07-01", "2020-12-31"],
}
# A large hmax so that the barely trained policy's small actions still buy whole shares and
# the backtests have trades, drawdowns and finite ratios to show.
ENV = {"hmax": 2000}
TINY_PPO = {"num_envs": 4, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32], "update_epochs": 2}


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-ada-12345")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-12345")


@pytest.fixture
def dataset(user, data_dir, settings):
    from webapp.market import services as market_services

    settings.PADDOCK_DATA_DIR = data_dir
    return market_services.dataset_create_from_files(owner=user, name="dow30", paths=[DOW30_FILE], tickers=TICKERS)


@pytest.fixture
def task(user, dataset):
    from webapp.runs import services

    return services.task_create(
        owner=user,
        dataset=dataset,
        name="tiny ppo",
        tickers=TICKERS,
        splits=SPLITS,
        env=ENV,
        algorithm="ppo",
        hyperparameters=TINY_PPO,
    )


@pytest.fixture(scope="session")
def trained_checkpoint(data_dir, tmp_path_factory) -> dict:
    """One real PPO generation (256 env steps, seed 1: a policy that trades) on the tiny task;
    its checkpoint file and result."""
    from webapp import engine

    spec = engine.validate_task(
        {
            "data": {"paths": [str(data_dir / DOW30_FILE)], "tickers": TICKERS},
            **SPLITS,
            "env": ENV,
            "algorithm": "ppo",
            "hyperparameters": TINY_PPO,
        }
    )
    out = tmp_path_factory.mktemp("checkpoint") / "agent.pt"
    result = engine.train_generation(
        spec,
        env_steps=256,
        out_path=str(out),
        parent_path=None,
        hyperparameters=None,
        seed=1,
        device="cpu",
        data_dir=str(data_dir),
        cache_dir=str(tmp_path_factory.getbasetemp() / "market-cache"),
    )
    return {"path": out, **result}


@pytest.fixture
def make_agent(user, task, trained_checkpoint) -> Callable:
    """Create a finished run's agent holding the trained checkpoint (stored in the default
    storage as the runs app does). ``make_agent(score=..., on_leaderboard=...)``."""
    from webapp.runs import services
    from webapp.runs.models import Agent, Generation, Pod

    budget = services.budget_create(actor=user, name="budget", max_concurrent_pods=1)
    run = services.run_create(owner=user, task=task, budget=budget, num_pods=1, generation_steps=256, device="cpu")
    pod = Pod.objects.create(run=run, index=0)
    seq = {"n": 0}

    def make(score: float = 1.0, on_leaderboard: bool = True) -> Agent:
        seq["n"] += 1
        gen = Generation.objects.create(run=run, pod=pod, number=seq["n"], env_steps=256, status=Generation.Status.DONE)
        with open(trained_checkpoint["path"], "rb") as fh:
            name = default_storage.save(f"test-checkpoints/run{run.id}-agent{seq['n']}.pt", File(fh))
        return Agent.objects.create(
            run=run,
            generation=gen,
            pod=pod,
            score=score,
            metrics=trained_checkpoint["metrics"],
            hyperparameters=trained_checkpoint["hyperparameters"],
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
    from trainer.backtest.engine import load_benchmark_close

    return load_benchmark_close(data_dir / "benchmark_etfs_daily_eodhd.csv.gz", "QQQ")

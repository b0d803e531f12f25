"""Fixtures shared by the web tests: users and their API clients, a real Dow-30 dataset, a tiny
task, budgets, a really trained checkpoint, and "worlds" (a started run with agents).

Who may see what: ``user`` (ada) owns the dataset, task, budgets and runs the fixtures make, and
``world``; ``other_user`` (bob) owns nothing of ada's (only ``other_world``) and must get a 404
for each of ada's objects and find none of them in any list; ``staff`` (sam) manages budgets.
"""

from __future__ import annotations

import dataclasses
import random
import types
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import DOW30_FILE

TICKERS = ["AAPL", "MSFT", "JPM"]
SPLITS = {
    "train": ["2018-06-01", "2019-12-31"],
    "validation": ["2020-01-01", "2020-06-30"],
    "test": ["2020-07-01", "2020-12-31"],
}
# Small enough that a generation of a few hundred env steps takes a fraction of a second.
TINY_PPO = {"num_envs": 4, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32], "update_epochs": 2}
# A large hmax so that a barely trained policy's small actions still buy whole shares: the
# backtests of ``trained_checkpoint`` have trades, drawdowns and finite ratios to show.
TRADING_ENV = {"hmax": 2000}


# --- users ----------------------------------------------------------------------------------


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-ada-12345")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-12345")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(username="sam", password="pw-sam-12345", is_staff=True)


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def api_client(user) -> APIClient:
    return _client(user)


@pytest.fixture
def other_client(other_user) -> APIClient:
    return _client(other_user)


@pytest.fixture
def staff_client(staff) -> APIClient:
    return _client(staff)


# --- data, tasks, budgets --------------------------------------------------------------------


def create_dataset(owner, name: str = "dow30"):
    """The three :data:`TICKERS` of the real Dow-30 file, owned by ``owner``."""
    from webapp.market import services as market_services

    return market_services.dataset_create_from_files(owner=owner, name=name, paths=[DOW30_FILE], tickers=TICKERS)


def create_task(owner, dataset, *, name: str = "tiny ppo", **options: Any):
    """A tiny PPO task on :data:`SPLITS`; ``options`` go to ``services.task_create`` (``env``...)."""
    from webapp.runs import services

    options.setdefault("algorithm", "ppo")
    options.setdefault("hyperparameters", TINY_PPO)
    return services.task_create(owner=owner, dataset=dataset, name=name, tickers=TICKERS, splits=SPLITS, **options)


@pytest.fixture
def dataset(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    return create_dataset(user)


@pytest.fixture
def task(user, dataset):
    return create_task(user, dataset)


@pytest.fixture
def make_budget(user) -> Callable:
    """``make_budget(**limits)``: a budget of ``user``'s (2 concurrent pods unless given)."""
    from webapp.runs import services

    def make(**limits):
        limits.setdefault("max_concurrent_pods", 2)
        return services.budget_create(actor=user, name=f"budget-{random.randrange(10**6)}", **limits)

    return make


# --- a trained agent and started runs --------------------------------------------------------

# The tiny task as a portfolio: target weights over the three tickers and cash, 0.01 no-trade band.
PORTFOLIO = {"kind": "portfolio", "env": {"rebalance_band": 0.01}}


def tiny_generation(
    data_dir, tmp_path_factory, task_fields: dict[str, Any], name: str, **train_options: Any
) -> dict[str, Any]:
    """One real PPO generation (256 env steps, seed 1) of the tiny task with ``task_fields``
    (its ``env``, or ``kind`` and ``env``), ``train_options`` passed on to
    ``engine.train_generation`` (e.g. ``benchmark_path``): ``{"path": Path, **its result}``."""
    from webapp import engine

    spec = engine.validate_task(
        {
            "data": {"paths": [str(data_dir / DOW30_FILE)], "tickers": TICKERS},
            **SPLITS,
            **task_fields,
            "algorithm": "ppo",
            "hyperparameters": TINY_PPO,
        }
    )
    out = tmp_path_factory.mktemp(name) / "agent.pt"
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
        **train_options,
    )
    return {"path": out, **dataclasses.asdict(result)}


@pytest.fixture(scope="session")
def trained_checkpoint(data_dir, tmp_path_factory) -> dict[str, Any]:
    """One real PPO generation (256 env steps, seed 1: a policy that trades) on the tiny task
    with :data:`TRADING_ENV`: ``{"path": Path, **engine.train_generation's result}``."""
    return tiny_generation(data_dir, tmp_path_factory, {"env": TRADING_ENV}, "checkpoint")


@pytest.fixture(scope="session")
def portfolio_checkpoint(data_dir, tmp_path_factory) -> dict[str, Any]:
    """One real PPO generation (256 env steps) on the tiny task as a :data:`PORTFOLIO` task:
    ``{"path": Path, **engine.train_generation's result}``."""
    return tiny_generation(data_dir, tmp_path_factory, PORTFOLIO, "portfolio-checkpoint")


def submit_agent(run, checkpoint: dict[str, Any], score: float | None):
    """Claim the run's oldest queued generation and complete it with ``score`` and the
    ``trained_checkpoint`` file, through the real services (leaderboard pruning, usage
    accounting and events included)."""
    from webapp.runs import services
    from webapp.runs.models import Generation

    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    assert gen is not None, "the run has no queued generation"
    claim = services.generation_claim(generation_id=gen.id, worker="test-worker")
    assert claim is not None, "the generation could not be claimed"
    from webapp import engine
    from webapp.runs.models import Agent

    # the checkpoint's training curve, placed after the parent's line as the trainer would
    parent_total = Agent.objects.get(pk=claim.parent_id).total_env_steps if claim.parent_id else 0
    curve = [
        {**p, "total_env_steps": parent_total + p["generation_env_steps"]} for p in checkpoint.get("telemetry", [])
    ]
    result = engine.TrainedGeneration(
        sha256=checkpoint["sha256"],
        score=score,
        metrics={**checkpoint["metrics"], "score": score},
        env_steps=claim.env_steps,
        hyperparameters=claim.hyperparameters,
        cancelled=False,
        duration_s=0.5,
        telemetry=curve,
        tickers=checkpoint["tickers"],
        provenance=checkpoint.get("provenance") or {},
    )
    return services.generation_complete(claim=claim, result=result, local_checkpoint=str(checkpoint["path"]))


def make_world(
    owner, name: str, *, checkpoint: dict[str, Any], scores=(), **task_options: Any
) -> types.SimpleNamespace:
    """Dataset, task (``task_options`` go to :func:`create_task`), budget and a started 2-pod
    run for ``owner``, with agents of ``scores``."""
    from webapp.runs import services

    dataset = create_dataset(owner, name)
    task = create_task(owner, dataset, name=f"{name} task", **task_options)
    budget = services.budget_create(actor=owner, name=f"{name} budget", max_concurrent_pods=8, env_step_cap=10**9)
    run = services.run_create(
        owner=owner,
        task=task,
        budget=budget,
        name=f"{name} run",
        num_pods=2,
        generation_steps=256,
        leaderboard_size=3,
        mutation={"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 1.25]},
        device="cpu",
    )
    services.run_start(run=run)
    agents = [submit_agent(run, checkpoint, s) for s in scores]
    run.refresh_from_db()
    return types.SimpleNamespace(dataset=dataset, task=task, budget=budget, run=run, agents=agents)


@pytest.fixture
def world(user, trained_checkpoint):
    """ada's started run with four agents (scores 0.5, 1.5, 1.0, 0.2; the top 3 rank)."""
    return make_world(user, "ada-data", checkpoint=trained_checkpoint, scores=[0.5, 1.5, 1.0, 0.2])


@pytest.fixture
def other_world(other_user, trained_checkpoint):
    """bob's started run with one agent."""
    return make_world(other_user, "bob-data", checkpoint=trained_checkpoint, scores=[0.7])


@pytest.fixture
def portfolio_world(user, portfolio_checkpoint):
    """ada's started run of the tiny :data:`PORTFOLIO` task with one agent (score 1.0)."""
    return make_world(user, "ada-portfolio", checkpoint=portfolio_checkpoint, scores=[1.0], **PORTFOLIO)

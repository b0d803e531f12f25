"""Fixtures of the web tests: three users, a real Dow-30 dataset, a started run whose agents
are submitted through the real generation services, and API clients.

Who may see what: ``user`` (ada) owns ``world`` (dataset, task, budget, run, agents);
``other_user`` (bob) owns ``other_world`` and must get a 404 for each of ada's objects and find
none of them in any list; ``staff`` (sam) manages budgets.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.conftest import DOW30_FILE

TICKERS = ["AAPL", "MSFT", "JPM"]
SPLITS = {
    "train": ["2018-06-01", "2019-12-31"],
    "validation": ["2020-01-01", "2020-06-30"],
    "test": ["2020-07-01", "2020-12-31"],
}
TINY_PPO = {"num_envs": 4, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32], "update_epochs": 2}


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


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory, data_dir) -> types.SimpleNamespace:
    """A real checkpoint of a tiny PPO agent (256 env steps on 3 Dow-30 tickers), trained once."""
    from webapp import engine

    spec = engine.validate_task(
        {
            "data": {"paths": [str(data_dir / DOW30_FILE)], "tickers": TICKERS},
            **SPLITS,
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
        seed=0,
        device="cpu",
        cache_dir=str(tmp_path_factory.mktemp("market-cache")),
    )
    return types.SimpleNamespace(path=Path(out), sha256=result["sha256"], metrics=result["metrics"])


def submit_agent(run, checkpoint, score: float | None):
    """Claim the run's oldest queued generation and complete it with ``score``, through the
    real services (leaderboard pruning, usage accounting and events included)."""
    from webapp.runs import services
    from webapp.runs.models import Generation

    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    assert gen is not None, "the run has no queued generation"
    claim = services.generation_claim(generation_id=gen.id, worker="test-worker")
    assert claim is not None, "the generation could not be claimed"
    result = {
        "sha256": checkpoint.sha256,
        "score": score,
        "metrics": {**checkpoint.metrics, "score": score},
        "env_steps": claim.env_steps,
        "hyperparameters": claim.hyperparameters,
        "cancelled": False,
        "duration_s": 0.5,
    }
    return services.generation_complete(claim=claim, result=result, local_checkpoint=str(checkpoint.path))


def make_world(owner, name: str, *, checkpoint=None, scores=()) -> types.SimpleNamespace:
    """Dataset, task, budget and a started run for ``owner``, with agents of ``scores``."""
    from webapp.market import services as market_services
    from webapp.runs import services

    dataset = market_services.dataset_create_from_files(owner=owner, name=name, paths=[DOW30_FILE], tickers=TICKERS)
    task = services.task_create(
        owner=owner, dataset=dataset, name=f"{name} task", tickers=TICKERS, splits=SPLITS, hyperparameters=TINY_PPO
    )
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
def world(user, checkpoint):
    return make_world(user, "ada-data", checkpoint=checkpoint, scores=[0.5, 1.5, 1.0, 0.2])


@pytest.fixture
def other_world(other_user, checkpoint):
    return make_world(other_user, "bob-data", checkpoint=checkpoint, scores=[0.7])

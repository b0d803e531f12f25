"""A2C, TD3, DDPG and direct from the browser form and the API: choices, defaults, runs that start."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.webapp.conftest import SPLITS
from tests.webapp.test_pages import _run_form
from webapp import engine

pytestmark = pytest.mark.django_db

TINY = {
    "a2c": {"num_envs": 4, "rollout_steps": 8, "hidden_sizes": [16]},
    "td3": {"num_envs": 4, "hidden_sizes": [16], "batch_size": 16, "buffer_size": 1024, "learning_starts": 32},
    "ddpg": {"num_envs": 4, "hidden_sizes": [16], "batch_size": 16, "buffer_size": 1024, "learning_starts": 32},
}


@pytest.fixture
def ada(client, user):
    client.force_login(user)
    return client


def test_the_form_offers_every_trainer_algorithm_with_its_defaults(ada, world):
    assert engine.algorithms() == ("ppo", "a2c", "sac", "td3", "ddpg", "direct")
    page = ada.get("/runs/new/").content.decode()
    for algo in engine.algorithms():
        assert f'value="{algo}"' in page
    assert engine.default_hyperparameters("ddpg")["twin_critics"] is False
    assert engine.default_hyperparameters("td3")["policy_delay"] == 2
    assert engine.default_hyperparameters("a2c")["rollout_steps"] == 16


@pytest.mark.parametrize("algo", ["a2c", "td3", "ddpg"])
def test_a_run_of_each_new_algorithm_starts_from_the_form(ada, world, algo):
    from webapp.runs.models import Run

    form = _run_form(world, start_now="on", algorithm=algo, hyperparameters=json.dumps(TINY[algo]), name=f"{algo} run")
    response = ada.post("/runs/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get(name=f"{algo} run")
    assert run.task.algorithm == algo and run.status == "running"
    assert run.task.hyperparameters["hidden_sizes"] == [16]


def test_a_bad_td3_hyperparameter_is_named_on_the_form(ada, world):
    form = _run_form(world, algorithm="td3", hyperparameters=json.dumps({**TINY["td3"], "policy_delay": 0}))
    page = ada.post("/runs/new/", form).content.decode()
    assert "policy_delay" in page and "must be in [1, 100]" in page


def test_the_api_creates_a_ddpg_task_and_filters_runs_by_algorithm(api_client, world):
    body = {
        "name": "api ddpg",
        "dataset": world.dataset.id,
        "tickers": ["AAPL", "MSFT"],
        "splits": SPLITS,
        "algorithm": "ddpg",
        "hyperparameters": TINY["ddpg"],
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["algorithm"] == "ddpg"
    assert response.json()["hyperparameters"]["policy_delay"] == 1
    assert api_client.get("/api/runs/?algorithm=ddpg").status_code == 200


def test_the_api_creates_a_direct_portfolio_task_and_names_a_bad_tilt_bound(api_client, world):
    body = {
        "name": "api direct",
        "dataset": world.dataset.id,
        "tickers": ["AAPL", "MSFT"],
        "splits": SPLITS,
        "kind": "portfolio",
        "algorithm": "direct",
        "hyperparameters": {"num_envs": 8, "rollout_steps": 5, "hidden_sizes": [8]},
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["hyperparameters"]["kappa"] == 0.5
    for hp, field in (({"kappa": 0}, "hyperparameters.kappa"), ({"subset_size": 3}, "hyperparameters.subset_size")):
        bad = api_client.post("/api/tasks/", {**body, "name": "bad", "hyperparameters": hp}, format="json")
        assert bad.status_code == 400 and field in bad.json()["fields"], bad.json()
    stock = api_client.post("/api/tasks/", {**body, "name": "stock", "kind": "stock_trading"}, format="json")
    assert stock.status_code == 400 and "algorithm" in stock.json()["fields"], stock.json()


@pytest.mark.parametrize("algo", ["ppo", "a2c", "sac", "td3", "ddpg", "direct"])
def test_each_algorithms_default_mutation_is_usable(algo):
    from webapp.runs.algorithms import default_mutation

    engine.check_mutation(default_mutation(algo), engine.default_hyperparameters(algo))  # raises when unusable
    assert default_mutation(algo)["bounds"]


def test_the_form_page_carries_each_algorithms_default_mutation(ada, world):
    page = ada.get("/runs/new/").content.decode()
    assert 'id="mutation-defaults"' in page and "actor_learning_rate" in page


@pytest.fixture
def with_dow(user):
    """AAPL, MSFT and DOW, which lists on 2019-03-20, after SPLITS' train start: a task trades 2."""
    from tests.conftest import DOW30_FILE
    from webapp.market import services as market_services

    return market_services.dataset_create_from_files(
        owner=user, name="with dow", paths=[DOW30_FILE], tickers=["AAPL", "MSFT", "DOW"]
    )


def test_a_direct_subset_is_checked_against_the_tickers_the_task_trades_not_the_datasets_list(api_client, with_dow):
    """DOW lists on 2019-03-20, after the train start: the task trades 2 of the dataset's 3
    tickers, so a subset of 3 is refused when the task is made, not at the first generation."""
    body = {
        "name": "direct on the traded tickers",
        "dataset": with_dow.id,
        "splits": SPLITS,
        "kind": "portfolio",
        "algorithm": "direct",
        "hyperparameters": {"num_envs": 8, "rollout_steps": 5, "hidden_sizes": [8], "subset_size": 3},
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 400, response.json()
    assert "universe has 2" in response.json()["fields"]["hyperparameters.subset_size"]
    body["hyperparameters"]["subset_size"] = 2
    assert api_client.post("/api/tasks/", body, format="json").status_code == 201


def test_a_direct_subset_in_a_mixed_tournament_is_checked_against_the_traded_tickers(api_client, with_dow):
    """The same check when direct is another algorithm of a mixed tournament: its subset comes in
    ``algorithm_hyperparameters.direct`` and is refused by that path, not when a pod trains."""
    body = {
        "name": "ppo and direct on the traded tickers",
        "dataset": with_dow.id,
        "splits": SPLITS,
        "kind": "portfolio",
        "algorithm": "ppo",
        "algorithms": ["ppo", "direct"],
        "hyperparameters": {"num_envs": 8, "rollout_steps": 5, "hidden_sizes": [8]},
        "algorithm_hyperparameters": {"direct": {"subset_size": 3}},
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 400, response.json()
    assert "universe has 2" in response.json()["fields"]["algorithm_hyperparameters.direct.subset_size"]
    body["algorithm_hyperparameters"]["direct"]["subset_size"] = 2
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["algorithm_hyperparameters"]["direct"]["subset_size"] == 2


def test_a_direct_portfolio_of_one_ticker_without_cash_is_a_400_on_tickers(api_client, world):
    body = {
        "name": "direct on one ticker",
        "dataset": world.dataset.id,
        "tickers": ["AAPL"],
        "splits": SPLITS,
        "kind": "portfolio",
        "algorithm": "direct",
        "hyperparameters": {"num_envs": 8, "rollout_steps": 5, "hidden_sizes": [8]},
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 400, response.json()
    assert "at least 2 tickers" in response.json()["fields"]["tickers"]
    body["hyperparameters"]["cash"] = True  # a cash decision is left to learn
    assert api_client.post("/api/tasks/", body, format="json").status_code == 201


def test_thousands_of_unknown_tickers_are_named_in_a_short_error(api_client, world):
    body = {
        "name": "many unknown",
        "dataset": world.dataset.id,
        "tickers": [f"T{i}" for i in range(10_000)],
        "splits": SPLITS,
        "hyperparameters": {"num_envs": 8, "rollout_steps": 5, "hidden_sizes": [8]},
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 400
    assert len(response.content) < 2_000, len(response.content)
    assert response.json()["fields"]["tickers"].startswith("T0, T1, T2, T3, T4 and 9,995 more not in dataset")


def test_a_copied_agent_that_holds_1_over_n_keeps_its_hyperparameters():
    from webapp.runs.algorithms import mutation_for

    mutation = {"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 1.25], "probability": 1.0}
    trains = {**engine.default_hyperparameters("direct"), "learning_rate": 3e-3}
    holds = {**trains, "hold_equal_weight": True}
    rng = np.random.default_rng(0)
    moved, changes = engine.mutate_hyperparameters(trains, mutation=mutation_for(mutation, trains), rng=rng)
    assert set(changes) == {"learning_rate"} and moved["learning_rate"] != 3e-3
    kept, changes = engine.mutate_hyperparameters(holds, mutation=mutation_for(mutation, holds), rng=rng)
    assert kept == holds and changes == {}  # its line trains nothing: a new learning rate would mean nothing

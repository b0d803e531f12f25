"""PPO's and A2C's cross-sectional actor from the New run form and the API: stored on the task,
its help shown, settings it cannot train a 400 naming the field."""

from __future__ import annotations

import json

import pytest

from tests.webapp.conftest import SPLITS
from tests.webapp.test_pages import _run_form
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

XS = {"policy": "cross_sectional", "num_envs": 4, "rollout_steps": 8, "num_minibatches": 2, "hidden_sizes": [8]}


@pytest.fixture
def ada(client, user):
    client.force_login(user)
    return client


def _task_body(world, **changes) -> dict:
    body = {
        "name": "api cross-sectional",
        "dataset": world.dataset.id,
        "tickers": ["AAPL", "MSFT"],
        "splits": SPLITS,
        "kind": "portfolio",
        "algorithm": "ppo",
        "hyperparameters": dict(XS),
    }
    body.update(changes)
    return body


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_the_api_creates_a_portfolio_task_whose_actor_is_cross_sectional(api_client, world, algo):
    hp = {k: v for k, v in XS.items() if algo == "ppo" or k != "num_minibatches"}
    response = api_client.post("/api/tasks/", _task_body(world, algorithm=algo, hyperparameters=hp), format="json")
    assert response.status_code == 201, response.json()
    stored = response.json()["hyperparameters"]
    assert stored["policy"] == "cross_sectional" and stored["kappa"] == 0.5


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"hyperparameters": {**XS, "kappa": 0}}, "hyperparameters.kappa", "must be > 0"),
        ({"hyperparameters": {**XS, "kappa": 3}}, "hyperparameters.kappa", "logit_scale"),
        ({"hyperparameters": {**XS, "policy": "cnn"}}, "hyperparameters.policy", "mlp, cross_sectional"),
        ({"kind": "stock_trading"}, "hyperparameters.policy", "portfolio tasks only"),
    ],
)
def test_a_setting_the_actor_cannot_train_is_a_400_naming_the_field(api_client, world, changes, field, words):
    response = api_client.post("/api/tasks/", _task_body(world, name="bad", **changes), format="json")
    assert response.status_code == 400, response.json()
    assert words in response.json()["fields"][field], response.json()


def test_the_form_stores_the_cross_sectional_actor_and_explains_it(ada, world):
    page = ada.get("/runs/new/").content.decode()
    assert "<code>policy</code>" in page and "cross_sectional (portfolio tasks only)" in page
    assert '"policy": "mlp"' in page  # PPO's defaults, the MLP actor among them, ride along for the algorithm switch
    before = set(Run.objects.values_list("id", flat=True))
    form = _run_form(world, kind="portfolio", start_now="", hyperparameters=json.dumps(XS))
    response = ada.post("/runs/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    task = Run.objects.exclude(id__in=before).get().task
    assert task.hyperparameters["policy"] == "cross_sectional" and task.kind == "portfolio"


def test_the_form_names_the_actor_on_a_stock_trading_task(ada, world):
    response = ada.post("/runs/new/", _run_form(world, hyperparameters=json.dumps(XS)))
    assert response.status_code == 400
    page = response.content.decode()
    assert "policy" in page and "portfolio tasks only" in page

"""The portfolio env's dynamics settings (trade rate, band mode, execution lag) from the New run
form, the API and a clone: stored on the task, bad values a 400 naming the field."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import SPLITS, TICKERS
from tests.webapp.runs.test_clone import assert_same_training, clone_unchanged
from tests.webapp.runs.test_form_errors import _errors
from tests.webapp.test_pages import _run_form
from webapp.runs import services
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

SETTINGS = {"trade_rate": 0.5, "band_mode": "edge", "execution_lag": 1}


def test_the_form_stores_the_dynamics_settings_on_the_task(client, user, world):
    client.force_login(user)
    before = set(Run.objects.values_list("id", flat=True))
    response = client.post("/runs/new/", _run_form(world, kind="portfolio", start_now="", **SETTINGS))
    assert response.status_code == 302
    env = Run.objects.exclude(id__in=before).get().task.env
    assert {k: env[k] for k in SETTINGS} == SETTINGS


def test_the_form_leaves_todays_dynamics_by_default(client, user, world):
    client.force_login(user)
    before = set(Run.objects.values_list("id", flat=True))
    assert client.post("/runs/new/", _run_form(world, kind="portfolio", start_now="")).status_code == 302
    env = Run.objects.exclude(id__in=before).get().task.env
    assert (env["trade_rate"], env["band_mode"], env["execution_lag"]) == (1.0, "target", 0)


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"trade_rate": 0}, "trade_rate", "must be more than 0 and at most 1, got 0"),
        ({"trade_rate": 1.5}, "trade_rate", "must be more than 0 and at most 1, got 1.5"),
        ({"band_mode": "middle"}, "band_mode", "middle"),
        ({"execution_lag": 2}, "execution_lag", "2"),
    ],
)
def test_bad_dynamics_settings_in_the_form_are_a_400_next_to_their_field(client, user, world, changes, field, words):
    client.force_login(user)
    assert client.post("/runs/new/", _run_form(world, kind="portfolio", **changes)).status_code == 400
    errors = _errors(client, world, kind="portfolio", **changes)
    assert field in errors and words in " ".join(errors[field]), errors


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"trade_rate": 0}, "env.trade_rate"),
        ({"trade_rate": 1.01}, "env.trade_rate"),
        ({"band_mode": "middle"}, "env.band_mode"),
        ({"execution_lag": 2}, "env.execution_lag"),
        ({"execution_lag": True}, "env.execution_lag"),
    ],
)
def test_bad_dynamics_settings_through_the_api_are_a_400_naming_the_field(api_client, dataset, env, field):
    response = api_client.post(
        "/api/tasks/",
        {"name": "t", "dataset": dataset.id, "splits": SPLITS, "kind": "portfolio", "env": env},
        format="json",
    )
    assert response.status_code == 400
    assert field in response.json()["fields"], response.json()


def test_the_api_accepts_the_dynamics_settings(api_client, dataset):
    response = api_client.post(
        "/api/tasks/",
        {"name": "t", "dataset": dataset.id, "splits": SPLITS, "kind": "portfolio", "env": SETTINGS},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert {k: response.json()["env"][k] for k in SETTINGS} == SETTINGS


def test_a_clone_keeps_the_dynamics_settings(client, user, dataset, make_budget):
    task = services.task_create(
        owner=user,
        dataset=dataset,
        name="dynamics",
        tickers=TICKERS,
        splits=SPLITS,
        kind="portfolio",
        algorithm="ppo",
        hyperparameters={"num_envs": 4, "hidden_sizes": [16, 16]},
        env={**SETTINGS, "rebalance_band": 0.02},
    )
    run = services.run_create(
        owner=user, task=task, budget=make_budget(), name="dynamics run", num_pods=1, generation_steps=4096, seed=7
    )
    client.force_login(user)
    clone = clone_unchanged(client, run)
    assert_same_training(clone, run)
    assert clone.task.env["band_mode"] == "edge"

"""A new task that names no algorithm gets its kind's default configuration, the same on the
form, the API and the page's script data: ``direct`` with the penalties chosen on validation
for a portfolio task (docs/default-selection.md), PPO for stock trading.

Ada (``user``) owns the dataset and the budgets the fixtures make."""

from __future__ import annotations

import json

import pytest

from tests.webapp.conftest import SPLITS, TICKERS
from webapp.runs.forms import RunForm
from webapp.runs.services.common import DEFAULT_GENERATION_STEPS

pytestmark = pytest.mark.django_db

#: The chosen configuration: twice the direct learner's former penalties, 2M-step generations in
#: whole gradient steps (94 x 1,024 windows x 21 days), the recommended no-trade band.
CHOSEN_PENALTIES = {"turnover_penalty": 0.02, "tracking_penalty": 20.0}
DIRECT_GENERATION = 94 * 1024 * 21


def _post_task(api_client, dataset, **changes):
    body = {"name": "no algorithm named", "dataset": dataset.id, "tickers": TICKERS, "splits": SPLITS}
    return api_client.post("/api/tasks/", {**body, **changes}, format="json")


def test_a_portfolio_task_posted_without_an_algorithm_trains_direct_with_the_chosen_penalties(api_client, dataset):
    response = _post_task(api_client, dataset, kind="portfolio")

    assert response.status_code == 201, response.content
    task = response.json()
    assert task["algorithm"] == "direct"
    assert {k: task["hyperparameters"][k] for k in CHOSEN_PENALTIES} == CHOSEN_PENALTIES
    assert task["env"]["rebalance_band"] == 0.01  # RECOMMENDED_REBALANCE_BAND, part of the choice


def test_a_stock_trading_task_posted_without_an_algorithm_still_trains_ppo(api_client, dataset):
    response = _post_task(api_client, dataset, kind="stock_trading", hyperparameters={"num_envs": 4})

    assert response.status_code == 201, response.content
    assert response.json()["algorithm"] == "ppo"


def test_a_run_of_a_direct_task_posted_without_generation_steps_trains_the_chosen_budget(
    api_client, dataset, make_budget
):
    task = _post_task(api_client, dataset, kind="portfolio").json()

    response = api_client.post("/api/runs/", {"task": task["id"], "budget": make_budget().id}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["generation_steps"] == DIRECT_GENERATION


def test_the_api_and_a_stock_trading_form_default_to_the_same_generation_steps_for_ppo(
    api_client, task, make_budget, user
):
    response = api_client.post("/api/runs/", {"task": task.id, "budget": make_budget().id}, format="json")

    assert response.status_code == 201, response.json()
    assert task.algorithm == "ppo" and response.json()["generation_steps"] == DEFAULT_GENERATION_STEPS
    form = RunForm(initial={"kind": "stock_trading"}, user=user)
    assert form.initial["algorithm"] == "ppo" and form.initial["generation_steps"] == DEFAULT_GENERATION_STEPS


def test_a_blank_form_starts_with_the_portfolio_default_configuration(user):
    form = RunForm(user=user)  # the form's kind starts at portfolio

    assert form.fields["kind"].initial == "portfolio"
    assert form.initial["algorithm"] == "direct"
    assert {k: form.initial["hyperparameters"][k] for k in CHOSEN_PENALTIES} == CHOSEN_PENALTIES
    assert set(form.initial["mutation"]["bounds"]) == {"learning_rate"}
    assert form.initial["generation_steps"] == DIRECT_GENERATION
    assert form.fields["rebalance_band"].initial() == 0.01


def test_the_new_run_page_tells_its_script_each_kinds_algorithm_and_generation_size(client, user):
    client.force_login(user)

    page = client.get("/runs/new/").content.decode()

    blob = page.split('id="algorithm-defaults" type="application/json">', 1)[1].split("</script>", 1)[0]
    data = json.loads(blob)
    assert data["kinds"] == {"stock_trading": "ppo", "portfolio": "direct"}
    assert data["generation_steps"]["direct"] == DIRECT_GENERATION
    assert data["generation_steps"]["ppo"] == DEFAULT_GENERATION_STEPS
    assert '<option value="direct" selected>' in page

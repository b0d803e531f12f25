"""A run on a budget that is spent could never start, so it is not created: ``POST /api/runs/``
answers the 409 that ``start/`` gives, naming the budget, the limit and what to do, and the
New run form shows it beside the budget with the typed values kept.

Who may see what: ada (``user``) creates the runs, on her own budget or on one sam (``staff``)
assigned to her; only sam can raise the assigned one, so ada is told to ask staff.
"""

from __future__ import annotations

import types

import pytest
from bs4 import BeautifulSoup

from tests.webapp.test_pages import _run_form
from webapp.runs import services
from webapp.runs.models import ClusterBudget, Run, Task

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_budget(user, settings):
    settings.PADDOCK_QUOTA_DEVICE_HOURS = 2.0
    return services.budget_create_own(actor=user, name="mine", gpu_hours_cap=1.0, env_step_cap=100_000)


def _spend_env_steps(budget) -> None:
    ClusterBudget.objects.filter(pk=budget.pk).update(env_steps_used=budget.env_step_cap - 100)


def _body(task, budget, **changes):
    return {"task": task.id, "budget": budget.id, "generation_steps": 256, "num_pods": 1, **changes}


def test_creating_a_run_on_a_spent_budget_is_the_409_that_start_gives(api_client, task, own_budget):
    queued = api_client.post("/api/runs/", _body(task, own_budget), format="json")
    assert queued.status_code == 201, queued.json()
    _spend_env_steps(own_budget)
    start = api_client.post(f"/api/runs/{queued.json()['id']}/start/")
    assert start.status_code == 409

    for start_now in (False, True):
        created = api_client.post("/api/runs/", _body(task, own_budget, start=start_now), format="json")
        assert created.status_code == 409, created.json()
        assert created.json()["fields"] == start.json()["fields"]
        assert created.json()["error"] == start.json()["error"].replace("cannot start", "cannot create a run")
    why = start.json()["fields"]["budget"]
    assert "budget 'mine': env-step cap of 100000 is spent" in why
    assert "raise its limits on the Budgets page" in why and "or choose another budget" in why
    assert Run.objects.filter(owner__username="ada").count() == 1, "only the run made before the cap was spent"


def test_a_spent_assigned_budget_tells_its_user_to_ask_staff(api_client, task, user, staff):
    budget = services.budget_create(actor=staff, owner=user, name="assigned", gpu_hours_cap=0.5)
    ClusterBudget.objects.filter(pk=budget.pk).update(gpu_seconds_used=1800.0)
    response = api_client.post("/api/runs/", _body(task, budget), format="json")
    assert response.status_code == 409
    assert response.json()["fields"]["budget"] == (
        "budget 'assigned': GPU-hours cap of 0.5 h is spent; ask staff to raise its limits, or choose another budget"
    )


def test_an_ended_budget_refuses_new_runs_and_says_to_choose_another(api_client, task, own_budget):
    assert api_client.post(f"/api/budgets/{own_budget.id}/end/").status_code == 200
    response = api_client.post("/api/runs/", _body(task, own_budget), format="json")
    assert response.status_code == 409
    assert response.json()["fields"]["budget"] == "budget 'mine' was ended by its owner; choose another budget"


def test_a_spent_budget_is_said_beside_the_other_errors_of_a_request(api_client, task, own_budget):
    _spend_env_steps(own_budget)
    response = api_client.post("/api/runs/", _body(task, own_budget, num_pods=0), format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"num_pods", "budget"}
    assert "env-step cap" in response.json()["fields"]["budget"]


def test_a_budget_that_is_not_spent_still_takes_runs(api_client, task, own_budget):
    ClusterBudget.objects.filter(pk=own_budget.pk).update(env_steps_used=own_budget.env_step_cap - 256)
    response = api_client.post("/api/runs/", _body(task, own_budget, start=True), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["status"] == "running"


def test_the_new_run_form_shows_a_spent_budget_beside_the_field_and_keeps_the_typed_values(
    client, user, dataset, own_budget
):
    _spend_env_steps(own_budget)
    client.force_login(user)
    tasks = Task.objects.count()
    form = _run_form(types.SimpleNamespace(dataset=dataset, budget=own_budget), name="my spent run", start_now="on")
    response = client.post("/runs/new/", form)
    assert response.status_code == 400
    page = BeautifulSoup(response.content.decode(), "html.parser")
    errors = {ul["data-error-for"]: ul.get_text(" ", strip=True) for ul in page.select("[data-error-for]")}
    assert list(errors) == ["budget"], errors
    assert "env-step cap of 100000 is spent" in errors["budget"] and "choose another budget" in errors["budget"]
    assert page.select_one("input[name=name]")["value"] == "my spent run"
    assert page.select_one("select[name=budget] option[selected]")["value"] == str(own_budget.id)
    assert Task.objects.count() == tasks and not Run.objects.exists(), "nothing is kept"

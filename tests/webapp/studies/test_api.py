"""``/api/studies/``: create (a run per fold on the study's own budget), list, detail, cancel;
bad input is a 400 naming the field, another user's study a 404."""

from __future__ import annotations

import pytest

from webapp.runs.models import Run
from webapp.studies.models import Study

pytestmark = pytest.mark.django_db

URL = "/api/studies/"


def test_creating_a_study_starts_one_run_per_fold_on_a_budget_for_the_whole_study(api_client, study_body):
    response = api_client.post(URL, study_body, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "running" and len(body["folds"]) == 2
    first, second = body["folds"]
    assert first["spans"]["test"] == {"start": "2018-01-02", "end": "2018-12-31"}
    assert second["spans"]["test"]["start"] == "2019-01-02"
    assert first["spans"]["validation"]["end"] < first["spans"]["test"]["start"]
    runs = Run.objects.filter(study_fold__study_id=body["id"])
    assert {r.status for r in runs} == {Run.Status.RUNNING}
    assert {r.budget_id for r in runs} == {body["budget"]}  # one budget for the whole study
    study = Study.objects.get(pk=body["id"])
    assert study.budget.env_step_cap == 2 * 512
    assert runs.get(study_fold__index=1).task.splits["test"] == second["spans"]["test"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"first_test_year": 2030}, "first_test_year"),
        ({"first_test_year": 2016}, "first_test_year"),
        ({"gap_days": -1}, "gap_days"),
        ({"start": "2016-02-30"}, "start"),
        ({"start": "1990-01-01"}, "start"),  # before the data: it trained from 2010 silently
        ({"end": "2018-01-09"}, "end"),
        ({"end": "2022-12-31"}, "end"),  # 46 days after the data's last day
        ({"env_steps_per_fold": 100, "generation_steps": 256}, "generation_steps"),
        # 300 asked trains 384 (three rollouts of 128): more than the fold's 350
        ({"env_steps_per_fold": 350, "generation_steps": 300}, "generation_steps"),
        ({"generation_steps": 8}, "generation_steps"),
        ({"start": None}, "start"),
        ({"num_pods": 3}, "num_pods"),  # the budget runs 2 pods at once
        ({"env_steps_per_fold": 10**400}, "env_steps_per_fold"),
        ({"seed": 2**40}, "seed"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api_client, study_body, change, field):
    response = api_client.post(URL, {**study_body, **change}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in body["fields"], body
    assert not body["fields"][field].startswith(f"{field}:"), "the field's message does not say its name again"
    assert not Study.objects.exists() and not Run.objects.exists()  # nothing half-made


def test_other_users_see_nothing_of_a_study(api_client, other_client, study_body):
    study_id = api_client.post(URL, study_body, format="json").json()["id"]
    assert [s["id"] for s in api_client.get(URL).json()["results"]] == [study_id]
    assert other_client.get(URL).json()["results"] == []
    assert other_client.get(f"{URL}{study_id}/").status_code == 404
    assert other_client.post(f"{URL}{study_id}/cancel/").status_code == 404
    assert other_client.post(URL, study_body, format="json").status_code == 404  # not their task


def test_cancelling_a_study_stops_its_fold_runs(api_client, study_body):
    study_id = api_client.post(URL, study_body, format="json").json()["id"]
    response = api_client.post(f"{URL}{study_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert {r.status for r in Run.objects.filter(study_fold__study_id=study_id)} == {Run.Status.CANCELLED}
    again = api_client.post(f"{URL}{study_id}/cancel/")
    assert again.status_code == 409


def test_a_non_staff_users_studies_hold_no_more_than_their_quota(api_client, user, study_body, settings):
    """A study's budget is a budget of the user's own: it counts against their quota, so
    studies cannot hold more device hours or pods at once than the quota allows (each study
    used to get an uncounted copy of the chosen budget's limits)."""
    settings.PADDOCK_QUOTA_DEVICE_HOURS, settings.PADDOCK_QUOTA_PODS = 2, 2
    own = api_client.post(
        "/api/budgets/", {"name": "mine", "gpu_hours_cap": 1, "max_concurrent_pods": 1}, format="json"
    )
    assert own.status_code == 201, own.json()
    first = api_client.post(URL, {**study_body, "budget": own.json()["id"]}, format="json")
    assert first.status_code == 201, first.json()
    study_budget = Study.objects.get(pk=first.json()["id"]).budget
    assert study_budget.purpose == "own" and study_budget.max_concurrent_pods == 1
    second = api_client.post(URL, {**study_body, "budget": own.json()["id"], "name": "again"}, format="json")
    assert second.status_code == 400
    assert "budget" in second.json()["fields"] and "quota" in second.json()["error"]


def test_a_huge_number_is_refused_in_a_short_message(api_client, study_body):
    body = {**study_body, "env_steps_per_fold": 10**400, "generation_steps": 10**300}
    response = api_client.post(URL, body, format="json")
    assert response.status_code == 400
    assert len(response.content) < 1_000
    assert set(response.json()["fields"]) >= {"env_steps_per_fold", "generation_steps"}


def test_more_pods_than_the_studys_budget_runs_is_a_400_naming_num_pods(api_client, study_body):
    response = api_client.post(URL, {**study_body, "num_pods": 3}, format="json")
    assert response.status_code == 400
    assert "at most 2" in response.json()["fields"]["num_pods"]

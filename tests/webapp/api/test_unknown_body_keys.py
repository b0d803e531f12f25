"""Every request body is read as sent: a key the endpoint does not take, a boolean written as
``"yes"`` or ``1``, a number written as a JSON string (``"2"``), and a body that is not a JSON
object are each a 400 naming what is wrong (DRF drops unknown keys and reads ``"yes"`` as true
and ``"2"`` as 2, so ``{"backtets": true}`` answered 200 and did nothing)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_id(api_client, task, make_budget) -> int:
    body = {"task": task.id, "budget": make_budget().id, "generation_steps": 256, "num_pods": 1}
    response = api_client.post("/api/runs/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def _fields(response) -> dict:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    return response.json()["fields"]


def test_creating_with_a_key_the_endpoint_does_not_take_is_a_400_naming_it(api_client, task, dataset, make_budget):
    posts = {
        "/api/runs/": {"task": task.id, "budget": make_budget().id, "generation_steps": 256, "num_podz": 3},
        "/api/tasks/": {"name": "t", "dataset": dataset.id, "splits": {}, "hyperparams": {}},
        "/api/datasets/": {"name": "d", "paths": ["x.csv"], "ticker": ["AAPL"]},
        "/api/backtests/": {"agent": 1, "start": "2021-01-04", "end": "2021-06-30", "benchmark": "QQQ"},
        "/api/studies/": {"task": task.id, "budget": 1, "start": "2010-01-04", "end": "2020-12-31", "folds": 3},
    }
    for url, body in posts.items():
        unknown = next(k for k in body if k in ("num_podz", "hyperparams", "ticker", "benchmark", "folds"))
        fields = _fields(api_client.post(url, body, format="json"))
        assert unknown in fields, (url, fields)
        assert "unknown field" in fields[unknown] and "this endpoint takes" in fields[unknown], fields


def test_a_run_action_with_a_misspelt_option_changes_nothing_and_says_so(api_client, run_id):
    before = api_client.get(f"/api/runs/{run_id}/").json()
    for action, body in {
        "stop": {"mode": "bogus"},
        "scale": {"num_pods": 2, "pods": 2},
        "archive": {"archive": True},
        "annotate": {"tag": ["a"]},
        "ensemble": {"k": 2, "size": 3},
    }.items():
        fields = _fields(api_client.post(f"/api/runs/{run_id}/{action}/", body, format="json"))
        assert set(fields) == set(body) - {"num_pods", "k"}, (action, fields)
    run = api_client.get(f"/api/runs/{run_id}/").json()
    assert run["status"] == before["status"] and run["archived"] is False and run["num_pods"] == 1
    assert run["tags"] == []


def test_a_boolean_must_be_true_or_false(api_client, task, make_budget, run_id):
    body = {"task": task.id, "budget": make_budget().id, "generation_steps": 256, "start": "yes"}
    assert "must be true or false" in _fields(api_client.post("/api/runs/", body, format="json"))["start"]
    for value in (1, "on", "y", None):
        response = api_client.post(f"/api/runs/{run_id}/archive/", {"archived": value}, format="json")
        assert "archived" in _fields(response), value
    ok = api_client.post(f"/api/runs/{run_id}/archive/", {"archived": True}, format="json")
    assert ok.status_code == 200 and ok.json()["archived"] is True


def test_a_number_must_be_a_json_number_not_a_string(api_client, user, task, make_budget, run_id):
    before = api_client.get(f"/api/runs/{run_id}/").json()
    scaled = _fields(api_client.post(f"/api/runs/{run_id}/scale/", {"num_pods": "2"}, format="json"))
    assert scaled == {"num_pods": "must be a whole number, got a string"}
    for value, kind in ((True, "a boolean"), (2.5, "2.5"), ([2], "a list")):
        fields = _fields(api_client.post(f"/api/runs/{run_id}/scale/", {"num_pods": value}, format="json"))
        assert fields == {"num_pods": f"must be a whole number, got {kind}"}
    assert api_client.get(f"/api/runs/{run_id}/").json()["num_pods"] == before["num_pods"] == 1
    assert "k" in _fields(api_client.post(f"/api/runs/{run_id}/ensemble/", {"k": "3"}, format="json"))
    body = {"task": task.id, "budget": make_budget().id, "generation_steps": "256", "num_pods": "2", "seed": "1"}
    fields = _fields(api_client.post("/api/runs/", {**body, "fresh_probability": "0.5"}, format="json"))
    assert set(fields) == {"generation_steps", "num_pods", "seed", "fresh_probability"}, fields
    assert fields["fresh_probability"] == "must be a number, got a string"
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    budget = {"name": "b1", "owner": user.username, "max_concurrent_pods": "2", "gpu_hours_cap": "1.5"}
    assert set(_fields(api_client.post("/api/budgets/", budget, format="json"))) == {
        "max_concurrent_pods",
        "gpu_hours_cap",
    }
    study = {"task": task.id, "budget": 1, "start": "2010-01-04", "end": "2020-12-31", "first_test_year": "2018"}
    assert "first_test_year" in _fields(api_client.post("/api/studies/", study, format="json"))
    # JSON 2.0 is a whole number (as the trainer's bounds count it); a form body's values are all text
    assert api_client.post(f"/api/runs/{run_id}/scale/", {"num_pods": 2.0}, format="json").json()["num_pods"] == 2
    assert api_client.post(f"/api/runs/{run_id}/scale/", {"num_pods": "3"}, format="multipart").json()["num_pods"] == 3


def test_a_body_that_is_not_an_object_is_a_400_saying_what_it_is(api_client, run_id):
    for url in (f"/api/runs/{run_id}/annotate/", f"/api/runs/{run_id}/stop/", "/api/runs/", "/api/tasks/"):
        for body in ([1, 2], "text", 5):
            response = api_client.post(url, body, format="json")
            assert response.status_code == 400, (url, body, response.status_code)
            assert "must be a JSON object" in str(response.json()), (url, body, response.json())


def test_an_action_that_takes_no_body_refuses_one(api_client, run_id):
    before = api_client.get(f"/api/runs/{run_id}/").json()["status"]
    for action in ("start", "pause", "resume"):
        fields = _fields(api_client.post(f"/api/runs/{run_id}/{action}/", {"now": True}, format="json"))
        assert "now" in fields, (action, fields)
        assert _fields(api_client.post(f"/api/runs/{run_id}/{action}/", 5, format="json")), action
    assert api_client.get(f"/api/runs/{run_id}/").json()["status"] == before  # nothing was started


def test_budgets_refuse_unknown_and_read_only_keys(api_client, make_budget, user):
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    budget = make_budget()
    body = {"name": "b1", "owner": user.username, "env_step_cap": 5_000_000, "max_concurrent_pods": 2}
    assert "bogus" in _fields(api_client.post("/api/budgets/", {**body, "bogus": 1}, format="json"))
    assert "env_steps_used" in _fields(api_client.post("/api/budgets/", {**body, "env_steps_used": 9}, format="json"))
    assert "nmae" in _fields(api_client.patch(f"/api/budgets/{budget.id}/", {"nmae": "x"}, format="json"))
    assert "x" in _fields(api_client.post(f"/api/budgets/{budget.id}/end/", {"x": 1}, format="json"))
    assert api_client.get(f"/api/budgets/{budget.id}/").json()["ended_at"] is None  # a typo ends nothing
    assert api_client.post(f"/api/budgets/{budget.id}/end/", {}, format="json").status_code == 200


def test_thousands_of_bad_keys_give_a_short_answer(api_client, dataset):
    splits = {
        "train": ["2016-01-04", "2018-12-31"],
        "validation": ["2019-01-02", "2019-12-31"],
        "test": ["2020-01-02", "2020-12-31"],
    }
    body = {"name": "t", "dataset": dataset.id, "splits": splits, "hyperparameters": {f"h{i}": 1 for i in range(5000)}}
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 400
    assert len(response.content) < 20_000, len(response.content)  # was 11 MB for 20,000 keys
    fields = response.json()["fields"]
    assert "hyperparameters.h0" in fields and len(fields) <= 23
    assert "more" in fields.get("more_errors", "") or "more keys" in fields.get("hyperparameters", "")

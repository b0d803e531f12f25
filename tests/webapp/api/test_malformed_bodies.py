"""A malformed API body (not JSON, nested deeper than ``PADDOCK_JSON_MAX_DEPTH``, an integer
longer than Python reads, or not a JSON object) is a 400 filed under ``fields.body`` with a
plain message, on every endpoint alike: the serving endpoint included, and never with Python's
advice to raise the interpreter's integer limit."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


BODIES = {
    "broken JSON": ('{"name": ', "not valid JSON"),
    "nested 40 levels": ("[" * 40 + "]" * 40, "JSON nested deeper than 32 levels (PADDOCK_JSON_MAX_DEPTH)"),
    "nested 100,000 levels": ("[" * 100_000, "JSON nested deeper than 32 levels (PADDOCK_JSON_MAX_DEPTH)"),
    "an integer of 5,001 digits": ('{"num_pods": 1' + "0" * 5000 + "}", "integer longer than 4,300 digits"),
    "a list": ("[1, 2]", "the request body must be a JSON object, got a list"),
    "a string": ('"run"', "the request body must be a JSON object, got a string"),
}
ENDPOINTS = ["/api/tasks/", "/api/runs/", "/api/backtests/", "/api/datasets/", "/api/budgets/"]


@pytest.mark.parametrize("case", list(BODIES))
def test_a_malformed_body_is_a_400_under_body_with_a_plain_message_everywhere(api_client, case, no_tracebacks):
    body, expected = BODIES[case]
    for url in ENDPOINTS:
        response = api_client.post(url, body, content_type="application/json")
        assert response.status_code == 400, url
        answer = response.json()
        assert list(answer["fields"]) == ["body"], (url, answer)
        assert expected in answer["fields"]["body"], (url, answer)
        assert answer["error"] == f"body: {answer['fields']['body']}"
        assert "sys.set_int_max_str_digits" not in response.content.decode()


def test_a_malformed_act_body_is_filed_under_body_as_on_the_other_endpoints(api_client, world, no_tracebacks):
    url = f"/api/agents/{world.agents[0].id}/act"
    for case in ("broken JSON", "nested 40 levels", "an integer of 5,001 digits", "a list"):
        body, expected = BODIES[case]
        response = api_client.post(url, body, content_type="application/json")
        assert response.status_code == 400, case
        assert list(response.json()["fields"]) == ["body"], (case, response.json())
        assert expected.split(", got")[0] in response.json()["fields"]["body"], case


def test_a_nested_object_that_is_not_one_is_named_by_its_own_field(api_client, dataset):
    response = api_client.post("/api/tasks/", {"name": "t", "dataset": dataset.id, "splits": [1, 2]}, format="json")
    assert response.status_code == 400
    assert "body" not in response.json()["fields"]

"""An object id in a request body (``dataset`` of a task, ``task`` and ``budget`` of a run) that
is not a whole number in range is a 400 naming the field, never a 500 nor another object."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

# raw JSON: 1e400 parses as infinity, which no id can be; 1.5 once read as id 1
BAD_IDS = ["1e400", "-1e400", "1.5", "1.0", "true", "123456789012345678901234567890", '"abc"', "[1]"]


def _post(client, path: str, fields: dict[str, str]) -> dict:
    body = "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"
    response = client.post(path, body, content_type="application/json")
    assert response.status_code == 400, (fields, response.status_code, response.content[:500])
    return response.json()


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_task_with_a_dataset_id_that_is_no_whole_number_is_a_400_naming_dataset(api_client, world, bad):
    body = _post(
        api_client,
        "/api/tasks/",
        {"name": '"bad id"', "dataset": bad, "tickers": '["AAPL", "MSFT"]', "kind": '"portfolio"'},
    )
    assert "dataset" in body["fields"], body


@pytest.mark.parametrize("field", ["task", "budget"])
@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_run_with_a_task_or_budget_id_that_is_no_whole_number_is_a_400_naming_it(api_client, world, field, bad):
    fields = {"task": str(world.run.task_id), "budget": str(world.run.budget_id), "num_pods": "1"}
    fields[field] = bad
    body = _post(api_client, "/api/runs/", fields)
    assert field in body["fields"], body


def test_an_id_as_digits_in_a_string_still_names_the_object(api_client, world):
    fields = {"task": f'"{world.run.task_id}"', "budget": f'"{world.run.budget_id}"', "num_pods": "0"}
    body = _post(api_client, "/api/runs/", fields)  # num_pods 0 is refused: the ids were read
    assert "task" not in body["fields"] and "budget" not in body["fields"], body

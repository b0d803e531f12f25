"""``NaN`` and ``Infinity`` are not JSON (RFC 8259 sec. 6), though Python's ``json`` writes them:
a body holding one is a 400 naming the field that holds it, never a 500 nor a field-less error."""

from __future__ import annotations

import pytest

from webapp.core.parsers import nonfinite_field

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"name": "t", "hyperparameters": {"learning_rate": NaN}}', "hyperparameters.learning_rate"),
        ('{"name": "t", "tickers": ["AAPL", Infinity]}', "tickers[1]"),
        ('{"name": "t", "splits": {"train": [-Infinity, 1]}}', "splits.train[0]"),
    ],
)
def test_a_task_body_with_a_nonfinite_number_is_a_400_naming_its_field(api_client, body, field):
    response = api_client.post("/api/tasks/", body, content_type="application/json")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert "not a number JSON allows" in response.json()["error"]


def test_a_run_body_with_infinity_in_the_mutation_factors_names_it(api_client):
    body = '{"task": 1, "budget": 1, "mutation": {"factors": [0.8, Infinity]}}'
    response = api_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["mutation.factors[1]"]


def test_a_body_that_is_not_json_at_all_is_filed_under_body_with_the_decoders_reason(api_client):
    response = api_client.post("/api/tasks/", '{"name": ', content_type="application/json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"body": "not valid JSON: Expecting value (line 1, column 10)"}


def test_the_first_nonfinite_value_in_body_order_is_named():
    assert nonfinite_field('{"a": 1, "b": [2, NaN], "c": Infinity}') == ("b[1]", "NaN")
    assert nonfinite_field("NaN") == ("non_field_errors", "NaN")
    assert nonfinite_field('{"a": 1}') is None
    assert nonfinite_field("[" * 100_000) is None  # too deep or broken: said as such, under body

"""What ``OPTIONS /api/datasets/`` says a create takes is what ``POST`` takes (it described the
dataset's read-only fields, start_date, end_date and loader_options among them, which POST refuses
as unknown), and a requested ticker no file holds is an error on ``tickers``, not on ``paths``."""

from __future__ import annotations

import pytest

from tests.conftest import DOW30_FILE

pytestmark = pytest.mark.django_db


def test_options_lists_the_fields_a_create_takes_and_post_takes_each_of_them(api_client):
    described = api_client.options("/api/datasets/").json()["actions"]["POST"]
    writable = {name for name, field in described.items() if not field["read_only"]}
    assert writable == {"name", "file", "paths", "membership", "tickers", "timezone", "bar_label", "session"}
    assert not {"start_date", "end_date", "loader_options"} & set(described)
    refused = api_client.post("/api/datasets/", {"name": "x", "start_date": "2020-01-01"}, format="json")
    assert refused.status_code == 400 and "start_date" in refused.json()["fields"]
    for name in writable:  # none of them is an unknown field
        answer = api_client.post("/api/datasets/", {"name": "x", name: None}, format="json").json()
        assert "unknown field" not in str(answer["fields"].get(name, "")), (name, answer)


def test_a_requested_ticker_no_file_holds_is_an_error_on_tickers(api_client, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    body = {"name": "x", "paths": [DOW30_FILE], "tickers": ["AAPL", "NOPE"]}
    response = api_client.post("/api/datasets/", body, format="json")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert list(fields) == ["tickers"] and "NOPE" in fields["tickers"], fields


def test_a_file_that_is_not_there_is_still_an_error_on_paths(api_client, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    response = api_client.post(
        "/api/datasets/", {"name": "x", "paths": ["nope.csv"], "tickers": ["AAPL"]}, format="json"
    )
    assert response.status_code == 400
    assert all(name.startswith("paths") for name in response.json()["fields"]), response.json()

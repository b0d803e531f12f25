"""Issue 28: every request limit is a 400/413 naming the limit (JSON on the API, a page on the
site), met before the body is read where the headers tell, never a 500 or a traceback in the log.

Who may see what: ``user`` (ada) is signed in (``api_client`` for the API, ``client`` logged in
for the pages); the limits apply before anyone's objects are looked up.
"""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile

from webapp.market.models import Dataset

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


@pytest.fixture
def page_client(client, user):
    client.force_login(user)
    return client


def _limit(response) -> str:
    body = response.json()
    assert isinstance(body["error"], str) and isinstance(body["fields"], dict), body
    return body["details"]["limit"]


def _files(n: int) -> dict:
    return {f"file{i}": SimpleUploadedFile(f"f{i}.csv", b"date,tic,close\n") for i in range(n)}


def test_101_file_parts_are_a_400_naming_the_files_limit(api_client, page_client, no_tracebacks):
    api = api_client.post("/api/datasets/", {"name": "x", **_files(101)}, format="multipart")
    assert api.status_code == 400 and _limit(api) == "DATA_UPLOAD_MAX_NUMBER_FILES"
    assert "100" in api.json()["error"]
    page = page_client.post("/datasets/", {"name": "x", **_files(101)})
    assert page.status_code == 400
    assert "DATA_UPLOAD_MAX_NUMBER_FILES" in page.content.decode() and "Request refused" in page.content.decode()
    assert not Dataset.objects.exists()


def test_1001_form_fields_are_a_400_naming_the_fields_limit(api_client, page_client, no_tracebacks):
    fields = {f"f{i}": "1" for i in range(1001)}
    api = api_client.post("/api/datasets/", fields, format="multipart")
    assert api.status_code == 400 and _limit(api) == "DATA_UPLOAD_MAX_NUMBER_FIELDS"
    form = page_client.post("/datasets/", fields)  # application/x-www-form-urlencoded
    assert form.status_code == 400 and "DATA_UPLOAD_MAX_NUMBER_FIELDS" in form.content.decode()
    query = page_client.get("/runs/?" + "&".join(f"q{i}=1" for i in range(1001)))
    assert query.status_code == 400 and "DATA_UPLOAD_MAX_NUMBER_FIELDS" in query.content.decode()


def test_an_11_mb_act_body_is_a_413_naming_the_body_limit_before_the_agent_is_looked_up(api_client, no_tracebacks):
    body = json.dumps({"observations": [[0.5] * 1000] * 2300})
    assert len(body) > 11 * 1000 * 1000
    response = api_client.post("/api/agents/999999/act/", body, content_type="application/json")
    assert response.status_code == 413 and _limit(response) == "PADDOCK_REQUEST_MAX_BYTES"
    assert "10,485,760 bytes" in response.json()["error"]


def test_an_upload_over_the_cap_is_a_413_naming_the_setting_and_stores_nothing(
    api_client, page_client, settings, no_tracebacks
):
    settings.PADDOCK_UPLOAD_MAX_BYTES = 64 * 1024
    big = b"date,tic,open,high,low,close,volume\n" + b"2020-01-02,AAA,1,1,1,1,100\n" * 5000  # ~140 KB
    # The body is under the cap plus the form allowance, so the headers let it in: the upload
    # handler stops it while it streams.
    api = api_client.post("/api/datasets/", {"name": "big", "file": SimpleUploadedFile("big.csv", big)})
    assert api.status_code == 413 and _limit(api) == "PADDOCK_UPLOAD_MAX_BYTES"
    assert api.json()["fields"] == {"file": "larger than 65,536 bytes"}
    page = page_client.post("/datasets/", {"name": "big", "file": SimpleUploadedFile("big.csv", big)})
    assert page.status_code == 413 and "PADDOCK_UPLOAD_MAX_BYTES" in page.content.decode()
    assert not Dataset.objects.exists()


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(api_client, settings, no_tracebacks):
    settings.PADDOCK_UPLOAD_MAX_BYTES = 64 * 1024
    # The client says 10 GB and sends nothing of it: the answer comes from the header alone.
    response = api_client.generic(
        "POST",
        "/api/datasets/",
        b"",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(10 * 1024**3),
    )
    assert response.status_code == 413 and _limit(response) == "PADDOCK_UPLOAD_MAX_BYTES"
    assert "10,737,418,240 bytes" in response.json()["error"]


def _asgi_request(path: str, headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[int, bytes]:
    """One HTTP request through the real ASGI application (``webapp/config/asgi.py``)."""
    from asgiref.sync import async_to_sync

    from webapp.config.asgi import django_asgi_app

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }

    async def run() -> tuple[int, bytes]:
        app = ApplicationCommunicator(django_asgi_app, scope)
        for i, chunk in enumerate(chunks):
            await app.send_input({"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1})
        start = await app.receive_output(30)
        body = b""
        while True:
            message = await app.receive_output(30)
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await app.wait(5)
        return start["status"], body

    return async_to_sync(run)()


def test_the_asgi_server_refuses_a_long_declared_body_at_once_and_cuts_off_one_sent_without_a_length(
    settings, no_tracebacks
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    json_type = (b"content-type", b"application/json")
    # Declared too long: answered before any body chunk is sent.
    status, body = _asgi_request("/api/tasks/", [json_type, (b"content-length", b"999999999")], [])
    assert status == 413 and json.loads(body)["details"]["limit"] == "PADDOCK_REQUEST_MAX_BYTES"
    # No Content-Length (chunked): counted as it streams, cut off past the limit.
    status, body = _asgi_request("/api/tasks/", [json_type], [b" " * 40_000] * 3)
    assert status == 413 and json.loads(body)["details"]["limit"] == "PADDOCK_REQUEST_MAX_BYTES"
    # A page gets a page.
    status, body = _asgi_request("/datasets/", [(b"content-length", b"999999999")], [])
    assert status == 413 and b"Request refused" in body


@pytest.mark.parametrize("depth", [40, 3000])
def test_deeply_nested_json_is_a_400_naming_the_nesting_limit(api_client, depth, no_tracebacks):
    body = "[" * depth + "]" * depth
    response = api_client.post("/api/tasks/", body, content_type="application/json")
    assert response.status_code == 400
    assert "PADDOCK_JSON_MAX_DEPTH" in response.json()["error"]


def test_a_number_as_a_name_is_refused_naming_the_field(api_client, staff_client, no_tracebacks):
    for client, url, body in [
        (staff_client, "/api/budgets/", {"name": 123, "max_concurrent_pods": 1}),  # budgets: staff write
        (api_client, "/api/tasks/", {"name": 123, "dataset": 1, "tickers": ["AAPL"], "splits": {}}),
        (api_client, "/api/datasets/", {"name": 123, "paths": ["x.csv"]}),
    ]:
        response = client.post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        assert response.json()["fields"]["name"] == "must be a string, got a number", url


def test_a_400_digit_generation_steps_is_a_400_naming_the_field(api_client, task, make_budget, no_tracebacks):
    budget = make_budget()
    body = f'{{"task": {task.pk}, "budget": {budget.pk}, "num_pods": 1, "generation_steps": {"9" * 400}}}'
    response = api_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert list(fields) == ["generation_steps"] and "400-digit" in fields["generation_steps"]
    assert len(response.content) < 1000, "the message does not grow with the number"


def test_a_400_digit_float_hyperparameter_is_a_400_saying_finite(api_client, dataset, no_tracebacks):
    # a 400-digit integer has no float: learning_rate 99...9 raised OverflowError (a 500)
    splits = {"train": ["2018-06-01", "2019-12-31"], "validation": ["2020-01-01", "2020-06-30"]}
    splits["test"] = ["2020-07-01", "2020-12-31"]
    body = {"name": "t", "dataset": dataset.id, "splits": splits, "algorithm": "ppo"}
    text = json.dumps({**body, "hyperparameters": {"learning_rate": 0}}).replace(
        '"learning_rate": 0', f'"learning_rate": {"9" * 400}'
    )
    response = api_client.post("/api/tasks/", text, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    why = response.json()["fields"]["hyperparameters.learning_rate"]
    assert why == "must be a finite number, got a 400-digit number"

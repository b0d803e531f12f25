"""Issue 13, item 8: the whole REST API under a property-based fuzzer (schemathesis).

Every operation of the OpenAPI schema served at ``/api/schema/`` is called with generated
path parameters, query strings and bodies, authenticated with ada's API token, through
Django's WSGI handler on the test database (ada owns a dataset, task, budget, started run and
agents, so some generated ids hit real objects). A bounded number of examples per operation
keeps it fast. Two properties must hold for every response:

- never HTTP 500 (a server error is a bug, whatever the input);
- every 4xx is in the documented error shape ``{"error": str, "fields": {...}}`` (docs/reference/api.md).

Issue 28 adds: every operation that takes a body refuses an oversize body (413), 101 files,
1,001 fields and 3,000 nested ``[`` (400), each naming its limit; and a stateful pass, sequences
of calls along the links schemathesis infers between operations, with the same two properties.

Who may see what: only ``user`` (ada) is authenticated here.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 12
"""Examples per operation: enough to hit empty, wrong-typed and huge values of each field."""

app = get_wsgi_application()


def _served_schema() -> dict:
    """The schema ``/api/schema/`` serves (drf-spectacular's generator, rendered to JSON)."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


schema = schemathesis.openapi.from_dict(_served_schema())


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """As Django's test client does: the WSGI handler must not close the test transaction's
    database connection at the start and end of each request."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


@pytest.mark.both_databases
def test_the_served_schema_is_the_one_fuzzed(api_client):
    served = api_client.get("/api/schema/?format=json")
    assert served.status_code == 200
    assert sorted(json.loads(served.content)["paths"]) == sorted(schema.raw_schema["paths"])


def check_error_shape(response, case) -> None:
    """The two properties of the module doc, with the request named in the failure."""
    where = f"{case.method} {case.formatted_path}"
    assert response.status_code < 500, f"{where} answered {response.status_code}: {response.text[:500]}"
    if 400 <= response.status_code < 500:
        try:
            body = json.loads(response.text)
        except ValueError:
            pytest.fail(f"{where} answered {response.status_code} with a non-JSON body: {response.text[:300]!r}")
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], (where, body)
        assert isinstance(body.get("fields"), dict), (where, body)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
def test_no_operation_answers_500_and_every_4xx_has_the_error_shape(case, token, world):
    response = case.call(app=app, headers={"Authorization": f"Token {token}"})
    assert response.status_code != 401, "the fuzzer must test the API signed in"
    check_error_shape(response, case)


# --- request limits at every operation that takes a body (issue 28) ---------------------------

BODY_METHODS = ("post", "put", "patch")


def _operations_with_a_body() -> list[tuple[str, str]]:
    return sorted(
        (method.upper(), path)
        for path, item in schema.raw_schema["paths"].items()
        for method, operation in item.items()
        if method in BODY_METHODS and "requestBody" in operation
    )


def _concrete(path: str, world) -> str:
    """``path`` with every ``{parameter}`` an id of ada's (the world's run, agent, dataset, task
    or budget; a budget path given a run's id found no budget once the two sequences drifted)."""
    ids = {
        "run": world.run.pk,
        "agent": world.agents[0].pk,
        "dataset": world.dataset.pk,
        "task": world.task.pk,
        "budget": world.run.budget_id,
    }
    kind = next((k for k in ids if f"/{k}s/" in path or f"/{k}" in path), "run")
    out = path
    while "{" in out:
        start, end = out.index("{"), out.index("}")
        out = out[:start] + str(ids[kind]) + out[end + 1 :]
    return out


@pytest.mark.both_databases
def test_every_operation_refuses_oversize_bodies_file_floods_field_floods_and_deep_json_by_name(
    api_client, staff_client, world, settings
):
    # One world for every operation (a world per operation would cost seconds each).
    failures = []
    for method, path in _operations_with_a_body():
        url = _concrete(path, world)
        # Budgets are written by staff; anyone else's PUT/PATCH is refused (403) before its
        # body is parsed (Django parses only a POST's form body up front).
        send = getattr(staff_client if path.startswith("/api/budgets/") else api_client, method.lower())
        # A small body limit for the oversize case, so that it is a few KB: the check is the same at any size.
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
        oversize = send(url, json.dumps({"x": "y" * 5000}), content_type="application/json")
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
        files = {f"f{i}": SimpleUploadedFile(f"{i}.csv", b"a") for i in range(101)}
        cases = {
            "PADDOCK_REQUEST_MAX_BYTES": (413, oversize),
            "DATA_UPLOAD_MAX_NUMBER_FILES": (400, send(url, files, format="multipart")),
            "DATA_UPLOAD_MAX_NUMBER_FIELDS": (400, send(url, {f"f{i}": "1" for i in range(1001)}, format="multipart")),
            "PADDOCK_JSON_MAX_DEPTH": (400, send(url, "[" * 3000 + "]" * 3000, content_type="application/json")),
        }
        for limit, (expected, response) in cases.items():
            body = json.loads(response.content) if response["Content-Type"].startswith("application/json") else {}
            if response.status_code != expected or limit not in str(body.get("error")) or "fields" not in body:
                failures.append(f"{method} {url} ({limit}): {response.status_code} {response.content[:200]!r}")
    assert failures == []


# --- stateful: sequences of calls that follow the schema's links ------------------------------

STATEFUL_EXAMPLES = 8
STATEFUL_STEPS = 4


@pytest.mark.both_databases
def test_call_sequences_never_answer_500(token, world):
    """Schemathesis chains operations by the links it infers (a created object's id used by the
    next call: create a task, then read, run or delete it), so generated calls reach real
    objects made in the same sequence, not only ids that do not exist."""
    headers = {"Authorization": f"Token {token}"}

    class Machine(schema.as_state_machine()):
        def get_call_kwargs(self, case):
            return {"app": app, "headers": headers}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            check_error_shape(response, case)

    Machine.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_STEPS,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )

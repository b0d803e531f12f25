"""Issue 13, item 8: the whole REST API under a property-based fuzzer (schemathesis).

Every operation of the OpenAPI schema served at ``/api/schema/`` is called with generated
path parameters, query strings and bodies, authenticated with ada's API token, through
Django's WSGI handler on the test database (ada owns a dataset, task, budget, started run and
agents, so some generated ids hit real objects). A bounded number of examples per operation
keeps it fast. Two properties must hold for every response:

- never HTTP 500 (a server error is a bug, whatever the input);
- every 4xx is in the documented error shape ``{"error": str, "fields": {...}}`` (README, API).

Who may see what: only ``user`` (ada) is authenticated here.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
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

"""Sign-in everywhere: API tokens, sessions, and the OpenAPI docs."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url", ["/api/runs/", "/api/agents/", "/api/datasets/", "/api/tasks/", "/api/budgets/", "/api/schema/?format=json"]
)
def test_anonymous_api_requests_are_refused_in_the_error_format(url):
    response = APIClient().get(url)
    # 401 with a challenge says "authenticate and retry"; a 403 would say "never".
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert set(response.json()) == {"error", "fields"}


def test_a_wrong_token_is_a_401_and_a_browser_session_still_works_with_csrf(user):
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert bad.get("/api/runs/").status_code == 401
    browser = APIClient(enforce_csrf_checks=True)
    browser.login(username="ada", password="pw-ada-12345")
    assert browser.get("/api/runs/").status_code == 200
    # A session-authenticated write without the CSRF token is refused, with the token it passes.
    refused = browser.post("/api/tasks/", {}, format="json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    csrf = browser.get("/runs/new/").cookies["csrftoken"].value
    checked = browser.post("/api/tasks/", {}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert checked.status_code == 400, "past CSRF and sign-in, on to input validation"


@pytest.mark.parametrize(
    "url", ["/", "/runs/", "/runs/new/", "/budgets/", "/datasets/", "/account/token/", "/api/docs/"]
)
def test_anonymous_pages_redirect_to_the_login_page(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_user_gets_a_token_with_username_and_password_and_uses_it(user):
    anonymous = APIClient()
    response = anonymous.post("/api/auth/token/", {"username": "ada", "password": "pw-ada-12345"}, format="json")
    assert response.status_code == 200
    token = response.json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/runs/").status_code == 200


def test_a_wrong_password_gets_no_token(user):
    response = APIClient().post("/api/auth/token/", {"username": "ada", "password": "nope"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]


def test_the_token_page_creates_shows_and_replaces_the_token(client, user):
    client.force_login(user)
    assert b"no API token yet" in client.get("/account/token/").content
    client.post("/account/token/")
    first = user.auth_token.key
    assert first.encode() in client.get("/account/token/").content
    client.post("/account/token/", {"regenerate": "1"})
    user.refresh_from_db()
    assert user.auth_token.key != first


def test_forms_require_csrf_tokens(user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/account/token/").status_code == 403


def test_the_schema_and_swagger_ui_are_served_offline_to_signed_in_users(client, api_client, user):
    schema = api_client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    body = schema.json()
    paths = body["paths"]
    for path in [
        "/api/runs/",
        "/api/runs/{id}/scale/",
        "/api/agents/{id}/bundle/",
        "/api/datasets/",
        "/api/auth/token/",
    ]:
        assert path in paths, path
    assert "snapshot.request" in body["info"]["description"]
    client.force_login(user)
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"drf_spectacular_sidecar" in docs.content and b"cdn" not in docs.content.lower()


def test_a_token_request_with_a_key_it_does_not_take_is_a_400_naming_it_and_gives_no_token(user):
    # DRF's ObtainAuthToken dropped unknown keys: {"usernme": ...} answered as a missing username,
    # and a right password with a stray key got a token, unlike every other body of the API.
    anonymous = APIClient()
    body = {"username": "ada", "password": "pw-ada-12345", "remember": True}
    response = anonymous.post("/api/auth/token/", body, format="json")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert (
        set(fields) == {"remember"} and "unknown field (this endpoint takes: password, username)" in fields["remember"]
    )
    assert "token" not in response.json()
    assert "token" in anonymous.post("/api/auth/token/", {**body, "token": "x"}, format="json").json()["fields"]
    typed = anonymous.post("/api/auth/token/", {"username": 123, "password": "pw-ada-12345"}, format="json")
    assert typed.status_code == 400 and typed.json()["fields"] == {"username": "must be a string, got a number"}
    listed = anonymous.post("/api/auth/token/", [1], format="json")
    assert listed.status_code == 400 and "must be a JSON object, got a list" in listed.json()["error"]

"""Serving from the browser: the agent page's serving card, a serve token made on the tokens page
for that agent, a call with it over real HTTP, and the call count on the agent page."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.e2e.conftest import make_serve_token
from tests.webapp.conftest import make_world, trained_checkpoint  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_serve_token_made_in_the_browser_calls_the_agent_and_the_page_counts_it(
    page,
    live_url,
    e2e_user,
    login,
    screenshot,
    monkeypatch,
    trained_checkpoint,  # noqa: F811
):
    from webapp.runs import services

    monkeypatch.setattr(services.budgets, "send_generation_tasks", lambda ids: None)  # no worker takes them
    world = make_world(e2e_user, "serving", checkpoint=trained_checkpoint, scores=[1.0])
    agent = world.agents[0]
    login(page, e2e_user)
    page.goto(f"/agents/{agent.id}/")
    assert page.text_content("#serve-calls").strip() == "0"
    assert f"/api/agents/{agent.id}/act" in page.text_content("#serve-url")
    key = make_serve_token(page, agent.id, "browser bot")

    request = urllib.request.Request(
        f"{live_url}/api/agents/{agent.id}/act",
        data=json.dumps({"date": "2020-07-15", "cash": 100_000}).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        out = json.loads(response.read())
    assert out["date"] == "2020-07-15" and len(out["orders"]) == 3

    page.goto(f"/agents/{agent.id}/")
    assert page.text_content("#serve-calls").strip() == "1"
    screenshot(page, "agent-serving")

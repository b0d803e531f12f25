"""POST /api/agents/{id}/act: same numbers as load_agent, market states, permissions, rate limit,
call counts on the agent page, serve tokens.

Who may call: ada (owner of ``world``) with her session, account token or a serve token of hers
(one limited to another agent is refused); bob gets 404 for ada's agents, and a serve token is
refused everywhere else in the API.
"""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.core.files.storage import default_storage
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from webapp.engine import market as engine_market
from webapp.runs import services as runs_services
from webapp.serving import counters
from webapp.serving.models import ServeToken
from webapp.serving.selectors import agent_serve_stats

pytestmark = pytest.mark.django_db

DAY = "2020-07-15"  # a day of the tiny task's test split


def _token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def agent(world):
    return world.agents[1]


def test_observations_answer_load_agents_actions_to_1e_5(agent, api_client, bundle):
    obs = np.random.default_rng(0).normal(size=(256, bundle.obs_dim)).astype(np.float32)
    response = api_client.post(f"/api/agents/{agent.id}/act", {"observations": obs.tolist()}, format="json")
    assert response.status_code == 200, response.json()
    np.testing.assert_allclose(np.array(response.json()["actions"]), bundle.act(obs), atol=1e-5)
    assert response.json()["algorithm"] == "ppo"


def test_a_dataset_day_answers_orders_prices_and_the_observation(agent, api_client, bundle, settings, data_dir):
    settings.PADDOCK_DATA_DIR = data_dir
    body = {"date": DAY, "cash": 50_000, "holdings": {"AAPL": 3}}
    response = api_client.post(f"/api/agents/{agent.id}/act/", body, format="json")
    assert response.status_code == 200, response.json()
    out = response.json()
    assert out["date"] == DAY and [o["ticker"] for o in out["orders"]] == ["AAPL", "MSFT", "JPM"]
    obs = np.array(out["observation"], dtype=np.float32)
    np.testing.assert_allclose(out["action"], bundle.act(obs), atol=1e-5)
    assert all(o["price"] == out["prices"][o["ticker"]] for o in out["orders"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"observations": [[0.0, 1.0]]}, "observations"),
        ({"date": "2020-07-04"}, "date"),  # a holiday
        ({"date": f"{DAY} 10:00"}, "date"),  # a bar time for an agent of daily data
        ({"date": 20200715}, "date"),
        ({"date": DAY, "holdings": {"TSLA": 1}}, "holdings"),
        ({"bars": {"AAPL": []}}, "bars"),
        ([1, 2], "body"),
        ({"date": DAY, "holding": {"AAPL": 3}}, "holding"),  # misspelt: not an empty portfolio
        ({"observations": [[0.0]], "cash": 5}, "cash"),  # a batch carries no portfolio
        ({"date": DAY, "weights": {"AAPL": 1.0}}, "weights"),  # a stock-trading agent holds shares
    ],
)
def test_bad_bodies_are_400s_naming_the_field_and_count_as_errors(agent, api_client, body, field):
    response = api_client.post(f"/api/agents/{agent.id}/act", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert agent_serve_stats(agent)["errors"] == 1


def test_other_users_get_404_and_anonymous_401(agent, other_client):
    assert other_client.post(f"/api/agents/{agent.id}/act", {"observations": [[0]]}, format="json").status_code == 404
    assert APIClient().post(f"/api/agents/{agent.id}/act", {"observations": [[0]]}, format="json").status_code == 401


@pytest.mark.both_databases  # the call counters' flush (Greatest over a null timestamp)
def test_account_tokens_and_serve_tokens_of_the_owner_may_call(agent, user, bundle):
    obs = {"observations": np.zeros((1, bundle.obs_dim)).tolist()}
    account = Token.objects.create(user=user)
    assert _token_client(account.key).post(f"/api/agents/{agent.id}/act", obs, format="json").status_code == 200
    serve = ServeToken.objects.create(owner=user, name="bot")
    assert _token_client(serve.key).post(f"/api/agents/{agent.id}/act", obs, format="json").status_code == 200
    counters.flush()
    serve.refresh_from_db()
    assert serve.calls == 1 and serve.last_used_at is not None


def test_a_serve_token_limited_to_one_agent_is_refused_for_another(world, user, bundle):
    one, other = world.agents[1], world.agents[2]
    serve = ServeToken.objects.create(owner=user, name="one agent", agent=one)
    obs = {"observations": np.zeros((1, bundle.obs_dim)).tolist()}
    client = _token_client(serve.key)
    assert client.post(f"/api/agents/{one.id}/act", obs, format="json").status_code == 200
    refused = client.post(f"/api/agents/{other.id}/act", obs, format="json")
    assert refused.status_code == 403 and f"#{one.id}" in refused.json()["error"]


def test_a_serve_token_opens_nothing_else_of_the_api(user, world):
    serve = ServeToken.objects.create(owner=user, name="bot")
    client = _token_client(serve.key)
    assert client.get("/api/runs/").status_code == 401
    assert client.get(f"/api/agents/{world.agents[1].id}/bundle/").status_code == 401


def test_a_serve_token_of_another_user_cannot_call_adas_agent(agent, other_user, bundle):
    serve = ServeToken.objects.create(owner=other_user, name="bob's bot")
    obs = {"observations": np.zeros((1, bundle.obs_dim)).tolist()}
    assert _token_client(serve.key).post(f"/api/agents/{agent.id}/act", obs, format="json").status_code == 404


def test_calls_over_the_per_token_limit_get_429_with_retry_after(agent, user, bundle, settings):
    settings.PADDOCK_SERVE_RATE_LIMIT = 3
    serve = ServeToken.objects.create(owner=user, name="limited")
    client = _token_client(serve.key)
    obs = {"observations": np.zeros((1, bundle.obs_dim)).tolist()}
    codes = [client.post(f"/api/agents/{agent.id}/act", obs, format="json") for _ in range(5)]
    statuses = [r.status_code for r in codes]
    # a minute boundary may fall inside the loop and open a new window: at most 2 refusals
    assert statuses.count(200) >= 3 and 429 in statuses, statuses
    refused = next(r for r in codes if r.status_code == 429)
    assert 1 <= int(refused["Retry-After"]) <= 60
    # another token has its own count
    fresh = _token_client(ServeToken.objects.create(owner=user, name="other").key)
    assert fresh.post(f"/api/agents/{agent.id}/act", obs, format="json").status_code == 200


def test_the_agent_page_shows_the_call_counts(agent, api_client, client, user, bundle):
    obs = {"observations": np.zeros((4, bundle.obs_dim)).tolist()}
    for _ in range(2):
        api_client.post(f"/api/agents/{agent.id}/act", obs, format="json")
    client.force_login(user)
    page = client.get(f"/agents/{agent.id}/").content.decode()
    assert 'id="serve-calls">2<' in page and 'id="serve-observations">8<' in page
    assert f"/api/agents/{agent.id}/act" in page


def test_the_serve_tokens_page_creates_limits_and_revokes_tokens(agent, client, user, other_world):
    client.force_login(user)
    page = client.post("/account/serve-tokens/", {"name": "bot", "agent": str(agent.id)})
    assert page.status_code == 200
    token = ServeToken.objects.get(owner=user)
    assert token.agent_id == agent.id and token.key in page.content.decode()
    bad = client.post("/account/serve-tokens/", {"name": "x", "agent": str(other_world.agents[0].id)})
    assert "not one of your agents" in bad.content.decode() and ServeToken.objects.count() == 1
    client.post("/account/serve-tokens/", {"revoke": str(token.id)})
    assert not ServeToken.objects.exists()


def test_a_changed_bundle_is_reloaded(agent, api_client, bundle):
    """The session cache keys on the bundle file; exporting it again (new file) reloads it."""
    obs = {"observations": np.ones((1, bundle.obs_dim)).tolist()}
    api_client.post(f"/api/agents/{agent.id}/act", obs, format="json")
    loads = engine_market._serving_cache.loads
    api_client.post(f"/api/agents/{agent.id}/act", obs, format="json")
    assert engine_market._serving_cache.loads == loads  # cached
    path = Path(default_storage.path(runs_services.agent_bundle(agent).name))
    data = path.read_bytes()
    assert zipfile.ZipFile(io.BytesIO(data)).namelist()
    time.sleep(0.01)
    path.write_bytes(data)  # the same bytes rewritten: a new mtime, treated as a new bundle
    os.utime(path, ns=(time.time_ns(), time.time_ns()))
    api_client.post(f"/api/agents/{agent.id}/act", obs, format="json")
    assert engine_market._serving_cache.loads == loads + 1


def test_a_warm_up_day_of_the_train_split_answers_with_a_warning_naming_the_first_full_day(
    agent, api_client, settings, data_dir
):
    """The tiny task's dataset and train split start 2018-06-01; 2018-06-04, its second day, has
    2 days of history for the 63-day features, as the agent's training episodes did: 200 with
    a warning; the first full day it names answers without one."""
    settings.PADDOCK_DATA_DIR = data_dir
    response = api_client.post(f"/api/agents/{agent.id}/act", {"date": "2018-06-04"}, format="json")
    assert response.status_code == 200, response.json()
    (warning,) = response.json()["warnings"]
    assert "2 trading days of history, fewer than the 64" in warning
    first_full = warning.split("first day with full history is ", 1)[1].rstrip(".")
    ok = api_client.post(f"/api/agents/{agent.id}/act", {"date": first_full}, format="json")
    assert ok.status_code == 200 and "warnings" not in ok.json() and ok.json()["date"] == first_full

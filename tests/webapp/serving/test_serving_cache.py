"""The act endpoint's Redis cache and counters: a warm request reads no database row, and
revoking a token, deactivating its user, changing a token's agent limit or deleting an agent
takes effect on the very next request; counts reach the database only through the flush, and
the agent page shows them before it.

ada (``user``) owns ``world``'s agents; bob (``other_user``) owns none of them.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from trainer.artifacts.bundle_reader import load_agent
from webapp.serving import cache, counters, services
from webapp.serving.models import AgentServeStats, ServeToken
from webapp.serving.selectors import agent_serve_stats, serve_tokens_of

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def agent(world):
    return world.agents[1]


@pytest.fixture(autouse=True)
def obs_dim(world, api_client, tmp_path):
    """The agents' obs_dim, read from a downloaded bundle (all of ``world``'s agents share it)."""
    response = api_client.get(f"/api/agents/{world.agents[1].id}/bundle/")
    path = tmp_path / "agent.zip"
    path.write_bytes(b"".join(response.streaming_content))
    _DIM[0] = load_agent(path).obs_dim


_DIM = [0]


def _act(client: APIClient, agent, rows: int = 1):
    body = {"observations": np.zeros((rows, _DIM[0])).tolist()}
    return client.post(f"/api/agents/{agent.id}/act", body, format="json")


def test_a_warm_request_with_a_serve_token_reads_no_database_row(agent, user, django_assert_num_queries):
    client = _client(ServeToken.objects.create(owner=user, name="bot").key)
    assert _act(client, agent).status_code == 200  # fills the cache
    with django_assert_num_queries(0):
        assert _act(client, agent).status_code == 200


def test_a_warm_request_with_the_account_token_reads_no_database_row(agent, user, django_assert_num_queries):
    client = _client(Token.objects.create(user=user).key)
    assert _act(client, agent).status_code == 200
    with django_assert_num_queries(0):
        assert _act(client, agent).status_code == 200


def test_a_revoked_serve_token_is_refused_on_the_next_request(agent, user):
    token = ServeToken.objects.create(owner=user, name="bot")
    client = _client(token.key)
    assert _act(client, agent).status_code == 200
    services.serve_token_revoke(owner=user, token_id=token.id)
    assert _act(client, agent).status_code == 401


def test_a_deleted_account_token_is_refused_on_the_next_request(agent, user):
    token = Token.objects.create(user=user)
    client = _client(token.key)
    assert _act(client, agent).status_code == 200
    token.delete()
    assert _act(client, agent).status_code == 401


def test_a_deactivated_users_tokens_are_refused_on_the_next_request(agent, user):
    serve, account = ServeToken.objects.create(owner=user, name="bot"), Token.objects.create(user=user)
    for key in (serve.key, account.key):
        assert _act(_client(key), agent).status_code == 200
    user.is_active = False
    user.save()
    for key in (serve.key, account.key):
        assert _act(_client(key), agent).status_code == 401


def test_limiting_a_token_to_another_agent_applies_on_the_next_request(world, user):
    one, other = world.agents[1], world.agents[2]
    token = ServeToken.objects.create(owner=user, name="bot")
    client = _client(token.key)
    assert _act(client, one).status_code == 200
    token.agent = other
    token.save()
    assert _act(client, one).status_code == 403


def test_a_deleted_agent_answers_404_on_the_next_request(agent, user):
    client = _client(ServeToken.objects.create(owner=user, name="bot").key)
    assert _act(client, agent).status_code == 200
    agent.delete()
    assert _act(client, agent).status_code == 404


def test_a_changed_agent_is_read_from_the_database_again(agent, user):
    client = _client(ServeToken.objects.create(owner=user, name="bot").key)
    assert _act(client, agent).status_code == 200
    agent.score = 9.0  # any save of the agent drops its cached entry
    agent.save()
    with CaptureQueriesContext(connection) as queries:
        assert _act(client, agent).status_code == 200
    assert any('"runs_agent"' in q["sql"] for q in queries.captured_queries)


def test_the_owners_cached_agent_entry_never_opens_it_to_another_user(agent, user, other_user):
    assert _act(_client(ServeToken.objects.create(owner=user, name="ada's").key), agent).status_code == 200
    bob = _client(ServeToken.objects.create(owner=other_user, name="bob's").key)
    assert _act(bob, agent).status_code == 404


def test_a_cached_entry_whose_bundle_file_is_gone_exports_the_bundle_again(agent, user):
    client = _client(ServeToken.objects.create(owner=user, name="bot").key)
    assert _act(client, agent).status_code == 200
    pipe = cache.redis_client().pipeline()
    cache.queue_agent_get(pipe, agent.id)
    entry = cache.agent_entry_from_raw(pipe.execute()[0])
    assert entry is not None and entry.usable()
    cache.agent_entry_store(
        cache.AgentEntry(**{**entry.__dict__, "bundle_path": entry.bundle_path + ".removed"})
    )  # fmt: skip
    assert _act(client, agent).status_code == 200


def test_counts_reach_the_database_at_the_flush_and_the_page_shows_them_before(agent, user, client):
    token = ServeToken.objects.create(owner=user, name="bot")
    api = _client(token.key)
    for rows in (1, 3):
        assert _act(api, agent, rows).status_code == 200
    assert api.post(f"/api/agents/{agent.id}/act", {"observations": [[0.0]]}, format="json").status_code == 400
    assert not AgentServeStats.objects.filter(agent=agent).exists()  # still in Redis
    before = agent_serve_stats(agent)
    assert (before["calls"], before["observations"], before["errors"]) == (2, 4, 1)
    assert [t.calls for t in serve_tokens_of(user)] == [2]
    client.force_login(user)
    assert 'id="serve-calls">2<' in client.get(f"/agents/{agent.id}/").content.decode()

    assert counters.flush() >= 2
    row = AgentServeStats.objects.get(agent=agent)
    assert (row.calls, row.observations, row.errors) == (2, 4, 1) and row.last_called_at is not None
    token.refresh_from_db()
    assert token.calls == 2 and token.last_used_at is not None
    after = agent_serve_stats(agent)  # nothing counted twice
    assert (after["calls"], after["observations"], after["errors"]) == (2, 4, 1)
    assert _act(api, agent).status_code == 200
    assert agent_serve_stats(agent)["calls"] == 3
    counters.flush()
    assert AgentServeStats.objects.get(agent=agent).calls == 3


def test_counts_of_a_deleted_agent_are_dropped_by_the_flush(agent, user):
    api = _client(ServeToken.objects.create(owner=user, name="bot").key)
    assert _act(api, agent).status_code == 200
    agent_id = agent.id
    agent.delete()
    counters.flush()
    assert not AgentServeStats.objects.filter(agent_id=agent_id).exists()

"""The query parameters of every list endpoint: an id filter beyond the database's 64-bit range
names nothing (an empty list, as an id of nothing does; SQLite refused the number, a 500),
digits only (``²`` is a digit to Python but no number), and a parameter the list does not read
is a 400 naming it, as ``/api/runs/`` always did (``?lineage=1`` answered every agent)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

HUGE = ["9223372036854775808", "99999999999999999999999"]  # 2**63: one past the largest id


@pytest.mark.parametrize("huge", HUGE)
@pytest.mark.parametrize("url", ["/api/agents/?run={}", "/api/backtests/?run={}", "/api/backtests/?agent={}"])
def test_an_id_filter_beyond_any_id_is_an_empty_list_not_a_500(api_client, world, url, huge):
    response = api_client.get(url.format(huge))
    assert response.status_code == 200, response.content[:300]
    assert response.json()["results"] == []


@pytest.mark.parametrize("url", ["/api/agents/?run={}", "/api/backtests/?run={}", "/api/backtests/?agent={}"])
@pytest.mark.parametrize("bad", ["abc", "²", "-1", "1.5"])
def test_an_id_filter_that_is_no_whole_number_is_a_400_naming_it(api_client, url, bad):
    response = api_client.get(url.format(bad))
    assert response.status_code == 400, response.content[:300]
    name = url.split("?")[1].split("=")[0]
    assert name in response.json()["fields"]


def test_the_agents_list_still_filters_by_run(api_client, world, other_world):
    mine = api_client.get(f"/api/agents/?run={world.run.id}").json()["results"]
    assert mine and {a["run"] for a in mine} == {world.run.id}
    assert api_client.get(f"/api/agents/?run={other_world.run.id}").json()["results"] == []


LISTS = [
    "/api/datasets/",
    "/api/tasks/",
    "/api/budgets/",
    "/api/runs/",
    "/api/agents/",
    "/api/backtests/",
    "/api/studies/",
]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("unknown", ["lineage", "parent", "dataset", "owner", "page_size"])
def test_every_list_refuses_a_filter_it_does_not_have_naming_it(api_client, url, unknown):
    response = api_client.get(f"{url}?{unknown}=1")
    assert response.status_code == 400, (url, response.content[:300])
    body = response.json()
    assert list(body["fields"]) == [unknown]
    assert "not a filter of" in body["fields"][unknown] and "page" in body["fields"][unknown]


@pytest.mark.parametrize("url", LISTS)
def test_every_list_still_takes_its_page_number(api_client, url):
    assert api_client.get(f"{url}?page=1").status_code == 200


def test_a_runs_leaderboard_refuses_an_unknown_parameter(api_client, world):
    response = api_client.get(f"/api/runs/{world.run.id}/leaderboard/?kind=ensemble")
    assert response.status_code == 400
    assert "kind" in response.json()["fields"]
    assert api_client.get(f"/api/runs/{world.run.id}/leaderboard/").status_code == 200


def test_on_leaderboard_other_than_true_or_false_is_a_400_not_every_agent(api_client, world):
    response = api_client.get("/api/agents/?on_leaderboard=maybe")
    assert response.status_code == 400
    assert "on_leaderboard" in response.json()["fields"]
    on_board = api_client.get("/api/agents/?on_leaderboard=1").json()["results"]
    assert on_board and all(a["on_leaderboard"] for a in on_board)

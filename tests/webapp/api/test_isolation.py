"""Cross-user matrix: another user's objects answer 404 everywhere and never appear in a list."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


def _object_urls(world) -> list[str]:
    run, agent = world.run.id, world.agents[0].id
    return [
        f"/api/datasets/{world.dataset.id}/",
        f"/api/datasets/{world.dataset.id}/prices/",
        f"/api/tasks/{world.task.id}/",
        f"/api/budgets/{world.budget.id}/",
        f"/api/runs/{run}/",
        f"/api/runs/{run}/leaderboard/",
        f"/api/agents/{agent}/",
        f"/api/agents/{agent}/bundle/",
    ]


def test_other_user_gets_404_for_every_object_of_mine(world, other_client):
    for url in _object_urls(world):
        response = other_client.get(url)
        assert response.status_code == 404, url
        assert response.json() == {"error": "Not found.", "fields": {}}, url


@pytest.mark.parametrize("action", ["start", "pause", "resume", "stop", "scale"])
def test_other_user_cannot_control_my_run(world, other_client, action):
    response = other_client.post(f"/api/runs/{world.run.id}/{action}/", {"num_pods": 1}, format="json")
    assert response.status_code == 404
    world.run.refresh_from_db()
    assert world.run.status == "running" and world.run.num_pods == 2


def test_nothing_of_mine_appears_in_the_other_users_lists(world, other_world, other_client):
    mine = {
        "datasets": {world.dataset.id},
        "tasks": {world.task.id},
        "budgets": {world.budget.id},
        "runs": {world.run.id},
        "agents": {a.id for a in world.agents},
    }
    for name, ids in mine.items():
        listed = {row["id"] for row in other_client.get(f"/api/{name}/").json()["results"]}
        assert listed, f"bob should see his own {name}"
        assert not listed & ids, f"bob sees ada's {name}"
    agents_of_my_run = other_client.get(f"/api/agents/?run={world.run.id}").json()
    assert agents_of_my_run["count"] == 0


def test_other_user_cannot_build_on_my_dataset_task_or_budget(world, other_world, other_client):
    task = other_client.post(
        "/api/tasks/",
        {"name": "steal", "dataset": world.dataset.id, "splits": {"train": ["2018-06-01", "2019-12-31"]}},
        format="json",
    )
    assert task.status_code == 400
    assert "dataset" in task.json()["fields"]
    run = other_client.post(
        "/api/runs/", {"task": world.task.id, "budget": other_world.budget.id, "generation_steps": 256}, format="json"
    )
    assert run.status_code == 400
    assert "does not exist" in run.json()["fields"]["task"]
    run = other_client.post(
        "/api/runs/", {"task": other_world.task.id, "budget": world.budget.id, "generation_steps": 256}, format="json"
    )
    assert run.status_code == 400
    assert "budget" in run.json()["fields"]


def test_other_user_gets_404_for_my_pages(world, other_user, client):
    client.force_login(other_user)
    run, agent = world.run.id, world.agents[0].id
    for url in [
        f"/runs/{run}/",
        f"/runs/new/?clone={run}",
        f"/agents/{agent}/",
        f"/agents/{agent}/bundle/",
        f"/datasets/{world.dataset.id}/",
    ]:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/runs/{run}/stop/").status_code == 404
    world.run.refresh_from_db()
    assert world.run.status == "running"

"""Runs API: create, list with filters, lifecycle actions, leaderboard, one error format."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import SPLITS, TICKERS, TINY_PPO

pytestmark = pytest.mark.django_db


def test_runs_list_shows_status_score_pods_running_and_budget_progress(world, api_client):
    data = api_client.get("/api/runs/").json()
    assert data["count"] == 1
    row = data["results"][0]
    assert row["id"] == world.run.id
    assert row["status"] == "running"
    assert row["best_score"] == pytest.approx(1.5)
    assert row["owner"] == "ada"
    assert row["algorithm"] == "ppo"
    assert row["agents_count"] == 4
    assert row["pods_running"] == 0
    assert row["env_steps_done"] == 4 * 256
    assert 0 < row["budget_progress"] < 1


def test_runs_list_filters_by_status_algorithm_and_search(world, api_client):
    assert api_client.get("/api/runs/?status=running").json()["count"] == 1
    assert api_client.get("/api/runs/?status=paused").json()["count"] == 0
    assert api_client.get("/api/runs/?algorithm=ppo").json()["count"] == 1
    assert api_client.get("/api/runs/?algorithm=sac").json()["count"] == 0
    assert api_client.get("/api/runs/?search=ada-data").json()["count"] == 1
    assert api_client.get(f"/api/runs/?search={world.run.id}").json()["count"] == 1
    assert api_client.get("/api/runs/?search=nothing-like-this").json()["count"] == 0
    # a filter the list does not have, or a status that does not exist, is a 400, not every run
    for query, field in (("task=abc", "task"), (f"task={world.run.task_id}", "task"), ("status=bogus", "status")):
        response = api_client.get(f"/api/runs/?{query}")
        assert response.status_code == 400 and list(response.json()["fields"]) == [field], response.json()
    assert api_client.get("/api/runs/?tag=nothing&page=1").json()["count"] == 0


def test_a_task_and_run_are_created_and_started_through_the_api(world, api_client):
    task = api_client.post(
        "/api/tasks/",
        {
            "name": "api task",
            "dataset": world.dataset.id,
            "tickers": TICKERS[:2],
            "splits": SPLITS,
            "algorithm": "ppo",
            "hyperparameters": TINY_PPO,
        },
        format="json",
    )
    assert task.status_code == 201, task.json()
    assert task.json()["hyperparameters"]["learning_rate"] == 3e-4  # defaults filled in
    run = api_client.post(
        "/api/runs/",
        {"task": task.json()["id"], "budget": world.budget.id, "generation_steps": 256, "num_pods": 1, "start": True},
        format="json",
    )
    assert run.status_code == 201, run.json()
    assert run.json()["status"] == "running"


def test_a_bad_hyperparameter_is_a_400_naming_the_field(world, api_client):
    response = api_client.post(
        "/api/tasks/",
        {
            "name": "bad",
            "dataset": world.dataset.id,
            "splits": SPLITS,
            "hyperparameters": {**TINY_PPO, "learning_rate": -1},
        },
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert "hyperparameters.learning_rate" in body["fields"]
    assert "learning_rate" in body["error"]


def test_bad_run_settings_are_400s_with_field_messages(world, api_client):
    response = api_client.post(
        "/api/runs/",
        {"task": world.task.id, "budget": world.budget.id, "generation_steps": 0, "fresh_probability": 2},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()["fields"]) >= {"generation_steps", "fresh_probability"}
    response = api_client.post("/api/runs/", {"task": "x"}, format="json")
    assert response.status_code == 400
    assert {"task", "budget"} <= set(response.json()["fields"])


@pytest.mark.parametrize("device", ["cuda:1", "cuda:0", "gpu", "mps"])
def test_a_run_device_other_than_auto_cpu_or_cuda_is_a_400_naming_device(world, api_client, device):
    # A worker pinned with CUDA_VISIBLE_DEVICES=N sees only cuda:0: the worker picks the GPU.
    response = api_client.post(
        "/api/runs/", {"task": world.task.id, "budget": world.budget.id, "device": device}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["device"]
    assert "auto, cpu or cuda" in response.json()["fields"]["device"]


def test_run_actions_pause_resume_scale_and_stop(world, api_client):
    url = f"/api/runs/{world.run.id}"
    assert api_client.post(f"{url}/pause/").json()["status"] == "paused"
    conflict = api_client.post(f"{url}/pause/")
    assert conflict.status_code == 409
    assert "paused" in conflict.json()["error"]
    assert api_client.post(f"{url}/resume/").json()["status"] == "running"
    assert api_client.post(f"{url}/scale/", {"num_pods": 3}, format="json").json()["num_pods"] == 3
    bad = api_client.post(f"{url}/scale/", {"num_pods": 0}, format="json")
    assert bad.status_code == 400 and "num_pods" in bad.json()["fields"]
    assert api_client.post(f"{url}/stop/", {}, format="json").json()["status"] == "cancelled"
    assert api_client.post(f"{url}/start/").status_code == 409


def test_leaderboard_lists_the_top_k_best_first(world, api_client):
    data = api_client.get(f"/api/runs/{world.run.id}/leaderboard/").json()
    assert [row["score"] for row in data["results"]] == [1.5, 1.0, 0.5]
    top = data["results"][0]
    assert top["on_leaderboard"] and top["bundle_url"].endswith(f"/api/agents/{top['id']}/bundle/")


def test_agents_list_filters_by_run_and_leaderboard(world, other_world, api_client):
    all_mine = api_client.get("/api/agents/").json()
    assert all_mine["count"] == 4
    on_board = api_client.get(f"/api/agents/?run={world.run.id}&on_leaderboard=true").json()
    assert on_board["count"] == 3
    off_board = api_client.get(f"/api/agents/?run={world.run.id}&on_leaderboard=false").json()
    assert [a["score"] for a in off_board["results"]] == [0.2]
    assert api_client.get("/api/agents/?run=abc").status_code == 400


def test_agent_detail_has_metrics_hyperparameters_and_mutations(world, api_client):
    agent = world.agents[-1]
    data = api_client.get(f"/api/agents/{agent.id}/").json()
    assert data["metrics"]["sharpe_ratio"] is not None
    assert data["hyperparameters"]["learning_rate"] > 0
    assert isinstance(data["mutations"], dict)


def test_a_portfolio_task_with_its_selection_rule_is_created_through_the_api(world, api_client):
    from webapp.runs.selectors.runs import task_spec

    response = api_client.post(
        "/api/tasks/",
        {
            "name": "portfolio task",
            "dataset": world.dataset.id,
            "tickers": TICKERS[:2],
            "splits": SPLITS,
            "kind": "portfolio",
            "env": {"reward": "excess_log_return", "cost_pct": 0.002},
            "selection": {"rule": "worst_window"},
            "algorithm": "ppo",
            "hyperparameters": TINY_PPO,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "portfolio"
    assert body["env"]["reward"] == "excess_log_return" and body["env"]["cost_pct"] == 0.002
    assert body["selection"] == {"rule": "worst_window", "windows": 4, "k": 1.0}
    task = world.dataset.tasks.get(id=body["id"])
    spec = task_spec(task)
    assert spec["kind"] == "portfolio" and spec["selection"]["rule"] == "worst_window"
    # A stock-trading setting on a portfolio task, and a bad rule, are 400s naming the field.
    bad = api_client.post(
        "/api/tasks/",
        {
            "name": "bad",
            "dataset": world.dataset.id,
            "splits": SPLITS,
            "kind": "portfolio",
            "env": {"hmax": 10},
            "selection": {"rule": "luckiest"},
        },
        format="json",
    )
    assert bad.status_code == 400
    assert "env.hmax" in bad.json()["fields"] or "selection.rule" in bad.json()["fields"]


def test_a_one_sample_rollout_is_a_400_naming_num_envs_and_rollout_steps(world, api_client):
    response = api_client.post(
        "/api/tasks/",
        {
            "name": "degenerate",
            "dataset": world.dataset.id,
            "splits": SPLITS,
            "algorithm": "a2c",
            "hyperparameters": {"num_envs": 1, "rollout_steps": 1},
        },
        format="json",
    )
    assert response.status_code == 400, response.json()
    body = response.json()
    assert "hyperparameters.rollout_steps" in body["fields"]
    assert "num_envs" in body["fields"]["hyperparameters.rollout_steps"]

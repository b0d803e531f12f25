"""Training telemetry: points stored while a generation trains, curves per generation against
the lineage's env steps, lineage fields of agents, and the metrics API (JSON and CSV)."""

from __future__ import annotations

import csv
import io

import pytest

from webapp.runs import services
from webapp.runs.models import Agent, Generation, TrainingPoint
from webapp.runs.selectors import curves
from webapp.runs.services import telemetry

pytestmark = pytest.mark.django_db


def _point(steps, total=None, **values):
    return {
        "env_steps": steps,
        "generation_env_steps": steps,
        "total_env_steps": total or steps,
        "elapsed_s": 0.1,
        **values,
    }


def test_agents_know_their_depth_line_env_steps_and_lineage(world):
    agents = Agent.objects.filter(run=world.run).order_by("created_seq")
    for agent in agents:
        if agent.parent is None:
            assert agent.depth == 1 and agent.lineage_id == agent.pk
            assert agent.total_env_steps == agent.generation.env_steps
        else:
            assert agent.depth == agent.parent.depth + 1
            assert agent.lineage_id == agent.parent.lineage_id
            assert agent.total_env_steps == agent.parent.total_env_steps + agent.generation.env_steps
    assert any(a.parent_id for a in agents), "the world should hold a continued agent"


def test_a_running_generation_stores_points_of_its_own_attempt_only_and_announces_them(make_budget, make_run):
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    gen = Generation.objects.get(run=run)
    claim = services.generation_claim(generation_id=gen.pk, worker="w@test")
    seq_before = type(run).objects.get(pk=run.pk).event_seq
    kw = {"run_id": run.pk, "generation_id": gen.pk, "pod_index": 0}
    assert telemetry.point_record(**kw, attempt=claim.attempt, point=_point(64, policy_loss=0.5, entropy=1.2))
    assert not telemetry.point_record(**kw, attempt=claim.attempt + 1, point=_point(128, policy_loss=0.4))
    assert type(run).objects.get(pk=run.pk).event_seq == seq_before + 1  # one numbered metrics event
    found = curves.run_curves(run, ["policy_loss", "entropy", "alpha"])["curves"]
    assert len(found) == 1
    curve = found[0]
    assert curve["agent_id"] is None and curve["depth"] == 1 and curve["status"] == "running"
    assert curve["points"]["policy_loss"] == [0.5] and curve["points"]["alpha"] == [None]


def test_a_generation_stores_at_most_its_bounded_number_of_points(make_budget, make_run):
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    gen = Generation.objects.get(run=run)
    claim = services.generation_claim(generation_id=gen.pk, worker="w@test")
    for i in range(telemetry.MAX_POINTS_PER_GENERATION + 5):
        telemetry.point_record(run_id=run.pk, generation_id=gen.pk, attempt=claim.attempt, pod_index=0, point=_point(i))
    assert TrainingPoint.objects.filter(generation=gen).count() == telemetry.MAX_POINTS_PER_GENERATION


def test_the_run_metrics_api_returns_each_generations_curve_against_line_env_steps(api_client, world):
    response = api_client.get(f"/api/runs/{world.run.pk}/metrics/?names=policy_loss,explained_variance")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["metrics"] == {"policy_loss": "Policy loss", "explained_variance": "Explained variance"}
    assert len(body["curves"]) == len(world.agents)
    by_agent = {c["agent_id"]: c for c in body["curves"]}
    for agent in world.agents:
        curve = by_agent[agent.pk]
        xs = curve["points"]["total_env_steps"]
        assert xs == sorted(xs) and xs[-1] == Agent.objects.get(pk=agent.pk).total_env_steps
        assert len(curve["points"]["policy_loss"]) == len(xs) <= 50
        assert curve["lineage"] == Agent.objects.get(pk=agent.pk).lineage_id
        assert set(curve["points"]) == {
            "total_env_steps",
            "env_steps",
            "elapsed_s",
            "policy_loss",
            "explained_variance",
        }


def test_the_metrics_csv_has_one_row_per_point_with_its_agent(api_client, world):
    response = api_client.get(f"/api/runs/{world.run.pk}/metrics/?names=entropy&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows and set(rows[0]) >= {"agent_id", "lineage", "depth", "total_env_steps", "entropy"}
    json_points = sum(
        len(c["points"]["entropy"]) for c in api_client.get(f"/api/runs/{world.run.pk}/metrics/").json()["curves"]
    )
    assert len(rows) == json_points
    assert {int(r["agent_id"]) for r in rows} == {a.pk for a in world.agents}


def test_an_unknown_metric_name_is_a_400_naming_the_parameter(api_client, world):
    response = api_client.get(f"/api/runs/{world.run.pk}/metrics/?names=policy_loss,bogus")
    assert response.status_code == 400
    assert "bogus" in response.json()["error"] and "names" in response.json()["fields"]


def test_another_users_run_metrics_are_not_found(other_client, world):
    assert other_client.get(f"/api/runs/{world.run.pk}/metrics/").status_code == 404
    assert other_client.get(f"/api/agents/{world.agents[0].pk}/metrics/").status_code == 404


def test_an_agents_curves_include_its_ancestors_oldest_first(api_client, world):
    child = Agent.objects.filter(run=world.run, parent__isnull=False).order_by("-depth").first()
    body = api_client.get(f"/api/agents/{child.pk}/metrics/").json()
    chain, node = [], child
    while node is not None:
        chain.append(node.pk)
        node = node.parent
    assert [c["agent_id"] for c in body["curves"]] == list(reversed(chain))
    assert "policy_loss" in body["metrics"] and "alpha" not in body["metrics"]  # PPO's curves only

"""An ensemble is shown as an ensemble everywhere: its own ``kind`` and ``members`` in the API,
no pod, generation, parent or lineage, its members' algorithm and tickers, never in a pod's
generation counters; the all-agents table and the agent page name and link its members; the
migration converts ensembles stored the old way (an agent on a synthetic generation of a pod)."""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile

import pytest
from bs4 import BeautifulSoup

from tests.webapp.conftest import submit_agent
from webapp.runs.models import Agent, Generation, Pod
from webapp.runs.selectors.payloads import pod_payload, run_payload
from webapp.runs.services import ensembles

pytestmark = pytest.mark.django_db


def _pods(run) -> dict[int, tuple]:
    """Each pod's latest generation number and done count, as the run page and its events show them."""
    return {
        p.index: ((pod_payload(p)["generation"] or {}).get("number"), p.generations_done)
        for p in Pod.objects.filter(run=run)
    }


def _lines_env_steps(ids: list[int]) -> int:
    seen, todo = {}, list(ids)
    while todo:
        agent = Agent.objects.select_related("generation").get(pk=todo.pop())
        if agent.pk not in seen:
            seen[agent.pk] = agent.generation.env_steps
            if agent.parent_id:
                todo.append(agent.parent_id)
    return sum(seen.values())


def test_the_api_labels_an_ensemble_with_its_kind_members_algorithm_and_tickers(world, api_client):
    pods_before = _pods(world.run)
    generations_before = Generation.objects.filter(run=world.run).count()

    body = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json").json()

    members = Agent.objects.filter(pk__in=body["members"])
    assert body["kind"] == "ensemble" and len(body["members"]) == 3
    for key in ("pod", "generation", "pod_generation", "env_steps", "parent", "lineage", "mutations"):
        assert body[key] is None, key
    assert body["algorithm"] == "ppo" == members[0].algorithm
    assert body["tickers"] == members[0].tickers and body["tickers"]
    assert body["hyperparameters"] == {}
    assert body["total_env_steps"] == _lines_env_steps(body["members"])
    trained = api_client.get(f"/api/agents/{world.agents[0].pk}/").json()
    assert trained["kind"] == "trained" and trained["members"] == [] and trained["pod"] is not None
    # no generation of any pod: the pods' counters and the runs list's agent count stay as they were
    assert Generation.objects.filter(run=world.run).count() == generations_before
    assert _pods(world.run) == pods_before
    assert run_payload(world.run)["agents"] == 4
    listed = api_client.get("/api/runs/").json()["results"]
    assert next(r for r in listed if r["id"] == world.run.id)["agents_count"] == 4


def test_a_pods_next_generation_follows_its_last_one_after_an_ensemble(world, trained_checkpoint):
    queued = {g.pod.index: g.number for g in Generation.objects.filter(run=world.run, status="queued")}
    ensembles.ensemble_get_or_create(run=world.run, k=3)
    agent = submit_agent(world.run, trained_checkpoint, 0.3)
    pod = agent.pod.index
    latest = Generation.objects.filter(run=world.run, pod__index=pod).order_by("-number").first()
    assert agent.generation.number == queued[pod]
    assert latest.number == queued[pod] + 1, "the pod numbers its generations without a gap"


def test_all_agents_names_an_ensembles_members_and_keeps_it_off_the_tree_and_scatter(world, client, user):
    agent, _ = ensembles.ensemble_get_or_create(run=world.run, k=3)
    client.force_login(user)
    url = f"/runs/{world.run.id}/agents/"

    page = BeautifulSoup(client.get(url).content, "html.parser")

    row = page.select_one(f'#agents-table tr[data-agent-id="{agent.id}"]')
    assert row["data-kind"] == "ensemble"
    text = row.get_text(" ", strip=True)
    assert "ensemble of #" in text and "fresh" not in text
    assert [a["href"] for a in row.select(".ensemble-of a")] == [f"/agents/{i}/" for i in agent.members]
    assert row.select_one('[data-col="pod"]').get_text(strip=True) == "–"
    assert row.select_one('[data-col="generation"]').get_text(strip=True) == "–"
    assert not page.select(f'#lineage-tree li[data-agent-id="{agent.id}"]')
    assert f'"id": {agent.id},' not in page.select_one("#scatter-points").string
    # sorted by pod either way, the ensemble comes last; a pod filter leaves it out
    for sort in ("pod", "-pod"):
        ids = [int(tr["data-agent-id"]) for tr in _rows(client, url + f"?sort={sort}")]
        assert ids[-1] == agent.id
    assert agent.id not in [int(tr["data-agent-id"]) for tr in _rows(client, url + "?pod=0")]
    rows = list(csv.DictReader(io.StringIO(client.get(url + "?format=csv").content.decode())))
    line = next(r for r in rows if int(r["agent_id"]) == agent.id)
    assert line["kind"] == "ensemble" and line["members"] == ";".join(map(str, agent.members))
    assert line["pod"] == line["generation"] == line["pod_generation"] == line["env_steps"] == ""
    assert {r["kind"] for r in rows if int(r["agent_id"]) != agent.id} == {"trained"}


def _rows(client, url: str):
    return BeautifulSoup(client.get(url).content, "html.parser").select("#agents-table tbody tr")


def test_the_agent_page_links_the_members_instead_of_a_hyperparameter_row(world, client, user):
    agent, _ = ensembles.ensemble_get_or_create(run=world.run, k=3)
    client.force_login(user)

    html = client.get(f"/agents/{agent.id}/").content.decode()

    page = BeautifulSoup(html, "html.parser")
    assert [a["href"] for a in page.select("#ensemble-members a")] == [f"/agents/{i}/" for i in agent.members]
    assert page.select_one("#agent-kind").get_text(strip=True) == "ensemble"
    assert page.select_one("#hyperparameters") is None and page.select_one("#hyperparameters-ensemble")
    assert "ensemble_of" not in html.lower()
    assert page.select_one("#agent-depth") is None and not page.select("#lineage li")
    assert re.search(r"pod \d", page.select_one("#agent-score").get_text(" ")) is None
    metrics = client.get(f"/api/agents/{agent.id}/metrics/").json()
    assert metrics["curves"] == []


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_an_ensemble_off_its_synthetic_generation(world, trained_checkpoint):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("runs", "0009_task_algorithm_hyperparameters")]
    executor = MigrationExecutor(connection)
    # Back to every app's newest state: going back before runs 0011 also unapplies the
    # migrations of other apps that depend on it (studies 0001), which a runs-only target
    # would leave unapplied for every later test.
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    try:
        old = MigrationExecutor(connection).loader.project_state(before).apps
        OldAgent, OldGeneration = old.get_model("runs", "Agent"), old.get_model("runs", "Generation")
        members = list(OldAgent.objects.filter(run_id=world.run.id, on_leaderboard=True).order_by("-score")[:3])
        pod = members[0].pod
        number = OldGeneration.objects.filter(pod=pod).order_by("-number").first().number + 1
        gen = OldGeneration.objects.create(
            run_id=world.run.id,
            pod=pod,
            number=number,
            hyperparameters={"ensemble_of": [a.id for a in members]},
            env_steps=0,
            status="done",
        )
        legacy = OldAgent.objects.create(
            run_id=world.run.id,
            generation=gen,
            pod=pod,
            score=0.9,
            metrics={"sharpe_ratio": 1.0},
            hyperparameters={"ensemble_of": [a.id for a in members]},
            checkpoint="legacy.pt",
            sha256="0" * 64,
            created_seq=99,
            depth=1,
            total_env_steps=1,
        )
        OldAgent.objects.filter(pk=legacy.pk).update(lineage=legacy)
    finally:
        MigrationExecutor(connection).migrate(latest)

    agent = Agent.objects.get(pk=legacy.pk)
    assert agent.kind == "ensemble" and agent.members == [a.id for a in members]
    assert (agent.generation_id, agent.pod_id, agent.parent_id, agent.depth, agent.lineage_id) == (None,) * 5
    assert agent.hyperparameters == {} and agent.algorithm == "ppo" and agent.tickers == members[0].tickers
    assert agent.total_env_steps == _lines_env_steps(agent.members)
    assert not Generation.objects.filter(pk=gen.pk).exists(), "the synthetic generation is gone"
    assert Agent.objects.filter(run=world.run, kind="trained").count() == 4


def test_the_ensemble_bundle_names_its_members_and_counts_env_steps_as_the_api(world, api_client):
    body = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json").json()
    response = api_client.get(f"/api/agents/{body['id']}/bundle/")
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as zf:
        config, card = json.loads(zf.read("config.json")), zf.read("README.md").decode()
    depth = dict(Agent.objects.filter(pk__in=body["members"]).values_list("id", "depth"))
    assert config["generation"] is None and body["generation"] is None
    assert config["total_env_steps"] == body["total_env_steps"] == config["ensemble"]["total_env_steps"]
    listed = [(m["id"], m["generation"]) for m in config["ensemble"]["members"]]
    assert listed == [(pk, depth[pk]) for pk in body["members"]]
    named = ", ".join(f"#{pk} generation {depth[pk]}" for pk in body["members"])
    assert f"Ensemble of 3 agents ({named})" in card
    assert f"Env steps trained: {body['total_env_steps']} (the members' lines" in card
    assert "stock-trading policy" in card


def test_the_agent_page_says_by_which_rule_the_members_were_chosen(world, client, user):
    client.force_login(user)
    top, _ = ensembles.ensemble_get_or_create(run=world.run, k=2)
    text = BeautifulSoup(client.get(f"/agents/{top.id}/").content, "html.parser").select_one("#ensemble-members")
    assert "(the leaderboard's top 2 when it was built)" in text.get_text(" ", strip=True)
    Agent.objects.filter(generation__run=world.run).update(score_se=100.0)  # every agent within one SE of the best
    deliverable, _ = ensembles.ensemble_one_se_get_or_create(run=world.run)
    assert deliverable.metrics["ensemble"]["rule"] == "one_se"
    text = BeautifulSoup(client.get(f"/agents/{deliverable.id}/").content, "html.parser").select_one(
        "#ensemble-members"
    )
    said = text.get_text(" ", strip=True)
    assert (
        f"every leaderboard agent within one standard error of the best when it was built, {len(deliverable.members)} of them"
        in said
    )
    assert "top" not in said

"""One click and one API call build an ensemble of the leaderboard's top K: an agent with a
validation score, a bundle and a backtest, never a parent of pods."""

from __future__ import annotations

import zipfile

import pytest

from trainer.bundle import load_agent
from webapp.runs.models import Agent

pytestmark = pytest.mark.django_db


def test_the_api_builds_a_top_3_ensemble_agent_with_a_score_and_a_bundle(world, api_client, tmp_path):
    response = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    top3 = [a.id for a in Agent.objects.filter(run=world.run, on_leaderboard=True).order_by("-score")[:3]]
    assert body["metrics"]["ensemble"]["members"] == top3
    assert body["on_leaderboard"] is False
    assert body["score"] == pytest.approx(body["metrics"]["score"])
    assert "vs_equal_weight" in body["metrics"] and "vs_QQQ" in body["metrics"]
    bundle = api_client.get(body["bundle_url"])
    assert bundle.status_code == 200
    path = tmp_path / "ensemble.zip"
    path.write_bytes(b"".join(bundle.streaming_content) if bundle.streaming else bundle.content)
    with zipfile.ZipFile(path) as zf:
        assert {"policy.onnx", "policy.safetensors", "SHA256SUMS"} <= set(zf.namelist())
    loaded = load_agent(path)
    assert loaded.algorithm == "ensemble" and len(loaded.config["ensemble"]["members"]) == 3


def test_one_click_builds_the_ensemble_and_shows_its_members(world, client, user, other_client):
    client.force_login(user)
    response = client.post(f"/runs/{world.run.id}/ensemble/")
    agent = Agent.objects.filter(run=world.run, hyperparameters__has_key="ensemble_of").get()
    assert response.status_code == 302 and response["Location"] == f"/agents/{agent.id}/"
    page = client.get(f"/agents/{agent.id}/").content.decode()
    assert 'id="ensemble-members"' in page
    assert other_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json").status_code == 404
    refused = client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 1}, content_type="application/json")
    assert refused.status_code == 400


def test_an_ensemble_agent_backtests_against_qqq_and_equal_weight(world, user):
    from tests.webapp.conftest import SPLITS
    from webapp.reports import services as reports
    from webapp.reports import tasks
    from webapp.runs import ensembles

    agent = ensembles.ensemble_create(run=world.run, k=2)
    backtest = reports.backtest_create(user=user, agent=agent, start=SPLITS["test"][0], end=SPLITS["test"][1])
    tasks.run_backtest(backtest.id)
    backtest.refresh_from_db()
    assert backtest.status == "done", backtest.error
    assert {"agent", "equal_weight", "QQQ"} <= set(backtest.metrics)

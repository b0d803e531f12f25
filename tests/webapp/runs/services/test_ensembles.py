"""One click and one API call build an ensemble of the leaderboard's top K: an agent with a
validation score, a bundle and a backtest, never a parent of pods; built once per member set,
and never with more members than the leaderboard holds."""

from __future__ import annotations

import zipfile

import pytest
from bs4 import BeautifulSoup
from django.contrib.messages import get_messages

from tests.webapp.conftest import make_world
from trainer.artifacts.bundle_reader import load_agent
from webapp.runs.models import Agent

pytestmark = pytest.mark.django_db


def _top(run, k: int) -> list[int]:
    return [a.id for a in Agent.objects.filter(run=run, on_leaderboard=True).order_by("-score")[:k]]


def test_the_api_builds_a_top_3_ensemble_agent_with_a_score_and_a_bundle(world, api_client, tmp_path):
    response = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "ensemble" and body["created"] is True
    assert body["members"] == body["metrics"]["ensemble"]["members"] == _top(world.run, 3)
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


def test_asking_again_for_the_same_members_returns_the_stored_ensemble_and_builds_nothing(world, api_client):
    url = f"/api/runs/{world.run.id}/ensemble/"
    first = api_client.post(url, {"k": 3}, format="json")
    assert first.status_code == 201, first.json()
    agents_then = Agent.objects.filter(run=world.run).count()

    again = api_client.post(url, {"k": 3}, format="json")

    assert again.status_code == 200, again.json()
    body = again.json()
    assert body["id"] == first.json()["id"] and body["created"] is False
    assert "already existed" in body["detail"] and f"#{body['id']}" in body["detail"]
    assert Agent.objects.filter(run=world.run).count() == agents_then
    # another member set is another ensemble
    pair = api_client.post(url, {"k": 2}, format="json")
    assert pair.status_code == 201 and pair.json()["members"] == _top(world.run, 2)
    assert Agent.objects.filter(run=world.run, kind="ensemble").count() == 2


def test_k_above_the_leaderboard_size_is_refused_naming_k_and_the_size(world, api_client):
    on_board = Agent.objects.filter(run=world.run, on_leaderboard=True).count()
    assert on_board == 3
    url = f"/api/runs/{world.run.id}/ensemble/"

    response = api_client.post(url, {"k": on_board + 1}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert "k" in body["fields"] and "3" in body["fields"]["k"]
    assert "leaderboard holds 3 agents" in body["error"]
    assert not Agent.objects.filter(run=world.run, kind="ensemble").exists()
    too_many = api_client.post(url, {"k": 17}, format="json")
    assert too_many.status_code == 400 and "k" in too_many.json()["fields"]


def test_one_click_builds_the_ensemble_once_and_shows_its_members(world, client, user, other_client):
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/runs/{world.run.id}/").content, "html.parser")
    assert page.select_one("#btn-ensemble").get_text(strip=True) == "Build top-3 ensemble"
    assert page.select_one("#ensemble-form input[name=k]")["value"] == "3"

    response = client.post(f"/runs/{world.run.id}/ensemble/", {"k": "3"})

    agent = Agent.objects.get(run=world.run, kind="ensemble")
    assert response.status_code == 302 and response["Location"] == f"/agents/{agent.id}/"
    assert agent.members == _top(world.run, 3)
    page = BeautifulSoup(client.get(f"/agents/{agent.id}/").content, "html.parser")
    links = [a["href"] for a in page.select("#ensemble-members a")]
    assert links == [f"/agents/{i}/" for i in agent.members]
    # the second click returns the same agent and says so
    again = client.post(f"/runs/{world.run.id}/ensemble/", {"k": "3"})
    assert again["Location"] == f"/agents/{agent.id}/"
    assert any("already existed" in str(m) for m in get_messages(again.wsgi_request))
    assert Agent.objects.filter(run=world.run, kind="ensemble").count() == 1
    assert other_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json").status_code == 404
    refused = client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 1}, content_type="application/json")
    assert refused.status_code == 400


def test_the_button_offers_no_more_members_than_the_leaderboard_holds(user, client, trained_checkpoint):
    two = make_world(user, "two", checkpoint=trained_checkpoint, scores=[0.5, 1.0])
    one = make_world(user, "one", checkpoint=trained_checkpoint, scores=[0.5])
    client.force_login(user)

    page = BeautifulSoup(client.get(f"/runs/{two.run.id}/").content, "html.parser")
    assert page.select_one("#btn-ensemble").get_text(strip=True) == "Build top-2 ensemble"
    assert page.select_one("#ensemble-form input[name=k]")["value"] == "2"
    page = BeautifulSoup(client.get(f"/runs/{one.run.id}/").content, "html.parser")
    assert page.select_one("#btn-ensemble").has_attr("disabled")  # the live page enables it (run.update)
    assert page.select_one("#ensemble-form input[name=k]")["value"] == ""
    # a stale page's k is refused with the leaderboard's size, not cut down silently
    response = client.post(f"/runs/{two.run.id}/ensemble/", {"k": "3"})
    assert response["Location"] == f"/runs/{two.run.id}/"
    assert any("leaderboard holds 2 agents" in str(m) for m in get_messages(response.wsgi_request))
    assert not Agent.objects.filter(run=two.run, kind="ensemble").exists()


def test_an_ensemble_agent_backtests_against_qqq_and_equal_weight(world, user, client):
    from tests.webapp.conftest import SPLITS
    from webapp.reports import services as reports
    from webapp.reports import tasks
    from webapp.runs.services import ensembles

    agent, created = ensembles.ensemble_get_or_create(run=world.run, k=2)
    assert created
    backtest = reports.backtest_create(user=user, agent=agent, start=SPLITS["test"][0], end=SPLITS["test"][1])
    tasks.run_backtest(backtest.id)
    backtest.refresh_from_db()
    assert backtest.status == "done", backtest.error
    assert {"agent", "equal_weight", "QQQ"} <= set(backtest.metrics)
    # its report counts the trials as the DSR does: the 4 trained agents, not the ensemble
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/reports/{backtest.id}/").content, "html.parser")
    assert page.select_one("#dsr-trials").get_text(strip=True) == "4"
    assert "Agents trained and evaluated in the run" in page.select_one("#deflated-sharpe").get_text(" ")
    # the report and its HTML export say it is an ensemble, link its members and round the score
    first, second = agent.members
    exported = BeautifulSoup(client.get(f"/reports/{backtest.id}/export.html").content, "html.parser")
    for soup in (page, exported):
        label = soup.select_one("#config-agent")
        text = " ".join(label.get_text().split())
        assert f"Ensemble of #{first}, #{second} (top-2 of run {world.run.id})" in text, text
        links = [a["href"] for a in label.select("#config-ensemble a")]
        assert links == [f"/agents/{first}/", f"/agents/{second}/"]
        assert f"validation score {agent.score:.3f}" in text and repr(agent.score) not in text
    assert backtest.config["agent"]["kind"] == "ensemble" and backtest.config["agent"]["members"] == agent.members


def test_the_report_of_the_one_se_ensemble_says_it_holds_the_agents_within_one_se(world, user, client):
    from tests.webapp.conftest import SPLITS
    from webapp.reports import services as reports
    from webapp.reports import tasks
    from webapp.runs.services import ensembles

    Agent.objects.filter(generation__run=world.run).update(score_se=100.0)  # every agent within one SE
    agent, _ = ensembles.ensemble_one_se_get_or_create(run=world.run)
    backtest = reports.backtest_create(user=user, agent=agent, start=SPLITS["test"][0], end=SPLITS["test"][1])
    tasks.run_backtest(backtest.id)
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/reports/{backtest.id}/").content, "html.parser")
    text = " ".join(page.select_one("#config-agent").get_text().split())
    assert f"(the {len(agent.members)} agents within one SE of the best of run {world.run.id})" in text, text

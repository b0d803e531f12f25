"""The all-agents page of a run: sort, filters, paging, CSV, the lineage tree and the scatter."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from tests.webapp.conftest import submit_agent
from webapp.runs.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def page_client(client, user):
    client.force_login(user)
    return client


def _ids(html: str) -> list[int]:
    body = html.split('id="agents-table"', 1)[1].split("</table>", 1)[0]
    return [int(x) for x in re.findall(r'<tr data-agent-id="(\d+)"', body)]


def test_the_table_lists_every_agent_best_first_and_sorts_by_any_column(page_client, world):
    url = f"/runs/{world.run.pk}/agents/"
    html = page_client.get(url).content.decode()
    by_score = list(Agent.objects.filter(run=world.run).order_by("-score").values_list("id", flat=True))
    assert _ids(html) == by_score  # all four, not only the top 3 of the leaderboard
    html = page_client.get(url + "?sort=score").content.decode()
    assert _ids(html) == list(reversed(by_score))
    html = page_client.get(url + "?sort=-total_env_steps").content.decode()
    steps = [Agent.objects.get(pk=i).total_env_steps for i in _ids(html)]
    assert steps == sorted(steps, reverse=True)


def test_filters_narrow_the_table_and_a_bad_filter_says_which(page_client, world):
    url = f"/runs/{world.run.pk}/agents/"
    html = page_client.get(url + "?min_score=0.9").content.decode()
    assert sorted(_ids(html)) == sorted(a.pk for a in world.agents if a.score >= 0.9)
    html = page_client.get(url + "?leaderboard=on").content.decode()
    assert len(_ids(html)) == 3
    html = page_client.get(url + "?pod=-1").content.decode()
    assert "pod:" in html and "greater than or equal to 0" in html


def test_the_table_pages_through_many_agents(page_client, world, trained_checkpoint, monkeypatch):
    from webapp.runs import views

    monkeypatch.setattr(views, "AGENT_PAGE_SIZE", 3)
    submit_agent(world.run, trained_checkpoint, 0.1)
    url = f"/runs/{world.run.pk}/agents/"
    first = _ids(page_client.get(url).content.decode())
    second = _ids(page_client.get(url + "?page=2").content.decode())
    assert len(first) == 3 and len(second) == 2 and not set(first) & set(second)


def test_the_csv_has_every_agent_with_both_env_step_counts_and_the_mutation(page_client, world):
    response = page_client.get(f"/runs/{world.run.pk}/agents/?format=csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {int(r["agent_id"]) for r in rows} == {a.pk for a in world.agents}
    for r in rows:
        agent = Agent.objects.get(pk=int(r["agent_id"]))
        assert int(r["generation"]) == agent.depth
        assert int(r["total_env_steps"]) == agent.total_env_steps
        assert int(r["env_steps"]) == agent.generation.env_steps
        if agent.generation.mutations:
            assert "→" in r["mutation"]


def test_the_lineage_tree_puts_every_child_under_its_parent(page_client, world):
    html = page_client.get(f"/runs/{world.run.pk}/agents/").content.decode()
    tree = html.split('id="lineage-tree"', 1)[1].split("</ul>", 1)[0]
    items = re.findall(r'data-agent-id="(\d+)" data-parent-id="(\d*)" data-level="(\d+)"', tree)
    assert len(items) == len(world.agents)
    seen: dict[int, int] = {}
    for agent_id, parent_id, level in items:
        if parent_id:
            assert int(parent_id) in seen, "a child comes after its parent"
            assert int(level) == seen[int(parent_id)] + 1
        else:
            assert level == "0"
        seen[int(agent_id)] = int(level)


def test_the_scatter_has_each_scored_agent_with_its_line(page_client, world):
    html = page_client.get(f"/runs/{world.run.pk}/agents/").content.decode()
    data = json.loads(html.split('id="scatter-points" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert {p["id"] for p in data} == {a.pk for a in world.agents}
    for p in data:
        agent = Agent.objects.get(pk=p["id"])
        assert (p["total_env_steps"], p["lineage"], p["generation"]) == (
            agent.total_env_steps,
            agent.lineage_id,
            agent.depth,
        )


def test_another_users_agents_page_is_not_found(client, other_user, world):
    client.force_login(other_user)
    assert client.get(f"/runs/{world.run.pk}/agents/").status_code == 404
    assert client.get(f"/runs/{world.run.pk}/agents/?format=csv").status_code == 404


def test_the_agent_page_shows_the_sha256_of_the_zip_it_downloads(page_client, world):
    import hashlib

    agent = world.agents[0]
    html = page_client.get(f"/agents/{agent.pk}/").content.decode()
    shown = re.search(r'id="bundle-sha256">([0-9a-f]{64})<', html)[1]
    download = page_client.get(f"/agents/{agent.pk}/bundle/")
    body = b"".join(download.streaming_content) if download.streaming else download.content
    assert shown == hashlib.sha256(body).hexdigest()
    assert shown != agent.sha256  # not the checkpoint's


def test_a_run_name_ending_in_a_number_is_rendered_once(page_client, world):
    world.run.name = "Dow 30 PPO demo #1"
    world.run.save(update_fields=["name"])
    html = page_client.get(f"/runs/{world.run.pk}/").content.decode()
    title = html.split('id="run-name"', 1)[1].split("</h1>", 1)[0]
    assert title.count("#1") == 1 and f"run {world.run.pk}" in title


def test_scores_stand_next_to_the_untrained_policy_equal_weight_qqq_and_their_noise(page_client, world):
    from webapp.runs.selectors import baselines

    agent = Agent.objects.get(pk=world.agents[0].pk)
    agent.metrics = {
        **agent.metrics,
        "untrained": {"score": 0.45, "sharpe_ratio": 0.4, "total_return": 0.01},
        "sub_windows": [{"sharpe": 0.2}, {"sharpe": 0.9}, {"sharpe": 0.5}, {"sharpe": 0.7}],
        "vs_equal_weight": {"baseline_sharpe": 0.8},
        "vs_QQQ": {"baseline_sharpe": 0.65},
    }
    agent.save(update_fields=["metrics"])
    b = baselines.agent_baselines(agent)
    assert b["untrained"] == 0.45 and b["equal_weight"] == 0.8 and b["qqq"] == 0.65
    assert b["noise"] == pytest.approx(0.2986, abs=1e-3)
    assert b["within_noise"] is True  # score 0.5 vs untrained 0.45, noise 0.30
    html = page_client.get(f"/agents/{agent.pk}/").content.decode()
    assert 'id="within-noise"' in html and "0.450" in html and "0.800" in html
    board = page_client.get(f"/runs/{world.run.pk}/").content.decode()
    row = board.split(f'<tr data-agent-id="{agent.pk}"', 1)[1].split("</tr>", 1)[0]
    # score next to score, Sharpe ratio next to Sharpe ratios
    assert "untrained 0.45 · noise ±0.30" in row and "within noise" in row
    assert "untrained 0.40 · 1/N 0.80 · QQQ 0.65" in row
    agent.metrics["untrained"]["score"] = -1.0
    agent.save(update_fields=["metrics"])
    assert baselines.agent_baselines(agent)["within_noise"] is False
    # nothing to compare with (an ensemble has no untrained policy): unknown, not "beyond the noise"
    del agent.metrics["untrained"]
    agent.save(update_fields=["metrics"])
    assert baselines.agent_baselines(agent)["within_noise"] is None

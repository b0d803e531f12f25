"""The owner's bookkeeping of runs: tags and note, archive, delete with the artifacts."""

from __future__ import annotations

import pytest
from django.core.files.storage import default_storage

from webapp.runs import services
from webapp.runs.models import Agent, Run
from webapp.runs.selectors.runs import run_list

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


def test_tags_and_a_note_are_set_normalized_and_bad_ones_refused_together(api_client, world):
    url = f"/api/runs/{world.run.pk}/annotate/"
    body = api_client.post(url, {"tags": ["Baseline", "lr-sweep", "baseline"], "note": " first try "}, format="json")
    assert body.status_code == 200 and body.json()["tags"] == ["baseline", "lr-sweep"]
    assert body.json()["note"] == "first try"
    bad = api_client.post(url, {"tags": ["x" * 41], "note": "n" * 5000}, format="json")
    assert bad.status_code == 400 and set(bad.json()["fields"]) == {"tags", "note"}


def test_archived_runs_leave_the_list_until_asked_for_and_tags_filter_it(client, user, api_client, world):
    api_client.post(f"/api/runs/{world.run.pk}/annotate/", {"tags": ["keep"]}, format="json")
    client.force_login(user)
    assert f'data-run-id="{world.run.pk}"' in client.get("/runs/?tag=keep").content.decode()
    assert f'data-run-id="{world.run.pk}"' not in client.get("/runs/?tag=other").content.decode()
    assert api_client.post(f"/api/runs/{world.run.pk}/archive/", {"archived": True}, format="json").json()["archived"]
    assert f'data-run-id="{world.run.pk}"' not in client.get("/runs/").content.decode()
    assert f'data-run-id="{world.run.pk}"' in client.get("/runs/?archived=on").content.decode()
    assert client.get(f"/runs/{world.run.pk}/").status_code == 200, "an archived run's page stays"


#: (the run's tags, the tag asked for, listed?)
TAG_CASES = [
    (["keep", "lr-sweep"], "keep", True),
    (["keep", "lr-sweep"], "KEEP ", True),
    (["keeper"], "keep", False),  # a whole tag, not a part of one
    (["50%", "a_b"], "50%", True),  # LIKE's wildcards are plain characters
    (["a_b"], "a%b", False),
    (['say "hi"'], 'say "hi"', True),  # quotes inside a tag
    (["x"], '"x"', False),
    ([], "keep", False),
    ([1, None, {"keep": 1}], "keep", False),  # non-string items (written by hand) never match
]


def test_the_tag_filter_matches_whole_tags_on_every_database(user, world):
    # The default database is SQLite, CI's PostgreSQL; ./paddock test runs this on both.
    wrong = []
    for tags, asked, found in TAG_CASES:
        Run.objects.filter(pk=world.run.pk).update(tags=tags)
        listed = run_list(user=user, tag=asked).filter(pk=world.run.pk).exists()
        if listed is not found:
            wrong.append((tags, asked, listed))
    assert wrong == []


def test_deleting_an_ended_run_removes_its_rows_and_files_but_not_a_running_one(api_client, other_client, world):
    assert api_client.delete(f"/api/runs/{world.run.pk}/").status_code == 409  # still running
    checkpoints = list(Agent.objects.filter(run=world.run).values_list("checkpoint", flat=True))
    assert checkpoints and all(default_storage.exists(c) for c in checkpoints)
    assert api_client.get(f"/api/agents/{world.agents[0].pk}/bundle/").status_code == 200  # exports a bundle
    services.run_stop(run=world.run)
    assert other_client.delete(f"/api/runs/{world.run.pk}/").status_code == 404
    assert api_client.delete(f"/api/runs/{world.run.pk}/").status_code == 204
    assert not Run.objects.filter(pk=world.run.pk).exists()
    assert not Agent.objects.filter(run_id=world.run.pk).exists()
    assert not any(default_storage.exists(c) for c in checkpoints)
    try:
        bundles = default_storage.listdir(f"bundles/run-{world.run.pk}")[1]
    except FileNotFoundError:
        bundles = []
    assert bundles == [], "the exported bundle went with the run"


def test_runs_compare_side_by_side_with_curves_parallel_coordinates_and_differences(
    client, user, world, trained_checkpoint
):
    import json
    import re

    from tests.webapp.conftest import make_world

    second = make_world(user, "second", checkpoint=trained_checkpoint, scores=[0.3, 0.9])
    client.force_login(user)
    html = client.get(f"/runs/compare/?ids={world.run.pk}&ids={second.run.pk}").content.decode()
    curves = json.loads(re.search(r'id="runs-curves" type="application/json">(.*?)</script>', html)[1])
    assert [c["best"][-1] for c in curves] == [1.5, 0.9]
    assert all(c["env_steps"] == sorted(c["env_steps"]) for c in curves)
    parallel = json.loads(re.search(r'id="runs-parallel" type="application/json">(.*?)</script>', html)[1])
    assert parallel["dimensions"][-1]["label"] == "score" and len(parallel["run_index"]) == 6
    diff = html.split('id="runs-diff"', 1)[1].split("</table>", 1)[0]
    assert 'data-key="budget" class="differs"' in diff and 'data-key="algorithm">' in diff  # same algorithm
    assert 'id="diff-only" data-diff-toggle="runs-diff" checked' in html
    one = client.get(f"/runs/compare/?ids={world.run.pk}")
    assert one.status_code == 400 and b"Tick 2 to 8" in one.content

"""Seeds as a setting: "run this configuration with N seeds" from the form and the API makes N
runs in one group, and the group's mean and 95 % interval are shown together."""

from __future__ import annotations

import math

import pytest
from bs4 import BeautifulSoup

from tests.webapp.test_pages import _run_form

pytestmark = pytest.mark.django_db


def test_the_interval_is_students_t_over_the_runs():
    from webapp.runs.selectors.seed_groups import mean_interval

    found = mean_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, 2) x s / sqrt(n), s = 1
    assert found["mean"] == 2.0 and found["std"] == 1.0
    assert found["low"] == pytest.approx(2.0 - half) and found["high"] == pytest.approx(2.0 + half)
    assert mean_interval([0.5]) == {"n": 1, "mean": 0.5, "low": None, "high": None, "std": None}
    assert mean_interval([None, float("nan")])["n"] == 0


def test_the_api_makes_n_runs_in_one_group_and_answers_its_summary(api_client, other_client, task, make_budget):
    budget = make_budget()
    body = {"task": task.id, "budget": budget.id, "name": "sweep", "generation_steps": 256, "seed": 7, "seeds": 3}
    response = api_client.post("/api/runs/", body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert [r["seed"] for r in data["runs"]] == [7, 8, 9]
    assert {r["seed_group"] for r in data["runs"]} == {data["seed_group"]}
    assert [r["name"] for r in data["runs"]] == ["sweep · seed 7", "sweep · seed 8", "sweep · seed 9"]
    assert data["summary"]["seeds"] == [7, 8, 9] and data["summary"]["score"]["n"] == 0
    group = api_client.get(f"/api/runs/seed-groups/{data['seed_group']}/")
    assert group.status_code == 200 and group.json()["runs"] == [r["id"] for r in data["runs"]]
    assert other_client.get(f"/api/runs/seed-groups/{data['seed_group']}/").status_code == 404
    single = api_client.post("/api/runs/", {**body, "seeds": 1}, format="json").json()
    assert single["seed_group"] == "" and single["seed"] == 7
    bad = api_client.post("/api/runs/", {**body, "seeds": 0}, format="json")
    assert bad.status_code == 400 and "seeds" in bad.json()["fields"]


def test_the_form_makes_a_group_and_each_run_page_shows_its_mean_and_interval(client, user, world):
    from webapp.runs.models import Run

    client.force_login(user)
    before = set(Run.objects.values_list("id", flat=True))
    response = client.post("/runs/new/", _run_form(world, seeds=3, seed=4))
    assert response.status_code == 302
    runs = list(Run.objects.exclude(id__in=before).order_by("seed"))
    assert [r.seed for r in runs] == [4, 5, 6] and len({r.seed_group for r in runs}) == 1
    for run, score in zip(runs, (1.0, 2.0, 3.0)):
        Run.objects.filter(pk=run.pk).update(best_score=score)
    soup = BeautifulSoup(client.get(f"/runs/{runs[1].id}/").content.decode(), "html.parser")
    text = soup.select_one("#seed-group-score").get_text(" ", strip=True)
    assert text == "mean 2.000, 95 % interval [-0.484, 4.484] over 3 runs"
    assert "not backtested yet" in soup.select_one("#seed-group-test").get_text()
    assert soup.select_one(f'#seed-group a[href="/runs/{runs[0].id}/"]') is not None

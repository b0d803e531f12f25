"""The run page and the APIs agree on what a user reads about a run: one budget fraction and
the limit behind it, device hours (not "GPU hours" on a CPU run), idle pods without stale
throughput, and agent metrics in readable units."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from webapp.runs import services
from webapp.runs.models import ClusterBudget, Pod, Run

pytestmark = pytest.mark.django_db


def _soup(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return BeautifulSoup(response.content, "html.parser")


def test_the_run_and_its_budget_report_the_same_fraction_and_name_the_limit(
    client, user, api_client, make_budget, make_run
):
    budget = make_budget(env_step_cap=9_000_000, max_wall_clock_s=3600)
    run = services.run_start(run=make_run(budget, num_pods=1))
    # 21 % of the env steps, 40 min of the 60 min wall clock: the wall clock is the limit.
    ClusterBudget.objects.filter(pk=budget.pk).update(env_steps_used=1_900_000)
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=40))

    run_progress = api_client.get(f"/api/runs/{run.id}/").json()["budget_progress"]
    budget_progress = api_client.get(f"/api/budgets/{budget.id}/").json()["progress"]
    assert run_progress == pytest.approx(2 / 3, abs=1e-3)
    assert budget_progress == pytest.approx(run_progress, abs=1e-3)

    client.force_login(user)
    card = _soup(client, f"/runs/{run.id}/").select_one("#budget")
    assert card.select_one("#budget-left").get_text() == "67 % used"
    assert card.select_one("#budget-limit").get_text() == "(wall clock per run)"
    assert "Device hours" in card.get_text() and "GPU hours" not in card.get_text()
    assert card.select_one('[data-limit="wall_clock"]').get_text(" ", strip=True).endswith("67 % of 1 h")


def test_the_budgets_page_says_device_hours(client, staff, make_budget):
    make_budget()
    client.force_login(staff)
    page = _soup(client, "/budgets/")
    headers = [th.get_text() for th in page.select("#budgets th")]
    assert "Device hours" in headers and "GPU hours" not in headers
    assert page.select_one('label[for="id_gpu_hours_cap"]').get_text() == "Device hours cap"


def test_a_stopped_pod_shows_no_throughput_nor_progress(client, user, make_budget, make_run):
    run = services.run_start(run=make_run(make_budget(), num_pods=2))
    Pod.objects.filter(run=run, index=0).update(state=Pod.State.TRAINING, steps_per_s=22417, env_steps=128)
    Pod.objects.filter(run=run, index=1).update(state=Pod.State.STOPPED, steps_per_s=22417, env_steps=100)
    client.force_login(user)
    page = _soup(client, f"/runs/{run.id}/")
    training, stopped = (page.select_one(f'.pod-card[data-pod-index="{i}"]') for i in (0, 1))
    assert training.select_one(".pod-sps").get_text() == "22,417"
    assert training.select_one(".pod-progress")["style"] == "width:50%"
    assert stopped.select_one(".pod-sps").get_text() == "–"
    assert stopped.select_one(".pod-progress")["style"] == "width:0%"


def test_agent_metrics_read_as_words_with_units(client, user, world):
    agent = world.agents[0]
    agent.metrics = {
        "score": 1.2,
        "score_defined": True,
        "num_days": 252.0,
        "start": "2020-01-02",
        "end": "2020-06-30 00:00:00",
        "total_return": 0.0734,
        "max_drawdown": -0.1234,
        "max_drawdown_peak": "2020-02-19",
        "max_drawdown_trough": "2020-03-23",
        "max_drawdown_recovery": None,
        "max_drawdown_duration_days": 34,
        "sharpe_ratio": 1.23456,
        "final_value": 1073400.0,
    }
    agent.save(update_fields=["metrics"])
    client.force_login(user)
    rows = {tr.th.get_text(): tr.td.get_text() for tr in _soup(client, f"/agents/{agent.id}/").select("#metrics tr")}
    assert rows == {
        "Days": "252",
        "First day": "2020-01-02",
        "Last day": "2020-06-30",
        "Total return": "7.34 %",
        "Max drawdown": "-12.34 %",
        "Max drawdown peak (date)": "2020-02-19",
        "Max drawdown trough (date)": "2020-03-23",
        "Max drawdown recovery (date)": "–",
        "Max drawdown duration (days)": "34",
        "Sharpe ratio": "1.235",
        "Final value": "$1,073,400",
    }


def test_the_reports_section_is_served_alone_and_only_to_the_runs_owner(
    client, user, other_user, make_budget, make_run
):
    run = make_run(make_budget())
    client.force_login(user)
    section = _soup(client, f"/runs/{run.id}/reports/")
    assert section.select_one("#run-reports") is not None
    assert section.select_one("#leaderboard") is None  # the section, not the page
    client.force_login(other_user)
    assert client.get(f"/runs/{run.id}/reports/").status_code == 404


def test_the_run_page_writes_numbers_as_its_script_does(client, user, make_budget, make_run):
    budget = make_budget(env_step_cap=9_000_000)
    run = services.run_start(run=make_run(budget, num_pods=1))
    ClusterBudget.objects.filter(pk=budget.pk).update(env_steps_used=1_234_567)
    client.force_login(user)
    page = _soup(client, f"/runs/{run.id}/")
    assert page.select_one("#budget-steps").get_text() == "1,234,567"  # format.js's count()
    assert page.select_one("#best-score").get_text() == "–"

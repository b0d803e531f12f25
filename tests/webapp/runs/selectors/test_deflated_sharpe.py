"""The Deflated Sharpe Ratio of leaderboard agents, on the run page, the agent page and the API,
computed from the agents the run's pods trained and evaluated (never its ensembles)."""

from __future__ import annotations

import math

import pytest

from trainer.selection import deflated_sharpe_ratio
from webapp.runs.models import Agent
from webapp.runs.selectors import deflated

pytestmark = pytest.mark.django_db


def test_each_agent_is_deflated_by_the_number_and_spread_of_the_runs_sharpe_ratios(world, api_client, client, user):
    sharpes = [0.4, 1.6, 1.1, 0.2]
    for agent, sharpe in zip(world.agents, sharpes):
        Agent.objects.filter(pk=agent.pk).update(metrics={**agent.metrics, "sharpe_ratio": sharpe, "num_days": 252})
    stats = deflated.run_sharpes(world.run.id)
    mean = sum(sharpes) / 4
    variance = sum((s - mean) ** 2 for s in sharpes) / 3
    assert stats.trials == 4 and stats.variance == pytest.approx(variance)
    best = Agent.objects.get(pk=world.agents[1].pk)
    expected = deflated_sharpe_ratio(
        1.6 / math.sqrt(252), num_trials=4, sharpe_variance=variance / 252, num_observations=252
    )
    assert deflated.agent_dsr(best, stats) == pytest.approx(expected)
    assert 0.0 < expected < 1.0
    detail = api_client.get(f"/api/agents/{best.id}/").json()
    assert detail["deflated_sharpe"] == pytest.approx(expected)
    client.force_login(user)
    page = client.get(f"/agents/{best.id}/").content.decode()
    assert 'id="deflated-sharpe"' in page and f"{expected:.3f}" in page
    assert "4 agents trained and evaluated" in page
    run_page = client.get(f"/runs/{world.run.id}/").content.decode()
    assert 'data-col="dsr"' in run_page and f"{expected:.3f}" in run_page


def test_an_intraday_agent_is_deflated_per_bar_not_per_day(world):
    # 5-minute bars: 78 a session, 78 x 252 a year; num_days counts sessions, num_periods bars.
    per_year, bars = 78 * 252, 126 * 78
    sharpes = [0.4, 1.6, 1.1, 0.2]
    for agent, sharpe in zip(world.agents, sharpes):
        metrics = {**agent.metrics, "sharpe_ratio": sharpe, "num_days": 126, "num_periods": bars}
        Agent.objects.filter(pk=agent.pk).update(metrics={**metrics, "periods_per_year": per_year})
    stats = deflated.run_sharpes(world.run.id)
    best = Agent.objects.get(pk=world.agents[1].pk)
    expected = deflated_sharpe_ratio(
        1.6 / math.sqrt(per_year), num_trials=4, sharpe_variance=stats.variance / per_year, num_observations=bars
    )
    daily_reading = deflated_sharpe_ratio(
        1.6 / math.sqrt(252), num_trials=4, sharpe_variance=stats.variance / 252, num_observations=126
    )
    assert deflated.agent_dsr(best, stats) == pytest.approx(expected)
    assert expected != pytest.approx(daily_reading)


def test_ensembles_are_not_trials_and_building_them_moves_no_agents_dsr(world, api_client, client, user):
    sharpes = [0.4, 1.6, 1.1, 0.2]
    for agent, sharpe in zip(world.agents, sharpes):
        Agent.objects.filter(pk=agent.pk).update(metrics={**agent.metrics, "sharpe_ratio": sharpe, "num_days": 252})
    url = f"/api/agents/?run={world.run.id}"
    before = {a["id"]: a["deflated_sharpe"] for a in api_client.get(url).json()["results"]}
    stats_before = deflated.run_sharpes(world.run.id)

    built = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json")
    again = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 3}, format="json")
    pair = api_client.post(f"/api/runs/{world.run.id}/ensemble/", {"k": 2}, format="json")

    assert (built.status_code, again.status_code, pair.status_code) == (201, 200, 201)
    ensemble = Agent.objects.get(pk=built.json()["id"])
    assert _sharpe(ensemble) is not None, "an ensemble has a validation Sharpe ratio of its own"
    stats = deflated.run_sharpes(world.run.id)
    assert stats == stats_before and stats.trials == 4
    after = {a["id"]: a["deflated_sharpe"] for a in api_client.get(url).json()["results"]}
    assert {i: after[i] for i in before} == before
    # the ensemble's own DSR: against the same 4 trials and their variance
    expected = deflated_sharpe_ratio(
        _sharpe(ensemble) / math.sqrt(252),
        num_trials=4,
        sharpe_variance=stats.variance / 252,
        num_observations=int(ensemble.metrics["num_days"]),
    )
    assert after[ensemble.id] == pytest.approx(expected)
    client.force_login(user)
    page = client.get(f"/agents/{world.agents[1].pk}/").content.decode()
    assert "4 agents trained and evaluated" in page


def _sharpe(agent: Agent) -> float | None:
    value = agent.metrics.get("sharpe_ratio")
    return None if value is None else float(value)


# Run in a fresh interpreter on the default database: the demo's SQLite file under var/.
_SQLITE_SCRIPT = """
import os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from django.db import connection
from tests.webapp.conftest import create_dataset, create_task
from webapp.runs import services
from webapp.runs.selectors import deflated
from webapp.runs.models import Agent, Generation, Pod
assert connection.vendor == "sqlite", connection.vendor
owner = get_user_model().objects.create_user("ada", password="unused-password-1")
task = create_task(owner, create_dataset(owner))
budget = services.budget_create(actor=owner, name="b", max_concurrent_pods=2, env_step_cap=10**6)
run = services.run_create(owner=owner, task=task, budget=budget, name="r", num_pods=1, generation_steps=256, device="cpu")
pod = Pod.objects.create(run=run, index=0)
seen = []
for i, sharpe in enumerate([0.5, 1.25, -0.25]):
    gen = Generation.objects.create(run=run, pod=pod, number=i + 1, env_steps=256, status=Generation.Status.DONE)
    Agent.objects.create(
        run=run, generation=gen, pod=pod, score=sharpe, metrics={"sharpe_ratio": sharpe, "short_window": False, "min_annualised_days": 63},
        checkpoint="x", sha256="0", created_seq=i + 1,
    )
    stats = deflated.run_sharpes(run.id)
    seen.append([stats.trials, stats.variance])
    Agent.objects.filter(run=run).update(on_leaderboard=True)
    # the pages and the API that read the agents' metrics answer on SQLite too
    from django.test import Client
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(owner)
    for url in ("/", "/runs/", f"/runs/{run.pk}/", f"/runs/{run.pk}/agents/", "/api/runs/", f"/api/runs/{run.pk}/",
                f"/api/runs/{run.pk}/leaderboard/"):
        status = client.get(url).status_code
        assert status == 200, (url, status)
print(seen)
"""


def test_the_runs_sharpe_statistics_work_on_the_default_sqlite_database_from_the_first_agent(tmp_path, data_dir):
    """SQLite's sample variance (Django's Python aggregate) raised on one value, so the first
    agent of every run failed its leaderboard update on the database ``./paddock demo`` uses;
    a JSON annotation of the runs list then broke the dashboard, the runs list and the run API
    there once a run had an agent. CI's suite runs on PostgreSQL: this runs on SQLite."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PADDOCK_VAR_DIR")}
    env.update(
        DEBUG="1", PADDOCK_VAR_DIR=str(tmp_path / "var"), PADDOCK_DATA_DIR=str(data_dir), PYTHONPATH=str(REPO_ROOT)
    )
    result = subprocess.run(
        [sys.executable, "-c", _SQLITE_SCRIPT], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert [n for n, _ in seen] == [1, 2, 3]
    assert seen[0][1] == 0.0
    assert seen[1][1] == pytest.approx((0.5 - 1.25) ** 2 / 2)  # two values: (a - b)^2 / 2
    mean = (0.5 + 1.25 - 0.25) / 3
    assert seen[2][1] == pytest.approx(sum((s - mean) ** 2 for s in (0.5, 1.25, -0.25)) / 2)

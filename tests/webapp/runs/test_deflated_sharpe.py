"""The Deflated Sharpe Ratio of leaderboard agents, on the run page, the agent page and the API,
computed from every agent the run has evaluated."""

from __future__ import annotations

import math

import pytest

from trainer.selection import deflated_sharpe_ratio
from webapp.runs import deflated
from webapp.runs.models import Agent

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
    assert "4 agents evaluated" in page
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

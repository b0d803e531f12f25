"""Issue 12, section 3: the report page and its HTML export show the agent's Deflated Sharpe
Ratio with the number of agents its run evaluated and the formula's source."""

from __future__ import annotations

import statistics

import pytest
from bs4 import BeautifulSoup

from webapp import engine
from webapp.runs.models import Agent

pytestmark = pytest.mark.django_db


def test_the_report_and_its_export_show_the_agents_dsr_and_the_trials(client, user, make_agent, run_backtest_now):
    agent = make_agent(score=1.0)
    others = [make_agent(score=0.5), make_agent(score=0.2)]
    base = dict(agent.metrics)
    assert base.get("sharpe_ratio") is not None and base.get("num_days")
    sharpes = [float(base["sharpe_ratio"]), 0.4, -0.3]
    for other, sharpe in zip(others, sharpes[1:]):
        Agent.objects.filter(pk=other.pk).update(metrics={**base, "sharpe_ratio": sharpe})
    make_agent(score=0.0)  # a fourth agent without a Sharpe ratio does not count
    Agent.objects.filter(run=agent.run, created_seq=4).update(metrics={"num_days": base["num_days"]})
    expected = engine.deflated_sharpe_ratio(
        sharpes[0],
        num_trials=3,
        annual_sharpe_variance=statistics.variance(sharpes),
        num_observations=int(base["num_days"]),
    )
    assert expected is not None and 0.0 <= expected <= 1.0
    backtest = run_backtest_now(agent, "2020-07-01", "2020-09-30")
    assert backtest.status == "done", backtest.error
    client.force_login(user)
    for url in (f"/reports/{backtest.id}/", f"/reports/{backtest.id}/export.html"):
        page = BeautifulSoup(client.get(url).content, "html.parser")
        value = page.select_one("#dsr-value")
        assert float(value["data-value"]) == pytest.approx(expected, rel=1e-9)
        assert value.get_text(strip=True) == f"{expected:.3f}"
        assert page.select_one("#dsr-trials").get_text(strip=True) == "3"
        note = page.select_one("#dsr-note").get_text(" ", strip=True)
        assert "Bailey & López de Prado 2014" in note and "Tasks, observations and selection" in note


def test_an_agent_without_a_validation_sharpe_has_no_dsr_on_its_report(client, user, agent, run_backtest_now):
    Agent.objects.filter(pk=agent.pk).update(metrics={"num_days": 10})
    agent.refresh_from_db()
    backtest = run_backtest_now(agent, "2020-07-01", "2020-07-31")
    assert backtest.status == "done", backtest.error
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/reports/{backtest.id}/").content, "html.parser")
    assert page.select_one("#dsr-value").get_text(strip=True).startswith("—")
    assert page.select_one("#dsr-trials").get_text(strip=True) == "0"

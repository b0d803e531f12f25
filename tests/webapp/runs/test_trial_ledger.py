"""The trial ledger and the Deflated Sharpe Ratio against 1/N: every trained agent ever evaluated
on a task is one trial (pruned ones and other runs' included); the DSR of the information ratio
over 1/N matches the paper's formula by hand; the leaderboard (page, live payload, API) and the
agent page carry it next to the raw-Sharpe DSR and the ``vs_equal_weight`` objects.

The agents hold the metrics of a really trained generation (``trained_checkpoint``), submitted
through the real services (``submit_agent``).
"""

from __future__ import annotations

import math
import statistics

import pytest
from bs4 import BeautifulSoup
from scipy import stats

from tests.webapp.conftest import make_world, submit_agent
from webapp.runs import services
from webapp.runs.models import Agent, Trial
from webapp.runs.selectors import deflated
from webapp.runs.selectors.payloads import run_snapshot

pytestmark = pytest.mark.django_db

GAMMA = 0.5772156649015329


@pytest.fixture
def world(user, trained_checkpoint):
    """Four agents, leaderboard of 3: the lowest score is pruned from the board."""
    return make_world(user, "ledger-data", checkpoint=trained_checkpoint, scores=[0.5, 1.5, 1.0, 0.2])


def test_every_trained_agent_enters_its_task_ledger_once_even_when_pruned(world):
    trials = list(Trial.objects.filter(task=world.task))
    assert len(trials) == 4
    assert Agent.objects.filter(run=world.run, on_leaderboard=False).exists()  # one was pruned
    agent = Agent.objects.get(pk=world.agents[0].pk)
    ir = agent.metrics["vs_equal_weight"]["information_ratio"]
    assert [t.information_ratio for t in trials] == pytest.approx([ir] * 4)
    assert services.trial_record(agent=agent).pk == agent.trial.pk  # idempotent
    assert Trial.objects.filter(task=world.task).count() == 4


def test_a_second_run_of_the_same_task_adds_its_agents_and_the_ledger_outlives_the_run(world, user, trained_checkpoint):
    run = services.run_create(
        owner=user, task=world.task, budget=world.budget, name="again", num_pods=1, generation_steps=256, device="cpu"
    )
    services.run_start(run=run)
    submit_agent(run, trained_checkpoint, 0.9)
    assert deflated.task_ledger(world.task.id).trials == 5
    run.delete()
    assert deflated.task_ledger(world.task.id).trials == 5  # deleting a run does not forget its trials


def hand_dsr(rel: dict, trials: int, variance: float) -> float:
    """Bailey & López de Prado 2014, eq. 2, on the per-day information ratio of the active returns."""
    ir = rel["information_ratio"] / math.sqrt(252)
    v = variance / 252
    sr0 = math.sqrt(v) * (
        (1 - GAMMA) * stats.norm.ppf(1 - 1 / trials) + GAMMA * stats.norm.ppf(1 - 1 / (trials * math.e))
    )
    g3, g4 = rel["active_skewness"], rel["active_kurtosis"]
    z = (ir - sr0) * math.sqrt(rel["n_periods"] - 1) / math.sqrt(1 - g3 * ir + (g4 - 1) / 4 * ir * ir)
    return float(stats.norm.cdf(z))


def test_the_dsr_against_one_over_n_matches_the_formula_by_hand_everywhere(world, user, client):
    ratios = [0.5, -0.3, 1.1, 0.2]  # annualised IRs of the four trials
    for trial, value in zip(Trial.objects.filter(task=world.task).order_by("id"), ratios):
        Trial.objects.filter(pk=trial.pk).update(information_ratio=value)
    variance = statistics.variance(ratios)  # 0.3633...
    best = Agent.objects.get(pk=world.agents[1].pk)
    rel = best.metrics["vs_equal_weight"]
    expected = hand_dsr(rel, 4, variance)
    assert deflated.agent_dsr_vs_equal_weight(best, deflated.task_ledger(world.task.id)) == pytest.approx(expected)

    client.force_login(user)
    rows = {r["id"]: r for r in client.get(f"/api/runs/{world.run.pk}/leaderboard/").json()["results"]}
    assert rows[best.pk]["deflated_sharpe_vs_equal_weight"] == pytest.approx(expected)
    assert rows[best.pk]["ledger_trials"] == 4
    assert rows[best.pk]["vs_equal_weight"]["verdict"] in {"beats", "trails", "indistinguishable"}
    assert rows[best.pk]["vs_equal_weight_with_costs"]["ci95"] == best.metrics["vs_equal_weight_with_costs"]["ci95"]

    live = {r["id"]: r for r in run_snapshot(world.run)["leaderboard"]}[best.pk]
    raw = live["deflated_sharpe"]
    assert live["dsr_text"] == f"{expected:.3f} · raw {raw:.3f}"
    page = BeautifulSoup(client.get(f"/runs/{world.run.pk}/").content, "html.parser")
    cell = page.select_one(f'#leaderboard tr[data-agent-id="{best.pk}"] [data-col="dsr"]')
    assert cell.get_text(strip=True) == live["dsr_text"]
    assert "Against 1/N on the same validation days" in page.select_one("#leaderboard-verdict").text

    agent_page = BeautifulSoup(client.get(f"/agents/{best.pk}/").content, "html.parser")
    assert agent_page.select_one("#deflated-sharpe-vs-equal-weight").text == f"{expected:.3f}"
    verdicts = agent_page.select("table#vs-equal-weight tr[data-comparison]")
    assert [tr["data-comparison"] for tr in verdicts] == ["vs_equal_weight", "vs_equal_weight_with_costs"]

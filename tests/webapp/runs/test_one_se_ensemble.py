"""A run's scores carry their standard error (leaderboard page, API, live events), and a
finished run's deliverable is the ensemble of its leaderboard agents within one SE of the best,
built by the end-of-run task; every evaluated agent is a trial of the task's ledger."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from tests.webapp.conftest import create_dataset, create_task, submit_agent
from webapp.reports.models import Backtest
from webapp.reports.tasks import backtest_top_agents
from webapp.runs import services
from webapp.runs.models import Agent, Run, Trial
from webapp.runs.selectors.payloads import leaderboard, leaderboard_with_verdict

pytestmark = pytest.mark.django_db


def _se(checkpoint) -> float:
    se = checkpoint["metrics"]["score_se"]
    assert se is not None and se > 0, "the tiny task's validation split is long enough for an SE"
    return float(se)


@pytest.fixture
def spent_run(user, trained_checkpoint):
    """ada's one-pod run whose budget holds three generations: the test submits them as the
    worker would (``submit_agent``), the third spends the budget and the run finishes. Scores:
    the best, half an SE below it, two SEs below it (the SE is the checkpoint's, shared)."""
    se = _se(trained_checkpoint)
    dataset = create_dataset(user, "ada-noise")
    task = create_task(user, dataset, name="noise task")
    budget = services.budget_create(actor=user, name="three generations", max_concurrent_pods=1, env_step_cap=3 * 256)
    run = services.run_create(
        owner=user, task=task, budget=budget, num_pods=1, generation_steps=256, leaderboard_size=3, device="cpu"
    )
    services.run_start(run=run)
    agents = [submit_agent(run, trained_checkpoint, score) for score in (1.0, 1.0 - 0.5 * se, 1.0 - 2.0 * se)]
    run.refresh_from_db()
    return run, agents, se


def test_a_finished_run_gets_the_ensemble_of_its_agents_within_one_se_of_the_best(spent_run):
    run, (best, close, far), se = spent_run
    assert run.status == Run.Status.FINISHED, "the third generation spent the budget"
    assert [a.id for a in leaderboard(run)] == [best.id, close.id, far.id]
    assert best.score_se == pytest.approx(se)

    backtest_top_agents(run.id)  # the end-of-run task the run_ended signal queues, run here as its worker

    ensembles = list(Agent.objects.filter(run=run, kind=Agent.Kind.ENSEMBLE))
    assert len(ensembles) == 1
    deliverable = ensembles[0]
    assert deliverable.members == [best.id, close.id], "two SEs below the best is outside the one-SE set"
    assert deliverable.metrics["ensemble"]["rule"] == "one_se"
    assert deliverable.score is not None and deliverable.score_se is not None
    assert Backtest.objects.filter(agent=deliverable, source=Backtest.Source.END_OF_RUN).exists()
    # every evaluated agent is one trial of the task; the ensemble is no new trial
    assert set(Trial.objects.filter(task=run.task).values_list("agent_id", flat=True)) == {best.id, close.id, far.id}
    backtest_top_agents(run.id)
    assert Agent.objects.filter(run=run, kind=Agent.Kind.ENSEMBLE).count() == 1, "built once"


def test_the_leaderboard_shows_each_score_with_its_se_on_the_page_the_api_and_the_live_events(
    spent_run, api_client, client, user
):
    run, (best, close, far), se = spent_run

    body = api_client.get(f"/api/runs/{run.id}/leaderboard/").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert rows[0]["id"] == best.id and rows[0]["score_se"] == pytest.approx(se)
    live = leaderboard_with_verdict(run)["leaderboard"]
    assert live[0]["score_se"] == pytest.approx(se)
    assert [item["within_one_se"] for item in live] == [True, True, False]

    client.force_login(user)
    page = BeautifulSoup(client.get(f"/runs/{run.id}/").content, "html.parser")

    def cell(agent):
        return page.select_one(f'#leaderboard tr[data-agent-id="{agent.id}"] [data-col="score"]')

    assert cell(best).find(string=True, recursive=False).strip() == f"1.000 ± {se:.3f}"
    assert cell(best).select_one(".badge.one-se") and cell(close).select_one(".badge.one-se")
    assert cell(far).select_one(".badge.one-se") is None, "two SEs below the best"

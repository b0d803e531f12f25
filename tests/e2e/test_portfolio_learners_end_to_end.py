"""The two portfolio learners, each end to end from the browser: the direct learner (a portfolio
task's default algorithm) and PPO with the cross-sectional actor (``"policy": "cross_sectional"``).

For each, a staff user assigns herself a budget on the budgets page and fills the new-run form:
choosing the portfolio task kind turns the algorithm to ``direct`` with its default
hyperparameters (``static/js/run_form.js``); the PPO case then picks PPO. Tiny settings (5 Dow-30
tickers, 2 pods, 3 generations of 2,048 env steps) keep a case short. The real Celery worker
trains the run; the run page shows leaderboard rows whose score cell is ``score ± SE`` and agrees
with the stored score and standard error. When the env-step cap ends the run:

- the run's deliverable, the ensemble of the leaderboard agents within one SE of the best
  (``Agent.Kind.ENSEMBLE``, ``metrics["ensemble"]["rule"] == "one_se"``), exists; its members are
  the leaderboard rows carrying the "one SE" badge;
- the end-of-run backtests (the best agents and the ensemble) are done, and the best agent's
  report, one click from the run page, reads ``done``;
- the best agent's bundle, downloaded from its page, loads with ``trainer.load_agent`` with the
  task's tickers and learner;
- a serve token made on the tokens page calls ``POST /api/agents/<id>/act``: a test-split date
  answers one action per portfolio slot (the tickers and cash) and target weights that sum to 1;
  a batch of that observation answers the same action per row, which the downloaded bundle's
  policy reproduces.
"""

from __future__ import annotations

import json
import re
import urllib.request

import numpy as np
import pytest
from playwright.sync_api import expect

from tests.conftest import DOW30_FILE
from tests.e2e.conftest import assign_budget, make_serve_token
from tests.harness import wait_for
from trainer import load_agent
from webapp import engine
from webapp.demo.profiles import CI_PROFILE, SPLITS
from webapp.reports.models import Backtest
from webapp.runs.models import Agent, Run

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TICKERS = list(CI_PROFILE.tickers)
PODS = 2
GENERATIONS = 3
#: 8 gradient steps (direct) or PPO rollouts of 32 envs x 8 steps
GENERATION_STEPS = 2048
LEARNERS = {
    "direct": ("direct", {"num_envs": 32, "rollout_steps": 8, "hidden_sizes": [8]}),
    "ppo-cross-sectional": (
        "ppo",
        {
            "policy": "cross_sectional",
            "num_envs": 32,
            "rollout_steps": 8,
            "num_minibatches": 2,
            "update_epochs": 1,
            "hidden_sizes": [16],
        },
    ),
}
TIMEOUT_S = 180.0
ROWS = "#leaderboard tbody tr[data-agent-id]"
SCORE_SE = re.compile(r"^(-?\d+\.\d{3}) ± (\d+\.\d{3})( one SE)?$")
SERVE_DATE = "2021-06-01"  # a trading day of the test split


def _score_cells(page) -> dict[int, str]:
    """The leaderboard's score cells, by agent id."""
    return {
        int(row.get_attribute("data-agent-id")): row.locator('td[data-col="score"]').inner_text().strip()
        for row in page.locator(ROWS).all()
    }


def _act(live_url: str, agent_id: int, key: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{live_url}/api/agents/{agent_id}/act",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("learner", list(LEARNERS))
def test_a_portfolio_learner_trains_from_the_form_to_a_served_agent(
    learner, page, live_url, celery_worker, staff_user, login, screenshot, tmp_path
):
    from webapp.market import services as market_services

    algorithm, hyperparameters = LEARNERS[learner]
    dataset = market_services.dataset_create_from_files(
        owner=staff_user, name="dow30 five", paths=[DOW30_FILE], tickers=TICKERS
    )
    login(page, staff_user)
    steps = GENERATIONS * GENERATION_STEPS
    assign_budget(page, name=f"{learner} budget", owner=staff_user, pods=PODS, env_steps=steps, wall_clock_s=300)

    # --- the new-run form: the portfolio kind brings the direct learner and its defaults --------
    page.goto("/runs/new/")
    page.fill("#id_name", f"{learner} run")
    page.select_option("#id_dataset", str(dataset.id))
    page.fill("#id_tickers", ", ".join(TICKERS))
    for split, (start, end) in SPLITS.items():
        page.fill(f"#id_{split}_start", start)
        page.fill(f"#id_{split}_end", end)
    page.select_option("#id_kind", "stock_trading")
    expect(page.locator("#id_algorithm")).to_have_value("ppo")
    page.select_option("#id_kind", "portfolio")
    expect(page.locator("#id_algorithm")).to_have_value("direct")
    assert json.loads(page.input_value("#id_hyperparameters")) == engine.default_hyperparameters("direct")
    if algorithm != "direct":
        page.select_option("#id_algorithm", algorithm)
    page.fill("#id_hyperparameters", json.dumps(hyperparameters))
    page.select_option("#id_budget", label=f"{learner} budget")
    page.fill("#id_num_pods", str(PODS))
    page.fill("#id_generation_steps", str(GENERATION_STEPS))
    expect(page.locator("#id_start_now")).to_be_checked()
    # The first POST imports the trainer's config classes (torch) in the server: allow for it.
    with page.expect_navigation(timeout=120_000):
        page.click("#create-run")
    match = re.search(r"/runs/(\d+)/$", page.url)
    assert match, f"the form did not lead to a run page: {page.url}"
    run = Run.objects.select_related("task").get(pk=int(match.group(1)))
    assert (run.task.kind, run.task.algorithm) == ("portfolio", algorithm)
    assert run.task.tickers == TICKERS
    assert {k: run.task.hyperparameters[k] for k in hyperparameters} == hyperparameters

    # --- the live leaderboard: every score with its standard error ------------------------------
    page.wait_for_selector("#live-indicator[data-state=live]")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length >= 2", timeout=TIMEOUT_S * 1000, polling=250)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "finished", timeout=TIMEOUT_S * 1000)
    run.refresh_from_db()
    assert "env-step cap" in run.status_reason, run.status_reason
    board = list(Agent.objects.filter(run=run, on_leaderboard=True))
    cells = _score_cells(page)
    assert set(cells) == {a.id for a in board}
    badged = set()
    for agent in board:
        shown = SCORE_SE.match(cells[agent.id])
        assert shown, f"agent #{agent.id}'s score cell is not 'score ± SE': {cells[agent.id]!r}"
        assert agent.score_se is not None and agent.score_se > 0
        assert (float(shown[1]), float(shown[2])) == pytest.approx((agent.score, agent.score_se), abs=6e-4)
        if shown[3]:
            badged.add(agent.id)
    best = board[0]
    assert page.locator(ROWS).first.get_attribute("data-agent-id") == str(best.id)
    assert best.algorithm == algorithm
    screenshot(page, f"portfolio-{learner}-finished")

    # --- the deliverable: the one-SE ensemble, and the end-of-run backtests -------------------
    report_links = page.locator("#run-reports a.report-link")
    expect(report_links.first).to_be_visible(timeout=TIMEOUT_S * 1000)
    ensemble = Agent.objects.get(run=run, kind=Agent.Kind.ENSEMBLE)
    assert ensemble.metrics["ensemble"]["rule"] == "one_se"
    assert len(ensemble.members) >= 2 and set(ensemble.members) <= {a.id for a in board}
    assert ensemble.members[0] == best.id
    assert set(ensemble.members) == badged, "the ensemble's members are the rows badged 'one SE'"

    def backtests_pending() -> list[str]:
        return [f"#{b.id} {b.status}" for b in Backtest.objects.filter(run=run).exclude(status="done")]

    wait_for(
        lambda: not backtests_pending(), timeout=TIMEOUT_S, what="the end-of-run backtests", pending=backtests_pending
    )
    tested = set(Backtest.objects.filter(run=run, source=Backtest.Source.END_OF_RUN).values_list("agent_id", flat=True))
    assert {best.id, ensemble.id} <= tested
    report_href = report_links.first.get_attribute("href")
    assert Backtest.objects.get(pk=int(re.search(r"/reports/(\d+)/$", report_href)[1])).agent_id == best.id
    report_links.first.click()
    expect(page.locator("#backtest-status")).to_have_text("done")

    # --- the best agent's bundle: downloaded from its page, loaded by the trainer --------------
    page.goto(f"/agents/{best.id}/")
    with page.expect_download() as download_info:
        page.click("#download-bundle")
    bundle_path = tmp_path / "best.zip"
    download_info.value.save_as(bundle_path)
    loaded = load_agent(bundle_path)
    assert loaded.tickers == tuple(TICKERS)
    assert (loaded.kind, loaded.algorithm, loaded.action_dim) == ("portfolio", algorithm, len(TICKERS) + 1)

    # --- serving: a serve token from the browser, then actions for an observation ---------------
    key = make_serve_token(page, best.id, f"{learner} bot")
    state = _act(live_url, best.id, key, {"date": SERVE_DATE})
    assert state["date"] == SERVE_DATE and state["algorithm"] == algorithm
    assert list(state["target_weights"]) == [*TICKERS, "cash"]
    assert sum(state["target_weights"].values()) == pytest.approx(1.0, abs=1e-5)
    action = np.asarray(state["action"])
    assert action.shape == (len(TICKERS) + 1,), "one action per portfolio slot: the tickers and cash"
    batch = _act(live_url, best.id, key, {"observations": [state["observation"]] * 2})
    actions = np.asarray(batch["actions"])
    assert actions.shape == (2, len(TICKERS) + 1)
    np.testing.assert_allclose(actions, [action, action], atol=1e-5)
    np.testing.assert_allclose(loaded.act(np.asarray([state["observation"]], dtype=np.float32)), [action], atol=1e-4)

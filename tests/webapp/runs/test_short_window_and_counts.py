"""What a fresh user found dishonest on the web pages, fixed and kept fixed:

- a validation window shorter than the short-window rule's minimum (63 trading days): the
  leaderboard (first paint and live payload), the agent page and the API give every Sharpe-based
  figure (score, Sharpe ratios and differences, the DSR) and the annualised metrics as the CLI
  does, "n/a" with the reason, while the API keeps the numbers flagged ``short_window``;
- ``score_metric`` names the rule the scores follow;
- agent counts say what they count (trained agents, ensembles), the same everywhere;
- ``/api/agents/?kind=``, ``/reports/?run=`` and the ensemble's training-curve message.

The short-window agents are a really trained generation on a 35-day validation window.
"""

from __future__ import annotations

import json
import types
from typing import Any

import pytest
from bs4 import BeautifulSoup
from rest_framework.test import APIClient

from tests.webapp.conftest import TICKERS, TINY_PPO, TRADING_ENV, create_dataset, submit_agent, tiny_generation
from trainer.backtest.contract import MIN_ANNUALISED_DAYS, short_window_text
from webapp.runs.models import Agent
from webapp.runs.selectors.payloads import run_payload, run_snapshot, score_note
from webapp.runs.services import ensembles

pytestmark = pytest.mark.django_db

SHORT_SPLITS = {
    "train": ["2018-06-01", "2019-12-31"],
    "validation": ["2020-01-01", "2020-02-20"],
    "test": ["2020-07-01", "2020-12-31"],
}
NOTE = short_window_text(MIN_ANNUALISED_DAYS)


@pytest.fixture(scope="module")
def short_checkpoint(data_dir, tmp_path_factory) -> dict[str, Any]:
    """One real PPO generation of the tiny task validated on 2020-01-01..2020-02-20."""
    from tests.conftest import BENCHMARK_FILE

    task_fields = {**SHORT_SPLITS, "env": TRADING_ENV}
    return tiny_generation(
        data_dir, tmp_path_factory, task_fields, "short-window", benchmark_path=data_dir / BENCHMARK_FILE
    )


def make_short_world(owner, checkpoint: dict[str, Any], scores=(0.5, 1.5, 1.0)) -> types.SimpleNamespace:
    """``owner``'s started 2-pod run of the short-window task with agents of ``scores``."""
    from webapp.runs import services

    dataset = create_dataset(owner, "short-data")
    task = services.task_create(
        owner=owner,
        dataset=dataset,
        name="short task",
        tickers=TICKERS,
        splits=SHORT_SPLITS,
        algorithm="ppo",
        hyperparameters=TINY_PPO,
        env=TRADING_ENV,
        selection={"rule": "worst_window", "windows": 2},
    )
    budget = services.budget_create(actor=owner, name="short budget", max_concurrent_pods=8, env_step_cap=10**9)
    run = services.run_create(
        owner=owner, task=task, budget=budget, name="short run", num_pods=2, generation_steps=256, device="cpu"
    )
    services.run_start(run=run)
    agents = [submit_agent(run, checkpoint, s) for s in scores]
    run.refresh_from_db()
    return types.SimpleNamespace(run=run, agents=agents)


@pytest.fixture
def short_world(user, short_checkpoint):
    """ada's started 2-pod run of the short-window task with three agents."""
    return make_short_world(user, short_checkpoint)


@pytest.fixture
def page_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def api(user):
    api = APIClient()
    api.force_authenticate(user)
    return api


def _soup(response) -> BeautifulSoup:
    assert response.status_code == 200, response.content[:500]
    return BeautifulSoup(response.content, "html.parser")


def test_the_trained_metrics_flag_the_short_window(short_world):
    m = Agent.objects.get(pk=short_world.agents[0].pk).metrics
    assert m["short_window"] is True and m["num_days"] < MIN_ANNUALISED_DAYS
    assert m["sharpe_ratio"] is not None and m["vs_equal_weight"]["sharpe_difference"] is not None


def test_the_leaderboard_shows_sharpe_figures_and_the_dsr_as_na_with_the_reason(page_client, short_world):
    page = _soup(page_client.get(f"/runs/{short_world.run.pk}/"))
    best = page.select_one("#best-score")
    assert best.get_text(strip=True) == "n/a" and best["title"] == NOTE
    assert run_payload(short_world.run)["score_note"] == NOTE
    rows = page.select("#leaderboard tbody tr")
    assert len(rows) == 3
    for row in rows:

        def cell(col, row=row):
            return row.select_one(f'[data-col="{col}"]')

        assert cell("score").get_text(strip=True) == "n/a"
        assert cell("sharpe").get_text(strip=True) == NOTE
        assert cell("untrained").get_text(" ", strip=True) == "n/a"
        for col in ("vs_equal_weight", "vs_qqq"):
            text = cell(col).get_text(" ", strip=True)
            assert text.endswith("· Sharpe n/a") and "%" in text, text  # the excess return is no ratio
        assert cell("dsr").get_text(strip=True) == "n/a"
        for col in ("score", "untrained", "sharpe", "vs_equal_weight", "vs_qqq", "dsr"):
            assert cell(col)["title"] == NOTE, col
    # the live payload carries the same texts and the flag, with the numbers kept
    snapshot = run_snapshot(short_world.run)
    for item in snapshot["leaderboard"]:
        b = item["baselines"]
        assert b["short_window"] is True and b["note"] == NOTE and b["min_annualised_days"] == MIN_ANNUALISED_DAYS
        assert b["texts"]["sharpe"] == NOTE and b["sharpe"] is not None
        assert item["deflated_sharpe"] is not None and not b["within_noise"]


def test_the_agent_page_withholds_annualised_and_sharpe_figures(page_client, short_world):
    agent = Agent.objects.get(pk=short_world.agents[1].pk)
    page = _soup(page_client.get(f"/agents/{agent.pk}/"))
    assert page.select_one("#score").get_text(strip=True) == "n/a"
    assert NOTE in page.select_one("#short-window-note").get_text(" ", strip=True)
    for sel in ("#baseline-untrained", "#baseline-noise", "#deflated-sharpe"):
        assert page.select_one(sel).get_text(strip=True) == "n/a", sel
    for tr in page.select("#baseline-comparison tbody tr"):
        assert tr.select_one('[data-col="sharpe"]').get_text(strip=True) in ("n/a", "–")
        if tr["data-series"] != "agent":
            assert tr.select_one('[data-col="sharpe_difference"]').get_text(strip=True) in ("n/a", "–")
    cells = {tr.th.get_text(strip=True): tr.td.get_text(strip=True) for tr in page.select("#metrics tr")}
    for label in ("Annual return", "Annual volatility", "Sharpe ratio", "Sortino ratio"):
        assert cells[label] == NOTE, label
    assert cells["Short window"] == "yes"
    assert cells["Total return"].endswith("%")  # not annualised: shown


def test_the_api_keeps_the_numbers_and_exposes_the_flag(api, short_world):
    agent = Agent.objects.get(pk=short_world.agents[0].pk)
    body = api.get(f"/api/agents/{agent.pk}/").json()
    assert body["baselines"]["short_window"] is True and body["baselines"]["note"] == NOTE
    assert body["baselines"]["sharpe"] == pytest.approx(agent.metrics["sharpe_ratio"])
    assert body["deflated_sharpe"] is not None and body["metrics"]["short_window"] is True
    board = api.get(f"/api/runs/{short_world.run.pk}/leaderboard/").json()
    rows = board["results"] if isinstance(board, dict) else board
    assert rows and all(r["baselines"]["short_window"] for r in rows)


def test_a_long_window_shows_the_figures(page_client, world):
    page = _soup(page_client.get(f"/runs/{world.run.pk}/"))
    row = page.select_one("#leaderboard tbody tr")
    assert row.select_one('[data-col="score"]').get_text(strip=True) not in ("n/a", "–")
    assert not row.select_one('[data-col="sharpe"]').has_attr("title")
    assert page.select_one("#best-score").get_text(strip=True) == f"{world.run.best_score:.3f}"
    assert run_payload(world.run)["score_note"] == ""
    assert run_snapshot(world.run)["leaderboard"][0]["baselines"]["short_window"] is False


def test_score_metric_names_the_rule(api, short_world, world):
    run = api.get(f"/api/runs/{short_world.run.pk}/").json()
    assert run["score_metric"] == "worst_window" == run["score_rule"]["rule"]
    assert api.get(f"/api/runs/{world.run.pk}/").json()["score_metric"] == "mean_minus_std"
    assert run_payload(short_world.run)["score_metric"] == "worst_window"


def test_agent_counts_say_what_they_count(api, page_client, world):
    ensemble, _ = ensembles.ensemble_get_or_create(run=world.run, k=3)
    run = api.get(f"/api/runs/{world.run.pk}/").json()
    assert (run["agents_count"], run["ensembles_count"]) == (4, 1)
    listed = api.get("/api/runs/").json()["results"]
    assert next(r for r in listed if r["id"] == world.run.pk)["ensembles_count"] == 1
    assert len(api.get(f"/api/agents/?run={world.run.pk}").json()["results"]) == 5
    summary = _soup(page_client.get(f"/runs/{world.run.pk}/")).select_one("#run-summary")
    assert summary.select_one("#agents-count").get_text(strip=True) == "4"
    assert summary.select_one("#ensembles-count").get_text(strip=True) == "1"
    assert "4 trained + 1 ensemble" in summary.get_text(" ", strip=True)
    total = _soup(page_client.get(f"/runs/{world.run.pk}/agents/")).select_one("#agents-total")
    assert total.get_text(" ", strip=True) == "5: 4 trained agents + 1 ensemble"
    assert run_payload(world.run)["ensembles"] == 1
    runs_page = _soup(page_client.get("/runs/"))
    assert "4 + 1 ensemble" in runs_page.select_one('[data-col="agents"]').get_text(" ", strip=True)


def test_agents_api_filters_by_kind_and_names_a_bad_kind(api, world):
    ensemble, _ = ensembles.ensemble_get_or_create(run=world.run, k=3)
    only = api.get(f"/api/agents/?run={world.run.pk}&kind=ensemble").json()["results"]
    assert [a["id"] for a in only] == [ensemble.pk]
    trained = api.get(f"/api/agents/?run={world.run.pk}&kind=trained").json()["results"]
    assert len(trained) == 4 and all(a["kind"] == "trained" for a in trained)
    bad = api.get("/api/agents/?kind=ensembles")
    assert bad.status_code == 400 and "kind" in bad.json()["fields"], bad.content


def test_the_ensemble_page_says_it_has_no_training_curve_of_its_own(page_client, world):
    ensemble, _ = ensembles.ensemble_get_or_create(run=world.run, k=3)
    text = _soup(page_client.get(f"/agents/{ensemble.pk}/")).select_one("#metrics-empty").get_text(" ", strip=True)
    assert "ensemble of its members" in text and "no training curve of its own" in text
    assert "No training curve yet" not in text
    trained = _soup(page_client.get(f"/agents/{world.agents[0].pk}/")).select_one("#metrics-empty")
    assert trained.get_text(" ", strip=True).startswith("No training curve yet")


def test_every_list_and_chart_of_scores_withholds_a_short_windows_scores(page_client, short_world, world):
    """The runs list, the dashboard, the agents page (table, lineage tree, scatter), the agent
    page's lineage, the compare page and the run page's score chart: "n/a" with the reason for
    the short-window run, numbers for the run validated on a full year."""
    short, full = short_world.run, world.run
    assert score_note(full) == "" and full.best_score is not None

    for url in ("/runs/", "/"):
        page = _soup(page_client.get(url))
        cell = page.select_one(f'tr[data-run-id="{short.pk}"] [data-col="best-score"]')
        assert cell.get_text(strip=True) == "n/a" and cell["title"] == NOTE, url
        cell = page.select_one(f'tr[data-run-id="{full.pk}"] [data-col="best-score"]')
        assert cell.get_text(strip=True) == f"{full.best_score:.3f}" and not cell.has_attr("title"), url

    page = _soup(page_client.get(f"/runs/{short.pk}/agents/"))
    cells = page.select('#agents-table tbody [data-col="score"]')
    assert len(cells) == 3 and all(c.get_text(strip=True) == "n/a" and c["title"] == NOTE for c in cells)
    assert {s.get_text(strip=True) for s in page.select("#lineage-tree .score")} == {"n/a"}
    assert NOTE in page.select_one("#scatter-note").get_text(" ", strip=True)
    page = _soup(page_client.get(f"/runs/{full.pk}/agents/"))
    assert page.select_one("#scatter-note") is None
    assert "n/a" not in {c.get_text(strip=True) for c in page.select('#agents-table tbody [data-col="score"]')}

    page = _soup(page_client.get(f"/agents/{short_world.agents[0].pk}/"))
    assert {s.get_text(strip=True) for s in page.select("#lineage .score")} == {"n/a"}

    page = _soup(page_client.get(f"/runs/{short.pk}/"))
    note = page.select_one("#score-chart-note")
    assert not note.has_attr("hidden") and note.select_one("#score-chart-note-text").get_text() == NOTE
    assert _soup(page_client.get(f"/runs/{full.pk}/")).select_one("#score-chart-note").has_attr("hidden")

    page = _soup(page_client.get(f"/runs/compare/?ids={short.pk}&ids={full.pk}"))
    assert NOTE in page.select_one(f'li[data-run-id="{short.pk}"]').get_text(" ", strip=True)
    assert page.select_one(f'li[data-run-id="{full.pk}"] .score-note') is None
    curves = {c["run_id"]: c for c in json.loads(page.select_one("#runs-curves").get_text())}
    assert curves[short.pk]["score_note"] == NOTE and curves[full.pk]["score_note"] == ""

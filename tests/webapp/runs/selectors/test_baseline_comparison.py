"""An agent's validation result next to its baselines on the same days, like with like: its
score next to the untrained policy's score (same rule), its Sharpe ratio next to the untrained
policy's, 1/N's and QQQ's, and its excess return and Sharpe difference over 1/N and QQQ, on the
leaderboard (first paint and live payload), the agent page and the API; and every score
labelled by the selection rule that made it.

The agents hold the metrics of a really trained generation (``trained_checkpoint``).
"""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup
from rest_framework.test import APIClient

from tests.conftest import BENCHMARK_FILE
from tests.webapp.conftest import make_world
from webapp.runs.models import Agent
from webapp.runs.selectors.payloads import run_snapshot

pytestmark = pytest.mark.django_db

DEFAULT_LABEL = "mean - 1 x std of the Sharpe ratios of 4 validation sub-windows"


@pytest.fixture(scope="module")
def benchmarked_checkpoint(data_dir, tmp_path_factory, trained_checkpoint) -> dict[str, Any]:
    """``trained_checkpoint``'s generation trained again as a worker trains it, with the QQQ
    file (``PADDOCK_BENCHMARK_FILE``): its metrics also hold ``vs_QQQ`` and QQQ's cumulative
    return on the validation days."""
    from tests.webapp.conftest import TRADING_ENV, tiny_generation

    return tiny_generation(
        data_dir, tmp_path_factory, {"env": TRADING_ENV}, "benchmarked", benchmark_path=data_dir / BENCHMARK_FILE
    )


@pytest.fixture
def world(user, benchmarked_checkpoint):
    """ada's started run with four agents of the benchmarked checkpoint (scores 0.5, 1.5, 1.0,
    0.2; the top 3 rank)."""
    return make_world(user, "ada-data", checkpoint=benchmarked_checkpoint, scores=[0.5, 1.5, 1.0, 0.2])


@pytest.fixture
def page_client(client, user):
    client.force_login(user)
    return client


def _row(html: bytes, agent_id: int):
    return BeautifulSoup(html, "html.parser").select_one(f'#leaderboard tr[data-agent-id="{agent_id}"]')


def _cell(row, col: str) -> str:
    return row.select_one(f'[data-col="{col}"]').get_text(" ", strip=True)


def test_the_trained_metrics_hold_every_figure_the_comparison_needs(world):
    m = Agent.objects.get(pk=world.agents[0].pk).metrics
    assert {"score", "sharpe_ratio", "total_return"} <= set(m["untrained"])
    for key in ("vs_equal_weight", "vs_QQQ"):
        assert {"excess_return", "sharpe_difference", "baseline_sharpe", "baseline_total_return"} <= set(m[key])


def test_the_leaderboard_shows_sharpe_next_to_sharpe_and_the_excess_over_1n_and_qqq(page_client, world):
    agent = Agent.objects.get(pk=world.agents[1].pk)  # the best score: first row
    m = agent.metrics
    row = _row(page_client.get(f"/runs/{world.run.pk}/").content, agent.pk)
    sharpe = _cell(row, "sharpe")
    expected = [
        f"{m['sharpe_ratio']:.2f}",
        f"untrained {m['untrained']['sharpe_ratio']:.2f}",
        f"1/N {m['vs_equal_weight']['baseline_sharpe']:.2f}",
        f"QQQ {m['vs_QQQ']['baseline_sharpe']:.2f}",
    ]
    assert sharpe == " · ".join(expected)
    ew, qqq = m["vs_equal_weight"], m["vs_QQQ"]
    fair = m["vs_equal_weight_with_costs"]
    low, high = ew["ci95"]
    assert _cell(row, "vs_equal_weight") == (
        f"{ew['excess_return'] * 100:+.2f} % · Sharpe {ew['sharpe_difference']:+.2f} [{low:+.2f}, {high:+.2f}]"
        f" · {ew['verdict']} · with costs: {fair['verdict']}"
    )
    assert _cell(row, "vs_qqq") == f"{qqq['excess_return'] * 100:+.2f} % · Sharpe {qqq['sharpe_difference']:+.2f}"
    # the untrained policy's score stands next to the score, both by the same rule
    assert _cell(row, "untrained").startswith(f"untrained {m['untrained']['score']:.2f}")
    assert _cell(row, "score").startswith(f"{agent.score:.3f} ± ")  # the score with its standard error


def test_the_live_payload_carries_the_same_cells_as_the_first_paint(page_client, world):
    html = page_client.get(f"/runs/{world.run.pk}/").content
    snapshot = run_snapshot(world.run)
    assert snapshot["leaderboard"], "no leaderboard rows"
    for item in snapshot["leaderboard"]:
        row = _row(html, item["id"])
        for col in ("untrained", "sharpe", "vs_equal_weight", "vs_qqq"):
            shown = _cell(row, col).replace(" within noise", "")
            assert shown == (item["baselines"]["texts"][col] or "–"), col
    assert snapshot["run"]["score_rule"]["label"] == DEFAULT_LABEL


def test_the_live_renderer_fills_the_same_columns_the_template_has():
    from tests.conftest import REPO_ROOT

    js = (REPO_ROOT / "static" / "js" / "run_live.js").read_text()
    template = (REPO_ROOT / "templates" / "runs" / "detail.html").read_text()
    for col in ("untrained", "sharpe", "vs_equal_weight", "vs_qqq"):
        assert f'"{col}"' in js and f'data-col="{col}"' in template
    assert 'data-col="baselines"' not in template


def test_an_untrained_policy_without_a_stored_sharpe_ratio_is_left_out_of_the_sharpe_cell(page_client, world):
    from webapp.runs.selectors import baselines

    agent = Agent.objects.get(pk=world.agents[1].pk)
    agent.metrics = {**agent.metrics, "untrained": {"score": -0.28}}  # older agents stored only the score
    agent.save(update_fields=["metrics"])
    b = baselines.agent_baselines(agent)
    assert b["untrained"] == -0.28 and b["untrained_sharpe"] is None
    assert "untrained" not in b["texts"]["sharpe"] and b["texts"]["untrained"].startswith("untrained -0.28")
    row = _row(page_client.get(f"/runs/{world.run.pk}/").content, agent.pk)
    assert "untrained" not in _cell(row, "sharpe") and _cell(row, "untrained").startswith("untrained -0.28")


def test_the_agent_page_tables_agent_untrained_1n_and_qqq(page_client, world):
    agent = Agent.objects.get(pk=world.agents[0].pk)
    m = agent.metrics
    page = BeautifulSoup(page_client.get(f"/agents/{agent.pk}/").content, "html.parser")
    table = page.select_one("#baseline-comparison")
    rows = {tr["data-series"]: tr for tr in table.select("tbody tr")}
    assert list(rows) == ["agent", "untrained", "equal_weight", "qqq"]

    def cell(series, col):
        return rows[series].select_one(f'[data-col="{col}"]').get_text(strip=True)

    assert cell("agent", "sharpe") == f"{m['sharpe_ratio']:.3f}"
    assert cell("agent", "total_return") == f"{m['total_return'] * 100:.2f} %"
    assert cell("untrained", "sharpe") == f"{m['untrained']['sharpe_ratio']:.3f}"
    untrained_excess = m["total_return"] - m["untrained"]["total_return"]
    assert cell("untrained", "excess_return") == f"{untrained_excess * 100:+.2f} %"
    for series, key in (("equal_weight", "vs_equal_weight"), ("qqq", "vs_QQQ")):
        rel = m[key]
        assert cell(series, "sharpe") == f"{rel['baseline_sharpe']:.3f}"
        assert cell(series, "total_return") == f"{rel['baseline_total_return'] * 100:.2f} %"
        assert cell(series, "excess_return") == f"{rel['excess_return'] * 100:+.2f} %"
        assert cell(series, "sharpe_difference") == f"{rel['sharpe_difference']:+.3f}"
    assert cell("agent", "excess_return") == "" and cell("agent", "sharpe_difference") == ""


def test_the_agent_page_writes_the_benchmark_cumulative_return_as_a_percentage(page_client, world):
    agent = Agent.objects.get(pk=world.agents[0].pk)
    value = agent.metrics["benchmark_cumulative_return"]
    page = BeautifulSoup(page_client.get(f"/agents/{agent.pk}/").content, "html.parser")
    cells = {tr.th.get_text(strip=True): tr.td.get_text(strip=True) for tr in page.select("#metrics tr")}
    assert cells["QQQ cumulative return (same days)"] == f"{value * 100:.2f} %"


def test_the_api_gives_the_same_comparison_and_the_score_rule(user, world):
    api = APIClient()
    api.force_authenticate(user)
    agent = Agent.objects.get(pk=world.agents[0].pk)
    body = api.get(f"/api/agents/{agent.pk}/").json()
    b = body["baselines"]
    m = agent.metrics
    assert b["sharpe"] == pytest.approx(m["sharpe_ratio"])
    assert b["equal_weight"] == pytest.approx(m["vs_equal_weight"]["baseline_sharpe"])
    assert b["vs_qqq"]["excess_return"] == pytest.approx(m["vs_QQQ"]["excess_return"])
    assert b["vs_equal_weight"]["sharpe_difference"] == pytest.approx(m["vs_equal_weight"]["sharpe_difference"])
    assert b["untrained_sharpe"] == pytest.approx(m["untrained"]["sharpe_ratio"])
    assert [r["key"] for r in b["comparison"]] == ["agent", "untrained", "equal_weight", "qqq"]
    run = api.get(f"/api/runs/{world.run.pk}/").json()
    assert run["score_metric"] == "mean_minus_std" == run["score_rule"]["rule"]  # the rule's name
    assert run["score_rule"] == {"rule": "mean_minus_std", "windows": 4, "k": 1.0, "label": DEFAULT_LABEL}
    listed = api.get("/api/runs/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert next(r for r in rows if r["id"] == world.run.pk)["score_rule"]["label"] == DEFAULT_LABEL


def test_pages_label_the_score_by_its_rule_not_as_a_sharpe_ratio(page_client, world):
    run_page = BeautifulSoup(page_client.get(f"/runs/{world.run.pk}/").content, "html.parser")
    assert run_page.select_one("#best-score-label").get_text(strip=True) == f"Best score ({DEFAULT_LABEL})"
    agent = world.agents[0]
    agent_page = BeautifulSoup(page_client.get(f"/agents/{agent.pk}/").content, "html.parser")
    assert (
        agent_page.select_one("#score-rule-label")
        .get_text(" ", strip=True)
        .startswith(f"Validation score: {DEFAULT_LABEL} ·")
    )
    assert "Validation sharpe" not in str(agent_page)
    task = world.run.task
    task.selection = {"rule": "worst_window", "windows": 3}
    task.save(update_fields=["selection"])
    run_page = BeautifulSoup(page_client.get(f"/runs/{world.run.pk}/").content, "html.parser")
    label = "worst Sharpe ratio of 3 validation sub-windows"
    assert run_page.select_one("#best-score-label").get_text(strip=True) == f"Best score ({label})"


@pytest.mark.parametrize(
    ("selection", "label"),
    [
        ({}, DEFAULT_LABEL),
        (
            {"rule": "mean_minus_std", "windows": 6, "k": 0.5},
            "mean - 0.5 x std of the Sharpe ratios of 6 validation sub-windows",
        ),
        ({"rule": "worst_window"}, "worst Sharpe ratio of 4 validation sub-windows"),
        ({"rule": "full_sharpe"}, "Sharpe ratio of the whole validation window"),
    ],
)
def test_score_rule_labels_each_rule(selection, label):
    from webapp.runs.scoring import score_rule

    assert score_rule(selection)["label"] == label

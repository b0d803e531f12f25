"""Backtest lists (``/reports/`` and the run page's "Backtest reports") follow the report
page's short-window rule, say each report's window and whether it is held out, and stand the
equal-weight buy-and-hold portfolio next to QQQ; ``GET /api/backtests/`` filters by run and agent.

``user`` owns every backtest here; each is really run in this process.
"""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from rest_framework.test import APIClient

from tests.webapp.conftest import SPLITS

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]

SHORT = "n/a (window shorter than 63 days)"


@pytest.fixture
def backtests(agent, run_backtest_now):
    """The agent on the test split (held out), on 5 days of it (short) and on the validation
    half-year (allowed to overlap: in sample)."""
    long = run_backtest_now(agent, SPLITS["test"][0], SPLITS["test"][1])
    short = run_backtest_now(agent, "2020-07-01", "2020-07-31")
    seen = run_backtest_now(agent, SPLITS["validation"][0], SPLITS["validation"][1], allow_overlap=True)
    for b in (long, short, seen):
        assert b.status == "done", b.error
    assert short.metrics["agent"]["short_window"] is True and long.metrics["agent"]["short_window"] is False
    return {"long": long, "short": short, "seen": seen}


def _rows(html: bytes, attr: str) -> dict[int, object]:
    soup = BeautifulSoup(html, "html.parser")
    return {int(tr[attr]): tr for tr in soup.select(f"tr[{attr}]")}


def _text(row, col: str) -> str:
    return row.select_one(f'[data-col="{col}"]').get_text(" ", strip=True)


def _check_rows(rows, backtests) -> None:
    long, short, seen = backtests["long"], backtests["short"], backtests["seen"]
    for col in ("sharpe", "equal_weight_sharpe", "qqq_sharpe"):
        cell = rows[short.id].select_one(f'[data-col="{col}"]')
        assert cell.get_text(strip=True) == "n/a" and cell["title"] == SHORT, col
    for col, series in (("sharpe", "agent"), ("equal_weight_sharpe", "equal_weight"), ("qqq_sharpe", "QQQ")):
        assert _text(rows[long.id], col) == f"{long.metrics[series]['sharpe_ratio']:.3f}", col
    assert "in sample" in _text(rows[seen.id], "window")
    assert "in sample" not in _text(rows[long.id], "window") and "in sample" not in _text(rows[short.id], "window")
    assert "2020-07-01" in _text(rows[short.id], "window") and "2020-07-31" in _text(rows[short.id], "window")


def test_the_backtest_list_withholds_short_window_sharpe_ratios_and_marks_in_sample_windows(client, user, backtests):
    client.force_login(user)
    _check_rows(_rows(client.get("/reports/").content, "data-backtest"), backtests)


def test_the_run_pages_reports_show_window_in_sample_and_1n_next_to_qqq(client, user, agent, backtests):
    client.force_login(user)
    html = client.get(f"/runs/{agent.run_id}/reports/").content
    rows = _rows(html, "data-backtest-id")
    _check_rows(rows, backtests)
    long = backtests["long"]
    assert (
        _text(rows[long.id], "equal_weight_return")
        == f"{long.metrics['equal_weight']['cumulative_return'] * 100:.2f} %"
    )
    assert _text(rows[long.id], "qqq_return") == f"{long.metrics['QQQ']['cumulative_return'] * 100:.2f} %"
    heading = BeautifulSoup(html, "html.parser").select_one("#run-reports h2").get_text(" ", strip=True)
    assert "each report's window" in heading  # the reports are not all on the test split
    # the whole run page includes the same section
    assert _rows(client.get(f"/runs/{agent.run_id}/").content, "data-backtest-id").keys() == rows.keys()


def test_the_api_filters_backtests_by_run_and_agent(user, make_agent, run_backtest_now):
    first, second = make_agent(), make_agent()
    a = run_backtest_now(first, "2020-07-01", "2020-07-31")
    b = run_backtest_now(second, "2020-07-01", "2020-07-31")
    api = APIClient()
    api.force_authenticate(user)

    def ids(query: str) -> set[int]:
        response = api.get(f"/api/backtests/{query}")
        assert response.status_code == 200, response.content
        body = response.json()
        return {r["id"] for r in (body["results"] if isinstance(body, dict) else body)}

    assert ids("") == {a.id, b.id}
    assert ids(f"?run={first.run_id}") == {a.id, b.id}
    assert ids(f"?run={first.run_id + 1000}") == set()  # not ignored
    assert ids(f"?agent={second.id}") == {b.id}
    assert ids(f"?run={first.run_id}&agent={first.id}") == {a.id}


@pytest.mark.parametrize(("field", "value"), [("run", "abc"), ("run", "-1"), ("agent", "1.5"), ("agent", "")])
def test_the_api_refuses_a_non_integer_filter_naming_the_field(user, field, value):
    api = APIClient()
    api.force_authenticate(user)
    response = api.get("/api/backtests/", {field: value})
    assert response.status_code == 400
    body = response.json()
    assert field in body["fields"] and body["error"].startswith(f"{field}:")


def test_the_backtest_page_filters_by_run_and_agent_like_the_api(client, user, make_agent, run_backtest_now):
    first, second = make_agent(), make_agent()
    a = run_backtest_now(first, "2020-07-01", "2020-07-31")
    b = run_backtest_now(second, "2020-07-01", "2020-07-31")
    client.force_login(user)

    def ids(query: str) -> set[int]:
        response = client.get(f"/reports/{query}")
        assert response.status_code == 200, response.content[:300]
        return set(_rows(response.content, "data-backtest"))

    assert ids("") == {a.id, b.id}
    assert ids(f"?run={first.run_id}") == {a.id, b.id}
    assert ids(f"?run={first.run_id + 1000}") == set()  # filtered, not ignored
    assert ids(f"?agent={second.id}") == {b.id}
    assert ids(f"?run={first.run_id}&agent={first.id}") == {a.id}
    page = BeautifulSoup(client.get(f"/reports/?run={first.run_id + 1000}").content, "html.parser")
    assert page.select_one("#no-match") and page.select_one("#filter-run")
    bad = client.get("/reports/?run=abc")
    assert bad.status_code == 400
    error = BeautifulSoup(bad.content, "html.parser").select_one("#list-error").get_text(strip=True)
    assert error.startswith("run:") and "'abc'" in error


def test_the_lists_name_the_equal_weight_portfolio_buy_and_hold(client, user, agent, backtests):
    """The reports' equal-weight line is bought once and held; the leaderboard's 1/N is rebalanced
    daily: each place names the one it shows."""
    client.force_login(user)
    for url, table in (("/reports/", "#backtest-list"), (f"/runs/{agent.run_id}/reports/", "#run-reports-table")):
        soup = BeautifulSoup(client.get(url).content, "html.parser")
        heads = [th.get_text(" ", strip=True) for th in soup.select(f"{table} thead th")]
        assert "Equal weight (buy and hold) Sharpe" in heads, heads
        assert "1/N Sharpe" not in heads
    heading = BeautifulSoup(client.get(f"/runs/{agent.run_id}/reports/").content, "html.parser").select_one(
        "#run-reports h2"
    )
    assert "equal-weight portfolio (buy and hold)" in heading.get_text(" ", strip=True)
    assert "1/N" not in heading.get_text(" ", strip=True)
    board = BeautifulSoup(client.get(f"/runs/{agent.run_id}/").content, "html.parser")
    assert "vs 1/N (rebalanced daily)" in [th.get_text(" ", strip=True) for th in board.select("#leaderboard th")]

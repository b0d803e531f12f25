"""Browser test of backtest reports: the report page and the compare page draw their Plotly
charts from locally served plotly.js, and the tables show what the user reads.

The backtests are run by calling the Celery task function in this process on real data (a
worker of the session may claim a message first; the test then waits for it to finish).
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from tests.webapp.conftest import dataset, trained_checkpoint  # noqa: F401 - fixtures of the web tests
from tests.webapp.reports.conftest import (  # noqa: F401 - fixtures shared with the reports tests
    agent,
    make_agent,
    run_backtest_now,
    task,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHARTS = ("equity-chart", "drawdown-chart", "monthly-heatmap", "rolling-sharpe")


@pytest.fixture
def user(e2e_user):
    """The reports fixtures' owner is the user who logs in."""
    return e2e_user


def _done(backtest, timeout_s: float = 120.0):
    deadline = time.monotonic() + timeout_s
    while backtest.status not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.5)
        backtest.refresh_from_db()
    assert backtest.status == "done", backtest.error
    return backtest


def test_report_and_compare_pages_draw_their_charts(page, user, agent, run_backtest_now, login, screenshot):  # noqa: F811
    first = _done(run_backtest_now(agent, "2020-07-01", "2020-12-31"))
    second = _done(run_backtest_now(agent, "2020-09-01", "2021-06-30"))
    login(page, user)

    page.goto(f"/reports/{first.id}/")
    for chart in CHARTS:
        expect(page.locator(f"#{chart} .main-svg").first).to_be_attached()
    qqq_sharpe = page.locator('table#metrics tr[data-metric="sharpe_ratio"] td[data-series="QQQ"]')
    assert float(qqq_sharpe.get_attribute("data-value")) == pytest.approx(first.metrics["QQQ"]["sharpe_ratio"])
    expect(page.locator("#metric-contract")).to_contain_text("empyrical")
    assert screenshot(page, "backtest-report").stat().st_size > 10_000

    page.goto("/reports/")
    page.check(f'input[name="ids"][value="{first.id}"]')
    page.check(f'input[name="ids"][value="{second.id}"]')
    with page.expect_navigation():
        page.click("#compare-form button[type=submit]")
    expect(page.locator("#compare-chart .main-svg").first).to_be_attached()
    assert page.locator("#compare-chart .scatterlayer .trace").count() == 3  # two agents + QQQ
    expect(page.locator('table#metrics tr[data-metric="sharpe_ratio"] td.best')).to_have_count(1)
    expect(page.locator("table#config-diff tr.differs").first).to_be_visible()
    assert screenshot(page, "backtest-compare").stat().st_size > 10_000

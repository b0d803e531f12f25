"""The 5-minute demo's path, shortened, through a real browser and a real Celery worker.

The intraday demo (``demo_setup --intraday``: AAPL, MSFT, NVDA 5-minute bars, train
2024-03..2025-06, validation 2025-07..2025-12, test 2026-01..2026-08) is started as the command
starts it, with a tiny profile (2 pods, 32 envs, 32x32 networks, 4 generations of 2,048 env
steps). The run page fills its leaderboard over the WebSocket; when the budget is spent the best
agents are backtested against **QQQ's 5-minute bars from the same file**: the report says so,
its QQQ Sharpe is recomputed here from the file's bars, its charts skip nights and weekends
(Plotly rangebreaks), and the best agent's bundle, downloaded and loaded, reproduces the report.

Screenshots: ``intraday-run-live.png``, ``intraday-report.png``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from tests.e2e.conftest import E2E_PASSWORD
from trainer import load_agent
from trainer.backtest.benchmark import load_benchmark_close
from trainer.backtest.engine import run_backtest
from trainer.backtest.metrics import compute_metrics, returns_from_values
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from webapp.demo.data import import_intraday_dataset
from webapp.demo.launch import is_demo_run, start_demo_run
from webapp.demo.profiles import (
    INTRADAY_BUDGET_NAME,
    INTRADAY_CPU_PROFILE,
    INTRADAY_FILE,
    INTRADAY_SPLITS,
    INTRADAY_TICKERS,
)
from webapp.demo.sizing import size_run
from webapp.reports.models import Backtest
from webapp.runs.models import Agent, Run

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROFILE = dataclasses.replace(
    INTRADAY_CPU_PROFILE,
    name="ci",
    num_pods=2,
    hyperparameters={"num_envs": 32, "rollout_steps": 16, "hidden_sizes": [32, 32]},
    generation_steps=2048,
    generations=4,
)
TRAIN_TIMEOUT_MS = 400_000
REPORT_TIMEOUT_S = 240.0
LEADERBOARD_ROWS = "#leaderboard tbody tr[data-agent-id]"


def _metric(page, metric: str, series: str) -> float:
    cell = page.locator(f'#metrics tr[data-metric="{metric}"] td[data-series="{series}"]')
    return float(cell.get_attribute("data-value"))


@pytest.fixture
def trader(transactional_db):
    return get_user_model().objects.create_user(username="ida", password=E2E_PASSWORD)


def test_the_5_minute_demo_trains_live_and_is_backtested_against_intraday_qqq(
    page, live_url, celery_worker, trader, login, screenshot, data_dir, tmp_path
):
    dataset, _ = import_intraday_dataset(trader, root=data_dir)
    assert dataset.tickers == list(INTRADAY_TICKERS)
    sizing = size_run(PROFILE, steps_per_s=None, device="cpu", training_workers=1)
    run, _ = start_demo_run(trader, dataset, PROFILE, sizing)
    assert is_demo_run(run) and run.budget.name == INTRADAY_BUDGET_NAME

    login(page, trader)
    page.goto(f"/runs/{run.pk}/")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    expect(page.locator("#live-indicator")).not_to_have_attribute("data-state", "connecting", timeout=15_000)
    page.wait_for_function(
        f"document.querySelectorAll('{LEADERBOARD_ROWS}').length >= 1", timeout=TRAIN_TIMEOUT_MS, polling=250
    )
    screenshot(page, "intraday-run-live")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "finished", timeout=TRAIN_TIMEOUT_MS)
    assert navigations == [], f"the run page navigated while training: {navigations}"
    run.refresh_from_db()
    best = Agent.objects.filter(run=run, on_leaderboard=True).first()
    assert page.locator(LEADERBOARD_ROWS).first.get_attribute("data-agent-id") == str(best.id)

    # --- the best agent's report: against QQQ's 5-minute bars, charts without nights ----------
    report_links = page.locator("#run-reports a.report-link")
    expect(report_links.first).to_be_visible(timeout=REPORT_TIMEOUT_S * 1000)
    report_href = report_links.first.get_attribute("href")
    backtest = Backtest.objects.get(pk=int(re.search(r"/reports/(\d+)/$", report_href).group(1)))
    assert backtest.agent_id == best.id
    assert [str(backtest.start), str(backtest.end)] == INTRADAY_SPLITS["test"]
    report_links.first.click()
    expect(page.locator("#backtest-status")).to_have_text("done", timeout=REPORT_TIMEOUT_S * 1000)
    expect(page.locator("#benchmark-basis")).to_contain_text("intraday bars from the same file")
    expect(page.locator("#benchmark-label")).to_contain_text(INTRADAY_FILE)
    page.wait_for_function("document.getElementById('equity-chart').layout !== undefined", timeout=30_000)
    breaks = page.evaluate("document.getElementById('equity-chart').layout.xaxis.rangebreaks")
    assert {"bounds": ["sat", "mon"]} in breaks and any(b.get("pattern") == "hour" for b in breaks)
    screenshot(page, "intraday-report")

    qqq = load_benchmark_close(data_dir / INTRADAY_FILE, "QQQ")
    test = INTRADAY_SPLITS["test"]
    qqq = qqq[(qqq.index >= pd.Timestamp(test[0])) & (qqq.index < pd.Timestamp(test[1]) + pd.Timedelta(days=1))]
    assert qqq.index[0] == pd.Timestamp("2026-01-02 09:35") and qqq.index[-1] == pd.Timestamp("2026-08-21 16:00")
    expected = compute_metrics(returns_from_values(qqq))  # bar returns, 78 x 252 periods a year
    assert _metric(page, "sharpe_ratio", "QQQ") == pytest.approx(expected["sharpe_ratio"], rel=1e-9)

    # --- the bundle: download, checksum, load, backtest again against the same bars -----------
    page.goto(f"/agents/{best.id}/")
    with page.expect_download() as download_info:
        page.click("#download-bundle")
    bundle_path = tmp_path / "best-agent.zip"
    download_info.value.save_as(bundle_path)
    response = page.request.get(page.locator("#download-bundle").get_attribute("href"))
    assert response.headers["etag"].strip('"') == hashlib.sha256(bundle_path.read_bytes()).hexdigest()
    loaded = load_agent(bundle_path)
    assert loaded.tickers == INTRADAY_TICKERS
    market = load_market_data(
        DataSpec(paths=dataset.source_paths(), tickers=list(loaded.tickers)), cache_dir=tmp_path / "cache"
    )
    result = run_backtest(
        loaded.policy_fn("cpu"),
        market,
        loaded.env_config(),
        benchmark_close=load_benchmark_close(data_dir / INTRADAY_FILE, "QQQ"),
        start=test[0],
        end=test[1],
        tickers=loaded.tickers,
    )
    assert result.benchmark_basis == "bars"
    page.goto(report_href)
    assert _metric(page, "sharpe_ratio", "agent") == pytest.approx(result.metrics["agent"]["sharpe_ratio"], rel=1e-6)
    assert Run.objects.get(pk=run.pk).status == "finished"

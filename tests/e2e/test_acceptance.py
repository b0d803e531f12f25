"""Acceptance test of the first version: the demo's path, shortened, through a real browser.

A staff user imports the Dow-30 demo dataset (``webapp.demo``, as ``./paddock demo``
does), assigns a budget on the budgets page, configures the Dow-30 task on the new-run form
and starts a tournament of 2 pods (``CI_PROFILE``: 5 tickers, small networks, 8
generations of 2,048 env steps, about a minute of training on one CPU core). The run page
must fill its leaderboard over the WebSocket without reloading; when the budget is spent the
best agents are backtested against QQQ on the held-out test dates. The report's QQQ Sharpe and
Calmar are recomputed here from the benchmark file with ``trainer.backtest.metrics``; the best
agent's bundle is downloaded, checked against its ETag (SHA-256), loaded with
``trainer.load_agent`` and backtested again over the test dates, which must reproduce the
report's numbers for that agent.

Screenshots: ``test-output/screenshots/acceptance-run-live.png`` (mid-run) and
``acceptance-report.png``.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from playwright.sync_api import expect

from tests.conftest import BENCHMARK_FILE
from tests.e2e.conftest import assign_budget
from trainer import load_agent
from trainer.backtest.benchmark import load_benchmark_close
from trainer.backtest.engine import run_backtest
from trainer.backtest.metrics import compute_metrics, returns_from_values
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from webapp.demo.data import import_demo_dataset
from webapp.demo.profiles import CI_PROFILE, MUTATION, SPLITS
from webapp.demo.sizing import size_run
from webapp.reports.models import Backtest
from webapp.runs.models import Agent, Run

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROFILE = CI_PROFILE
TRAIN_TIMEOUT_MS = 300_000
REPORT_TIMEOUT_S = 180.0
LEADERBOARD_ROWS = "#leaderboard tbody tr[data-agent-id]"


def _metric(page, metric: str, series: str) -> float:
    """The exact value behind a cell of the report's metrics table (``data-value``)."""
    cell = page.locator(f'#metrics tr[data-metric="{metric}"] td[data-series="{series}"]')
    return float(cell.get_attribute("data-value"))


def test_user_trains_a_tournament_watches_it_live_and_checks_report_and_bundle(
    page, live_url, celery_worker, staff_user, login, screenshot, data_dir, tmp_path
):
    dataset, _ = import_demo_dataset(staff_user, root=data_dir, allow_download=False)
    # The dataset keeps the 29 tickers with full history; DOW (listed 2019) is dropped with a note.
    assert "DOW" not in dataset.tickers and len(dataset.tickers) == 29
    assert any(note.startswith("DOW: dropped") for note in dataset.notes)
    sizing = size_run(PROFILE, steps_per_s=None, device="cpu", training_workers=1)

    login(page, staff_user)

    # --- a budget, assigned on the budgets page -------------------------------------------
    assign_budget(
        page,
        name="Acceptance budget",
        owner=staff_user,
        pods=1,
        env_steps=sizing.env_steps,
        wall_clock_s=sizing.max_wall_clock_s,
    )

    # --- the Dow-30 task and the tournament, on the new-run form ----------------------------
    page.goto("/runs/new/")
    page.fill("#id_name", "Acceptance run")
    page.select_option("#id_dataset", label=dataset.name)
    page.fill("#id_tickers", ", ".join(PROFILE.tickers))
    for split, (start, end) in SPLITS.items():
        page.fill(f"#id_{split}_start", start)
        page.fill(f"#id_{split}_end", end)
    page.select_option("#id_algorithm", "ppo")
    page.fill("#id_hyperparameters", json.dumps(PROFILE.hyperparameters))
    page.select_option("#id_budget", label="Acceptance budget")
    page.fill("#id_num_pods", str(PROFILE.num_pods))
    page.fill("#id_generation_steps", str(sizing.generation_steps))
    page.fill("#id_mutation", json.dumps(MUTATION))
    expect(page.locator("#id_start_now")).to_be_checked()
    with page.expect_navigation():
        page.click("#create-run")
    match = re.search(r"/runs/(\d+)/$", page.url)
    assert match, f"the form did not lead to a run page: {page.url}"
    run_id = int(match.group(1))

    # --- the live page: rows arrive over the WebSocket, the page is never reloaded ----------
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    page.evaluate("window.__acceptanceMarker = 'set before the first agent'")
    expect(page.locator("#live-indicator")).not_to_have_attribute("data-state", "connecting", timeout=15_000)
    page.wait_for_function(
        f"document.querySelectorAll('{LEADERBOARD_ROWS}').length >= 2", timeout=TRAIN_TIMEOUT_MS, polling=250
    )
    expect(page.locator("#run-status")).to_have_attribute("data-status", re.compile("running|finishing"))
    expect(page.locator("#pods .pod-card")).to_have_count(PROFILE.num_pods)
    assert int(page.locator("#budget-steps").inner_text().replace(",", "")) > 0
    screenshot(page, "acceptance-run-live")

    expect(page.locator("#run-status")).to_have_attribute("data-status", "finished", timeout=TRAIN_TIMEOUT_MS)
    assert page.evaluate("window.__acceptanceMarker") == "set before the first agent"
    assert navigations == [], f"the run page navigated while training: {navigations}"
    run = Run.objects.get(pk=run_id)
    assert "env-step cap" in run.status_reason or "wall-clock" in run.status_reason
    rows = page.locator(LEADERBOARD_ROWS)
    assert rows.count() >= 2
    best = Agent.objects.filter(run=run, on_leaderboard=True).first()
    assert rows.first.get_attribute("data-agent-id") == str(best.id)

    # --- the report, one click from the finished run's page (it appears without a reload) -----
    report_links = page.locator("#run-reports a.report-link")
    expect(report_links.first).to_be_visible(timeout=REPORT_TIMEOUT_S * 1000)
    assert page.evaluate("window.__acceptanceMarker") == "set before the first agent"
    report_href = report_links.first.get_attribute("href")
    backtest = Backtest.objects.get(pk=int(re.search(r"/reports/(\d+)/$", report_href).group(1)))
    assert backtest.agent_id == best.id, "the first report is the best agent's"
    assert (str(backtest.start), str(backtest.end)) == tuple(SPLITS["test"])
    report_links.first.click()
    expect(page.locator("#backtest-status")).to_have_text("done", timeout=REPORT_TIMEOUT_S * 1000)
    screenshot(page, "acceptance-report")

    qqq = load_benchmark_close(data_dir / BENCHMARK_FILE, "QQQ")
    qqq = qqq[(qqq.index >= SPLITS["test"][0]) & (qqq.index <= SPLITS["test"][1])]
    expected = compute_metrics(returns_from_values(qqq))
    assert _metric(page, "sharpe_ratio", "QQQ") == pytest.approx(expected["sharpe_ratio"], rel=1e-9)
    assert _metric(page, "calmar_ratio", "QQQ") == pytest.approx(expected["calmar_ratio"], rel=1e-9)

    # --- the best agent's bundle: download, checksum, load, backtest again -------------------
    page.goto(f"/runs/{run_id}/")
    rows.first.locator('[data-col="agent"] a').click()
    expect(page.locator("h1")).to_contain_text(f"Agent #{best.id}")
    with page.expect_download() as download_info:
        page.click("#download-bundle")
    bundle_path = tmp_path / "best-agent.zip"
    download_info.value.save_as(bundle_path)
    digest = hashlib.sha256(bundle_path.read_bytes()).hexdigest()
    response = page.request.get(page.locator("#download-bundle").get_attribute("href"))
    assert response.ok
    assert response.headers["etag"].strip('"') == digest
    assert hashlib.sha256(response.body()).hexdigest() == digest

    loaded = load_agent(bundle_path)
    assert loaded.tickers == tuple(PROFILE.tickers)
    market = load_market_data(
        DataSpec(paths=dataset.source_paths(), tickers=list(loaded.tickers)), cache_dir=tmp_path / "cache"
    )
    result = run_backtest(
        loaded.policy_fn("cpu"),
        market,
        loaded.env_config(),
        benchmark_close=load_benchmark_close(data_dir / BENCHMARK_FILE, "QQQ"),
        start=SPLITS["test"][0],
        end=SPLITS["test"][1],
        tickers=loaded.tickers,
    )
    assert str(result.daily.index[0].date()) == "2021-01-04"
    assert result.metrics["QQQ"]["sharpe_ratio"] == pytest.approx(expected["sharpe_ratio"], rel=1e-9)

    # The best agent's report shows what its bundle reproduces here.
    page.goto(report_href)
    expect(page.locator("#backtest-status")).to_have_text("done")
    assert _metric(page, "sharpe_ratio", "agent") == pytest.approx(result.metrics["agent"]["sharpe_ratio"], rel=1e-6)
    assert _metric(page, "cumulative_return", "agent") == pytest.approx(
        result.metrics["agent"]["cumulative_return"], rel=1e-6
    )

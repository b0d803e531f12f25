"""Issue 13, item 5: reports say only what is true. The benchmark's price basis comes from the
file used (and a mismatch with the agent's is said); annualised figures of a short window are
"n/a (window shorter than 63 days)" on pages and exports, their values kept in the JSON with a
flag next to the per-day figures.

``user`` owns every backtest here.
"""

from __future__ import annotations

import gzip

import pytest
from bs4 import BeautifulSoup

from tests.conftest import BENCHMARK_FILE
from trainer.backtest.contract import ANNUALISED_KEYS

pytestmark = pytest.mark.django_db

SHORT = "n/a (window shorter than 63 days)"


@pytest.fixture
def short_backtest(agent, run_backtest_now):
    """The agent on 22 trading days of the test split (2020-07-01 to 2020-07-31): at least the 20
    a backtest needs, fewer than the 63 of annualised figures."""
    backtest = run_backtest_now(agent, "2020-07-01", "2020-07-31")
    assert backtest.status == "done", backtest.error
    return backtest


def _cells(page: bytes, key: str) -> list:
    row = BeautifulSoup(page, "html.parser").select_one(f'tr[data-metric="{key}"]')
    return row.select("td")[1:]


def test_a_short_windows_annualised_figures_read_na_on_the_report_and_the_export(client, user, short_backtest):
    client.force_login(user)
    for url in (f"/reports/{short_backtest.id}/", f"/reports/{short_backtest.id}/export.html"):
        page = client.get(url).content
        for key in ("annual_return", "sharpe_ratio", "sortino_ratio", "calmar_ratio", "alpha"):
            cells = _cells(page, key)
            assert cells and all(c.get_text(strip=True) == SHORT for c in cells if c.get("data-series") != "")
        # per-day figures and the total return are shown as numbers
        daily = _cells(page, "daily_mean_return")
        assert daily and all(c.get_text(strip=True).endswith("%") for c in daily)
        assert _cells(page, "cumulative_return")[0].get_text(strip=True).endswith("%")
        assert "Windows shorter than 63 trading days" in page.decode()  # the contract says the rule


def test_the_json_keeps_the_raw_values_with_a_flag(api_client, short_backtest):
    metrics = api_client.get(f"/api/backtests/{short_backtest.id}/").json()["metrics"]
    agent = metrics["agent"]
    assert agent["short_window"] is True and agent["min_annualised_days"] == 63 and agent["num_days"] == 21
    assert isinstance(agent["annual_return"], float)  # kept, flagged
    assert isinstance(agent["daily_mean_return"], float) and isinstance(agent["daily_sharpe_ratio"], float)
    assert set(ANNUALISED_KEYS) >= {"annual_return", "sharpe_ratio", "sortino_ratio", "calmar_ratio", "alpha"}


def test_a_long_window_shows_its_annualised_figures(client, user, done_backtest):
    client.force_login(user)
    page = client.get(f"/reports/{done_backtest.id}/").content
    assert _cells(page, "calmar_ratio")[0].get_text(strip=True) not in ("", SHORT)
    assert not any(c.get_text(strip=True) == SHORT for c in BeautifulSoup(page, "html.parser").select("td"))
    assert done_backtest.metrics["agent"]["short_window"] is False


def test_the_benchmark_label_states_the_price_basis_of_the_file_used(client, user, done_backtest):
    assert done_backtest.config["benchmark"]["price"] == "adjusted close"
    assert done_backtest.config["benchmark"]["same_basis"] is True
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/reports/{done_backtest.id}/").content, "html.parser")
    assert "QQQ buy & hold (adjusted close, benchmark_etfs_daily_eodhd.csv.gz)" in page.select_one(
        "#benchmark-label"
    ).get_text(" ", strip=True)
    assert page.select_one("#price-basis-differs") is None


def test_a_raw_close_benchmark_is_labelled_raw_and_the_mismatch_is_said(
    client, user, agent, run_backtest_now, tmp_path, data_dir, settings
):
    raw = tmp_path / "qqq_raw.csv.gz"
    with gzip.open(data_dir / BENCHMARK_FILE, "rt") as src, gzip.open(raw, "wt") as out:
        header = src.readline().strip().split(",")
        keep = [i for i, c in enumerate(header) if not c.startswith("adj_")]
        out.write(",".join(header[i] for i in keep) + "\n")
        for line in src:
            if ",QQQ," in line:
                cells = line.strip().split(",")
                out.write(",".join(cells[i] for i in keep) + "\n")
    settings.PADDOCK_BENCHMARK_FILE = raw
    backtest = run_backtest_now(agent, "2020-07-01", "2020-12-31")
    assert backtest.status == "done", backtest.error
    assert backtest.config["benchmark"]["price"] == "raw close"
    assert backtest.config["benchmark"]["agent_price"] == "adjusted close"
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/reports/{backtest.id}/").content, "html.parser")
    assert "raw close, qqq_raw.csv.gz" in page.select_one("#benchmark-label").get_text(" ", strip=True)
    assert "the bases differ" in page.select_one("#price-basis-differs").get_text()


def _metrics_csv(response) -> dict[str, dict[str, str]]:
    import csv
    import io

    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return {row["series"]: row for row in csv.DictReader(io.StringIO(response.content.decode()))}


def test_the_metrics_csv_flags_a_short_window_and_keeps_raw_and_per_day_figures(
    client, api_client, user, short_backtest
):
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/reports/{short_backtest.id}/").content, "html.parser")
    href = page.select_one("#export-metrics-csv")["href"]
    for response in (client.get(href), api_client.get(f"/api/backtests/{short_backtest.id}/metrics.csv/")):
        rows = _metrics_csv(response)
        assert set(rows) == {"agent", "QQQ", "equal_weight"}
        for name, row in rows.items():
            metrics = short_backtest.metrics[name]
            assert row["short_window"] == "true" and row["min_annualised_days"] == "63" and row["num_days"] == "21"
            for key in ("annual_return", "calmar_ratio", "daily_mean_return", "daily_volatility"):
                assert float(row[key]) == metrics[key]  # raw values, exactly, flagged above


def test_the_metrics_csv_of_a_long_window_is_not_flagged(client, api_client, user, done_backtest):
    client.force_login(user)
    for response in (
        client.get(f"/reports/{done_backtest.id}/metrics.csv"),
        api_client.get(f"/api/backtests/{done_backtest.id}/metrics.csv/"),
    ):
        rows = _metrics_csv(response)
        agent = rows["agent"]
        assert agent["short_window"] == "false" and int(agent["num_days"]) >= 63
        assert float(agent["sharpe_ratio"]) == done_backtest.metrics["agent"]["sharpe_ratio"]
        assert float(agent["daily_sharpe_ratio"]) == done_backtest.metrics["agent"]["daily_sharpe_ratio"]


def test_the_metrics_csv_of_anothers_backtest_is_not_found(client, other_user, done_backtest):
    client.force_login(other_user)
    assert client.get(f"/reports/{done_backtest.id}/metrics.csv").status_code == 404

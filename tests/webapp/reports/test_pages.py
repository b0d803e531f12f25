"""Report, compare and export pages, the API, and who may see them.

``user`` owns every backtest here; ``other_user`` gets 404 for each of them (never 403, so
ids do not leak).
"""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest
from bs4 import BeautifulSoup
from django.urls import reverse
from rest_framework.test import APIClient

from tests.webapp.conftest import SPLITS, TICKERS
from tests.webapp.reports.conftest import qqq_close
from trainer.backtest.metrics import compute_metrics, returns_from_values
from webapp.reports.models import Backtest
from webapp.reports.selectors import backtest_daily

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of(client):
    def login(user):
        client.force_login(user)
        return client

    return login


@pytest.fixture
def api_client():
    return APIClient()


def metric_cell(soup: BeautifulSoup, metric: str, series: str):
    return soup.select_one(f'table#metrics tr[data-metric="{metric}"] td[data-series="{series}"]')


def test_report_page_shows_charts_and_qqq_metrics_equal_to_the_trainers(client_of, user, done_backtest, data_dir):
    response = client_of(user).get(reverse("reports:backtest-detail", args=[done_backtest.id]))

    assert response.status_code == 200
    soup = BeautifulSoup(response.content, "html.parser")
    for chart in ("equity-chart", "drawdown-chart", "monthly-heatmap", "rolling-sharpe"):
        assert soup.select_one(f"div#{chart}[data-plotly-figure]") is not None
        assert soup.select_one(f"script#{chart}-data[type='application/json']") is not None
    assert soup.select_one("script[src$='vendor/plotly/plotly.min.js']") is not None
    daily = backtest_daily(done_backtest)
    qqq = qqq_close(data_dir).reindex(daily.index)
    expected = compute_metrics(returns_from_values(qqq), returns_from_values(qqq), start_date=qqq.index[0])
    assert float(metric_cell(soup, "sharpe_ratio", "QQQ")["data-value"]) == pytest.approx(expected["sharpe_ratio"])
    assert float(metric_cell(soup, "calmar_ratio", "QQQ")["data-value"]) == pytest.approx(expected["calmar_ratio"])
    assert metric_cell(soup, "max_drawdown_trough", "QQQ").text == expected["max_drawdown_trough"]
    headers = [th["data-series"] for th in soup.select("table#metrics thead th[data-series]")]
    assert headers == ["agent", "QQQ", "equal_weight"]
    assert "empyrical" in soup.select_one("#metric-contract").text
    assert SPLITS["test"][0] in soup.select_one("#backtest-config").text
    label = " ".join(soup.select_one("#config-agent").get_text().split())
    agent = done_backtest.agent
    assert label.startswith(f"#{agent.id} (ppo, validation score {agent.score:.3f})"), label
    assert "Ensemble" not in label


def test_queued_backtest_page_says_it_is_pending(client_of, user, agent):
    from webapp.reports import services

    backtest = services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31")

    response = client_of(user).get(reverse("reports:backtest-detail", args=[backtest.id]))

    assert response.status_code == 200
    assert b"backtest-pending" in response.content
    assert b"equity-chart" not in response.content


def test_html_export_embeds_plotly_and_loads_nothing_from_outside(client_of, user, done_backtest):
    response = client_of(user).get(reverse("reports:backtest-export-html", args=[done_backtest.id]))

    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    html = response.content.decode()
    assert "plotly.js v" in html or "Plotly" in html[:5_000_000]
    assert len(html) > 1_000_000  # plotly.min.js is inlined
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    assert not re.search(r"<link[^>]*\bhref\s*=\s*[\"']https?:", html, re.IGNORECASE)
    soup = BeautifulSoup(html, "html.parser")
    for chart in ("equity-chart", "drawdown-chart", "monthly-heatmap", "rolling-sharpe"):
        assert soup.select_one(f"div#{chart}") is not None
    assert metric_cell(soup, "sharpe_ratio", "QQQ") is not None


def test_daily_csv_download_parses_with_dates_and_values(client_of, user, done_backtest):
    response = client_of(user).get(reverse("reports:backtest-daily-csv", args=[done_backtest.id]))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert f'filename="paddock-backtest-{done_backtest.id}-daily.csv"' in response["Content-Disposition"]
    frame = pd.read_csv(io.BytesIO(response.content), parse_dates=["date"])
    assert len(frame) == done_backtest.num_days
    assert frame["date"].iloc[0] == pd.Timestamp(SPLITS["test"][0])
    assert (frame["benchmark_QQQ"] > 0).all()


def test_compare_page_overlays_curves_and_marks_the_best_value_per_row(client_of, user, agent, run_backtest_now):
    first = run_backtest_now(agent, "2020-07-01", "2020-12-31")
    second = run_backtest_now(agent, "2020-09-01", "2021-06-30")
    ids = f"{first.id},{second.id}"

    response = client_of(user).get(reverse("reports:backtest-compare") + f"?ids={ids}")

    assert response.status_code == 200, response.content[:500]
    soup = BeautifulSoup(response.content, "html.parser")
    assert soup.select_one("div#compare-chart[data-plotly-figure]") is not None
    for metric, pick in (("sharpe_ratio", max), ("annual_volatility", min), ("max_drawdown", max)):
        cells = soup.select(f'table#metrics tr[data-metric="{metric}"] td[data-series]')
        values = [float(c["data-value"]) for c in cells]
        best = [c for c in cells if c.get("data-best") == "true"]
        assert best, metric
        assert all(float(c["data-value"]) == pick(values) for c in best)
    # The common dates are 2020-09-01..2020-12-31, shorter than either window.
    assert "2020-09-01" in soup.text
    differing = {tr["data-key"] for tr in soup.select("table#config-diff tr[data-differs]")}
    assert "data.window" in differing
    assert "data.tickers" not in differing


def test_compare_needs_at_least_two_backtests(client_of, user, done_backtest):
    response = client_of(user).get(reverse("reports:backtest-compare") + f"?ids={done_backtest.id}")

    assert response.status_code == 400
    assert b"at least 2" in response.content


def test_backtest_list_shows_only_my_backtests(client_of, user, other_user, done_backtest):
    mine = client_of(user).get(reverse("reports:backtest-list"))
    assert f'data-backtest="{done_backtest.id}"'.encode() in mine.content

    theirs = client_of(other_user).get(reverse("reports:backtest-list"))
    assert f'data-backtest="{done_backtest.id}"'.encode() not in theirs.content


@pytest.mark.parametrize(
    "name", ["reports:backtest-detail", "reports:backtest-export-html", "reports:backtest-daily-csv"]
)
def test_other_user_gets_404_for_my_backtest_pages(client_of, other_user, done_backtest, name):
    response = client_of(other_user).get(reverse(name, args=[done_backtest.id]))

    assert response.status_code == 404


def test_other_user_cannot_compare_my_backtests(client_of, other_user, user, agent, run_backtest_now):
    a = run_backtest_now(agent, "2020-07-01", "2020-12-31")
    b = run_backtest_now(agent, "2020-08-03", "2020-12-31")

    response = client_of(other_user).get(reverse("reports:backtest-compare") + f"?ids={a.id},{b.id}")

    assert response.status_code == 404


def test_other_user_cannot_request_a_backtest_of_my_agent(client_of, other_user, agent):
    response = client_of(other_user).post(
        reverse("reports:backtest-new"), {"agent": agent.id, "start": "2020-07-01", "end": "2020-12-31"}
    )

    assert response.status_code == 404
    assert not Backtest.objects.exists()


def test_backtest_form_shows_the_error_next_to_the_field(client_of, user, agent):
    response = client_of(user).post(
        reverse("reports:backtest-new"), {"agent": agent.id, "start": "2019-03-01", "end": "2020-12-31"}
    )

    assert response.status_code == 400
    soup = BeautifulSoup(response.content, "html.parser")
    assert "overlaps" in soup.select_one("#form-error").text


def test_backtest_form_queues_and_redirects_to_the_report(client_of, user, agent):
    response = client_of(user).post(
        reverse("reports:backtest-new"), {"agent": agent.id, "start": "2020-07-01", "end": "2020-12-31"}
    )

    backtest = Backtest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:backtest-detail", args=[backtest.id])


# --- API -------------------------------------------------------------------------------------


def test_api_creates_lists_and_retrieves_my_backtests(api_client, user, agent):
    api_client.force_authenticate(user)

    created = api_client.post(
        "/api/backtests/", {"agent": agent.id, "start": "2020-07-01", "end": "2020-12-31"}, format="json"
    )
    assert created.status_code == 201, created.json()
    backtest_id = created.json()["id"]
    assert created.json()["status"] == "queued"

    listed = api_client.get("/api/backtests/").json()
    assert [b["id"] for b in listed["results"]] == [backtest_id]
    assert "config" not in listed["results"][0]  # lists stay light
    detail = api_client.get(f"/api/backtests/{backtest_id}/").json()
    assert detail["tickers"] == ["AAPL", "MSFT", "JPM"]


def test_api_refuses_overlapping_ranges_in_the_one_error_format(api_client, user, agent):
    api_client.force_authenticate(user)

    response = api_client.post(
        "/api/backtests/", {"agent": agent.id, "start": "2020-01-02", "end": "2020-12-31"}, format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"error", "fields"}
    assert "start" in body["fields"]


def test_a_range_shorter_than_20_trading_days_is_refused_by_the_api_and_the_form_naming_end(
    api_client, client_of, user, agent
):
    # 2020-07-01 to 2020-07-02: two trading days, one daily return; it was queued and "done"
    api_client.force_authenticate(user)
    response = api_client.post(
        "/api/backtests/", {"agent": agent.id, "start": "2020-07-01", "end": "2020-07-02"}, format="json"
    )
    assert response.status_code == 400
    why = response.json()["fields"]["end"]
    assert "the range 2020-07-01 to 2020-07-02 holds 2 trading day(s); it needs at least 20" in why
    page = client_of(user).post(
        reverse("reports:backtest-new"), {"agent": agent.id, "start": "2020-07-01", "end": "2020-07-28"}
    )
    assert page.status_code == 400
    assert "holds 19 trading day(s); it needs at least 20" in BeautifulSoup(page.content, "html.parser").text
    assert not Backtest.objects.exists()
    ok = api_client.post(
        "/api/backtests/", {"agent": agent.id, "start": "2020-07-01", "end": "2020-07-29"}, format="json"
    )
    assert ok.status_code == 201, ok.json()  # 20 trading days (2020-07-03 was a holiday)


def test_api_refuses_unknown_tickers_naming_the_field(api_client, user, agent):
    api_client.force_authenticate(user)

    response = api_client.post(
        "/api/backtests/",
        {"agent": agent.id, "start": "2020-07-01", "end": "2020-12-31", "tickers": ["AAPL", "NOPE"]},
        format="json",
    )

    assert response.status_code == 400
    assert "NOPE" in response.json()["fields"]["tickers"]


def test_api_daily_csv_downloads_the_series(api_client, user, done_backtest):
    api_client.force_authenticate(user)

    response = api_client.get(f"/api/backtests/{done_backtest.id}/daily.csv/")

    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    assert len(pd.read_csv(io.BytesIO(response.content))) == done_backtest.num_days


@pytest.mark.parametrize("suffix", ["", "daily.csv/"])
def test_api_answers_404_for_another_users_backtest(api_client, other_user, done_backtest, suffix):
    api_client.force_authenticate(other_user)

    response = api_client.get(f"/api/backtests/{done_backtest.id}/{suffix}")

    assert response.status_code == 404
    assert response.json() == {"error": "backtest not found", "fields": {}}


def test_api_answers_404_for_another_users_agent(api_client, other_user, agent):
    api_client.force_authenticate(other_user)

    response = api_client.post(
        "/api/backtests/", {"agent": agent.id, "start": "2020-07-01", "end": "2020-12-31"}, format="json"
    )

    assert response.status_code == 404
    assert response.json()["fields"] == {"agent": "not found"}


def test_backtest_button_without_dates_backtests_the_test_window(client_of, user, agent):
    # The agent page's "Backtest on the test window" button posts only the agent.
    response = client_of(user).post(reverse("reports:backtest-new"), {"agent": agent.id})

    backtest = Backtest.objects.get()
    assert response.status_code == 302
    assert (str(backtest.start), str(backtest.end)) == tuple(SPLITS["test"])


def test_backtest_list_stands_qqq_and_equal_weight_next_to_the_agent_and_links_run_and_agent(
    client_of, user, done_backtest
):
    page = BeautifulSoup(client_of(user).get(reverse("reports:backtest-list")).content, "html.parser")
    row = page.select_one(f'tr[data-backtest="{done_backtest.id}"]')
    qqq = done_backtest.metrics["QQQ"]["cumulative_return"]
    equal = done_backtest.metrics["equal_weight"]["cumulative_return"]
    assert row.select_one('[data-col="qqq"]').get_text().strip() == f"{round(qqq * 100)} %"
    assert row.select_one('[data-col="equal_weight"]').get_text().strip() == f"{round(equal * 100)} %"
    links = [a["href"] for a in row.select("a")]
    assert reverse("runs:detail", args=[done_backtest.run_id]) in links
    assert reverse("runs:agent", args=[done_backtest.agent_id]) in links


def test_the_report_shows_positions_over_time_and_the_trades(client_of, user, done_backtest):
    daily = backtest_daily(done_backtest)
    weights = daily[[c for c in daily.columns if c.startswith("weight_")]]
    assert sorted(weights.columns) == sorted(f"weight_{t}" for t in TICKERS)
    # weights and cash add up to the whole account every day
    total = weights.sum(axis=1) + daily["cash"] / daily["account_value"]
    assert (abs(total - 1.0) < 1e-9).all()
    page = BeautifulSoup(
        client_of(user).get(reverse("reports:backtest-detail", args=[done_backtest.id])).content, "html.parser"
    )
    assert page.select_one("#weights-chart") is not None
    traded = int((daily[[c for c in daily.columns if c.startswith("trades_")]] != 0).to_numpy().sum())
    rows = page.select("#trades-table tbody tr")
    assert traded > 0 and len(rows) == min(traded, 200)
    first = [td.get_text() for td in rows[0].select("td")]
    assert first[0] == max(r.select("td")[0].get_text() for r in rows)  # latest first


def test_the_equity_curve_offers_spy_and_dia_from_the_same_capital(client_of, user, done_backtest):
    import json

    html = client_of(user).get(reverse("reports:backtest-detail", args=[done_backtest.id])).content.decode()
    figure = json.loads(re.search(r'id="equity-chart-data" type="application/json">(.*?)</script>', html)[1])
    extra = {t["name"]: t for t in figure["data"] if t["name"] in ("SPY (buy and hold)", "DIA (buy and hold)")}
    assert set(extra) == {"SPY (buy and hold)", "DIA (buy and hold)"}
    assert all(t["visible"] == "legendonly" for t in extra.values()), "optional: hidden until asked for"
    from django.conf import settings

    from webapp import engine

    daily = backtest_daily(done_backtest)
    start = daily["account_value"].iloc[0]
    values = engine.benchmark_values(settings.PADDOCK_BENCHMARK_FILE, ["SPY", "DIA", "NOPE"], daily.index, start)
    assert set(values) == {"SPY", "DIA"}  # a ticker the file lacks is left out
    for series in values.values():
        assert series.iloc[0] == pytest.approx(start) and series.index.equals(daily.index)

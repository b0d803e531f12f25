"""A backtest report's evidence against 1/N and its robustness checks, on the page, in the HTML
export and in the API: the numbers the trainer stored, with the interval and the verdict."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from django.urls import reverse
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

VERDICTS = {"beats", "trails", "indistinguishable"}


def test_report_page_shows_both_one_over_n_verdicts_and_the_robustness_tables(client, user, done_backtest):
    client.force_login(user)
    soup = BeautifulSoup(client.get(reverse("reports:backtest-detail", args=[done_backtest.id])).content, "html.parser")
    stored = done_backtest.metrics
    for key in ("vs_equal_weight", "vs_equal_weight_with_costs"):
        row = soup.select_one(f'table#vs-equal-weight tr[data-comparison="{key}"]')
        assert row is not None, key
        assert (
            row.select_one('[data-col="verdict"]').text == stored[key]["verdict"] and stored[key]["verdict"] in VERDICTS
        )
        low, high = stored[key]["ci95"]
        assert row.select_one('[data-col="ci95"]').text == f"{low:+.3f} to {high:+.3f}"
        assert row["title"].startswith("Against 1/N") and "one-sided p = " in row["title"]
    multiples = [tr["data-multiple"] for tr in soup.select("table#cost-sensitivity tr[data-multiple]")]
    assert multiples == ["1", "2", "3"]
    assert soup.select_one("#execution-lag") is not None
    assert soup.select("table#drawdowns tbody tr")
    assert soup.select_one("#var-95").text.endswith("%") and soup.select_one("#beta-equal-weight").text != "–"


def test_html_export_carries_the_same_evidence(client, user, done_backtest):
    client.force_login(user)
    html = client.get(reverse("reports:backtest-export-html", args=[done_backtest.id])).content.decode()
    soup = BeautifulSoup(html, "html.parser")
    assert (
        soup.select_one("table#vs-equal-weight") is not None and soup.select_one("table#cost-sensitivity") is not None
    )


def test_api_detail_has_vs_equal_weight_and_robustness(user, done_backtest):
    api = APIClient()
    api.force_authenticate(user)
    metrics = api.get(f"/api/backtests/{done_backtest.id}/").json()["metrics"]
    for key in ("vs_equal_weight", "vs_equal_weight_with_costs"):
        rel = metrics[key]
        assert rel["verdict"] in VERDICTS and len(rel["ci95"]) == 2 and 0 < rel["p_value"] <= 1
        assert {"sharpe_difference", "active_return_annual", "tracking_error", "information_ratio"} <= set(rel)
    assert [c["cost_multiple"] for c in metrics["robustness"]["cost_sensitivity"]] == [1, 2, 3]
    assert metrics["robustness"]["execution_lag"]["lag_periods"] == 1


def test_the_dataset_page_api_and_every_report_say_the_dow_file_is_a_2022_membership_list(client, user, done_backtest):
    dataset = done_backtest.dataset
    assert dataset.survivorship.startswith("Survivorship bias: the universe is the Dow 30 as of 2022")
    client.force_login(user)
    pages = [
        reverse("market:detail", args=[dataset.id]),
        reverse("reports:backtest-detail", args=[done_backtest.id]),
        reverse("reports:backtest-export-html", args=[done_backtest.id]),
    ]
    for url in pages:
        soup = BeautifulSoup(client.get(url).content, "html.parser")
        assert soup.select_one("#survivorship").get_text(strip=True) == dataset.survivorship, url
    api = APIClient()
    api.force_authenticate(user)
    assert api.get(f"/api/datasets/{dataset.id}/").json()["survivorship"] == dataset.survivorship

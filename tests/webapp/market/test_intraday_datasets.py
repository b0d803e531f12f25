"""Intraday datasets through the web form and the API: interval, session and the missing-bar
report stored and shown; loader options; task splits with date-times (real files of ../shared/data)."""

from __future__ import annotations

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.conftest import INTRADAY_1MIN_FILE, INTRADAY_5MIN_FILE
from tests.webapp.conftest import TINY_PPO

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_folder(settings, data_dir):
    settings.PADDOCK_DATA_DIR = data_dir
    return data_dir


def _one_min_upload(data_dir, *, drop_rows=(), name="aapl_msft_1min.csv") -> SimpleUploadedFile:
    """AAPL and MSFT of the real 1-minute file (US/Eastern bar ends), minus ``drop_rows``."""
    raw = pd.read_csv(data_dir / INTRADAY_1MIN_FILE)
    raw = raw[raw["tic"].isin(["AAPL", "MSFT"])].reset_index(drop=True).drop(index=list(drop_rows))
    return SimpleUploadedFile(name, raw.to_csv(index=False).encode(), content_type="text/csv")


def test_the_5_minute_file_makes_an_intraday_dataset_through_the_api(api_client, data_folder):
    response = api_client.post(
        "/api/datasets/", {"name": "bars", "paths": [INTRADAY_5MIN_FILE], "tickers": ["AAPL", "QQQ"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["interval"], data["session"]) == ("5m", "regular")
    assert (data["start_date"], data["end_date"]) == ("2024-03-11", "2026-08-21")
    bars = data["bars"]
    assert bars["periods_per_year"] == 78 * 252 and bars["bars_per_session"] == 78
    assert (bars["bar_label"], bars["bar_label_detected"]) == ("start", "start")
    assert bars["timezone"].startswith("UTC") and bars["missing"] == [] and len(bars["half_days"]) == 6
    assert data["loader_options"] == {}
    listed = api_client.get("/api/datasets/").json()["results"][0]
    assert listed["interval"] == "5m"


def test_an_uploaded_1_minute_file_reports_its_missing_bars(api_client, data_folder):
    # row 3 of AAPL is 2019-02-11 09:34: the upload lacks it, the dataset reports and fills it
    upload = _one_min_upload(data_folder, drop_rows=[3])
    response = api_client.post(
        "/api/datasets/", {"name": "minutes", "file": upload, "bar_label": "end"}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["interval"] == "1m" and data["loader_options"] == {"bar_label": "end"}
    aapl = next(m for m in data["bars"]["missing"] if m["ticker"] == "AAPL")
    assert aapl["count"] >= 1 and ["2019-02-11", 1] in aapl["worst"]
    assert any("AAPL" in n and "filled with the previous close" in n for n in data["notes"])
    assert "aapl_msft_1min.csv" in data["bars"]["timezone"] or "column name" in data["bars"]["timezone"]


def test_a_bad_loader_option_is_a_400_naming_it(api_client, data_folder):
    response = api_client.post(
        "/api/datasets/", {"name": "x", "paths": [INTRADAY_1MIN_FILE], "session": "overnight"}, format="json"
    )
    assert response.status_code == 400
    assert "session" in response.json()["fields"] and "regular, extended" in response.json()["error"]


def test_an_outside_session_bar_is_a_400_naming_row_and_ticker(api_client, data_folder):
    raw = pd.read_csv(data_folder / INTRADAY_1MIN_FILE).head(50)
    raw.loc[49, "datetime_et"] = "2019-02-11 16:30:00"  # after the close
    upload = SimpleUploadedFile("late.csv", raw.to_csv(index=False).encode(), content_type="text/csv")
    response = api_client.post("/api/datasets/", {"name": "late", "file": upload}, format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert "late.csv, row 50" in body["error"] and "AAPL" in body["error"]
    assert "16:29-16:30 ET is outside the regular session" in body["error"]


def test_the_web_form_uploads_and_the_page_shows_interval_session_and_missing_bars(client, user, data_folder):
    client.force_login(user)
    upload = _one_min_upload(data_folder, drop_rows=[3, 4])
    response = client.post(
        reverse("market:list"),
        {"name": "web minutes", "file": upload, "timezone": "auto", "bar_label": "auto", "session": "regular"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    page = client.get(response["Location"]).content.decode()
    assert 'id="bar-interval">1m (390 bars a full session, 98280 periods a year)' in page
    assert "regular 09:30-16:00 ET" in page and "read as bar ends (detected)" in page
    # the two dropped minutes of 2019-02-11, next to the two the file itself lacks on 2019-02-14
    assert (
        "<code>AAPL</code>: 4 bars on 2 days filled with the previous close (flat, volume 0); worst: 2019-02-11 (2)"
        in page
    )
    listing = client.get(reverse("market:list")).content.decode()
    assert 'data-interval="1m">1m regular' in listing


def _intraday_dataset(user):
    from webapp.market import services

    return services.dataset_create_from_files(
        owner=user, name="5m", paths=[INTRADAY_5MIN_FILE], tickers=["AAPL", "MSFT"], options={"bar_label": "start"}
    )


def test_task_splits_take_date_times_on_intraday_data_only(api_client, user, dataset, data_folder, settings):
    settings.PADDOCK_BENCHMARK_FILE = data_folder / INTRADAY_5MIN_FILE  # its QQQ bars cover the splits
    bars = _intraday_dataset(user)
    splits = {
        "train": ["2024-03-11", "2024-12-31 12:00"],
        "validation": ["2024-12-31 12:05", "2025-03-31"],
        "test": ["2025-04-01", "2025-06-30"],
    }
    body = {"name": "t", "dataset": bars.id, "splits": splits, "hyperparameters": TINY_PPO}
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["splits"]["train"] == {"start": "2024-03-11", "end": "2024-12-31 12:00"}
    from webapp.runs.models import Task
    from webapp.runs.selectors.runs import task_spec

    spec = task_spec(Task.objects.get(pk=response.json()["id"]))
    assert spec["data"]["bar_label"] == "start" and spec["train"]["end"] == "2024-12-31 12:00"
    # a split too short says its days (the web checks days; training checks bars too)
    short = {**splits, "test": ["2025-04-01", "2025-04-10"]}
    response = api_client.post("/api/tasks/", {**body, "splits": short}, format="json")
    assert response.status_code == 400 and "splits.test.end" in response.json()["fields"]
    # the daily Dow-30 dataset refuses a time of day
    daily = {
        "train": ["2018-06-01", "2019-12-31 12:00"],
        "validation": ["2020-01-01", "2020-06-30"],
        "test": ["2020-07-01", "2020-12-31"],
    }
    response = api_client.post(
        "/api/tasks/", {**body, "dataset": dataset.id, "tickers": ["AAPL"], "splits": daily}, format="json"
    )
    assert response.status_code == 400
    assert "splits.train.end" in response.json()["fields"] and "the data is daily" in response.json()["error"]


def test_the_run_form_accepts_date_times_for_an_intraday_dataset(user, dataset, data_folder):
    from webapp.runs.forms import RunForm

    bars = _intraday_dataset(user)
    base = {
        "train_start": "2024-03-11",
        "train_end": "2024-12-31 12:00",
        "validation_start": "2024-12-31T12:05",
        "validation_end": "2025-03-31",
        "test_start": "2025-04-01",
        "test_end": "2025-06-30",
    }
    form = RunForm({**base, "dataset": bars.id}, user=user)
    form.is_valid()
    assert "train_end" not in form.errors and "validation_start" not in form.errors, form.errors
    assert form.cleaned_data["validation_start"] == "2024-12-31 12:05"
    daily = RunForm({**base, "dataset": dataset.id}, user=user)
    daily.is_valid()
    assert "holds daily bars" in daily.errors["train_end"][0]
    bad = RunForm({**base, "dataset": bars.id, "test_end": "2025-06-31"}, user=user)
    bad.is_valid()
    assert "Enter a date YYYY-MM-DD" in bad.errors["test_end"][0]


def test_a_task_on_intraday_bars_counts_the_session_features_in_its_memory_estimate(
    api_client, user, data_folder, settings
):
    from webapp.market import services

    settings.PADDOCK_BENCHMARK_FILE = data_folder / INTRADAY_5MIN_FILE
    bars = services.dataset_create_from_files(
        owner=user,
        name="5m3",
        paths=[INTRADAY_5MIN_FILE],
        tickers=["AAPL", "MSFT", "NVDA"],
        options={"bar_label": "start"},
    )
    splits = {
        "train": ["2024-03-11", "2025-06-30"],
        "validation": ["2025-07-01", "2025-12-31"],
        "test": ["2026-01-02", "2026-08-21"],
    }
    # 4,096 x 53,000 transitions fit in 48 GiB with the 43-dim daily-sized observation, not with
    # the 52 dimensions 3 tickers x 3 session features add (tests/trainer/test_task_intraday_memory.py)
    hp = {"num_envs": 53_000, "rollout_steps": 4_096}
    response = api_client.post(
        "/api/tasks/", {"name": "big", "dataset": bars.id, "splits": splits, "hyperparameters": hp}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert "hyperparameters.num_envs" in response.json()["fields"]
    assert "52-dim observations" in response.json()["error"]
    hp = {"num_envs": 40_000, "rollout_steps": 4_096}
    response = api_client.post(
        "/api/tasks/", {"name": "big", "dataset": bars.id, "splits": splits, "hyperparameters": hp}, format="json"
    )
    assert response.status_code == 201, response.json()

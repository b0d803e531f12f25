"""Issue 13, items 1-3: data decisions judged on the task's range and shown everywhere; backtests
on the agent's own tickers; windows checked against the data and the benchmark file up front.

Who may see what: ``user`` (ada) owns every dataset, task, run and agent made here.
"""

from __future__ import annotations

import gzip
import types

import pytest
from bs4 import BeautifulSoup
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import BENCHMARK_FILE, DOW30_FILE
from tests.webapp.conftest import SPLITS, TICKERS, TINY_PPO, make_world
from webapp.core.errors import AppError
from webapp.market import services as market_services
from webapp.reports import services as report_services
from webapp.reports.models import Backtest
from webapp.runs import services
from webapp.runs.models import Run, Task

pytestmark = pytest.mark.django_db

# DOW lists on 2019-03-20; a range from 2018 cannot trade it, one from 2020 can.
FROM_2018 = {"train": ["2018-01-02", "2019-12-31"], "validation": ["2020-01-01", "2020-06-30"], "test": SPLITS["test"]}
FROM_2020 = {"train": ["2020-01-02", "2020-12-31"], "validation": ["2021-01-04", "2021-06-30"], "test": ["2021-07-01", "2021-12-31"]}  # fmt: skip


@pytest.fixture
def dow_dataset(user, data_dir, settings):
    """ada's dataset of AAPL, KO and DOW from the real Dow-30 file."""
    settings.PADDOCK_DATA_DIR = data_dir
    return market_services.dataset_create_from_files(
        owner=user, name="with dow", paths=[DOW30_FILE], tickers=["AAPL", "KO", "DOW"]
    )


def _post_task(api_client, dataset, splits, tickers=None):
    body = {"name": "t", "dataset": dataset.id, "splits": splits, "hyperparameters": TINY_PPO}
    if tickers is not None:
        body["tickers"] = tickers
    return api_client.post("/api/tasks/", body, format="json")


# --- 1. drops and fills judged against the task's range; shown where the user looks -----------


def test_a_named_ticker_listed_after_the_train_start_is_a_400_naming_it_its_days_and_the_range(api_client, dow_dataset):
    response = _post_task(api_client, dow_dataset, FROM_2018, tickers=["AAPL", "DOW"])
    assert response.status_code == 400
    body = response.json()
    assert "tickers" in body["fields"]
    assert "DOW does not cover the range 2018-01-02 to 2020-12-31" in body["error"]
    assert "2019-03-20 to 2022-11-15" in body["error"]  # its first and last day
    assert not Task.objects.exists()


def test_a_named_late_ticker_is_kept_when_the_range_starts_after_its_listing(api_client, dow_dataset):
    response = _post_task(api_client, dow_dataset, FROM_2020, tickers=["AAPL", "DOW"])
    assert response.status_code == 201, response.json()
    assert response.json()["tickers"] == ["AAPL", "DOW"]
    assert not any("dropped" in n for n in response.json()["data_notes"])


def test_unnamed_tickers_that_miss_the_range_are_dropped_with_a_note_and_the_count_is_what_is_traded(
    api_client, client, user, dow_dataset, make_budget
):
    response = _post_task(api_client, dow_dataset, FROM_2018)
    assert response.status_code == 201, response.json()
    task = response.json()
    assert task["tickers"] == ["AAPL", "KO"]  # traded: DOW is dropped for this range
    notes = "\n".join(task["data_notes"])
    assert "DOW: dropped, its first row 2019-03-20 is after the range start 2018-01-02" in notes
    assert "adjusted prices used" in notes  # raw-vs-adjusted decision, from the dataset
    assert "warm-up" in notes
    run = services.run_create(
        owner=user, task=Task.objects.get(pk=task["id"]), budget=make_budget(), generation_steps=256, device="cpu"
    )
    api = api_client.get(f"/api/runs/{run.id}/").json()
    assert api["tickers"] == ["AAPL", "KO"] and api["data_notes"] == task["data_notes"]
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/runs/{run.id}/").content, "html.parser")
    assert page.select_one("#tickers-traded").get_text() == "2 tickers"
    shown = page.select_one("#data-notes").get_text()
    assert "2 tickers traded" in shown and "DOW: dropped" in shown


def test_the_run_form_refuses_a_named_late_ticker_next_to_the_tickers_field(client, user, dow_dataset, make_budget):
    from tests.webapp.test_pages import _run_form

    client.force_login(user)
    owner_objects = types.SimpleNamespace(dataset=dow_dataset, budget=make_budget())
    dates = {f"{split}_{end}": FROM_2018[split][i] for split in FROM_2018 for i, end in enumerate(("start", "end"))}
    form = _run_form(owner_objects, tickers="AAPL, DOW", **dates)
    response = client.post("/runs/new/", form)
    assert response.status_code == 400  # as docs/reference/api.md says for every page form
    page = BeautifulSoup(response.content, "html.parser")
    error = page.select_one('[data-error-for="tickers"]')
    assert error is not None and "DOW does not cover the range" in error.get_text()
    assert not Run.objects.exists()


def _late_and_gappy_csv() -> str:
    """AAA on every day; BBB from the second day, without 2021-01-07, ending a day early."""
    days = ["2021-01-04", "2021-01-05", "2021-01-06", "2021-01-07", "2021-01-08", "2021-01-11"]
    rows = ["date,tic,open,high,low,close,volume"]
    for i, day in enumerate(days):
        rows.append(f"{day},AAA,10,11,9,10,100")
        if 1 <= i < len(days) - 1 and day != "2021-01-07":
            rows.append(f"{day},BBB,20,21,19,20,100")
    return "\n".join(rows) + "\n"


def test_an_upload_notes_tickers_that_start_late_end_early_or_miss_days_naming_the_dates(api_client):
    upload = SimpleUploadedFile("gappy.csv", _late_and_gappy_csv().encode(), content_type="text/csv")
    response = api_client.post("/api/datasets/", {"name": "gappy", "file": upload}, format="multipart")
    assert response.status_code == 201, response.json()
    notes = response.json()["notes"]
    assert "BBB: starts 2021-01-05, after the file's first day 2021-01-04" in notes
    assert "BBB: ends 2021-01-08, before the file's last day 2021-01-11" in notes
    assert "BBB: 1 day(s) missing inside its history: 2021-01-07" in notes
    assert any(n.startswith("gappy.csv: no adjusted prices") for n in notes)  # the user's file name


# --- 2. backtests on the agent's own tickers ----------------------------------------------------


@pytest.fixture
def wider_task_agent(user, data_dir, settings, trained_checkpoint):
    """A run whose task names AAPL, MSFT, JPM and KO, with an agent trained on AAPL, MSFT, JPM."""
    settings.PADDOCK_DATA_DIR = data_dir
    world = make_world(user, "wide", checkpoint=trained_checkpoint, scores=[1.0])
    Task.objects.filter(pk=world.task.pk).update(tickers=[*TICKERS, "KO"])
    return world.agents[0]


def test_a_backtest_trades_the_agents_tickers_from_its_checkpoint_not_the_tasks_list(user, wider_task_agent):
    from webapp.reports import tasks

    backtest = report_services.backtest_create(user=user, agent=wider_task_agent, start="2020-07-01", end="2020-12-31")
    assert backtest.tickers == TICKERS
    tasks.run_backtest(backtest.id)
    backtest.refresh_from_db()
    assert backtest.status == Backtest.Status.DONE, backtest.error
    assert backtest.config["data"]["tickers"] == TICKERS


def test_a_ticker_mismatch_names_the_agents_tickers_and_the_requested_ones(user, wider_task_agent):
    with pytest.raises(AppError) as err:
        report_services.backtest_create(
            user=user, agent=wider_task_agent, start="2020-07-01", end="2020-12-31", tickers=["AAPL", "MSFT"]
        )
    message = err.value.message
    assert "trained on AAPL, MSFT, JPM (from its checkpoint)" in message and "names AAPL, MSFT;" in message


# --- 3. windows checked against the data and the benchmark file when they are chosen -------------


@pytest.fixture
def short_benchmark(tmp_path, data_dir, settings):
    """A benchmark file whose QQQ ends on 2020-09-30 (the real file cut), set as the benchmark."""
    path = tmp_path / "qqq_short.csv.gz"
    with gzip.open(data_dir / BENCHMARK_FILE, "rt") as src, gzip.open(path, "wt") as out:
        header = src.readline()
        out.write(header)
        for line in src:
            if ",QQQ," in line and line[:10] <= "2020-09-30":
                out.write(line)
    settings.PADDOCK_BENCHMARK_FILE = path
    return path


def test_a_test_split_past_the_last_benchmark_day_is_a_400_naming_the_file_and_its_last_day(
    api_client, dataset, short_benchmark
):
    response = _post_task(api_client, dataset, SPLITS, tickers=TICKERS)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "splits.test.end: 2020-12-31 is after the last QQQ day 2020-09-30 in qqq_short.csv.gz"
    assert "splits.test.end" in body["fields"]


def test_a_test_split_past_the_datas_last_day_names_the_file(api_client, dataset):
    splits = {**SPLITS, "test": ["2022-07-01", "2023-03-31"]}
    response = _post_task(api_client, dataset, splits, tickers=TICKERS)
    assert response.status_code == 400
    assert response.json()["error"] == (
        "splits.test.end: 2023-03-31 is after the last data day 2022-11-15 in dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
    )


def test_a_train_split_starting_before_the_data_is_refused_naming_the_datas_first_day(api_client, dataset):
    # it was accepted with a note and trained from 2010-01-04; the command line now refuses it too
    splits = {**SPLITS, "train": ["2009-06-01", "2019-12-31"]}
    response = _post_task(api_client, dataset, splits, tickers=TICKERS)
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == (
        "splits.train.start: 2009-06-01 is before the first data day 2010-01-04 in dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
    )


def test_a_backtest_window_past_the_benchmark_is_refused_when_it_is_requested(api_client, user, world, short_benchmark):
    agent = world.agents[0]
    response = api_client.post(
        "/api/backtests/", {"agent": agent.id, "start": "2020-07-01", "end": "2020-12-31"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "end: 2020-12-31 is after the last QQQ day 2020-09-30 in qqq_short.csv.gz"
    assert not Backtest.objects.exists()


def test_a_refused_end_of_run_backtest_reaches_the_run_page_and_the_api(
    api_client, client, user, world, short_benchmark
):
    Run.objects.filter(pk=world.run.pk).update(status=Run.Status.FINISHED)
    assert report_services.backtests_for_run(run_id=world.run.id) == []
    reason = api_client.get(f"/api/runs/{world.run.id}/").json()["backtest_error"]
    assert reason.startswith("End-of-run backtests could not run: agent #")
    assert "after the last QQQ day 2020-09-30 in qqq_short.csv.gz" in reason
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/runs/{world.run.id}/").content, "html.parser")
    section = page.select_one("#run-reports")
    assert section["data-refused"] == "1"
    assert reason in section.select_one("#run-reports-refused").get_text()
    assert page.select_one("#run-reports-pending") is None  # never "being backtested" forever

"""Tasks and runs the trainer could not train are 400s naming the field, before anything is queued:
splits outside the dataset or too short, an empty ticker list, absurd hyperparameters, generations
shorter than one rollout, a file without a close column."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.webapp.conftest import SPLITS, TICKERS, TINY_PPO

pytestmark = pytest.mark.django_db


def post_task(api_client, dataset, **changes):
    body = {
        "name": "t",
        "dataset": dataset.id,
        "tickers": TICKERS,
        "splits": SPLITS,
        "algorithm": "ppo",
        "hyperparameters": TINY_PPO,
    }
    return api_client.post("/api/tasks/", {**body, **changes}, format="json")


def test_a_test_split_after_the_dataset_is_a_400_naming_test_start(api_client, dataset):
    response = post_task(api_client, dataset, splits={**SPLITS, "test": ["2030-01-01", "2031-11-15"]})
    assert response.status_code == 400
    assert "splits.test.start" in response.json()["fields"]
    assert "2022-11-15" in response.json()["error"]  # the dataset's last day


def test_a_three_day_train_split_is_a_400_naming_train_end(api_client, dataset):
    splits = {"train": ["2019-12-27", "2019-12-31"], "validation": ["2020-01-01", "2020-01-02"], "test": SPLITS["test"]}
    response = post_task(api_client, dataset, splits=splits)
    assert response.status_code == 400
    assert "splits.train.end" in response.json()["fields"]
    assert "126" in response.json()["error"]


def test_an_empty_ticker_list_is_a_400_and_leaving_it_out_means_all(api_client, dataset):
    response = post_task(api_client, dataset, tickers=[])
    assert response.status_code == 400
    assert "tickers" in response.json()["fields"] and "at least one ticker" in response.json()["error"]
    body = {"name": "all", "dataset": dataset.id, "splits": SPLITS, "hyperparameters": TINY_PPO}
    created = api_client.post("/api/tasks/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["tickers"] == sorted(TICKERS)


@pytest.mark.parametrize(
    ("hyperparameters", "field"),
    [
        ({"num_envs": 100_000_000}, "hyperparameters.num_envs"),
        ({"hidden_sizes": [100_000, 100_000]}, "hyperparameters.hidden_sizes"),
        ({"rollout_steps": 4_097}, "hyperparameters.rollout_steps"),
    ],
)
def test_absurd_hyperparameters_are_400s_naming_the_field(api_client, dataset, hyperparameters, field):
    response = post_task(api_client, dataset, hyperparameters=hyperparameters)
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_a_generation_shorter_than_one_rollout_is_a_400_naming_generation_steps(api_client, task, make_budget):
    budget = make_budget()
    rollout = TINY_PPO["num_envs"] * TINY_PPO["rollout_steps"]
    response = api_client.post(
        "/api/runs/", {"task": task.id, "budget": budget.id, "generation_steps": rollout - 1}, format="json"
    )
    assert response.status_code == 400
    assert "generation_steps" in response.json()["fields"]
    ok = api_client.post(
        "/api/runs/", {"task": task.id, "budget": budget.id, "generation_steps": rollout}, format="json"
    )
    assert ok.status_code == 201, ok.json()


def test_an_upload_without_a_close_column_is_a_400_naming_close(api_client):
    rows = "".join(f"2021-01-{d:02d},AAA,10,11,9,10.5,1000\n" for d in (4, 5, 6, 7, 8))
    upload = SimpleUploadedFile("p.csv", ("date,tic,open,high,low,adj_close,volume\n" + rows).encode())
    response = api_client.post("/api/datasets/", {"name": "no close", "file": upload}, format="multipart")
    assert response.status_code == 400
    # reported on the field the user filled, the missing column named in words
    assert "missing column(s) close" in response.json()["fields"]["file"]


@pytest.mark.parametrize(
    ("tickers", "says"),
    [
        (["AAPL", "AAPL"], "AAPL is listed twice"),
        (["AAPL", "aapl", "MSFT"], "AAPL is listed twice"),  # the same ticker, as the CLI's --tickers says
    ],
)
def test_a_ticker_listed_twice_is_a_400_naming_it_not_a_count_of_one(api_client, dataset, tickers, says):
    response = post_task(api_client, dataset, tickers=tickers, kind="portfolio", algorithm="direct", hyperparameters={})
    assert response.status_code == 400
    assert says in response.json()["fields"]["tickers"]
    assert "with 1 ticker" not in response.json()["error"]


@pytest.mark.parametrize("name", ["variance_penalty", "tracking_penalty", "turnover_penalty"])
def test_a_direct_penalty_above_a_million_is_a_400_naming_it(api_client, dataset, name):
    response = post_task(api_client, dataset, kind="portfolio", algorithm="direct", hyperparameters={name: 1e300})
    assert response.status_code == 400
    assert "at most 1,000,000" in response.json()["fields"][f"hyperparameters.{name}"]
    ok = post_task(api_client, dataset, kind="portfolio", algorithm="direct", hyperparameters={name: 1e6})
    assert ok.status_code == 201, ok.json()

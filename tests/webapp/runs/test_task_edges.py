"""The web's two doors (``POST /api/tasks/`` and the New run form) refuse what the command line
refuses (``tests/trainer/cli/test_task_edges.py``): an env logit setting too large for float32
(``logit_scale`` 1e308 was accepted and the run died of a torch overflow), a learning rate of
1e308, and a train split that starts before the dataset, whose error names the dataset's first
day, not QQQ's."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup

from tests.webapp.api.test_task_limits import post_task
from tests.webapp.conftest import SPLITS, TINY_PPO
from tests.webapp.runs.test_form_errors import _errors
from tests.webapp.test_pages import _run_form

pytestmark = pytest.mark.django_db

DOW30 = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("logit_scale", 1e308, "must be more than 0 and at most 100, got 1e+308"),
        ("logit_scale", 1e30, "must be more than 0 and at most 100, got 1e+30"),
        ("cash_bias", 1e308, "must be at least 0 and at most 100, got 1e+308"),
    ],
)
def test_an_env_logit_setting_past_its_bound_is_a_400_naming_it(api_client, dataset, name, value, says):
    response = post_task(api_client, dataset, kind="portfolio", env={name: value})
    assert response.status_code == 400, response.content
    assert response.json()["fields"] == {f"env.{name}": says}


def test_the_form_refuses_a_logit_scale_of_1e308_in_the_env_extra_json(client, user, world):
    # a setting the form has no input for: its error is said above the form, by its name
    client.force_login(user)
    data = _run_form(world, kind="portfolio", env_extra=json.dumps({"portfolio": {"logit_scale": 1e308}}))
    response = client.post("/runs/new/", data)
    assert response.status_code == 400
    said = BeautifulSoup(response.content.decode(), "html.parser").select_one("#form-errors").get_text(" ", strip=True)
    assert said == "logit_scale: must be more than 0 and at most 100, got 1e+308"


def test_a_learning_rate_of_1e308_is_a_400_at_both_web_doors(api_client, dataset, client, user, world):
    response = post_task(api_client, dataset, hyperparameters={**TINY_PPO, "learning_rate": 1e308})
    assert response.status_code == 400, response.content
    assert "must be more than 0 and at most 1,000,000, got 1e+308" in response.json()["error"]
    client.force_login(user)
    errors = _errors(client, world, hyperparameters=json.dumps({**TINY_PPO, "learning_rate": 1e308}))
    assert any("at most 1,000,000, got 1e+308" in e for e in errors.get("hyperparameters", [])), errors


@pytest.mark.parametrize("start", ["1990-01-01", "2009-06-01"])
def test_a_train_split_before_the_dataset_is_refused_naming_the_datasets_first_day(api_client, dataset, start):
    # 1990 was refused naming QQQ's first day (1999-03-10); 2009-06-01 was accepted with a note
    # and trained from 2010-01-04, as the command line did for both
    response = post_task(api_client, dataset, splits={**SPLITS, "train": [start, "2019-12-31"]})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == f"splits.train.start: {start} is before the first data day 2010-01-04 in {DOW30}"
    assert set(response.json()["fields"]) == {"splits.train.start"}


def test_a_train_split_from_the_weekend_before_the_data_is_accepted(api_client, dataset):
    response = post_task(api_client, dataset, splits={**SPLITS, "train": ["2010-01-01", "2019-12-31"]})
    assert response.status_code == 201, response.content


def test_the_form_refuses_a_train_split_before_the_dataset_beside_its_field(client, user, world):
    client.force_login(user)
    errors = _errors(client, world, train_start="1990-01-01")
    assert any("1990-01-01 is before the first data day 2010-01-04" in e for e in errors.get("train_start", [])), errors

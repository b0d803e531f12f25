"""The New run form says everything in one round: field errors, cross-field rules (split order
and overlap) and tickers against the dataset together, with a summary at the top; a blank form
starts from the portfolio settings chosen on validation, or a chosen dataset's own range."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from tests.webapp.runs.test_clone import form_as_posted
from tests.webapp.test_pages import _run_form

pytestmark = pytest.mark.django_db


def _answer(client, world, **changes):
    response = client.post("/runs/new/", _run_form(world, **changes))
    soup = BeautifulSoup(response.content.decode(), "html.parser")
    errors = {ul["data-error-for"]: ul.get_text(" ", strip=True) for ul in soup.select("[data-error-for]")}
    return response, soup, errors


def test_field_errors_split_order_and_unknown_tickers_come_back_together(client, user, world):
    client.force_login(user)
    response, soup, errors = _answer(
        client,
        world,
        initial_cash=-5,
        tickers="AAPL, ZZZ",
        train_start="2019-12-31",
        train_end="2018-06-01",
        test_start="2020-12-31",
        test_end="2020-07-01",
    )
    assert response.status_code == 400
    assert "at least 100" in errors["initial_cash"]
    assert "ZZZ" in errors["tickers"]
    assert "before the training start" in errors["train_end"]
    assert "before the test start" in errors["test_end"]
    summary = soup.select_one("#error-summary")
    assert summary is not None and "4 settings to fix" in summary.get_text()
    assert {a["href"] for a in summary.select("a")} >= {"#field-initial_cash", "#field-tickers", "#field-test_end"}


def test_overlapping_splits_are_reported_with_a_bad_field(client, user, world):
    client.force_login(user)
    _, _, errors = _answer(client, world, hmax=0, validation_start="2019-06-01")
    assert "hmax" in errors
    assert "must be after the training end" in errors["validation_start"], errors


def test_a_split_that_does_not_parse_is_not_also_called_missing(client, user, world):
    client.force_login(user)
    _, _, errors = _answer(client, world, train_start="yesterday", tickers="ZZZ")
    assert "Enter a date" in errors["train_start"] and "train_end" not in errors
    assert "validation_start" not in errors, "no order error against a split that did not parse"
    assert "ZZZ" in errors["tickers"]


def test_nothing_is_kept_when_the_round_has_errors(client, user, world):
    from webapp.runs.models import Task

    client.force_login(user)
    before = Task.objects.count()
    _answer(client, world, initial_cash=-5)
    assert Task.objects.count() == before


def test_a_blank_form_starts_from_the_portfolio_defaults_chosen_on_validation(client, user, world):
    from webapp import engine
    from webapp.demo.profiles import SPLITS

    client.force_login(user)
    data = form_as_posted(client.get("/runs/new/").content.decode())
    assert data["kind"] == ["portfolio"] and data["reward"] == ["log_return"]
    assert float(data["rebalance_band"][0]) == engine.recommended_rebalance_band()
    assert data["selection_rule"] == ["mean_minus_std"]
    assert [data["train_start"][0], data["test_end"][0]] == [SPLITS["train"][0], SPLITS["test"][1]]


def test_a_blank_form_for_a_dataset_takes_its_range_and_tickers_and_is_accepted(client, user, world):
    from webapp.runs.models import Run

    client.force_login(user)
    dataset = world.dataset
    data = form_as_posted(client.get(f"/runs/new/?dataset={dataset.id}").content.decode())
    assert data["tickers"] == [", ".join(dataset.tickers)]
    assert data["train_start"] == [str(dataset.start_date)]
    assert data["test_end"] == [str(dataset.end_date)]
    assert data["train_end"][0] < data["validation_start"][0] <= data["validation_end"][0] < data["test_start"][0]
    data.update(
        {"budget": [str(world.budget.id)], "hyperparameters": ['{"num_envs": 4, "rollout_steps": 16}'], "name": ["x"]}
    )
    data.pop("start_now", None)
    before = Run.objects.count()
    response = client.post("/runs/new/", data)
    assert response.status_code == 302, BeautifulSoup(response.content.decode(), "html.parser").select(".errorlist")
    assert Run.objects.count() == before + 1
    assert Run.objects.latest("id").task.kind == "portfolio"


@pytest.mark.parametrize("tickers", [",,,", " ; , "])
def test_tickers_of_only_separators_are_an_error_not_all_of_the_datasets(client, user, world, tickers):
    """The API refuses an empty ticker list; the form must not read ",,," as "all of them"."""
    client.force_login(user)
    response, _, errors = _answer(client, world, tickers=tickers)
    assert response.status_code == 400
    assert "at least one ticker" in errors["tickers"]

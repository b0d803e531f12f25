"""Errors of the New run form and the API as a person reads them: each said once, next to its
field, without internal dotted names in front."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup

from tests.webapp.conftest import SPLITS, TINY_PPO
from tests.webapp.test_pages import _run_form

pytestmark = pytest.mark.django_db


def _errors(client, world, **changes) -> dict[str, list[str]]:
    page = client.post("/runs/new/", _run_form(world, **changes)).content.decode()
    soup = BeautifulSoup(page, "html.parser")
    return {ul["data-error-for"]: [li.get_text() for li in ul.select("li")] for ul in soup.select("[data-error-for]")}


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        (
            {"train_start": "2019-12-31", "train_end": "2010-01-01"},
            "train_end",
            "2010-01-01 is before the training start 2019-12-31",
        ),
        ({"initial_cash": -5}, "initial_cash", "must be at least 100 and at most 10,000,000,000 USD, got -5"),
        (
            {"flatten_at_close": "on"},
            "flatten_at_close",
            "flattening at the session close needs intraday bars; dataset 'ada-data' is daily",
        ),
        (
            {"hyperparameters": json.dumps({**TINY_PPO, "learning_rate": -1})},
            "hyperparameters",
            "learning_rate: must be > 0, got -1.0",
        ),
    ],
)
def test_a_form_error_is_shown_once_next_to_its_field_in_plain_words(client, user, world, changes, field, expected):
    client.force_login(user)
    errors = _errors(client, world, **changes)
    assert errors.get(field) == [expected], errors
    shown = " ".join(" ".join(v) for v in errors.values())
    for internal in ("train.", "env.", "hyperparameters."):
        assert internal not in shown


def test_api_field_messages_do_not_repeat_their_field_name(api_client, dataset):
    response = api_client.post(
        "/api/tasks/",
        {
            "name": "t",
            "dataset": dataset.id,
            "splits": {**SPLITS, "train": ["2019-12-31", "2010-01-01"]},
        },
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["fields"] == {"splits.train.end": "2010-01-01 is before train.start 2019-12-31"}
    assert body["error"] == "splits.train.end: 2010-01-01 is before train.start 2019-12-31"


def test_the_form_creates_a_portfolio_run_with_its_reward_costs_and_selection_rule(client, user, world):
    from webapp.runs.models import Run

    client.force_login(user)
    before = set(Run.objects.values_list("id", flat=True))
    form = _run_form(
        world,
        kind="portfolio",
        reward="differential_sharpe",
        selection_rule="worst_window",
        buy_cost_pct=0.002,
        rebalance_band=0.02,
        start_now="",
    )
    response = client.post("/runs/new/", form)
    assert response.status_code == 302, _errors(client, world, **{k: v for k, v in form.items() if k != "dataset"})
    run = Run.objects.exclude(id__in=before).get()
    task = run.task
    assert task.kind == "portfolio"
    assert task.env["reward"] == "differential_sharpe" and task.env["cost_pct"] == 0.002
    assert task.env["rebalance_band"] == 0.02
    assert "hmax" not in task.env
    assert task.selection["rule"] == "worst_window"


def test_the_form_offers_the_no_trade_band_chosen_on_validation(client, user, world):
    client.force_login(user)
    soup = BeautifulSoup(client.get("/runs/new/").content.decode(), "html.parser")
    assert soup.select_one("input[name=rebalance_band]")["value"] == "0.01"


def test_a_portfolio_task_left_without_reward_scale_gets_its_rewards_scale_from_form_and_api(
    client, user, world, api_client
):
    """The form's hyperparameter box leaves ``reward_scale`` out, and ``{}`` is accepted (every
    default): a portfolio task then trains log returns scaled by 100 and the differential Sharpe
    ratio by 1, as the learning-quality benchmark does; stock trading keeps 1; a value given wins."""
    from webapp.runs.models import Run

    client.force_login(user)
    soup = BeautifulSoup(client.get("/runs/new/").content.decode(), "html.parser")
    shown = json.loads(soup.select_one("textarea[name=hyperparameters]").get_text())
    assert "reward_scale" not in shown and shown["num_envs"] > 0

    made = {}
    for label, changes in (
        ("log", {"kind": "portfolio", "reward": "log_return", "hyperparameters": "{}", "generation_steps": 16384}),
        ("dsr", {"kind": "portfolio", "reward": "differential_sharpe", "hyperparameters": json.dumps(TINY_PPO)}),
        ("given", {"kind": "portfolio", "hyperparameters": json.dumps({**TINY_PPO, "reward_scale": 7.0})}),
        ("stock", {"hyperparameters": json.dumps(TINY_PPO)}),
    ):
        before = set(Run.objects.values_list("id", flat=True))
        form = _run_form(world, start_now="", **changes)
        response = client.post("/runs/new/", form)
        assert response.status_code == 302, (label, _errors(client, world, **changes))
        made[label] = Run.objects.exclude(id__in=before).get().task.hyperparameters["reward_scale"]
    assert made == {"log": 100.0, "dsr": 1.0, "given": 7.0, "stock": 1.0}

    body = {
        "dataset": world.dataset.id,
        "name": "api portfolio",
        "splits": SPLITS,
        "kind": "portfolio",
        "algorithm": "ppo",
        "hyperparameters": TINY_PPO,
    }
    response = api_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["hyperparameters"]["reward_scale"] == 100.0


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        ({"sell_cost_pct": 0.05}, "sell_cost_pct", "a portfolio task charges one cost on all turnover"),
        ({"hmax": 500}, "hmax", "stock trading only"),
        ({"turbulence_threshold": 50}, "turbulence_threshold", "stock trading only"),
        ({"reward_scaling": 0.5}, "reward_scaling", "stock trading only"),
    ],
)
def test_a_portfolio_form_names_a_stock_trading_setting_instead_of_dropping_it(
    client, user, world, changes, field, expected
):
    """The portfolio env charges one cost on turnover and has no shares, turbulence stop or
    value-change reward: a stock-trading field set away from its default is a form error, not a
    silently cost-free run (the API refuses such env keys as unknown settings)."""
    client.force_login(user)
    errors = _errors(client, world, kind="portfolio", **changes)
    assert list(errors) == [field] and errors[field][0].startswith(expected), errors

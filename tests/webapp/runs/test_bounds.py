"""Bounds on every number of a task, run and budget, enforced alike by the API and the New run
form, with every error in one answer."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from tests.webapp.api.test_task_limits import post_task
from tests.webapp.runs.test_form_errors import _errors
from webapp.core.errors import AppError
from webapp.runs import bounds, services

pytestmark = pytest.mark.django_db


def test_a_task_with_several_bad_numbers_gets_every_error_at_once(api_client, dataset):
    response = post_task(
        api_client,
        dataset,
        env={"initial_cash": 1e300, "hmax": 0, "buy_cost_pct": 0.5},
        hyperparameters={"learning_rate": -1, "num_envs": 0},
    )
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert {"env.initial_cash", "env.hmax", "env.buy_cost_pct", "hyperparameters.learning_rate"} <= set(fields)
    assert "hyperparameters.num_envs" in fields
    assert "1e+300" in fields["env.initial_cash"] and "10,000,000,000" in fields["env.initial_cash"]
    assert response.json()["error"].startswith("5 fields are invalid")


def test_a_run_with_absurd_settings_gets_every_error_at_once(api_client, world):
    body = {
        "task": world.task.id,
        "budget": world.budget.id,
        "num_pods": 0,
        "generation_steps": 10**12,
        "leaderboard_size": 100_000,
        "fresh_probability": 2,
    }
    response = api_client.post("/api/runs/", body, format="json")
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert set(fields) >= {"num_pods", "generation_steps", "leaderboard_size", "fresh_probability"}
    assert "at least 1" in fields["num_pods"]
    assert "at most 1,000" in fields["leaderboard_size"]


def test_budgets_refuse_a_past_deadline_a_duplicate_name_and_zero_pods_together(user):
    services.budget_create(actor=user, name="gpu week")
    with pytest.raises(AppError) as caught:
        services.budget_create(
            actor=user,
            name="gpu week",
            max_concurrent_pods=0,
            deadline=timezone.now() - dt.timedelta(days=1),
            env_step_cap=10**16,
        )
    fields = caught.value.fields
    assert set(fields) == {"name", "max_concurrent_pods", "deadline", "env_step_cap"}
    assert "already has a budget named 'gpu week'" in fields["name"]
    assert "past" in fields["deadline"]


def test_another_owner_may_use_the_same_budget_name(user, other_user):
    services.budget_create(actor=user, name="shared name")
    assert services.budget_create(actor=other_user, name="shared name").name == "shared name"


def test_the_budget_form_says_the_bound_not_a_database_constraint(client, staff, user):
    client.force_login(staff)
    page = client.post(
        "/budgets/",
        {"action": "assign", "name": "zero", "owner": user.id, "max_concurrent_pods": 0, "env_step_cap": 1000},
    ).content.decode()
    assert "violated" not in page and "budget_pods_gte_1" not in page
    assert "must be at least 1 and at most 1,024, got 0" in page  # the whole range, as the API says it


def test_the_new_run_form_shows_task_and_run_errors_together_with_labels_in_words(client, user, world):
    client.force_login(user)
    errors = _errors(client, world, initial_cash=1e300, hmax=0, num_pods=0, leaderboard_size=100000)
    assert set(errors) >= {"initial_cash", "hmax", "num_pods", "leaderboard_size"}, errors
    page = client.get("/runs/new/").content.decode()
    assert "Max shares per trade" in page and "Buy cost (fraction, 0.001 = 0.1 %)" in page
    assert 'max="10000000000.0"' in page or 'max="10000000000"' in page


def test_the_services_and_the_forms_use_one_bounds_table():
    from webapp.runs.forms import RunForm

    shown = {name: bound for name, bound in bounds.ENV.items() if name in RunForm.base_fields}
    assert set(shown) >= {"initial_cash", "hmax", "buy_cost_pct", "sell_cost_pct", "turbulence_threshold"}
    for name, bound in {**shown, **bounds.RUN}.items():
        field = RunForm.base_fields[name]
        assert field.label == bound.label
        assert float(field.widget.attrs["max"]) == bound.high


@pytest.mark.parametrize(
    ("env", "field", "form_field", "expected"),
    [
        ({"cost_pct": 0.5}, "cost_pct", "buy_cost_pct", "at most 0.1"),
        ({"initial_cash": 10}, "initial_cash", "initial_cash", "at least 100"),
        ({"reward_scaling": 5}, "reward_scaling", "reward_scaling", "at most 1"),
    ],
)
def test_a_portfolio_task_gets_the_same_env_bounds_from_the_api_as_from_the_form(
    api_client, client, user, dataset, world, env, field, form_field, expected
):
    response = post_task(api_client, dataset, kind="portfolio", env=env)
    assert response.status_code == 400, response.content
    assert set(response.json()["fields"]) == {f"env.{field}"}
    assert expected in response.json()["fields"][f"env.{field}"]
    client.force_login(user)
    errors = _errors(client, world, kind="portfolio", **{form_field: env[field]})
    assert form_field in errors and expected in errors[form_field][0], errors


def test_a_portfolio_task_within_the_bounds_is_created(api_client, dataset):
    response = post_task(api_client, dataset, kind="portfolio", env={"cost_pct": 0.1, "initial_cash": 100})
    assert response.status_code == 201, response.content
    assert response.json()["env"]["cost_pct"] == 0.1

"""The API's defaults and error fields follow the request body: a run created without
``mutation`` mutates as the new-run form does, and errors name ``mutation.bounds.<name>`` and
``splits.<split>[.start|.end]``."""

from __future__ import annotations

import types

import pytest

from tests.webapp.conftest import SPLITS, TICKERS, TINY_PPO, create_task
from tests.webapp.runs.test_mixed_algorithms import _claim, _complete
from webapp.runs.algorithms import default_mutation
from webapp.runs.forms import RunForm
from webapp.runs.models import Generation, Run

pytestmark = pytest.mark.django_db


def _post_run(api_client, task, budget, **changes):
    body = {"task": task.id, "budget": budget.id, "generation_steps": 256, "num_pods": 1, **changes}
    return api_client.post("/api/runs/", body, format="json")


def test_a_run_created_without_mutation_gets_the_forms_default_and_its_children_mutate(
    api_client, user, task, make_budget, tmp_path
):
    form_default = RunForm(user=user).initial["mutation"]
    assert form_default == default_mutation("ppo") and form_default["bounds"] == {"learning_rate": [1e-5, 1e-2]}
    response = _post_run(
        api_client, task, make_budget(), num_pods=2, fresh_probability=0.0, leaderboard_size=1, start=True
    )
    assert response.status_code == 201, response.json()
    assert response.json()["mutation"] == form_default
    run = Run.objects.get(pk=response.json()["id"])
    parent = _complete(_claim(run, 1), 1.0, tmp_path)
    child = _claim(run, 0)  # pod 0 has no agent of its own: it copies pod 1's, mutated
    assert child.parent_id == parent.id
    old, new = Generation.objects.get(pk=child.generation_id).mutations["learning_rate"]
    assert old == parent.hyperparameters["learning_rate"]
    assert new in (pytest.approx(old * 0.8), pytest.approx(old * 1.25))
    assert child.hyperparameters["learning_rate"] == new


def test_a_null_mutation_gets_the_forms_default_like_a_missing_one(api_client, user, task, make_budget):
    response = _post_run(api_client, task, make_budget(), mutation=None)
    assert response.status_code == 201, response.json()
    assert response.json()["mutation"] == RunForm(user=user).initial["mutation"] == default_mutation("ppo")


def test_an_explicit_empty_mutation_still_means_none(api_client, task, make_budget):
    response = _post_run(api_client, task, make_budget(), mutation={})
    assert response.status_code == 201 and response.json()["mutation"] == {}


def test_a_mixed_tasks_default_mutation_has_each_algorithms_learning_rates(api_client, user, dataset, make_budget):
    task = create_task(user, dataset, name="ppo+sac", algorithms=["ppo", "sac"])
    response = _post_run(api_client, task, make_budget())
    assert response.status_code == 201, response.json()
    assert set(response.json()["mutation"]["bounds"]) == {
        "learning_rate",
        "actor_learning_rate",
        "critic_learning_rate",
    }


@pytest.mark.parametrize(
    ("mutation", "field"),
    [
        ({"bounds": {"foo": [0, 1]}}, "mutation.bounds.foo"),  # no such hyperparameter
        ({"bounds": {"hidden_sizes": [1, 2]}}, "mutation.bounds.hidden_sizes"),  # not a number
        ({"bounds": {"learning_rate": [1e-2, 1e-5]}}, "mutation.bounds.learning_rate"),  # low > high
        # factors and probability are checked even without bounds (they are stored with the run)
        ({"factors": [-1]}, "mutation.factors[0]"),
        ({"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 0]}, "mutation.factors[1]"),
        ({"probability": 2}, "mutation.probability"),
        # an unknown key and an empty factor list are not silently stored
        ({"bogus": 1}, "mutation.bogus"),
        ({"factors": []}, "mutation.factors"),
        ({"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": "0.8"}, "mutation.factors"),
    ],
)
def test_a_bad_mutation_bound_is_a_400_on_mutation_bounds_name(api_client, task, make_budget, mutation, field):
    response = _post_run(api_client, task, make_budget(), mutation=mutation)
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert response.json()["error"].startswith(f"{field}: ")


def _post_task(api_client, dataset, splits):
    body = {"name": "t", "dataset": dataset.id, "tickers": TICKERS, "splits": splits, "hyperparameters": TINY_PPO}
    return api_client.post("/api/tasks/", body, format="json")


@pytest.mark.parametrize(
    ("splits", "fields"),
    [
        ({"train": SPLITS["train"], "validation": SPLITS["validation"]}, ["splits.test"]),
        ({"train": SPLITS["train"]}, ["splits.validation", "splits.test"]),
        ({**SPLITS, "test": ["2020-07-01"]}, ["splits.test"]),
        ({**SPLITS, "test": None}, ["splits.test"]),
        ({**SPLITS, "extra": ["2020-01-01", "2020-02-01"]}, ["splits.extra"]),  # not silently ignored
        ({**SPLITS, "test": ["2021-07-01", "2020-12-31"]}, ["splits.test.end"]),
        ({**SPLITS, "validation": ["2020-01-01", "2020-13-01"]}, ["splits.validation.end"]),
    ],
)
def test_split_errors_name_the_splits_path_of_the_body(api_client, dataset, splits, fields):
    response = _post_task(api_client, dataset, splits)
    assert response.status_code == 400
    assert sorted(response.json()["fields"]) == sorted(fields), response.json()


def test_the_form_still_shows_a_split_error_under_its_own_field(client, user, dataset, make_budget):
    from tests.webapp.test_pages import _run_form

    client.force_login(user)
    world = types.SimpleNamespace(dataset=dataset, budget=make_budget())
    body = _run_form(world, test_start="2021-07-01", test_end="2020-12-31")
    response = client.post("/runs/new/", body)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert "test_end" in errors and "the test start" in errors["test_end"][0], errors

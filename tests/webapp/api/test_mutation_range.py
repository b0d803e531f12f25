"""A run's mutation bounds are checked against what the task can train: every value a
mutation can reach (each bound's ends, and every corner of them together) must be a usable
hyperparameter of the task, or ``POST /api/runs/`` is a 400 naming ``mutation.bounds.<name>``,
not a run whose mutated pods fail one by one."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import create_task
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

TINY_DIRECT = {"num_envs": 8, "rollout_steps": 5, "hidden_sizes": [8]}


def _post_run(api_client, task, budget, mutation):
    body = {"task": task.id, "budget": budget.id, "generation_steps": 256, "num_pods": 1, "mutation": mutation}
    return api_client.post("/api/runs/", body, format="json")


@pytest.fixture
def direct_task(user, dataset):
    return create_task(
        user, dataset, name="tiny direct", kind="portfolio", algorithm="direct", hyperparameters=TINY_DIRECT
    )


@pytest.mark.parametrize(
    ("bounds", "field", "reached"),
    [
        ({"gamma": [0.9, 1.5]}, "mutation.bounds.gamma", "gamma = 1.5"),
        ({"ent_coef": [-0.1, 0.1]}, "mutation.bounds.ent_coef", "ent_coef = -0.1"),
        # a rollout of the tiny task holds 4 x 32 = 128 samples
        ({"num_minibatches": [1, 1000]}, "mutation.bounds.num_minibatches", "num_minibatches = 1000"),
        # each end alone is fine; together (1 env: 32 samples, 64 minibatches) they are not
        (
            {"num_envs": [1, 8], "num_minibatches": [2, 64]},
            "mutation.bounds.num_minibatches",
            "num_envs = 1, num_minibatches = 64",
        ),
        # an integer's reachable ends are whole numbers: [0.5, 3] reaches 1..3 and is usable
    ],
)
def test_a_ppo_bound_that_reaches_an_unusable_value_is_a_400_naming_it(
    api_client, task, make_budget, bounds, field, reached
):
    response = _post_run(api_client, task, make_budget(), {"bounds": bounds, "factors": [0.8, 1.25]})
    assert response.status_code == 400, response.json()
    assert list(response.json()["fields"]) == [field]
    assert f"a mutation can reach {reached}" in response.json()["fields"][field]
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("bounds", "field", "why"),
    [
        ({"kappa": [0, 0]}, "mutation.bounds.kappa", "must be a finite number > 0"),
        ({"kappa": [3, 5]}, "mutation.bounds.kappa", "logit_scale"),  # 2 x 3 > the env's logit_scale of 4
        ({"turnover_penalty": [-1, 0.1]}, "mutation.bounds.turnover_penalty", "must be at least 0 and at most"),
        ({"variance_penalty": [0.5, 1e7]}, "mutation.bounds.variance_penalty", "at most 1,000,000, got 10000000.0"),
        ({"subset_size": [2, 50]}, "mutation.bounds.subset_size", "universe has 3"),
        # asked once per line: a mutation back above 0 would repeat the held-out test until it passed
        ({"challenger_alpha": [0.01, 0.5]}, "mutation.bounds.challenger_alpha", "set once for a line"),
    ],
)
def test_a_direct_bound_that_reaches_an_unusable_value_is_a_400_naming_it(
    api_client, direct_task, make_budget, bounds, field, why
):
    direct_task.hyperparameters = {**direct_task.hyperparameters, "subset_size": 2}
    direct_task.save(update_fields=["hyperparameters"])
    response = _post_run(api_client, direct_task, make_budget(), {"bounds": bounds})
    assert response.status_code == 400, response.json()
    assert list(response.json()["fields"]) == [field]
    assert why in response.json()["fields"][field]


@pytest.mark.parametrize(
    "bounds",
    [
        {"learning_rate": [1e-5, 1e-2]},
        {"kappa": [0.1, 1.0], "turnover_penalty": [0.0, 0.1], "tracking_penalty": [5, 40]},
    ],
)
def test_bounds_whose_every_value_trains_make_a_run(api_client, direct_task, make_budget, bounds):
    response = _post_run(api_client, direct_task, make_budget(), {"bounds": bounds})
    assert response.status_code == 201, response.json()
    assert response.json()["mutation"]["bounds"] == bounds


def test_a_bound_on_a_setting_fixed_at_creation_is_a_400(api_client, task, make_budget):
    response = _post_run(api_client, task, make_budget(), {"bounds": {"init_log_std": [-1.0, 0.0]}})
    assert response.status_code == 400, response.json()
    assert "not mutated" in response.json()["fields"]["mutation.bounds.init_log_std"]


def test_whole_number_ends_of_an_integer_bound_are_what_is_checked(api_client, task, make_budget):
    response = _post_run(api_client, task, make_budget(), {"bounds": {"num_envs": [0.5, 3]}})
    assert response.status_code == 201, response.json()

"""Per-algorithm hyperparameters of mixed-algorithm tasks (``algorithm_hyperparameters``):
stored complete at creation, used by the pods that train each algorithm, given through the
service, the API and the run form, and refused with errors naming the algorithm and the key."""

from __future__ import annotations

import json

import pytest

from tests.webapp.conftest import SPLITS, TICKERS, TINY_PPO, create_task
from tests.webapp.test_pages import _run_form
from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import algorithms, services
from webapp.runs.form_initial import initial_from_run
from webapp.runs.models import Generation, Run

pytestmark = pytest.mark.django_db

SAC = {"tau": 0.02, "actor_learning_rate": 0.001}


def _claim(run, pod_index):
    gen = Generation.objects.get(run=run, pod__index=pod_index, status=Generation.Status.QUEUED)
    return services.generation_claim(generation_id=gen.id, worker="w@test")


def test_a_pod_of_another_algorithm_trains_with_that_algorithms_own_values(user, dataset, make_budget):
    task = create_task(user, dataset, algorithms=["ppo", "sac"], algorithm_hyperparameters={"sac": SAC})
    stored = task.algorithm_hyperparameters["sac"]
    assert stored == engine.validate_hyperparameters("sac", stored)  # complete: every field of SAC's config
    run = services.run_create(owner=user, task=task, budget=make_budget(), num_pods=2, generation_steps=256)
    services.run_start(run=run)
    ppo, sac = _claim(run, 0), _claim(run, 1)
    assert sac.task["algorithm"] == "sac"
    assert sac.hyperparameters["tau"] == 0.02 and sac.hyperparameters["actor_learning_rate"] == 0.001
    # names SAC shares with the main algorithm come from the task's hyperparameters
    assert sac.hyperparameters["num_envs"] == TINY_PPO["num_envs"]
    assert sac.hyperparameters["hidden_sizes"] == TINY_PPO["hidden_sizes"]
    # the default of a name neither sets
    assert sac.hyperparameters["gamma"] == engine.validate_hyperparameters("sac", {})["gamma"]
    assert ppo.hyperparameters == engine.validate_hyperparameters("ppo", TINY_PPO)


def test_a_value_given_for_the_algorithm_wins_over_the_shared_one(user, dataset):
    task = create_task(user, dataset, algorithms=["ppo", "a2c"], algorithm_hyperparameters={"a2c": {"num_envs": 8}})
    assert algorithms.algorithm_hyperparameters(task, "a2c")["num_envs"] == 8
    assert algorithms.algorithm_hyperparameters(task, "ppo")["num_envs"] == TINY_PPO["num_envs"]


def test_a_task_stored_before_the_field_takes_the_shared_values_and_defaults(user, dataset):
    task = create_task(user, dataset, algorithms=["ppo", "sac"])
    task.algorithm_hyperparameters = {}  # as the migration leaves older tasks
    hp = algorithms.algorithm_hyperparameters(task, "sac")
    assert hp["num_envs"] == TINY_PPO["num_envs"] and hp["tau"] == engine.validate_hyperparameters("sac", {})["tau"]


def _body(dataset, **changes):
    return {
        "name": "mixed",
        "dataset": dataset.id,
        "tickers": TICKERS,
        "splits": SPLITS,
        "algorithm": "ppo",
        "hyperparameters": TINY_PPO,
        "algorithms": ["ppo", "sac"],
        **changes,
    }


def test_the_api_stores_and_returns_each_algorithms_values(api_client, dataset):
    response = api_client.post("/api/tasks/", _body(dataset, algorithm_hyperparameters={"SAC": SAC}), format="json")
    assert response.status_code == 201, response.json()
    stored = response.json()["algorithm_hyperparameters"]
    assert set(stored) == {"sac"} and stored["sac"]["tau"] == 0.02


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ({"sac": {"tau": -1}}, "algorithm_hyperparameters.sac.tau", "tau"),
        ({"sac": {"tau": 0.01, "gamma": 7}}, "algorithm_hyperparameters.sac.gamma", "gamma"),
        ({"sac": {"learning_rate": 0.001}}, "algorithm_hyperparameters.sac.learning_rate", "actor_learning_rate"),
        ({"td3": {"tau": 0.01}}, "algorithm_hyperparameters.td3", "not one of the task's other algorithms (sac)"),
        ({"ppo": {"learning_rate": 0.001}}, "algorithm_hyperparameters.ppo", "set its values in hyperparameters"),
        ({"sac": 3}, "algorithm_hyperparameters.sac", "an object of sac's settings"),
        ({"sac": {"buffer_size": 2_000_000_000}}, "algorithm_hyperparameters.sac.buffer_size", "buffer"),
    ],
)
def test_the_api_names_the_algorithm_and_key_of_a_bad_value(api_client, dataset, value, field, words):
    response = api_client.post("/api/tasks/", _body(dataset, algorithm_hyperparameters=value), format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert words in json.dumps(response.json())


def test_values_for_a_single_algorithm_task_are_refused(user, dataset):
    with pytest.raises(AppError) as err:
        create_task(user, dataset, algorithm_hyperparameters={"sac": SAC})
    assert "tick algorithms for a mixed tournament first" in err.value.fields["algorithm_hyperparameters.sac"]


def test_the_form_stores_them_clone_keeps_them_and_a_bad_one_shows_next_to_the_field(client, user, world):
    client.force_login(user)
    form = _run_form(world, name="mixed hp", algorithms=["sac"], algorithm_hyperparameters=json.dumps({"sac": SAC}))
    response = client.post("/runs/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get(name="mixed hp")
    assert run.task.algorithm_hyperparameters["sac"]["tau"] == 0.02
    assert initial_from_run(run)["algorithm_hyperparameters"]["sac"]["tau"] == 0.02
    bad = _run_form(world, name="bad hp", algorithms=["sac"], algorithm_hyperparameters='{"sac": {"tau": -1}}')
    response = client.post("/runs/new/", bad)
    page = response.content.decode()
    assert response.status_code == 400 and 'data-error-for="algorithm_hyperparameters"' in page
    assert "sac.tau" in page and not Run.objects.filter(name="bad hp").exists()

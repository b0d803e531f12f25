"""Mixed-algorithm runs: the task's allowed list, fresh pods round-robin over it, children
keeping their parent's algorithm, the leaderboard's algorithm column, and validation."""

from __future__ import annotations

import json

import pytest

from tests.webapp.conftest import SPLITS, TICKERS, TINY_PPO, create_task
from tests.webapp.test_pages import _run_form
from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import services
from webapp.runs.models import Agent, Generation
from webapp.runs.selectors.payloads import leaderboard_payload

pytestmark = pytest.mark.django_db

MUTATION = {"bounds": {"learning_rate": [1e-5, 1e-2], "actor_learning_rate": [1e-5, 1e-2]}, "factors": [0.5, 2.0]}


def _claim(run, pod_index):
    gen = Generation.objects.get(run=run, pod__index=pod_index, status=Generation.Status.QUEUED)
    return services.generation_claim(generation_id=gen.id, worker="w@test")


def _complete(claim, score, tmp_path):
    path = tmp_path / f"agent-{claim.generation_id}.pt"
    path.write_bytes(b"not a real checkpoint: the services only store the file")
    result = engine.TrainedGeneration(
        sha256="0" * 64,
        score=score,
        metrics={"total_return": 0.01},
        env_steps=claim.env_steps,
        hyperparameters=claim.hyperparameters,
        cancelled=False,
        duration_s=0.1,
    )
    return services.generation_complete(claim=claim, result=result, local_checkpoint=str(path))


@pytest.fixture
def mixed_run(user, dataset, make_budget):
    task = create_task(user, dataset, name="ppo+sac", algorithms=["ppo", "sac"])
    run = services.run_create(
        owner=user,
        task=task,
        budget=make_budget(max_concurrent_pods=2),
        num_pods=2,
        generation_steps=256,
        leaderboard_size=1,
        fresh_probability=0.0,
        mutation=MUTATION,
        device="cpu",
    )
    services.run_start(run=run)
    return run


def test_fresh_pods_train_each_allowed_algorithm_round_robin_by_pod_index(mixed_run):
    assert mixed_run.task.algorithms == ["ppo", "sac"]
    first, second = _claim(mixed_run, 0), _claim(mixed_run, 1)
    assert (first.task["algorithm"], second.task["algorithm"]) == ("ppo", "sac")
    # the task's own hyperparameters for ppo; sac takes the shared ones and its defaults
    assert first.hyperparameters == first.task["hyperparameters"] == engine.validate_hyperparameters("ppo", TINY_PPO)
    assert second.hyperparameters["num_envs"] == TINY_PPO["num_envs"]
    assert second.hyperparameters["hidden_sizes"] == TINY_PPO["hidden_sizes"]
    assert second.hyperparameters["tau"] == engine.validate_hyperparameters("sac", {})["tau"]
    assert "learning_rate" not in second.hyperparameters
    engine.validate_task(second.task)  # a spec the trainer accepts as it is
    assert Generation.objects.get(pk=second.generation_id).algorithm == "sac"


def test_a_child_keeps_its_parents_algorithm_and_mutates_only_its_hyperparameters(mixed_run, tmp_path):
    ppo_claim, sac_claim = _claim(mixed_run, 0), _claim(mixed_run, 1)
    sac_agent = _complete(sac_claim, 2.0, tmp_path)
    ppo_agent = _complete(ppo_claim, 0.1, tmp_path)  # below the sac agent: off the 1-agent board
    assert (sac_agent.algorithm, ppo_agent.algorithm) == ("sac", "ppo")
    child = _claim(mixed_run, 0)  # pod 0 had ppo; it switches to the better sac agent
    assert child.parent_id == sac_agent.id
    assert child.task["algorithm"] == "sac"
    gen = Generation.objects.get(pk=child.generation_id)
    assert gen.algorithm == "sac" and set(gen.mutations) == {"actor_learning_rate"}
    assert "learning_rate" not in child.hyperparameters
    board = leaderboard_payload(mixed_run)
    assert [row["algorithm"] for row in board] == ["sac"]


def test_the_run_page_and_api_show_the_algorithm_column(client, api_client, user, mixed_run, tmp_path):
    _complete(_claim(mixed_run, 1), 1.0, tmp_path)
    client.force_login(user)
    page = client.get(f"/runs/{mixed_run.id}/").content.decode()
    assert "<th>Algorithm</th>" in page and '<td data-col="algorithm">SAC</td>' in page
    rows = api_client.get(f"/api/runs/{mixed_run.id}/leaderboard/").json()
    rows = rows.get("results", rows) if isinstance(rows, dict) else rows
    assert [r["algorithm"] for r in rows] == ["sac"]
    assert api_client.get(f"/api/agents/{Agent.objects.get(run=mixed_run).id}/").json()["algorithm"] == "sac"


def _task_body(dataset, **changes):
    return {
        "name": "mixed",
        "dataset": dataset.id,
        "tickers": TICKERS,
        "splits": SPLITS,
        "algorithm": "ppo",
        "hyperparameters": TINY_PPO,
        **changes,
    }


def test_the_api_stores_the_allowed_list_and_defaults_to_the_single_algorithm(api_client, dataset):
    response = api_client.post("/api/tasks/", _task_body(dataset, algorithms=["A2C", "ppo"]), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["algorithms"] == ["ppo", "a2c"]
    response = api_client.post("/api/tasks/", _task_body(dataset), format="json")
    assert response.status_code == 201 and response.json()["algorithms"] == ["ppo"]


@pytest.mark.parametrize(
    ("algorithms", "words"),
    [
        (["ppo", "dqn"], "'dqn' not one of"),
        (["sac", "td3"], "must include the task's algorithm 'ppo'"),
        ("ppo", "list"),
    ],
)
def test_the_api_names_a_bad_allowed_list(api_client, dataset, algorithms, words):
    response = api_client.post("/api/tasks/", _task_body(dataset, algorithms=algorithms), format="json")
    assert response.status_code == 400, response.json()
    assert "algorithms" in response.json()["fields"]
    assert words in json.dumps(response.json())


def test_a_mutation_bound_no_allowed_algorithm_has_is_named(user, dataset, make_budget):
    task = create_task(user, dataset, algorithms=["ppo", "a2c"])
    with pytest.raises(AppError) as err:
        services.run_create(
            owner=user,
            task=task,
            budget=make_budget(),
            generation_steps=256,
            mutation={"bounds": {"actor_learning_rate": [1e-5, 1e-2]}},
        )
    assert "mutation.bounds.actor_learning_rate" in err.value.fields


def test_the_form_starts_a_mixed_run_and_names_an_unknown_algorithm(client, user, world):
    from webapp.runs.models import Run

    client.force_login(user)
    form = _run_form(world, name="mixed form", algorithms=["a2c"], num_pods=2, start_now="on")
    response = client.post("/runs/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Run.objects.get(name="mixed form").task.algorithms == ["ppo", "a2c"]
    response = client.post("/runs/new/", _run_form(world, name="bad", algorithms=["dqn"]))
    assert response.status_code == 400
    assert 'data-error-for="algorithms"' in response.content.decode()

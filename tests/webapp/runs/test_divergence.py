"""Diverged generations (issue 20): failed at once, never retried, never ranked; the run goes on
and pauses itself when every pod keeps diverging.

The first tests drive the services as a worker would; the last one trains through a real
Celery worker process on real Dow-30 data with an exploding learning rate.
"""

from __future__ import annotations

import re
import time

import pytest
from django.core.files.storage import default_storage

from tests.webapp.conftest import TINY_PPO, create_task
from webapp.runs import services
from webapp.runs.models import Agent, Generation, Run
from webapp.runs.selectors.payloads import leaderboard, pod_payload

LINE = "PPO diverged at update 37: policy loss is NaN; learning_rate=1000"
#: Exploding learning rates, and the one line each algorithm's failed generations must show.
EXPLODING = {
    "ppo": ({**TINY_PPO, "learning_rate": 1000}, r"PPO diverged at update \d+: [a-zA-Z ]+ is (NaN|inf|-inf); learning_rate=1000"),
    "sac": (
        {"num_envs": 4, "hidden_sizes": [32, 32], "batch_size": 64, "learning_starts": 64, "buffer_size": 4096,
         "actor_learning_rate": 1e6, "critic_learning_rate": 1e6},
        r"SAC diverged at update \d+: [a-zA-Z ]+ is (NaN|inf|-inf); actor_learning_rate=1e\+06, "
        r"critic_learning_rate=1e\+06, alpha_learning_rate=0.0003",
    ),
}  # fmt: skip


def claim_pod(run: Run, index: int) -> services.Claim:
    """Claim pod ``index``'s queued generation as a worker would."""
    gen = Generation.objects.get(run=run, pod__index=index, status=Generation.Status.QUEUED)
    claim = services.generation_claim(generation_id=gen.id, worker="test-worker")
    assert claim is not None
    return claim


def diverge(run: Run, index: int, line: str = LINE) -> None:
    services.generation_diverged(claim=claim_pod(run, index), error=line, env_steps=128)


def succeed(run: Run, index: int, checkpoint: dict) -> Agent:
    from webapp import engine

    claim = claim_pod(run, index)
    result = engine.TrainedGeneration(
        sha256=checkpoint["sha256"],
        score=0.5,
        metrics=checkpoint["metrics"],
        env_steps=claim.env_steps,
        hyperparameters=claim.hyperparameters,
        cancelled=False,
        duration_s=0.5,
        telemetry=[],
        tickers=checkpoint["tickers"],
    )
    return services.generation_complete(claim=claim, result=result, local_checkpoint=str(checkpoint["path"]))


@pytest.fixture
def run(make_budget, make_run) -> Run:
    budget = make_budget(max_concurrent_pods=4, env_step_cap=10**9)
    return services.run_start(run=make_run(budget, num_pods=2))


@pytest.mark.django_db
def test_a_diverged_generation_fails_without_retry_or_agent_and_its_pod_goes_on(run):
    diverge(run, 0)

    gen = Generation.objects.get(run=run, pod__index=0, number=1)
    assert (gen.status, gen.failure, gen.error, gen.attempt) == ("failed", "diverged", LINE, 1)
    assert not Agent.objects.filter(run=run).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.status_reason == ""
    # the pod has its next generation queued; the budget paid for the steps trained
    assert Generation.objects.filter(run=run, pod__index=0, number=2, status="queued").exists()
    run.budget.refresh_from_db()
    assert run.budget.env_steps_used == 128
    # the pod says why on the run page (and in its live updates)
    pod = gen.pod
    assert pod_payload(pod)["last_failure"] == f"generation 1 diverged: {LINE}"
    assert pod_payload(Generation.objects.get(run=run, pod__index=1).pod)["last_failure"] == ""


@pytest.mark.django_db
def test_a_run_pauses_itself_when_every_pod_diverged_three_times_in_a_row(run, api_client, client, user):
    for _ in range(services.PAUSE_AFTER_FAILURES - 1):
        diverge(run, 0)
        diverge(run, 1)
    diverge(run, 0)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # pod 1 has failed only twice

    diverge(run, 1, line="PPO diverged at update 2: approximate KL is inf; learning_rate=1000")

    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED
    assert run.status_reason == (
        "paused: the last 3 generations of every pod diverged "
        "(latest: PPO diverged at update 2: approximate KL is inf; learning_rate=1000)"
    )
    # the next generations wait for a resume instead of spending the budget
    waiting = Generation.objects.filter(run=run, status=Generation.Status.QUEUED)
    assert waiting.count() == 2 and not waiting.filter(dispatched_at__isnull=False).exists()
    assert services.generation_claim(generation_id=waiting.first().id, worker="w") is None
    # the reason is on the API and the run page
    body = api_client.get(f"/api/runs/{run.pk}/").json()
    assert (body["status"], body["status_reason"]) == ("paused", run.status_reason)
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "the last 3 generations of every pod diverged" in page
    assert f"generation 3 diverged: {LINE}" in page  # pod 0's card

    services.run_resume(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.status_reason == ""


@pytest.mark.django_db
def test_a_healthy_generation_in_between_keeps_the_run_going(run, trained_checkpoint):
    for _ in range(3):
        diverge(run, 0)
    diverge(run, 1)
    succeed(run, 1, trained_checkpoint)
    diverge(run, 1)
    diverge(run, 1)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # pod 1: failed, done, failed... not 3 in a row

    diverge(run, 1)
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED


# ---------------------------------------------------------------------------- real worker
def _wait(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        services.runs_ensure_work(redispatch_after=30)
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_exploding_learning_rate_through_a_celery_worker_fails_generations_and_pauses_the_run(
    workers, make_budget, user, dataset, algorithm
):
    if not workers.procs:
        workers.start("nan")
    hyperparameters, line_re = EXPLODING[algorithm]
    task = create_task(
        user, dataset, name=f"exploding {algorithm}", algorithm=algorithm, hyperparameters=hyperparameters
    )
    budget = make_budget(max_concurrent_pods=2, env_step_cap=10**9)
    run = services.run_create(
        owner=user, task=task, budget=budget, num_pods=2, generation_steps=256, leaderboard_size=3, device="cpu"
    )
    services.run_start(run=run)

    _wait(
        lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk) == Run.Status.PAUSED,
        timeout=300,  # six tiny generations; generous for a loaded machine
        what="the run to pause itself",
    )

    run.refresh_from_db()
    failed = Generation.objects.filter(run=run, status=Generation.Status.FAILED)
    assert failed.count() == 2 * services.PAUSE_AFTER_FAILURES
    for gen in failed:
        assert re.fullmatch(line_re, gen.error), gen.error
        assert gen.failure == "diverged"
        assert gen.attempt == 1  # a permanent failure: never retried
    assert not Generation.objects.filter(run=run, status=Generation.Status.DONE).exists()
    assert not Agent.objects.filter(run=run).exists() and leaderboard(run) == []
    for gen in failed:  # no checkpoint was stored (names as services.checkpoint_name makes them)
        folder = f"runs/{run.pk}/pod{gen.pod.index}"
        stored = default_storage.listdir(folder)[1] if default_storage.exists(folder) else []
        # gen<number>-a<attempt>-<generation id>.pt, written since this run started (the storage
        # folder outlives test sessions, whose fresh databases reuse run and generation ids)
        written = [
            n
            for n in stored
            if re.fullmatch(rf"gen{gen.number}-a\d+-{gen.pk}\.pt", n)
            and default_storage.get_modified_time(f"{folder}/{n}") >= run.started_at
        ]
        assert not written
    assert run.status_reason.startswith(
        f"paused: the last 3 generations of every pod diverged (latest: {algorithm.upper()} diverged"
    )
    budget.refresh_from_db()
    assert budget.env_steps_used > 0  # what the diverged generations trained counts

"""What every part of the runs services shares: settings, limits, row locks and the events
that tell live pages a budget, run or pod changed.

Lock order, wherever two rows are written in one transaction: the budget row first
(:func:`lock_budget`), then the run (:func:`lock_budget_and_run`), then generations and pods
(conditional updates, no row locks). Every service that locks takes them in this order, so two
transactions never wait on each other in a circle.

Events: the ``publish_*`` helpers number an event inside the transaction and hand
:func:`webapp.runs.events.publish` a function that builds the payload after the commit, so no
payload read (usage, leaderboard, ...) runs while these locks are held.
"""

from __future__ import annotations

import copy

from django.conf import settings

from webapp import engine
from webapp.runs import events
from webapp.runs.models import ClusterBudget, Generation, Pod, Run, Task
from webapp.runs.selectors.payloads import pod_payload, run_payload

MAX_ATTEMPTS = 3
#: A run pauses itself when the last this-many finished generations of every pod failed the
#: same way (e.g. all diverged): more of the same would only spend the budget.
PAUSE_AFTER_FAILURES = 3
#: Env steps per generation when a run does not say (the New run form and the API): one PPO
#: rollout at the default hyperparameters (1 024 envs x 16 steps).
DEFAULT_GENERATION_STEPS = 16_384
#: A ``direct`` run's generation when it does not say: the training budget of the portfolio
#: default chosen on validation (docs/default-selection.md: 2M env steps, ``python -m trainer
#: train``'s default), rounded up to whole gradient steps by :func:`default_generation_steps`.
DIRECT_GENERATION_STEPS = 2_000_000
#: Seconds after its dispatch from which a queued generation whose message is not in the
#: broker (neither waiting nor delivered to a worker) counts as lost and is sent again. The
#: message goes out milliseconds after the dispatching transaction commits, so a few seconds
#: are plenty; a message that only waits for a worker is never sent twice, however long it waits.
LOST_MESSAGE_AFTER_S = 3.0


def default_generation_steps(algorithm: str, hyperparameters: dict) -> int:
    """Env steps per generation of a run of ``algorithm`` that does not say (the New run form
    and ``POST /api/runs/``): :data:`DIRECT_GENERATION_STEPS` in whole gradient steps for
    ``direct`` (2,021,376 = 94 x 1,024 windows x 21 days at its defaults), else
    :data:`DEFAULT_GENERATION_STEPS`."""
    if algorithm != "direct":
        return DEFAULT_GENERATION_STEPS
    return trained_env_steps(algorithm, hyperparameters, DIRECT_GENERATION_STEPS)


def fewest_trained_steps(task: Task, generation_steps: int) -> int:
    """The fewest env steps a generation of ``generation_steps`` of ``task`` trains
    (:func:`trained_env_steps` of each algorithm the task allows, at the task's hyperparameters):
    what the env-step cap is checked against before a generation's algorithm and hyperparameters
    are known."""
    from webapp.runs import algorithms

    return min(
        trained_env_steps(a, algorithms.algorithm_hyperparameters(task, a), generation_steps)
        for a in algorithms.task_algorithms(task)
    )


def trained_env_steps(algorithm: str, hyperparameters: dict, generation_steps: int) -> int:
    """Env steps a generation asked for ``generation_steps`` actually trains, and so what it
    holds of a budget's env-step cap: the agents learn in whole chunks (``engine.min_env_steps``:
    a rollout of ``num_envs x rollout_steps`` for PPO, A2C and direct, a vector step of
    ``num_envs`` off-policy) and train at least the steps asked, so ``generation_steps`` rounded
    up to a whole number of chunks (21,504 asked of a 16,384-step rollout trains 32,768)."""
    chunk = engine.min_env_steps(algorithm, hyperparameters)
    return -(-int(generation_steps) // chunk) * chunk


def setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def stale_after_s() -> float:
    """Seconds without a heartbeat after which a running generation is presumed dead."""
    return setting("PADDOCK_STALE_AFTER_S", 120.0)


def redispatch_after_s() -> float:
    """See :data:`LOST_MESSAGE_AFTER_S`."""
    return LOST_MESSAGE_AFTER_S


def lock_budget(budget_id: int) -> ClusterBudget:
    """Lock a budget row (``SELECT ... FOR UPDATE``) for the rest of the transaction.

    Lock order: the budget row is always the FIRST lock a service takes; a run row, if any,
    comes after it (:func:`lock_budget_and_run`).
    """
    return ClusterBudget.objects.select_for_update().get(pk=budget_id)


def lock_budget_and_run(run: Run) -> tuple[ClusterBudget, Run]:
    """Lock ``run``'s budget row, then the run row, in that order (the one lock order of the
    runs services), and return both freshly read."""
    budget = lock_budget(run.budget_id)  # lock order: 1. budget
    locked = Run.objects.select_for_update().get(pk=run.pk)  # lock order: 2. run
    return budget, locked


def publish_run(run: Run) -> None:
    """Refresh ``run`` from its row and send ``run.update`` after commit; the payload
    (:func:`~webapp.runs.selectors.payloads.run_payload`: usage, progress, ETA, counts) is
    built then, from a copy of the refreshed row, outside the row locks."""
    run.refresh_from_db()
    held = copy.copy(run)
    events.publish(run.id, events.RUN_UPDATE, lambda: {"run": run_payload(held)})


def publish_budget_usage(budget_id: int, run: Run | None = None) -> None:
    """Send ``run.update`` to ``run`` and to every other active run on the budget: its usage
    (pods running, env steps, GPU hours) is on each of their pages and has changed."""
    if run is not None:
        publish_run(run)
    others = Run.objects.filter(budget_id=budget_id).exclude(status__in=Run.TERMINAL)
    if run is not None:
        others = others.exclude(pk=run.pk)
    for other in others.select_related("budget"):
        events.publish(other.id, events.RUN_UPDATE, lambda other=other: {"run": run_payload(other)})


def publish_pod(pod: Pod, gen: Generation | None = None) -> None:
    """Send ``pod.update`` after commit, built then from copies of the rows held now."""
    held_pod, held_gen = copy.copy(pod), copy.copy(gen)
    events.publish(pod.run_id, events.POD_UPDATE, lambda: {"pod": pod_payload(held_pod, held_gen)})

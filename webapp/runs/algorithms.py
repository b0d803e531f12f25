"""Which algorithm a task's pods train: a task may allow several (a mixed tournament); fresh
pods take them round-robin, children keep their parent's. Each algorithm trains with its own
hyperparameters (``Task.algorithm_hyperparameters``, set when the task is created: the values
given for it, the main algorithm's for the names they share, its defaults for the rest)."""

from __future__ import annotations

from typing import Any

from webapp import engine
from webapp.runs.models import Task

#: The PBT mutation of a new run unless it names one: learning rates between 1e-5 and 1e-2,
#: moved by x0.8 or x1.25 each time a pod copies a leaderboard agent.
DEFAULT_MUTATION = {"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 1.25], "probability": 1.0}
_LEARNING_RATES = ("learning_rate", "actor_learning_rate", "critic_learning_rate")


def shared_hyperparameters(algorithm: str, hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """``algorithm``'s full hyperparameters: its defaults, with ``hyperparameters``' values of
    the names it has.

    Raises:
        AppError: a shared value is invalid for ``algorithm`` (naming the field).
    """
    own = engine.validate_hyperparameters(algorithm, {})
    return engine.validate_hyperparameters(algorithm, {k: v for k, v in hyperparameters.items() if k in own})


def task_algorithms(task: Task) -> list[str]:
    """The algorithms ``task``'s runs may train, ``task.algorithm`` first."""
    return list(task.algorithms or [task.algorithm])


def algorithm_hyperparameters(task: Task, algorithm: str) -> dict[str, Any]:
    """The hyperparameters ``algorithm`` trains with on ``task``: ``task.hyperparameters`` for
    ``task.algorithm``; for another allowed algorithm, its entry of
    ``task.algorithm_hyperparameters`` (complete, stored at creation); for a task created before
    that field existed, the task's values of the names the two share (``num_envs``,
    ``hidden_sizes``, ``gamma``...) and that algorithm's defaults for the rest.
    """
    if algorithm == task.algorithm:
        return dict(task.hyperparameters)
    own = (task.algorithm_hyperparameters or {}).get(algorithm)
    if own is not None:
        return dict(own)
    return shared_hyperparameters(algorithm, task.hyperparameters)


def fresh_algorithm(task: Task, pod_index: int) -> str:
    """The algorithm a fresh agent of pod ``pod_index`` trains: round-robin over the task's
    allowed list by pod index (pod 0 the first, pod 1 the second, ...), so a run with at least
    as many pods as algorithms trains each of them. Children keep their parent's algorithm."""
    allowed = task_algorithms(task)
    return allowed[pod_index % len(allowed)]


def mutation_for(mutation: dict[str, Any], hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """``mutation`` restricted to the bounds of hyperparameters the agent has (a mixed run's
    bounds may name another algorithm's hyperparameters, e.g. SAC's ``actor_learning_rate``).
    An agent that holds 1/N (the direct learner's ``hold_equal_weight``, set when its line's gate
    closed) gets no bounds: its line trains nothing, so a perturbed learning rate would change
    nothing and read on the leaderboard as if it did."""
    bounds_ = mutation.get("bounds") or {}
    if hyperparameters.get("hold_equal_weight") is True:
        return {**mutation, "bounds": {}}
    return {**mutation, "bounds": {k: v for k, v in bounds_.items() if k in hyperparameters}}


def form_hyperparameters(algorithm: str) -> dict[str, Any]:
    """What the new-run form's hyperparameter box starts with: the algorithm's defaults without
    ``reward_scale``, which is left out so that the task's kind and reward decide it (100 for a
    portfolio task's log-return rewards, 1 otherwise: ``trainer.task.TaskSpec.from_dict``)."""
    return {k: v for k, v in engine.default_hyperparameters(algorithm).items() if k != "reward_scale"}


def default_mutation(algorithm: str) -> dict[str, Any]:
    """The new-run form's default PBT mutation for ``algorithm``: its learning rates
    (``learning_rate`` for PPO and A2C; ``actor_learning_rate`` and ``critic_learning_rate`` for
    SAC, TD3, DDPG) between 1e-5 and 1e-2, moved by x0.8 or x1.25."""
    names = [k for k in engine.default_hyperparameters(algorithm) if k in _LEARNING_RATES]
    return {**DEFAULT_MUTATION, "bounds": {name: [1e-5, 1e-2] for name in names}}


def task_default_mutation(task: Task) -> dict[str, Any]:
    """The mutation of a run of ``task`` created without one (``POST /api/runs/``): the form's
    default for the task's algorithm (:func:`default_mutation`), with, for a mixed task, the
    learning rates of its other allowed algorithms too (each child mutates only the bounds its
    algorithm has, :func:`mutation_for`)."""
    bounds_: dict[str, list[float]] = {}
    for algorithm in task_algorithms(task):
        bounds_.update(default_mutation(algorithm)["bounds"])
    return {**DEFAULT_MUTATION, "bounds": bounds_}

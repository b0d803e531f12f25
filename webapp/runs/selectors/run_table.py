"""The runs table's columns beyond the run itself (reads): the main hyperparameters (learning
rate, discount, envs), the seed and the best test Sharpe ratio, annotated in the same query
and sortable (``?sort=lr`` ascending, ``?sort=-lr`` descending; missing values last)."""

from __future__ import annotations

from django.db.models import F, FloatField, Max, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce

from webapp.runs.models import Run

#: ``sort key -> (header, title)``, in column order.
COLUMNS: dict[str, tuple[str, str]] = {
    "lr": ("LR", "learning rate (PPO, A2C) or actor learning rate (SAC, TD3, DDPG) of the task"),
    "gamma": ("γ", "discount factor"),
    "num_envs": ("Envs", "vectorized envs per pod"),
    "seed": ("Seed", "the run's seed"),
    "best_test_sharpe": ("Best test Sharpe", "the best Sharpe ratio of the end-of-run backtests on the test split"),
    "best_score": ("Best score", "the best validation score"),
    "created": ("Started", "when it started (sorted by when the run was made)"),
}
DEFAULT_SORT = "-created"


def _number(field: str, *keys: str):
    """``field``'s JSON value at ``keys`` (a relation path is allowed in ``field``) as a float."""
    expr = field
    for key in keys[:-1]:
        expr = KeyTransform(key, expr)
    return Cast(KeyTextTransform(keys[-1], expr), FloatField())


def with_columns(qs: QuerySet[Run]) -> QuerySet[Run]:
    """``qs`` annotated with ``lr``, ``gamma``, ``num_envs`` (from the task's hyperparameters)
    and ``best_test_sharpe`` (the best agent Sharpe of the run's finished end-of-run backtests,
    ``None`` before any; the backtests are reached through the ORM relation only)."""
    return qs.annotate(
        lr=Coalesce(
            _number("task__hyperparameters", "learning_rate"), _number("task__hyperparameters", "actor_learning_rate")
        ),
        gamma=_number("task__hyperparameters", "gamma"),
        num_envs=_number("task__hyperparameters", "num_envs"),
        best_test_sharpe=Max(
            _number("backtests__metrics", "agent", "sharpe_ratio"),
            filter=Q(backtests__status="done", backtests__source="end_of_run"),
        ),
    )


def sort_runs(qs: QuerySet[Run], sort: str) -> tuple[QuerySet[Run], str]:
    """``qs`` ordered by ``sort`` (a key of :data:`COLUMNS`, ``-`` for descending; anything
    else is the default, newest first); returns the queryset and the sort applied."""
    key = sort.removeprefix("-")
    if key not in COLUMNS:
        sort, key = DEFAULT_SORT, DEFAULT_SORT.removeprefix("-")
    field = {"created": "created_at"}.get(key, key)
    expr = F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True)
    return qs.order_by(expr, "-id"), sort

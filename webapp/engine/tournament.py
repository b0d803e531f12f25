"""The leaderboard policy (``trainer.tournament``) in the web's plain types: parents, mutations,
pruning, the one-SE ensemble's members.

A leaderboard row is ``(agent_id, score, created_seq)`` or, with the score's noise,
``(agent_id, score, created_seq, score_se, sub_windows)``: ``score_se`` the agent's stored
standard error (``None``: unknown, then read from the sub-windows' dispersion) and
``sub_windows`` its ``metrics["sub_windows"]`` (``[{"start", "end", "sharpe"}, ...]``), which
pair two agents scored on the same days.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.errors import TrainerError
from webapp.core.errors import AppError


@dataclass(frozen=True)
class ParentDecision:
    """What a generation starts from: ``action`` is ``fresh``, ``keep_current`` or ``parent``;
    ``agent_id`` the agent to load (``None`` when fresh)."""

    action: str
    agent_id: int | None


def score_se(score_se: float | None, sub_windows: Any) -> float | None:
    """The SE a score carries (``trainer.tournament.metric_se``): the stored one, else the
    dispersion of its sub-window Sharpe ratios; ``None`` when neither is known."""
    from trainer.tournament import metric_se

    return metric_se(score_se, sub_windows)


def _entry(row: Sequence[Any]) -> Any:
    from trainer.tournament import entry_from_metrics

    agent_id, score, seq, *noise = row
    se, subs = (noise + [None, None])[:2]
    return entry_from_metrics(agent_id, score, seq, se, subs)


def one_se_member_ids(leaderboard: Sequence[Sequence[Any]]) -> list[int]:
    """Ids of the leaderboard agents within one SE of the best, best first
    (``trainer.tournament.one_se_members``; rows as the module docstring gives them)."""
    from trainer.tournament import one_se_members

    return [int(e.agent_id) for e in one_se_members([_entry(row) for row in leaderboard])]


def choose_parent(
    leaderboard: Sequence[Sequence[Any]],
    *,
    current: Sequence[Any] | None,
    fresh_probability: float,
    rng: np.random.Generator,
) -> ParentDecision:
    """Pick the agent a pod's next generation starts from (``trainer.tournament.select_parent``).

    Args:
        leaderboard: rows of the agents on the leaderboard (module docstring).
        current: ``(agent_id, score)`` or ``(agent_id, score, score_se, sub_windows)`` of the
            pod's own last agent, ``None`` if it has none. It is replaced only by an agent
            better by more than one SE of the difference (paired on shared sub-windows).
        fresh_probability: chance in [0, 1] of starting from a new random agent.
        rng: NumPy generator (seeded per run, pod and generation for reproducibility).
    """
    from trainer import tournament

    entries = [_entry(row) for row in leaderboard]
    own = None if current is None else _entry((current[0], current[1], -1, *current[2:]))
    choice = tournament.select_parent_for(entries, own, fresh_probability=fresh_probability, rng=rng)
    if choice.action == tournament.PARENT:
        return ParentDecision(tournament.PARENT, int(choice.parent.agent_id))
    if choice.action == tournament.KEEP_CURRENT and current is not None:
        return ParentDecision(tournament.KEEP_CURRENT, current[0])
    return ParentDecision(tournament.FRESH, None)


def mutate_hyperparameters(
    hyperparameters: dict[str, Any], *, mutation: dict[str, Any], rng: np.random.Generator, check: bool = False
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """PBT perturbation of a copied agent's hyperparameters (``trainer.mutation.mutate``).

    Args:
        hyperparameters: the parent's values.
        mutation: the run's settings ``{"bounds": {name: [low, high]}, "factors": [...],
            "probability": p}``; no bounds means no mutation.
        check: validate ``factors`` and ``probability`` even without bounds (a new run's
            settings are checked whole, :func:`check_mutation`).

    Returns:
        ``(new_hyperparameters, {name: [old, new]})``.
    """
    from trainer.mutation import mutate

    bounds = mutation.get("bounds") or {}
    if not bounds and not check:
        return dict(hyperparameters), {}
    return mutate(
        hyperparameters,
        {k: tuple(v) for k, v in bounds.items()},
        factors=tuple(mutation.get("factors") or (0.8, 1.25)),
        rng=rng,
        probability=float(mutation.get("probability", 1.0)),
    )


#: The settings a run's ``mutation`` object may hold.
MUTATION_KEYS = ("bounds", "factors", "probability")


def check_mutation(mutation: dict[str, Any], hyperparameters: dict[str, Any]) -> None:
    """Raise :class:`AppError` (fields ``mutation.*``) if a run's mutation settings are unusable.

    Every field is the setting's path in the run's body: a bound on a hyperparameter the
    algorithm lacks (or one that is not a number) is ``mutation.bounds.<name>``, the entry the
    user wrote, not the trainer's ``hyperparameters.<name>``; a key other than
    :data:`MUTATION_KEYS` is ``mutation.<key>``, and an empty ``factors`` list is
    ``mutation.factors`` (it is not "the default factors").
    """
    if not isinstance(mutation, dict):
        raise AppError(
            'mutation: an object {"bounds": ..., "factors": ..., "probability": ...}', fields={"mutation": "an object"}
        )
    for key in mutation:
        if key not in MUTATION_KEYS:
            why = f"not a mutation setting ({', '.join(MUTATION_KEYS)})"
            raise AppError(f"mutation.{key}: {why}", fields={f"mutation.{key}": why})
    factors = mutation.get("factors")
    if factors is not None and (not isinstance(factors, list | tuple) or len(factors) == 0):
        why = "a non-empty list of positive factors, e.g. [0.8, 1.25]; leave it out for that default"
        raise AppError(f"mutation.factors: {why}", fields={"mutation.factors": why})
    try:
        mutate_hyperparameters(hyperparameters, mutation=mutation, rng=np.random.default_rng(0), check=True)
    except TrainerError as exc:
        name = str(exc.details.get("field") or "")
        head, _, key = name.partition(".")
        # a bound's hyperparameter is named by the entry the user wrote: mutation.bounds.<key>
        if head == "hyperparameters":
            located = exc.under(f"mutation.bounds.{key}")
        else:
            located = exc.under(f"mutation.{name}" if name else "mutation")
        raise AppError.from_trainer(located) from exc
    except (TypeError, ValueError) as exc:
        raise AppError(f"mutation: {exc}", fields={"mutation": str(exc)}) from exc


def prune_leaderboard(entries: Sequence[tuple[int, float | None, int]], k: int) -> tuple[list[int], list[int]]:
    """Split ``(agent_id, score, created_seq)`` entries into the ``k`` best ids (best first)
    and the ids to drop (``trainer.tournament.prune``)."""
    from trainer import tournament

    keep, drop = tournament.prune([tournament.Entry(a, s, q) for a, s, q in entries], k)
    return [int(e.agent_id) for e in keep], [int(e.agent_id) for e in drop]


#: Above this many bounds only each bound's ends are checked (alone), not every corner.
MAX_CORNER_BOUNDS = 6


def _reachable_ends(value: Any, low: float, high: float) -> tuple[Any, Any]:
    """The lowest and highest values a mutation can give a hyperparameter now at ``value``
    (``trainer.mutation.mutate`` rounds integers and clips to the bounds)."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(np.ceil(low)), int(np.floor(high))
    return float(low), float(high)


def check_mutation_range(spec: dict[str, Any], mutation: dict[str, Any], *, intraday: bool = False) -> None:
    """Raise :class:`AppError` (field ``mutation.bounds.<name>``) if a value the mutation can
    reach makes the task unusable: each bound's low and high end with the other values at the
    task's, then, for up to :data:`MAX_CORNER_BOUNDS` bounds, every combination of ends, each
    checked as the whole task (``trainer.task.TaskSpec``: the algorithm's own ranges, a
    direct learner's ``kappa`` against the env's ``logit_scale / 2``, rollout and buffer
    memory). The trainer's checks are monotone in each value, so the corners cover every value
    in between. Call after :func:`check_mutation` (bounds well formed).

    Args:
        spec: the ``trainer.task.TaskSpec`` dict the run's pods train (its ``hyperparameters``
            complete, as ``webapp.runs.selectors.runs.task_spec`` gives them).
        mutation: the run's ``{"bounds": {name: [low, high]}, ...}``, restricted to names the
            spec's algorithm has.
        intraday: the dataset holds intraday bars (the memory estimate counts session features).
    """
    from itertools import product

    from trainer.agents import not_mutated
    from trainer.task import TaskSpec

    hp = dict(spec["hyperparameters"])
    for name in mutation.get("bounds") or {}:
        if name in not_mutated(spec["algorithm"]):
            field = f"mutation.bounds.{name}"
            why = f"{spec['algorithm']}'s {name} is set once for a line and is not mutated; remove its bound"
            raise AppError(f"{field}: {why}", fields={field: why})
    ends = {
        name: _reachable_ends(hp[name], *(float(b) for b in bound))
        for name, bound in (mutation.get("bounds") or {}).items()
        if name in hp
    }
    trials = [{name: end} for name, pair in ends.items() for end in pair]
    if 1 < len(ends) <= MAX_CORNER_BOUNDS:
        trials += [dict(zip(ends, corner, strict=True)) for corner in product(*ends.values())]
    for values in trials:
        try:
            TaskSpec.from_dict({**spec, "hyperparameters": {**hp, **values}}, intraday=intraday)
        except TrainerError as exc:
            named = str(exc.details.get("field") or "").rpartition(".")[2]
            field = f"mutation.bounds.{named if named in values else next(iter(values))}"
            reached = ", ".join(f"{k} = {v:g}" for k, v in values.items())
            why = f"a mutation can reach {reached}, and then {exc.message}"
            raise AppError(f"{field}: {why}", fields={field: why}) from exc

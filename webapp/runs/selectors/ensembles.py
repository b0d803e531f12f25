"""Reads of ensembles: the K the run page's "Build ensemble" button offers and a run's stored
ensemble of a member set (built by :mod:`webapp.runs.services.ensembles`). Nothing here writes."""

from __future__ import annotations

from webapp.runs.models import Agent, Run
from webapp.runs.selectors.runs import leaderboard_queryset

#: Smallest and default number of leaderboard agents an ensemble is built of.
ENSEMBLE_MIN_K, ENSEMBLE_DEFAULT_K = 2, 3


def ensemble_k(run: Run) -> int | None:
    """The K the run page's "Build ensemble" button offers: the default, or the leaderboard's
    size when it holds fewer agents; ``None`` when it holds fewer than 2 (no ensemble)."""
    size = leaderboard_queryset(run).count()
    return min(ENSEMBLE_DEFAULT_K, size) if size >= ENSEMBLE_MIN_K else None


def find_ensemble(run: Run, member_ids: list[int]) -> Agent | None:
    """The run's ensemble whose member set equals ``member_ids`` (any order), or ``None``."""
    wanted = set(member_ids)
    for agent in Agent.objects.filter(run=run, kind=Agent.Kind.ENSEMBLE).order_by("created_seq"):
        if set(agent.members) == wanted:
            return agent
    return None

"""Reads of ensembles: the K the run page's "Build ensemble" button offers and a run's stored
ensemble of a member set (built by :mod:`webapp.runs.services.ensembles`). Nothing here writes."""

from __future__ import annotations

from webapp import engine
from webapp.runs.models import Agent, Run
from webapp.runs.selectors.runs import leaderboard_queryset

#: Smallest, default and largest number of leaderboard agents an ensemble is built of.
ENSEMBLE_MIN_K, ENSEMBLE_DEFAULT_K, ENSEMBLE_MAX_K = 2, 3, 16


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


def one_se_member_ids(run: Run) -> list[int]:
    """The leaderboard agents within one standard error of the best, best first
    (``engine.one_se_member_ids``: ``score >= best - SE_best``); at most :data:`ENSEMBLE_MAX_K`."""
    rows = leaderboard_queryset(run).values_list("id", "score", "created_seq", "score_se", "metrics__sub_windows")
    return engine.one_se_member_ids(list(rows))[:ENSEMBLE_MAX_K]

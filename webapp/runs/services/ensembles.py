"""Ensembles of a run's leaderboard: one agent that acts with the mean action of the top K.

``ensemble_get_or_create`` builds the ensemble checkpoint with the trainer
(``engine.build_ensemble``: the members' full states, scored on the validation split by the
task's rule, next to 1/N and QQQ), stores it, and records it as an
:class:`~webapp.runs.models.Agent` of ``kind`` ``ensemble``: an agent page, a bundle (safetensors,
ONNX, SHA256SUMS), backtests and reports like any agent, but no generation, pod, parent or
lineage (``members`` lists the member ids, best first). It never enters the leaderboard, so pods
cannot continue an ensemble, only its members, and it never counts in a pod's generations.

One ensemble per member set: asking again for the same members (the leaderboard's top K has not
changed) returns the stored ensemble and builds nothing.

The run's deliverable is :func:`ensemble_one_se_get_or_create`: the ensemble of every
leaderboard agent within one standard error of the best (``trainer.tournament.one_se_members``),
built at the end of the run (``webapp.reports.services.backtests_for_run``), not the argmax.

The Deflated Sharpe Ratio (``webapp.runs.selectors.deflated``) counts only trained agents as trials: an
ensemble is a function of agents already counted, not a new draw. An ensemble's own DSR is read
against the same trials (the run's trained agents and the variance of their Sharpe ratios).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Max

from webapp import engine
from webapp.core.errors import AppError
from webapp.runs.models import Agent, Run
from webapp.runs.selectors.ensembles import (
    ENSEMBLE_DEFAULT_K,
    ENSEMBLE_MAX_K,
    ENSEMBLE_MIN_K,
    find_ensemble,
    one_se_member_ids,
)
from webapp.runs.selectors.runs import leaderboard_queryset
from webapp.runs.services.common import lock_budget_and_run, publish_run
from webapp.runs.services.storage import local_copy_of_checkpoint

#: Members of the one-click ensemble and of the end-of-run comparison.
DEFAULT_K = ENSEMBLE_DEFAULT_K  # one rule with the run page's live button (ensemble_k)
MIN_K = ENSEMBLE_MIN_K
MAX_K = ENSEMBLE_MAX_K


def ensemble_get_or_create(*, run: Run, k: int = DEFAULT_K) -> tuple[Agent, bool]:
    """The ensemble of the run's ``k`` best leaderboard agents, built and stored unless the run
    already has an ensemble of exactly these members.

    Args:
        run: the run (any state); its leaderboard must hold at least ``k`` agents.
        k: members, 2 to 16 and at most the number of agents on the leaderboard.

    Returns:
        ``(agent, created)``: the ensemble (``kind="ensemble"``, ``members`` best first) and
        whether it was built now (``False``: an ensemble of these members existed; nothing was
        built).

    Raises:
        AppError: a bad ``k``, ``k`` above the leaderboard's size or fewer than 2 leaderboard
            agents (400 naming ``k``), or members the trainer refuses.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not MIN_K <= k <= MAX_K:
        raise AppError(f"k: an ensemble has {MIN_K} to {MAX_K} agents, got {k!r}", fields={"k": f"{MIN_K} to {MAX_K}"})
    board = leaderboard_queryset(run)
    size = board.count()
    if size < MIN_K:
        raise AppError(
            f"k: the leaderboard holds {size} agent(s); an ensemble needs at least {MIN_K}",
            fields={"k": f"needs at least {MIN_K} leaderboard agents; the leaderboard holds {size}"},
        )
    if k > size:
        raise AppError(
            f"k: the leaderboard holds {size} agents, so k is at most {size}; got {k}",
            fields={"k": f"at most {size}: the leaderboard holds {size} agents"},
        )
    return _get_or_create(run, list(board[:k]), rule="top_k")


def ensemble_one_se_get_or_create(*, run: Run) -> tuple[Agent | None, bool]:
    """The run's deliverable: the ensemble of its leaderboard agents within one SE of the best
    (:func:`one_se_member_ids`), built once per member set, as :func:`ensemble_get_or_create`.

    Returns:
        ``(agent, created)``; ``(None, False)`` when fewer than 2 agents are within one SE of
        the best: the best agent alone is then the deliverable, and nothing is built.

    Raises:
        AppError: members the trainer refuses.
    """
    ids = one_se_member_ids(run)
    if len(ids) < MIN_K:
        return None, False
    by_id = {a.id: a for a in Agent.objects.filter(pk__in=ids)}
    return _get_or_create(run, [by_id[pk] for pk in ids], rule="one_se")


def _get_or_create(run: Run, members: list[Agent], *, rule: str) -> tuple[Agent, bool]:
    """The ensemble of ``members`` (best first): the stored one, or built and stored now with
    ``metrics["ensemble"]["rule"]`` saying how they were chosen (``top_k`` or ``one_se``)."""
    ids = [a.id for a in members]
    existing = find_ensemble(run, ids)
    if existing is not None:
        return existing, False
    with tempfile.TemporaryDirectory(prefix="paddock-ensemble-") as tmp:
        paths = [
            local_copy_of_checkpoint(a.checkpoint, Path(tmp) / f"member-{a.id}.pt", expected_sha256=a.sha256)
            for a in members
        ]
        out = Path(tmp) / "ensemble.pt"
        try:
            result = engine.build_ensemble(
                paths,
                out,
                data_dir=str(settings.PADDOCK_DATA_DIR),
                cache_dir=str(settings.PADDOCK_CACHE_DIR),
                benchmark_path=str(settings.PADDOCK_BENCHMARK_FILE),
                member_ids=ids,
                total_env_steps=_lines_env_steps(run, ids),
            )
        except engine.TrainerError as exc:
            raise AppError.from_trainer(exc) from exc
        with open(out, "rb") as fh:
            stored = default_storage.save(f"runs/{run.id}/ensemble-{'-'.join(map(str, ids))}.pt", File(fh))
    metrics = {**result.metrics, "ensemble": {"members": ids, "k": len(ids), "rule": rule}}
    try:
        with transaction.atomic():
            # The budget and run locks every agent-creating service takes: a pod's result (which
            # numbers its agent the same way) or a second request for these members waits here.
            lock_budget_and_run(run)
            existing = find_ensemble(run, ids)
            if existing is None:
                agent = _record(run, members, stored, result.sha256, result.score, metrics)
                # the live page's agent and ensemble counts follow (after commit, as every event)
                publish_run(run)
                return agent, True
    except BaseException:
        default_storage.delete(stored)
        raise
    default_storage.delete(stored)  # built at the same moment by another request: keep that one
    return existing, False


def _lines_env_steps(run: Run, member_ids: list[int]) -> int:
    """Env steps of the members' lines (each member and its ancestors), each agent counted once."""
    rows = {
        pk: (parent, own or 0)
        for pk, parent, own in Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED).values_list(
            "id", "parent_id", "generation__env_steps"
        )
    }
    seen: set[int] = set()
    for pk in member_ids:
        current = pk
        while current in rows and current not in seen:
            seen.add(current)
            current = rows[current][0]
    return sum(rows[pk][1] for pk in seen)


def _record(run: Run, members: list[Agent], stored: str, sha256: str, score, metrics) -> Agent:
    ids = [a.id for a in members]
    seq = (Agent.objects.filter(run=run).aggregate(m=Max("created_seq"))["m"] or 0) + 1
    return Agent.objects.create(
        run=run,
        kind=Agent.Kind.ENSEMBLE,
        members=ids,
        generation=None,
        pod=None,
        parent=None,
        depth=None,
        lineage=None,
        score=score,
        score_se=metrics.get("score_se"),
        metrics=metrics,
        # built here from the members (no seed of its own): this process's code and packages
        provenance={**engine.provenance(run.task.dataset.source_paths(), seed=None), "members": ids},
        algorithm="+".join(dict.fromkeys(a.algorithm for a in members if a.algorithm)),
        hyperparameters={},
        tickers=list(members[0].tickers or []),
        checkpoint=stored,
        sha256=sha256,
        created_seq=seq,
        on_leaderboard=False,
        total_env_steps=_lines_env_steps(run, ids),
    )

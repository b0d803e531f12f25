"""Ensembles of a run's leaderboard: one agent that acts with the mean action of the top K.

``ensemble_create`` builds the ensemble checkpoint with the trainer (``engine.build_ensemble``:
the members' full states, scored on the validation split by the task's rule, next to 1/N and
QQQ), stores it, and records it as an :class:`~webapp.runs.models.Agent` of the run, so it has
an agent page, a bundle (safetensors, ONNX, SHA256SUMS), backtests and reports like any agent.
Its generation row is a finished one with no env steps of its own (``hyperparameters`` name the
members). It never enters the leaderboard: pods cannot continue an ensemble, only its members.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import selectors, services
from webapp.runs.models import Agent, Generation, Run

#: Members of the one-click ensemble and of the end-of-run comparison.
DEFAULT_K = 3
MAX_K = 16


def ensemble_create(*, run: Run, k: int = DEFAULT_K) -> Agent:
    """Build and store the ensemble of the run's ``k`` best leaderboard agents.

    Args:
        run: the run (any state); its leaderboard must hold at least 2 agents.
        k: members, 2..16 (fewer when the leaderboard is shorter, but at least 2).

    Returns:
        The new agent (``metrics["ensemble"]`` lists the member ids, best first).

    Raises:
        AppError: a bad ``k`` or fewer than 2 leaderboard agents (400 naming ``k``), or
            members the trainer refuses.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= MAX_K:
        raise AppError(f"k: an ensemble has 2 to {MAX_K} agents, got {k!r}", fields={"k": f"2 to {MAX_K}"})
    members = list(selectors.leaderboard_queryset(run)[:k])
    if len(members) < 2:
        raise AppError(
            f"k: the leaderboard holds {len(members)} agent(s); an ensemble needs at least 2",
            fields={"k": "needs at least 2 leaderboard agents"},
        )
    ids = [a.id for a in members]
    with tempfile.TemporaryDirectory(prefix="paddock-ensemble-") as tmp:
        paths = [services.local_copy_of_checkpoint(a.checkpoint, Path(tmp) / f"member-{a.id}.pt") for a in members]
        out = Path(tmp) / "ensemble.pt"
        try:
            result = engine.build_ensemble(
                paths,
                out,
                data_dir=str(settings.PADDOCK_DATA_DIR),
                cache_dir=str(settings.PADDOCK_CACHE_DIR),
                benchmark_path=str(settings.PADDOCK_BENCHMARK_FILE),
            )
        except engine.TrainerError as exc:
            raise AppError.from_trainer(exc) from exc
        with open(out, "rb") as fh:
            stored = default_storage.save(f"runs/{run.id}/ensemble-{'-'.join(map(str, ids))}.pt", File(fh))
    metrics = {**result.metrics, "ensemble": {"members": ids, "k": len(ids)}}
    for _ in range(3):  # a pod may take the next generation number at the same moment
        try:
            with transaction.atomic():
                return _record(run, members, stored, result.sha256, result.score, metrics)
        except IntegrityError:
            continue
    default_storage.delete(stored)
    raise AppError("the ensemble could not be recorded while the run was busy; try again", status=409)


def _record(run: Run, members: list[Agent], stored: str, sha256: str, score, metrics) -> Agent:
    pod = members[0].pod
    number = (Generation.objects.filter(pod=pod).aggregate(n=Max("number"))["n"] or 0) + 1
    now = timezone.now()
    ids = [a.id for a in members]
    gen = Generation.objects.create(
        run=run,
        pod=pod,
        number=number,
        hyperparameters={"ensemble_of": ids},
        env_steps=0,
        status=Generation.Status.DONE,
        started_at=now,
        finished_at=now,
    )
    seq = (Agent.objects.filter(run=run).aggregate(m=Max("created_seq"))["m"] or 0) + 1
    agent = Agent.objects.create(
        run=run,
        generation=gen,
        pod=pod,
        score=score,
        metrics=metrics,
        hyperparameters={"ensemble_of": ids},
        checkpoint=stored,
        sha256=sha256,
        created_seq=seq,
        on_leaderboard=False,
        depth=1,
        total_env_steps=sum(a.total_env_steps for a in members),
    )
    Agent.objects.filter(pk=agent.pk).update(lineage=agent)
    agent.lineage_id = agent.pk
    return agent

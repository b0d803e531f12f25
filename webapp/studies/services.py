"""Writes of the studies app: create a study (its budget, fold tasks and runs), cancel it, and
stitch its record when every fold run has ended."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import services as runs_services
from webapp.runs.models import Agent, ClusterBudget, Run, Task
from webapp.runs.selectors import quotas as runs_quotas
from webapp.runs.selectors.runs import task_spec
from webapp.runs.services.common import fewest_trained_steps
from webapp.studies.models import Study, StudyFold

logger = logging.getLogger(__name__)

#: Most folds a study may have (one per test year of a 2010-2022 file is 9 to 12).
MAX_FOLDS = 20
#: Largest whole-number settings of a study: a fold run's limits (``webapp.runs.bounds.RUN``) and
#: a budget's env-step cap shared by at most :data:`MAX_FOLDS` folds.
MOST = {
    "env_steps_per_fold": 10**15 // MAX_FOLDS,
    "generation_steps": 1_000_000_000,
    "num_pods": 64,
    "seed": int(engine.seed_bound()["high"]),
}


def _whole(fields: dict[str, str], name: str, value: Any, *, least: int) -> int:
    most = MOST[name]
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        fields[name] = f"must be a whole number from {least} to {most:,}"
        return least
    return int(value)


def _pods_available(owner, chosen: ClusterBudget) -> int:
    """Pods at once the study's budget will have: the chosen budget's, and for a non-staff owner
    no more than their quota has left (see :func:`_own_study_budget`)."""
    if owner.is_staff:
        return chosen.max_concurrent_pods
    return max(0, min(chosen.max_concurrent_pods, runs_quotas.quota_of(owner).pods_left))


def _study_budget(*, owner, chosen: ClusterBudget, name: str, env_step_cap: int) -> ClusterBudget:
    """The budget every fold run draws on: the chosen budget's limits, with the study's env
    steps as its cap (never more than what the chosen budget has left)."""
    if chosen.env_step_cap is not None:
        left = chosen.env_step_cap - chosen.env_steps_used
        if left < env_step_cap:
            raise AppError(
                f"env_steps_per_fold: the study needs {env_step_cap:,} env steps; budget {chosen.name!r} has {left:,} left",
                fields={"env_steps_per_fold": f"the study needs {env_step_cap:,} env steps, the budget has {left:,}"},
            )
    gpu_hours = None
    if chosen.gpu_hours_cap is not None:
        gpu_hours = max(chosen.gpu_hours_cap - chosen.gpu_seconds_used / 3600.0, 1e-6)
    if not owner.is_staff:
        return _own_study_budget(owner=owner, chosen=chosen, name=name, env_step_cap=env_step_cap, gpu_hours=gpu_hours)
    return runs_services.budget_create(
        actor=owner,
        name=f"study: {name}"[:200],
        max_concurrent_pods=chosen.max_concurrent_pods,
        gpu_hours_cap=gpu_hours,
        max_wall_clock_s=chosen.max_wall_clock_s,
        deadline=chosen.deadline,
        env_step_cap=env_step_cap,
    )


def _own_study_budget(*, owner, chosen: ClusterBudget, name: str, env_step_cap: int, gpu_hours) -> ClusterBudget:
    """A non-staff owner's study budget is a budget of their own: it counts against their quota
    like any other (so studies never hold more than the quota at once), with the chosen budget's
    hours left (or, uncapped, what the quota has left) and pods (no more than the quota has left).

    Raises:
        AppError: 400 on ``budget`` naming the quota when it has no pod or hour left.
    """
    quota = runs_quotas.quota_of(owner)
    hours = quota.hours_left if gpu_hours is None else min(gpu_hours, quota.hours_left)
    pods = min(chosen.max_concurrent_pods, quota.pods_left)
    if hours <= 0 or pods < 1:
        why = f"a study's budget counts against your quota, which has {quota.hours_left:g} h and {quota.pods_left} pods left of {quota.text()}"
        raise AppError(f"budget: {why}", fields={"budget": why})
    try:
        return runs_services.budget_create_own(
            actor=owner,
            name=f"study: {name}"[:200],
            gpu_hours_cap=hours,
            max_concurrent_pods=pods,
            max_wall_clock_s=chosen.max_wall_clock_s,
            deadline=chosen.deadline,
            env_step_cap=env_step_cap,
        )
    except AppError as err:  # the name taken, say: reported on the study's own fields
        raise AppError(f"budget: {err}", fields={"budget": str(err)}) from err


def _fold_task(owner, base: Task, index: int, spans: dict[str, Any]) -> Task:
    return runs_services.task_create(
        owner=owner,
        dataset=base.dataset,
        name=f"{base.name} · fold {index}"[:200],
        tickers=list(base.tickers),
        splits={k: spans[k] for k in ("train", "validation", "test")},
        env=dict(base.env),
        algorithm=base.algorithm,
        hyperparameters=dict(base.hyperparameters),
        kind=base.kind,
        selection=dict(base.selection or {}),
        algorithms=list(base.algorithms or []),
        algorithm_hyperparameters={
            k: v for k, v in (base.algorithm_hyperparameters or {}).items() if k != base.algorithm
        },
    )


@transaction.atomic
def study_create(
    *,
    owner,
    task: Task,
    budget: ClusterBudget,
    start: str,
    end: str,
    first_test_year: int,
    env_steps_per_fold: int,
    generation_steps: int,
    name: str = "",
    fold_years: int = 1,
    validation_days: int = 252,
    gap_days: int = 5,
    num_pods: int = 2,
    seed: int = 0,
) -> Study:
    """Plan a study on ``task``'s data, create its budget and one started run per fold.

    Args:
        task, budget: the base task and the budget whose limits the study copies (the owner's).
        start, end, first_test_year, fold_years, validation_days, gap_days: the plan
            (``trainer.data.folds.plan_folds``).
        env_steps_per_fold: env steps each fold's run may train; the study's budget caps the
            whole study at folds x this.
        generation_steps, num_pods, seed: each fold's run (fold ``i`` is seeded ``seed + i``).

    Raises:
        AppError: 404 for another user's task or budget; 400 naming the field (``first_test_year``,
            ``gap_days``, ``env_steps_per_fold``, ``generation_steps``...) for a bad plan or size.
    """
    if task.owner_id != owner.id:
        raise AppError("task not found", fields={"task": "not found"}, status=404)
    if budget.owner_id != owner.id and not owner.is_staff:
        raise AppError("budget not found", fields={"budget": "not found"}, status=404)
    fields: dict[str, str] = {}
    env_steps_per_fold = _whole(fields, "env_steps_per_fold", env_steps_per_fold, least=1)
    generation_steps = _whole(fields, "generation_steps", generation_steps, least=1)
    num_pods = _whole(fields, "num_pods", num_pods, least=1)
    seed = _whole(fields, "seed", seed, least=0)
    trained = fewest_trained_steps(task, generation_steps) if not fields else 0  # whole rollouts
    if not fields and trained > env_steps_per_fold:
        fields["generation_steps"] = (
            f"a generation ({generation_steps:,}) trains {trained:,} env steps in whole rollouts, "
            f"more than a fold's {env_steps_per_fold:,}"
            if trained != generation_steps
            else f"a generation ({generation_steps:,}) is more than a fold's env steps"
        )
    pods = _pods_available(owner, budget)
    if "num_pods" not in fields and 0 < pods < num_pods:
        fields["num_pods"] = (
            f"each fold's run asks for {num_pods} pods at once; the study's budget runs at most {pods} "
            f"(budget {budget.name!r}{'' if owner.is_staff else ' and your quota'})"
        )
    if fields:
        raise AppError(f"{next(iter(fields))}: {next(iter(fields.values()))}", fields=fields)
    plan = engine.check_study_plan(
        {
            "start": start,
            "end": end,
            "first_test_year": first_test_year,
            "fold_years": fold_years,
            "validation_days": validation_days,
            "gap_days": gap_days,
        }
    )
    folds = engine.plan_study_folds(
        task_spec(task),
        plan,
        data_dir=str(settings.PADDOCK_DATA_DIR),
        cache_dir=str(settings.PADDOCK_CACHE_DIR),
    )
    if len(folds) > MAX_FOLDS:
        message = f"the plan makes {len(folds)} folds; at most {MAX_FOLDS}"
        raise AppError(f"first_test_year: {message}", fields={"first_test_year": message})
    name = name.strip() or f"{task.name} walk-forward"
    study_budget = _study_budget(owner=owner, chosen=budget, name=name, env_step_cap=env_steps_per_fold * len(folds))
    study = Study.objects.create(
        owner=owner,
        name=name[:200],
        task=task,
        budget=study_budget,
        plan=plan,
        num_pods=num_pods,
        generation_steps=generation_steps,
        env_steps_per_fold=env_steps_per_fold,
        seed=seed,
    )
    for fold in folds:
        fold_task = _fold_task(owner, task, fold["index"], fold)
        run = runs_services.run_create(
            owner=owner,
            task=fold_task,
            budget=study_budget,
            name=f"{name} · fold {fold['index']} (test {fold['test']['start'][:4]})"[:200],
            num_pods=num_pods,
            generation_steps=generation_steps,
            seed=seed + fold["index"],
        )
        StudyFold.objects.create(study=study, index=fold["index"], spans=fold, run=run)
        runs_services.run_start(run=run)
    logger.info("study %s created with %s folds", study.pk, len(folds))
    return study


def study_cancel(*, study: Study) -> Study:
    """Cancel a study: stop its fold runs that are still going; nothing is stitched.

    Raises:
        AppError: 409 when the study has already ended.
    """
    with transaction.atomic():
        n = Study.objects.filter(pk=study.pk, status=Study.Status.RUNNING).update(
            status=Study.Status.CANCELLED, finished_at=timezone.now(), error="cancelled by user"
        )
        if not n:
            study.refresh_from_db()
            raise AppError(f"study is already {study.status}", status=409)
    for fold in StudyFold.objects.filter(study=study).select_related("run"):
        if fold.run.status not in Run.TERMINAL:
            try:
                runs_services.run_stop(run=fold.run)
            except AppError:  # it ended meanwhile
                pass
    study.refresh_from_db()
    return study


def study_ready_to_stitch(*, run_id: int) -> int | None:
    """The id of the study whose fold ``run_id`` is, when that study is running and every one of
    its fold runs has ended; else ``None``."""
    fold = StudyFold.objects.filter(run_id=run_id, study__status=Study.Status.RUNNING).first()
    if fold is None:
        return None
    if Run.objects.filter(study_fold__study_id=fold.study_id).exclude(status__in=Run.TERMINAL).exists():
        return None
    return fold.study_id


def _fail(study_id: int, error: str) -> None:
    Study.objects.filter(pk=study_id, status=Study.Status.STITCHING).update(
        status=Study.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def study_stitch(*, study_id: int) -> str:
    """Claim a study whose fold runs have all ended and store its stitched record.

    Each fold's candidates are its run's leaderboard agents, best validation score first (the
    first is the fold's selected agent). Returns the study's status afterwards (``"skipped"``
    when another worker claimed it, or some fold run is still going).
    """
    if Run.objects.filter(study_fold__study_id=study_id).exclude(status__in=Run.TERMINAL).exists():
        return "skipped"
    if not Study.objects.filter(pk=study_id, status=Study.Status.RUNNING).update(status=Study.Status.STITCHING):
        return "skipped"
    study = Study.objects.select_related("task__dataset").get(pk=study_id)
    folds = list(StudyFold.objects.filter(study=study).select_related("run").order_by("index"))
    with tempfile.TemporaryDirectory(prefix="paddock-study-") as tmp:
        items = []
        for fold in folds:
            agents = list(
                Agent.objects.filter(run_id=fold.run_id, on_leaderboard=True, kind=Agent.Kind.TRAINED)
                .exclude(score__isnull=True)
                .order_by("-score", "created_seq")
            )
            agents = [a for a in agents if default_storage.exists(a.checkpoint)]
            if not agents:
                _fail(study_id, f"fold {fold.index} (run {fold.run_id}, {fold.run.status}) has no scored agent")
                return Study.Status.FAILED
            candidates = []
            for a in agents:
                try:  # a copy that does not match the recorded digest fails the study, naming the agent
                    local = runs_services.local_copy_of_checkpoint(
                        a.checkpoint, Path(tmp) / f"agent-{a.pk}.pt", expected_sha256=a.sha256 or None
                    )
                except AppError as exc:
                    _fail(study_id, f"fold {fold.index}, agent {a.pk}: {exc.message}")
                    return Study.Status.FAILED
                candidates.append({"agent": a.pk, "score": a.score, "checkpoint": str(local)})
            items.append({"fold": {**fold.spans, "index": fold.index}, "candidates": candidates})
        try:
            result = engine.stitch_study(
                task=task_spec(study.task),
                plan=study.plan,
                folds=items,
                benchmark_path=str(settings.PADDOCK_BENCHMARK_FILE),
                data_dir=str(settings.PADDOCK_DATA_DIR),
                cache_dir=str(settings.PADDOCK_CACHE_DIR),
                seed=study.seed,
            )
        except (engine.TrainerError, AppError) as exc:
            _fail(study_id, exc.message)
            return Study.Status.FAILED
    for report, fold in zip(result["folds"], folds, strict=True):
        report["run"] = fold.run_id
    Study.objects.filter(pk=study_id, status=Study.Status.STITCHING).update(
        status=Study.Status.DONE, result=result, finished_at=timezone.now()
    )
    logger.info("study %s stitched over %s days", study_id, len(result["out_of_sample"]["dates"]))
    return Study.Status.DONE

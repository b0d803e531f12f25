"""The demo's budget, task and run: created once per user and reused, a demo run told apart from
the user's own runs (:func:`is_demo_run`), and a new run started (:func:`start_demo_run`)."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from webapp import engine
from webapp.demo.profiles import (
    BUDGET_NAME,
    DAILY_PREFIX,
    DEMO_RUN_NAME,
    FRESH_PROBABILITY,
    INTRADAY_BUDGET_NAME,
    INTRADAY_PREFIX,
    LEADERBOARD_SIZE,
    DemoProfile,
    _hyperparameters,
    _task_spec,
    demo_mutation,
    task_name,
)
from webapp.demo.sizing import Sizing
from webapp.market.models import Dataset
from webapp.runs import services
from webapp.runs.models import ClusterBudget, Run, Task


def ensure_budget(owner, sizing: Sizing, name: str = BUDGET_NAME) -> tuple[ClusterBudget, bool]:
    """The owner's demo budget (created once, ``purpose="demo"``: it counts against no quota and
    the user's own budgets never wait for it), with limits for a new run of ``sizing``.

    ``max_concurrent_pods`` and ``max_wall_clock_s`` are set to the sizing; the env-step cap
    becomes what the budget has used so far plus the run's env steps.

    Returns:
        ``(budget, created)``.
    """
    with transaction.atomic():
        budget = ClusterBudget.objects.select_for_update().filter(owner=owner, name=name, purpose="demo").first()
        created = budget is None
        if created:
            budget = services.budget_create(
                actor=owner, name=name, max_concurrent_pods=sizing.concurrent_pods, purpose="demo"
            )
        budget.max_concurrent_pods = sizing.concurrent_pods
        budget.max_wall_clock_s = sizing.max_wall_clock_s
        budget.env_step_cap = budget.env_steps_used + sizing.env_steps
        budget.ended_at = None
        budget.save(update_fields=["max_concurrent_pods", "max_wall_clock_s", "env_step_cap", "ended_at"])
    return budget, created


def ensure_task(owner, dataset: Dataset, profile: DemoProfile) -> Task:
    """The owner's demo task for ``profile`` (reused when one with the same settings exists).

    Settings are compared in full, defaults filled in: a task made when PPO's defaults were
    different (wider networks, more epochs), or with other env settings (before the no-trade
    band), is not reused."""
    tickers = list(profile.tickers or dataset.tickers)
    spec = _task_spec(dataset, profile)
    validated = engine.validate_task(spec)
    wanted, wanted_env = validated["hyperparameters"], validated["env"]
    name = task_name(profile.algorithm, profile.prefix)
    for task in Task.objects.filter(
        owner=owner, name=name, dataset=dataset, algorithm=profile.algorithm, kind=profile.kind
    ):
        same_hp = task.hyperparameters == wanted and task.env == wanted_env
        if task.tickers == tickers and same_hp and task.splits["test"]["end"] == profile.splits["test"][1]:
            return task
    return services.task_create(
        owner=owner,
        dataset=dataset,
        name=name,
        tickers=tickers,
        splits=profile.splits,
        algorithm=profile.algorithm,
        hyperparameters=_hyperparameters(profile),
        kind=profile.kind,
        env=spec.get("env"),
    )


def is_demo_run(run: Run) -> bool:
    """Whether ``run`` is one the demo started: on the demo budget and task, named as
    :func:`start_demo_run` names them (``"Dow 30 PPO demo #3"``)."""
    for prefix, budget in ((DAILY_PREFIX, BUDGET_NAME), (INTRADAY_PREFIX, INTRADAY_BUDGET_NAME)):
        name = task_name(run.task.algorithm, prefix)
        if (
            run.budget.name == budget
            and run.task.name == name
            and DEMO_RUN_NAME.fullmatch(run.name)
            and run.name.startswith(f"{name} #")
        ):
            return True
    return False


def active_demo_run(owner, *, intraday: bool = False) -> Run | None:
    """The owner's demo run that is still going (started, not ended, within its wall-clock
    limit), if any.

    Only runs the demo started count: a run of the owner's own on the demo budget (or on the
    demo task), or a demo run that was created but never started, is left alone."""
    now = timezone.now()
    prefix = INTRADAY_PREFIX if intraday else DAILY_PREFIX
    candidates = Run.objects.filter(
        owner=owner,
        budget__name=INTRADAY_BUDGET_NAME if intraday else BUDGET_NAME,
        task__name__regex=rf"^{prefix} [A-Z0-9]+ demo$",
        status__in=Run.ACTIVE,
    ).select_related("budget", "task")
    for run in candidates.order_by("-created_at", "-id"):
        if not is_demo_run(run):
            continue
        limit = run.budget.max_wall_clock_s
        started = run.started_at or run.created_at
        if limit is None or now - started < timedelta(seconds=limit + 60):
            return run
    return None


def start_demo_run(owner, dataset: Dataset, profile: DemoProfile, sizing: Sizing) -> tuple[Run, ClusterBudget]:
    """Create and start a demo run (its budget topped up for it).

    Raises:
        AppError: the task, run or budget is refused (naming the field).
    """
    task = ensure_task(owner, dataset, profile)
    budget, _ = ensure_budget(owner, sizing, profile.budget_name)
    seed = Run.objects.filter(owner=owner, budget=budget).count()
    run = services.run_create(
        owner=owner,
        task=task,
        budget=budget,
        name=f"{task.name} #{seed + 1}",
        num_pods=profile.num_pods,
        generation_steps=sizing.generation_steps,
        leaderboard_size=LEADERBOARD_SIZE,
        fresh_probability=FRESH_PROBABILITY,
        mutation=demo_mutation(profile.algorithm),
        seed=seed,
    )
    run = services.run_start(run=run)
    return run, budget

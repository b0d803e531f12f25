"""The live page's ETA follows the budget's binding limit, at the pods' current rate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _started_run(user, task, budget, **fields):
    from webapp.runs import services

    run = services.run_create(owner=user, task=task, budget=budget, name="eta", num_pods=2, generation_steps=256)
    return services.run_start(run=run)


def test_the_env_step_cap_binds_at_the_pods_current_rate(user, task, make_budget):
    from webapp.runs.models import Pod
    from webapp.runs.selectors.eta import budget_eta

    budget = make_budget(env_step_cap=100_000, max_wall_clock_s=3600)
    run = _started_run(user, task, budget)
    Pod.objects.filter(run=run).update(state=Pod.State.TRAINING, steps_per_s=500.0, env_steps=5_000)
    budget.env_steps_used = 35_000
    budget.save()
    eta = budget_eta(budget, run)
    # (100,000 - 35,000 - 2 x 5,000) env steps left at 2 x 500 steps/s; the wall clock has ~3,600 s
    assert eta == {"seconds": 55.0, "limit": "env_steps", "label": "env-step cap"}


def test_the_wall_clock_binds_when_it_ends_first(user, task, make_budget):
    from webapp.runs.models import Pod, Run
    from webapp.runs.selectors.eta import budget_eta

    budget = make_budget(env_step_cap=10**9, max_wall_clock_s=600)
    run = _started_run(user, task, budget)
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=500))
    run.refresh_from_db()
    Pod.objects.filter(run=run).update(state=Pod.State.TRAINING, steps_per_s=1000.0)
    eta = budget_eta(budget, run)
    assert eta["limit"] == "wall_clock" and 95 <= eta["seconds"] <= 100


def test_no_rate_and_no_clock_gives_no_eta(user, task, make_budget):
    from webapp.runs.selectors.eta import budget_eta

    budget = make_budget(env_step_cap=10**6)
    run = _started_run(user, task, budget)
    assert budget_eta(budget, run) == {"seconds": None, "limit": None, "label": ""}

"""``budget_verdict``: the one rule for "is the budget spent, or only held by running
generations?" (claim, completion and the sweep all ask it). Pure: unsaved rows, no database."""

from __future__ import annotations

import datetime as dt

import pytest

from webapp.runs.models import ClusterBudget, Run
from webapp.runs.services.budgets import BudgetVerdict, budget_verdict

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def _budget(**limits) -> ClusterBudget:
    return ClusterBudget(
        **{"name": "b", "max_concurrent_pods": 2, "gpu_seconds_used": 0.0, "env_steps_used": 0, **limits}
    )


def _run(*, generation_steps: int = 1000, started_at=NOW - HOUR) -> Run:
    return Run(name="r", generation_steps=generation_steps, started_at=started_at)


# (budget limits and usage, run, steps held by running generations) -> expected state
CASES = [
    pytest.param({}, {}, 0, "ok", id="no limits"),
    pytest.param({"env_step_cap": 10_000, "env_steps_used": 8_000}, {}, 0, "ok", id="cap leaves one generation"),
    pytest.param({"env_step_cap": 10_000, "env_steps_used": 9_000}, {}, 0, "ok", id="cap exactly fits one generation"),
    pytest.param({"env_step_cap": 10_000, "env_steps_used": 9_001}, {}, 0, "spent", id="cap one step short"),
    pytest.param({"env_step_cap": 10_000, "env_steps_used": 8_000}, {}, 1_000, "ok", id="room beside a running one"),
    pytest.param({"env_step_cap": 10_000, "env_steps_used": 8_000}, {}, 2_000, "held", id="held by running ones"),
    pytest.param({"env_step_cap": 10_000, "env_steps_used": 9_500}, {}, 2_000, "spent", id="spent even without them"),
    pytest.param({"gpu_hours_cap": 1.0, "gpu_seconds_used": 3_599.0}, {}, 0, "ok", id="gpu hours left"),
    pytest.param({"gpu_hours_cap": 1.0, "gpu_seconds_used": 3_600.0}, {}, 0, "spent", id="gpu hours spent"),
    pytest.param({"gpu_hours_cap": 1.0, "gpu_seconds_used": 3_600.0}, {}, 500, "spent", id="gpu spent beats held"),
    pytest.param({"deadline": NOW + HOUR}, {}, 0, "ok", id="before the deadline"),
    pytest.param({"deadline": NOW}, {}, 0, "spent", id="at the deadline"),
    pytest.param({"max_wall_clock_s": 3_601}, {}, 0, "ok", id="wall clock left"),
    pytest.param({"max_wall_clock_s": 3_600}, {}, 0, "spent", id="wall clock spent"),
    pytest.param({"max_wall_clock_s": 60}, {"started_at": None}, 0, "ok", id="wall clock of an unstarted run"),
    pytest.param({"env_step_cap": 500}, {"generation_steps": 1000}, 0, "spent", id="a generation larger than cap"),
]


@pytest.mark.parametrize(("limits", "run_fields", "reserved", "expected"), CASES)
def test_budget_verdict_table(limits, run_fields, reserved, expected):
    verdict = budget_verdict(_budget(**limits), _run(**run_fields), reserved_steps=reserved, now=NOW)
    assert verdict.state == expected
    assert (verdict.reason == "") == (expected == BudgetVerdict.OK)


def test_a_verdict_names_the_limit_that_is_spent():
    verdict = budget_verdict(_budget(env_step_cap=10_000, env_steps_used=9_500), _run(), now=NOW)
    assert "env-step cap of 10000" in verdict.reason
    held = budget_verdict(_budget(env_step_cap=10_000, env_steps_used=8_000), _run(), reserved_steps=2_000, now=NOW)
    assert "env-step cap of 10000" in held.reason

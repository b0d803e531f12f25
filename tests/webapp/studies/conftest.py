"""Fixtures of the studies tests: a portfolio base task on the real Dow-30 file and a 2-fold plan;
real Celery workers come from the runs tests' fixtures (``tests/webapp/runs/conftest.py``)."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import PORTFOLIO, create_task
from tests.webapp.runs.conftest import _workers_quiet_at_teardown, isolated_redis, workers  # noqa: F401

#: Two folds: tested on 2018 and 2019, validated on the half year before each, trained from 2016.
PLAN = {"start": "2016-01-01", "end": "2019-12-31", "first_test_year": 2018, "validation_days": 126, "gap_days": 5}


@pytest.fixture
def base_task(user, dataset):
    return create_task(user, dataset, name="tiny portfolio", **PORTFOLIO)


@pytest.fixture
def study_body(base_task, make_budget) -> dict:
    budget = make_budget(max_concurrent_pods=2)
    return {
        "task": base_task.id,
        "budget": budget.id,
        "name": "tiny study",
        **PLAN,
        "num_pods": 1,
        "generation_steps": 256,
        "env_steps_per_fold": 512,
    }

"""The backtest reaper creates the end-of-run backtests of a run whose trigger message was
lost (the run finished while Redis was down or restarting)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from webapp.reports import services
from webapp.reports.models import Backtest
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def _finish(run_id: int, *, ago_s: float) -> None:
    Run.objects.filter(pk=run_id).update(
        status=Run.Status.FINISHED, finished_at=timezone.now() - dt.timedelta(seconds=ago_s)
    )


def _end_of_run(run_id: int) -> int:
    return Backtest.objects.filter(run_id=run_id, source=Backtest.Source.END_OF_RUN).count()


def test_a_finished_run_whose_trigger_was_lost_gets_its_end_of_run_backtests_once(make_agent):
    run_id = make_agent(score=0.2).run_id
    make_agent(score=0.1)
    make_agent(score=0.3, on_leaderboard=False)
    _finish(run_id, ago_s=600)

    services.backtest_reap(stale_after_s=600, redispatch_after_s=60)
    services.backtest_reap(stale_after_s=600, redispatch_after_s=60)

    assert _end_of_run(run_id) == 3, "one per leaderboard agent and their ensemble, however often the reaper ticks"


def test_a_run_that_just_finished_is_left_to_its_own_trigger(make_agent):
    run_id = make_agent().run_id
    _finish(run_id, ago_s=5)

    services.backtest_reap(stale_after_s=600, redispatch_after_s=60)

    assert _end_of_run(run_id) == 0


def test_a_run_finished_long_ago_is_not_backtested_again(make_agent):
    run_id = make_agent().run_id
    _finish(run_id, ago_s=services.END_OF_RUN_TRIGGER_WINDOW.total_seconds() + 60)

    services.backtest_reap(stale_after_s=600, redispatch_after_s=60)

    assert _end_of_run(run_id) == 0

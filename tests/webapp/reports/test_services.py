"""Requesting backtests: what is accepted, what is refused and how the refusal names the field."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.webapp.conftest import SPLITS, TICKERS
from webapp.core.errors import AppError
from webapp.reports import services
from webapp.reports.models import Backtest
from webapp.runs.models import Agent

pytestmark = pytest.mark.django_db


def test_backtest_on_the_test_split_is_queued_with_the_agents_tickers(user, agent):
    backtest = services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31")

    assert backtest.status == Backtest.Status.QUEUED
    assert backtest.tickers == TICKERS
    assert (backtest.start, backtest.end) == ("2020-07-01", "2020-12-31")
    assert backtest.run_id == agent.run_id and backtest.owner == user


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        ("2020-12-31", "2020-07-01", "end"),  # end before start
        ("2020-07-01", "2020-07-01", "end"),  # empty range
        ("2009-06-01", "2009-12-31", "start"),  # before the data (2010-01-04)
        ("2022-01-03", "2023-03-31", "end"),  # after the data (2022-11-15)
        ("July 1st", "2020-12-31", "start"),  # not a date
    ],
)
def test_bad_range_is_refused_naming_the_field(user, agent, start, end, field):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=agent, start=start, end=end)

    assert err.value.status == 400
    assert field in err.value.fields
    assert not Backtest.objects.exists()


def test_a_range_ending_four_days_past_the_data_is_accepted_as_task_splits_are(user, agent):
    # the data ends Tuesday 2022-11-15; a task's test split may end 2022-11-19 (the one rule of
    # trainer.data.splits.check_window), so its end-of-run backtest must be accepted too
    backtest = services.backtest_create(user=user, agent=agent, start="2022-07-01", end="2022-11-19")
    assert backtest.status == Backtest.Status.QUEUED
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=agent, start="2022-07-01", end="2022-11-20")
    assert "end" in err.value.fields and "2022-11-15" in err.value.message


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("2020-03-02", "2020-12-31"),  # starts inside validation
        ("2019-01-02", "2019-06-28"),  # inside train
        ("2017-01-03", "2018-12-31"),  # ends inside train
    ],
)
def test_range_overlapping_train_or_validation_dates_is_refused(user, agent, start, end):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=agent, start=start, end=end)

    assert err.value.status == 400
    assert "overlaps" in err.value.message
    assert SPLITS["validation"][1] in err.value.message  # says where held-out dates begin
    assert {"start", "end"} & set(err.value.fields)


def test_overlapping_range_is_accepted_when_explicitly_allowed(user, agent):
    backtest = services.backtest_create(
        user=user, agent=agent, start="2019-01-02", end="2020-12-31", allow_overlap=True
    )

    assert backtest.allow_overlap is True


def test_dates_before_training_are_held_out_too(user, agent):
    backtest = services.backtest_create(user=user, agent=agent, start="2016-01-04", end="2017-12-29")

    assert backtest.status == Backtest.Status.QUEUED


def test_unknown_ticker_is_refused_naming_tickers(user, agent):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31", tickers=["AAPL", "ZZZZ"])

    assert err.value.fields.keys() == {"tickers"}
    assert "ZZZZ" in err.value.fields["tickers"]


def test_tickers_other_than_the_agents_are_refused(user, agent):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=agent, start="2020-07-01", end="2020-12-31", tickers=["AAPL"])

    assert "tickers" in err.value.fields


def test_other_user_cannot_backtest_my_agent(other_user, agent):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=other_user, agent=agent, start="2020-07-01", end="2020-12-31")

    assert err.value.status == 404


def test_finished_run_queues_its_best_agents_on_the_test_split_once(make_agent):
    best = make_agent(score=2.0, score_se=1.2)
    second = make_agent(score=1.0, score_se=0.1)
    make_agent(score=0.5, score_se=0.1)
    make_agent(score=9.0, on_leaderboard=False)  # pruned from the leaderboard: not backtested

    created = services.backtests_for_run(run_id=best.run_id, top=2)
    again = services.backtests_for_run(run_id=best.run_id, top=2)

    # the 2 best agents, then the deliverable (built once): the ensemble of the leaderboard
    # agents within one SE of the best, 2.0 - 1.2 = 0.8 (the third, 0.5, is not)
    assert [b.agent_id for b in created][:2] == [best.id, second.id]
    ensemble = created[2].agent
    assert len(created) == 3 and ensemble.metrics["ensemble"]["members"] == [best.id, second.id]
    assert again == []
    for backtest in created:
        assert (str(backtest.start), str(backtest.end)) == tuple(SPLITS["test"])
        assert backtest.source == Backtest.Source.END_OF_RUN


def test_finished_run_backtests_three_agents_by_default(make_agent):
    agents = [make_agent(score=s, score_se=0.25) for s in (0.1, 0.2, 0.3, 0.4)]

    created = services.backtests_for_run(run_id=agents[0].run_id)

    # and the one-SE ensemble: 0.4, 0.3 and 0.2 are within 0.25 of the best, 0.1 is not
    assert len(created) == services.DEFAULT_TOP_AGENTS + 1 == 4
    assert created[-1].agent.members == [a.id for a in agents[::-1][:3]]


def test_a_best_agent_alone_within_one_se_is_the_deliverable_and_no_ensemble_is_built(make_agent):
    best = make_agent(score=2.0, score_se=0.1)
    second = make_agent(score=1.0, score_se=0.1)

    created = services.backtests_for_run(run_id=best.run_id)

    assert [b.agent_id for b in created] == [best.id, second.id]
    assert not Agent.objects.filter(run_id=best.run_id, kind=Agent.Kind.ENSEMBLE).exists()


def test_reaper_requeues_a_backtest_whose_worker_died_and_sends_it_again(user, agent):
    backtest = services.backtest_create(user=user, agent=agent, start="2021-01-04", end="2021-06-30")
    assert services.backtest_claim(backtest_id=backtest.id)
    # The worker died an hour ago mid-backtest: the row is still "running".
    Backtest.objects.filter(pk=backtest.pk).update(started_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))

    outcome = services.backtest_reap(stale_after_s=600, redispatch_after_s=60)

    backtest.refresh_from_db()
    assert outcome == {"requeued": 1, "resent": 1}
    assert backtest.status == Backtest.Status.QUEUED
    assert services.backtest_claim(backtest_id=backtest.id)  # the next delivery can claim it


def test_reaper_leaves_a_recent_running_backtest_alone(user, agent):
    backtest = services.backtest_create(user=user, agent=agent, start="2021-01-04", end="2021-06-30")
    assert services.backtest_claim(backtest_id=backtest.id)

    outcome = services.backtest_reap(stale_after_s=600, redispatch_after_s=60)

    backtest.refresh_from_db()
    assert outcome == {"requeued": 0, "resent": 0}
    assert backtest.status == Backtest.Status.RUNNING

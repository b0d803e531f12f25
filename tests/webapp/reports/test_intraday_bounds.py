"""Backtests of an intraday task take the bounds its splits take: ``YYYY-MM-DD HH:MM`` exchange
time (bar end) as well as days (real 5-minute file of ../shared/data)."""

from __future__ import annotations

import pytest

from tests.conftest import INTRADAY_5MIN_FILE
from tests.webapp.conftest import TINY_PPO
from webapp.core.errors import AppError
from webapp.reports import services
from webapp.reports.models import Backtest

pytestmark = pytest.mark.django_db

SPLITS = {
    "train": ["2024-03-11", "2025-06-30"],
    "validation": ["2025-07-01", "2025-12-31 12:00"],
    "test": ["2025-12-31 12:05", "2026-08-21"],
}


@pytest.fixture
def bar_agent(user, settings, data_dir):
    """An agent record of a run on a 5-minute AAPL/MSFT task whose validation ends at noon."""
    from webapp.market import services as market
    from webapp.runs import services as runs
    from webapp.runs.models import Agent, Generation, Pod

    settings.PADDOCK_DATA_DIR = data_dir
    settings.PADDOCK_BENCHMARK_FILE = data_dir / INTRADAY_5MIN_FILE  # its QQQ bars cover the splits
    bars = market.dataset_create_from_files(
        owner=user, name="5m", paths=[INTRADAY_5MIN_FILE], tickers=["AAPL", "MSFT"], options={"bar_label": "start"}
    )
    task = runs.task_create(
        owner=user, dataset=bars, name="bars", tickers=None, splits=SPLITS, hyperparameters=TINY_PPO
    )
    budget = runs.budget_create(actor=user, name="budget", max_concurrent_pods=1)
    run = runs.run_create(owner=user, task=task, budget=budget, num_pods=1, generation_steps=256, device="cpu")
    pod = Pod.objects.create(run=run, index=0)
    gen = Generation.objects.create(run=run, pod=pod, number=1, env_steps=256, status=Generation.Status.DONE)
    return Agent.objects.create(
        run=run,
        generation=gen,
        pod=pod,
        score=1.0,
        tickers=["AAPL", "MSFT"],
        checkpoint="unused.pt",
        created_seq=1,
        on_leaderboard=True,
    )


def test_a_backtest_may_start_and_end_inside_a_session(user, bar_agent):
    backtest = services.backtest_create(user=user, agent=bar_agent, start="2025-12-31 12:05", end="2026-08-21 12:30")
    assert (backtest.start, backtest.end) == ("2025-12-31 12:05", "2026-08-21 12:30")
    day = services.backtest_create(user=user, agent=bar_agent, start="2026-01-02", end="2026-03-31")
    assert (day.start, day.end) == ("2026-01-02", "2026-03-31")


@pytest.mark.parametrize(
    ("start", "end", "field", "words"),
    [
        ("2025-12-31 11:55", "2026-03-31", "start", "overlaps"),  # a bar of the validation morning
        ("2025-12-31", "2026-03-31", "start", "overlaps"),  # the whole day holds validation bars
        ("2026-03-31 15:00", "2026-03-31 10:00", "end", "after start"),
        ("2026-01-02 25:00", "2026-03-31", "start", "not a calendar date and time"),
        ("2026-01-02", "2026-08-26 10:00", "end", "after the data"),  # 5 days past the last bar (2026-08-21)
    ],
)
def test_bad_intraday_bounds_are_refused_naming_the_field(user, bar_agent, start, end, field, words):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=bar_agent, start=start, end=end)
    assert err.value.status == 400 and field in err.value.fields
    assert words in err.value.message
    assert not Backtest.objects.exists()


def test_the_end_of_run_backtest_takes_a_test_split_that_starts_at_noon(user, bar_agent):
    created = services.backtests_for_run(run_id=bar_agent.run_id, top=1)
    assert [(b.start, b.end) for b in created] == [("2025-12-31 12:05", "2026-08-21")]


def test_a_time_of_day_on_a_daily_dataset_is_refused_naming_the_field(user, agent):
    with pytest.raises(AppError) as err:
        services.backtest_create(user=user, agent=agent, start="2020-07-01 10:00", end="2020-12-31")
    assert "start" in err.value.fields and "the data is daily" in err.value.message


def test_the_backtest_form_of_an_intraday_agent_takes_bar_times(client, user, bar_agent):
    from django.urls import reverse

    client.force_login(user)
    page = client.get(reverse("reports:backtest-new") + f"?agent={bar_agent.id}").content.decode()
    assert 'type="text"' in page and 'value="2025-12-31 12:05"' in page  # a date input cannot hold a time
    response = client.post(
        reverse("reports:backtest-new"), {"agent": bar_agent.id, "start": "2025-12-31 12:05", "end": "2026-03-31 15:30"}
    )
    assert response.status_code == 302
    assert Backtest.objects.get().end == "2026-03-31 15:30"

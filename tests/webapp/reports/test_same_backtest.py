"""Asking for a backtest that exists gives that one: the API answers 200 with its id instead of
201 with a copy, and the New backtest form opens its report. "The same" is every input the
result depends on (agent, dataset and tickers, window, allow_overlap); one that differs in any
of them, or repeats a failed one, is new.

Who may see what: ada (``user``) owns the agents and every backtest.
"""

from __future__ import annotations

import pytest

from tests.webapp.conftest import SPLITS
from webapp.reports import services
from webapp.reports.models import Backtest

pytestmark = pytest.mark.django_db

START, END = SPLITS["test"]


def _post(api_client, agent, **changes):
    body = {"agent": agent.id, "start": START, "end": END, **changes}
    return api_client.post("/api/backtests/", body, format="json")


def test_posting_the_same_backtest_twice_answers_the_first_with_200(api_client, agent):
    first = _post(api_client, agent)
    assert first.status_code == 201, first.json()
    again = _post(api_client, agent, tickers=list(reversed(agent.tickers)), allow_overlap=False)
    assert again.status_code == 200, again.json()
    assert again.json()["id"] == first.json()["id"]
    assert Backtest.objects.count() == 1


def test_a_backtest_differing_in_window_overlap_or_agent_is_new(api_client, agent, make_agent):
    first = _post(api_client, agent).json()["id"]
    others = [
        _post(api_client, agent, end="2020-12-30"),
        _post(api_client, agent, allow_overlap=True),
        _post(api_client, make_agent(score=0.5)),
    ]
    assert [r.status_code for r in others] == [201, 201, 201]
    assert len({first, *(r.json()["id"] for r in others)}) == 4


def test_a_finished_backtest_is_answered_and_a_failed_one_is_run_again(api_client, user, agent, run_backtest_now):
    done = run_backtest_now(agent, START, END)
    assert done.status == Backtest.Status.DONE
    again = _post(api_client, agent)
    assert again.status_code == 200 and again.json()["id"] == done.id and again.json()["status"] == "done"

    Backtest.objects.filter(pk=done.id).update(status=Backtest.Status.FAILED, error="worker lost")
    retried = _post(api_client, agent)
    assert retried.status_code == 201 and retried.json()["id"] != done.id


def test_a_request_repeating_an_end_of_run_backtest_gets_it(api_client, user, agent):
    end_of_run = services.backtest_create(
        user=user, agent=agent, start=START, end=END, source=Backtest.Source.END_OF_RUN
    )
    again = _post(api_client, agent)
    assert again.status_code == 200 and again.json()["id"] == end_of_run.id
    assert again.json()["source"] == "end_of_run"


def test_the_new_backtest_form_opens_the_existing_report(client, user, agent):
    client.force_login(user)
    form = {"agent": agent.id, "start": START, "end": END}
    first = client.post("/reports/new/", form)
    assert first.status_code == 302
    again = client.post("/reports/new/", form, follow=True)
    assert again.redirect_chain[-1][0] == first.url
    assert "This backtest exists already" in again.content.decode()
    assert Backtest.objects.count() == 1

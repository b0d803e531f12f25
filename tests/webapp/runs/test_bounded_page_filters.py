"""The pages' integer query parameters are bounded: a number beyond the database's 64-bit range
is a 400 naming the filter (the agents table) or names nothing (the backtests list, as
``/api/backtests/``; the compare page: not found), never SQLite's "Python int too large to
convert to SQLite INTEGER" as a 500."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from django.test import Client

pytestmark = pytest.mark.django_db

HUGE = "9223372036854775808"  # 2**63


@pytest.fixture
def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(("name", "value"), [("lineage", HUGE), ("generation", HUGE), ("pod", "256"), ("pod", HUGE)])
def test_an_agents_table_filter_out_of_range_is_a_400_naming_it(page, world, name, value):
    response = page.get(f"/runs/{world.run.id}/agents/?{name}={value}")
    assert response.status_code == 400
    errors = BeautifulSoup(response.content, "html.parser").select_one(".errorlist").get_text(" ", strip=True)
    assert errors.startswith(name) and "less than or equal to" in errors, errors


def test_an_agents_table_filter_that_is_no_number_is_a_400_not_every_agent(page, world):
    assert page.get(f"/runs/{world.run.id}/agents/?lineage=abc").status_code == 400
    assert page.get(f"/runs/{world.run.id}/agents/?lineage=abc&format=csv").status_code == 400
    assert page.get(f"/runs/{world.run.id}/agents/?lineage=1").status_code == 200


@pytest.mark.parametrize("name", ["run", "agent"])
def test_the_backtests_page_reads_an_id_beyond_any_as_naming_nothing(page, world, name):
    response = page.get(f"/reports/?{name}={HUGE}")
    assert response.status_code == 200
    assert BeautifulSoup(response.content, "html.parser").select_one("#no-match")
    assert page.get(f"/reports/?{name}=²").status_code == 400


def test_comparing_a_backtest_id_beyond_any_is_not_found(page, world):
    assert page.get(f"/reports/compare/?ids={HUGE},1").status_code == 404
    assert page.get("/reports/compare/?ids=²,1").status_code == 400


def test_comparing_runs_by_a_digit_that_is_no_number_is_not_a_500(page, world):
    assert page.get(f"/runs/compare/?ids={world.run.id}&ids=²").status_code == 400  # one run: too few

"""The runs table's hyperparameter, seed and best-test-Sharpe columns, each sortable."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from tests.webapp.conftest import TINY_PPO, create_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_runs(user, dataset, make_budget):
    from webapp.reports.models import Backtest
    from webapp.runs import services

    budget = make_budget()
    runs = {}
    for name, lr, seed in (("slow", 1e-4, 3), ("fast", 3e-3, 1), ("mid", 1e-3, 2)):
        task = create_task(user, dataset, name=name, hyperparameters={**TINY_PPO, "learning_rate": lr})
        runs[name] = services.run_create(
            owner=user, task=task, budget=budget, name=name, generation_steps=256, seed=seed
        )
    return runs, Backtest


def _order(client, sort: str) -> list[str]:
    soup = BeautifulSoup(client.get(f"/runs/?sort={sort}").content.decode(), "html.parser")
    return [tr.select_one(".run-name a").get_text() for tr in soup.select("#runs-table tbody tr")]


def test_runs_sort_by_learning_rate_seed_and_best_test_sharpe(client, user, dataset, three_runs, trained_checkpoint):
    runs, Backtest = three_runs
    from tests.webapp.conftest import submit_agent
    from webapp.runs import services

    run = services.run_start(run=runs["slow"])
    agent = submit_agent(run, trained_checkpoint, 0.3)
    Backtest.objects.create(
        owner=user, agent=agent, run=run, dataset=dataset, tickers=agent.tickers, start="2020-07-01",
        end="2020-12-31", status="done", source="end_of_run", metrics={"agent": {"sharpe_ratio": 0.75}},
    )  # fmt: skip
    client.force_login(user)
    assert _order(client, "lr") == ["slow", "mid", "fast"]
    assert _order(client, "-lr") == ["fast", "mid", "slow"]
    assert _order(client, "seed") == ["fast", "mid", "slow"]
    assert _order(client, "-best_test_sharpe")[0] == "slow"
    soup = BeautifulSoup(client.get("/runs/?sort=-best_test_sharpe").content.decode(), "html.parser")
    row = soup.select_one(f'tr[data-run-id="{run.id}"]')
    assert row.select_one('[data-col="best-test-sharpe"]').get_text() == "0.750"
    assert row.select_one('[data-col="lr"]').get_text() == "0.0001"
    assert row.select_one('[data-col="seed"]').get_text() == "3"
    header = soup.select_one('th[data-sort="best_test_sharpe"]')
    assert header["aria-sort"] == "descending" and "sort=best_test_sharpe" in header.a["href"]


def test_an_unknown_sort_falls_back_to_newest_first(client, user, three_runs):
    client.force_login(user)
    assert _order(client, "drop table") == ["mid", "fast", "slow"]

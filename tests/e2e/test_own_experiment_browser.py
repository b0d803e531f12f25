"""From the demo to a run of one's own in Chromium, without staff: a budget of one's own made
on the Budgets page (one above the quota refused, naming it), then the demo's portfolio run
cloned and submitted unchanged on that budget."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import SPLITS, TICKERS, create_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_new_user_makes_a_budget_and_clones_the_demo_run_onto_it(page, live_url, e2e_user, login, screenshot):
    from webapp.runs import services
    from webapp.runs.models import Run

    dataset = create_dataset(e2e_user)
    demo_budget = services.budget_create(actor=e2e_user, name="Demo budget", max_concurrent_pods=1, purpose="demo")
    task = services.task_create(
        owner=e2e_user,
        dataset=dataset,
        name="Dow 30 PPO demo",
        tickers=TICKERS,
        splits=SPLITS,
        kind="portfolio",
        algorithm="ppo",
        hyperparameters={"num_envs": 4, "rollout_steps": 16, "hidden_sizes": [16, 16]},
        env={"rebalance_band": 0.02},
    )
    demo_run = services.run_create(
        owner=e2e_user, task=task, budget=demo_budget, name="Dow 30 PPO demo #1", num_pods=1, generation_steps=64
    )
    login(page, e2e_user)

    page.goto("/budgets/")
    assert "2 device hours" in page.text_content("#quota")
    page.fill("#id_own-name", "too big")
    page.fill("#id_own-gpu_hours_cap", "50")
    page.click("#own-budget-form button[type=submit]")
    page.wait_for_selector('[data-error-for="gpu_hours_cap"]')
    assert "quota" in page.text_content('[data-error-for="gpu_hours_cap"]')
    page.fill("#id_own-name", "my first budget")
    page.fill("#id_own-gpu_hours_cap", "1")
    with page.expect_navigation():
        page.click("#own-budget-form button[type=submit]")
    row = page.locator("#budgets tr", has_text="my first budget")
    assert "own" in row.locator('[data-col="purpose"]').text_content()
    assert "1 h and 1 pod left" in page.text_content("[data-quota-left]")

    page.goto(f"/runs/new/?clone={demo_run.id}")
    page.select_option("#id_budget", label="my first budget")
    page.uncheck("#id_start_now")
    with page.expect_navigation():
        page.click("#run-form button[type=submit].primary")
    assert "/runs/new/" not in page.url, page.text_content("#run-form")
    clone = Run.objects.exclude(pk=demo_run.pk).get()
    assert clone.budget.name == "my first budget" and clone.task.kind == "portfolio"
    assert clone.task.env == task.env
    screenshot(page, "own-experiment-clone")

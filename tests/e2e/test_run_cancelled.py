"""A run its user stops while watching: it ends cancelled (not finished), the generation that
was training never ranks, the tab title and a notice say so, and ages stop ticking."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.webapp.conftest import create_dataset, create_task, submit_agent, trained_checkpoint  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_stopped_run_is_cancelled_and_its_running_generation_never_ranks(
    page,
    live_url,
    e2e_user,
    login,
    screenshot,
    monkeypatch,
    trained_checkpoint,  # noqa: F811
):
    from webapp import engine
    from webapp.runs import services
    from webapp.runs.models import Agent, Generation, Run
    from webapp.runs.services import budgets

    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)  # this test is the worker
    triggered = []
    monkeypatch.setattr("webapp.reports.receivers.backtest_top_agents", SimpleNamespace(delay=triggered.append))
    task = create_task(e2e_user, create_dataset(e2e_user))
    budget = services.budget_create(actor=e2e_user, name="stop me", max_concurrent_pods=2, env_step_cap=10**9)
    run = services.run_start(
        run=services.run_create(owner=e2e_user, task=task, budget=budget, num_pods=2, generation_steps=256)
    )
    first = submit_agent(run, trained_checkpoint, 0.7)
    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    claim = services.generation_claim(generation_id=gen.id, worker="browser-test")

    login(page, e2e_user)
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector("#live-indicator[data-state=live]")
    assert page.text_content("#run-age-label") == "Age"
    title = page.title()
    assert not page.is_checked("#stop-backtest"), "backtests of a cancelled run are opt-in"
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#btn-stop")

    page.wait_for_selector("#live-indicator[data-state=ended]", timeout=15_000)
    assert page.text_content("#live-indicator") == "cancelled"
    assert page.get_attribute("#run-status", "data-status") == "cancelled"
    assert page.title() == f"■ cancelled · {title}"
    assert page.is_visible("#run-notice") and "cancelled by user" in page.text_content("#run-notice")
    assert Run.objects.get(pk=run.id).status == Run.Status.CANCELLED
    assert triggered == []

    # the generation that was training completes after the stop: it does not rank
    result = engine.TrainedGeneration(
        sha256=trained_checkpoint["sha256"],
        score=9.9,
        metrics=trained_checkpoint["metrics"],
        env_steps=claim.env_steps,
        hyperparameters=claim.hyperparameters,
        cancelled=False,
        duration_s=0.5,
    )
    assert (
        services.generation_complete(claim=claim, result=result, local_checkpoint=str(trained_checkpoint["path"]))
        is None
    )
    assert list(Agent.objects.filter(run=run).values_list("id", flat=True)) == [first.id]
    page.reload()
    assert page.locator("#leaderboard tbody tr").count() == 1
    assert page.text_content("#run-age-label") == "Ran for"
    ages = [page.text_content("#run-age"), page.text_content('#leaderboard td[data-col="age"]')]
    page.wait_for_timeout(2100)
    assert [page.text_content("#run-age"), page.text_content('#leaderboard td[data-col="age"]')] == ages, (
        "an ended run's ages do not tick"
    )
    screenshot(page, "run-cancelled")

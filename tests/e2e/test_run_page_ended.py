"""The run page when a run ends while someone watches it: the indicator says how it ended
and the page stops listening; pods drop their last throughput; the chart stays a message."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import create_dataset, create_task

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_run_that_fails_while_watched_shows_failed_and_stops_listening(
    page, live_url, e2e_user, login, screenshot, monkeypatch
):
    from webapp.runs import services
    from webapp.runs.models import Generation
    from webapp.runs.services import budgets

    # This test plays the worker: no task message, so a Celery worker of another test of the
    # session cannot claim the generation first.
    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)

    task = create_task(e2e_user, create_dataset(e2e_user))
    budget = services.budget_create(actor=e2e_user, name="ended", max_concurrent_pods=1, max_wall_clock_s=3600)
    run = services.run_start(
        run=services.run_create(owner=e2e_user, task=task, budget=budget, num_pods=1, generation_steps=256)
    )
    gen = Generation.objects.get(run=run)
    claim = services.generation_claim(generation_id=gen.id, worker="browser-test")
    services.generation_heartbeat(generation_id=gen.id, attempt=claim.attempt, env_steps=128, steps_per_s=22417.0)

    login(page, e2e_user)
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector("#live-indicator[data-state=live]")
    card = '#pods .pod-card[data-pod-index="0"]'
    assert page.text_content(f"{card} .pod-sps") == "22,417"
    assert page.text_content("#budget-limit") == "(wall clock per run)"

    services.generation_fail(claim=claim, error="RuntimeError: out of memory", retry=False)

    page.wait_for_selector("#live-indicator[data-state=ended]", timeout=15_000)
    assert page.text_content("#live-indicator") == "failed"
    assert page.get_attribute("#run-status", "data-status") == "failed"
    assert "RuntimeError: out of memory" in page.text_content("#status-reason")
    page.wait_for_function(f"document.querySelector('{card} .pod-sps').textContent === '–'")
    assert page.get_attribute(f"{card} .pod-progress", "style") == "width: 0%;"
    assert "Waiting for the first agent" in page.text_content("#score-chart")
    page.wait_for_timeout(2000)  # longer than the first reconnect delay
    assert page.evaluate("window.paddockLive.ws.readyState") == 3, "the socket is closed for good"
    assert page.text_content("#live-indicator") == "failed"
    screenshot(page, "run-detail-failed")


def test_a_lost_final_update_is_noticed_by_the_heartbeat_and_resynced_within_seconds(
    page, live_url, e2e_user, login, monkeypatch
):
    from webapp.runs import events, services
    from webapp.runs.models import Run

    monkeypatch.setattr(services.budgets, "send_generation_tasks", lambda ids: None)  # no worker plays along
    task = create_task(e2e_user, create_dataset(e2e_user))
    budget = services.budget_create(actor=e2e_user, name="lost tail", max_concurrent_pods=1)
    run = services.run_start(
        run=services.run_create(owner=e2e_user, task=task, budget=budget, num_pods=1, generation_steps=256)
    )
    login(page, e2e_user)
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector("#live-indicator[data-state=live]")

    # The final run update is committed and numbered, but its message never reaches the page
    # (a channel layer over capacity drops it silently): no later event will reveal the gap.
    Run.objects.filter(pk=run.id).update(status=Run.Status.FINISHED, status_reason="budget spent")
    events.next_seq(run.id)

    # heartbeat (3 s of silence) + grace (0.8 s) -> snapshot.request -> the final state
    page.wait_for_selector("#run-status[data-status=finished]", timeout=10_000)
    assert page.text_content("#live-indicator") == "finished"

"""The live run page follows its events without a reload: the "Build ensemble" button turns on
when the leaderboard holds two agents, the ensemble count rises when one is built, the ETA
names the budget's binding limit; and the leaderboard fits its card at 1,190 px."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import (  # noqa: F401  (fixtures)
    TINY_PPO,
    create_dataset,
    create_task,
    submit_agent,
    trained_checkpoint,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_ensemble_button_count_and_eta_follow_the_events_and_the_board_fits(
    browser, live_url, e2e_user, login, screenshot, data_dir, settings, request, monkeypatch
):
    from webapp.runs import services
    from webapp.runs.services import budgets, ensembles

    # This test is the worker: the browser tests' session worker must not claim the generations.
    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)

    checkpoint = request.getfixturevalue("trained_checkpoint")  # the web tests' session fixture

    settings.PADDOCK_DATA_DIR = data_dir
    dataset = create_dataset(e2e_user)
    task = create_task(e2e_user, dataset)
    budget = services.budget_create(actor=e2e_user, name="live", max_concurrent_pods=2, env_step_cap=10**6)
    run = services.run_create(
        owner=e2e_user, task=task, budget=budget, name="live run", num_pods=2, generation_steps=256, device="cpu"
    )
    services.run_start(run=run)
    submit_agent(run, checkpoint, 0.4)

    context = browser.new_context(base_url=live_url, viewport={"width": 1190, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        login(page, e2e_user)
        page.goto(f"/runs/{run.id}/")
        page.wait_for_selector("#leaderboard tbody tr[data-agent-id]")
        assert page.is_disabled("#btn-ensemble")

        submit_agent(run, checkpoint, 0.9)  # a second agent: the button may build a top-2
        page.wait_for_function("!document.getElementById('btn-ensemble').disabled")
        assert page.text_content("#btn-ensemble") == "Build top-2 ensemble"
        assert page.input_value('#ensemble-form input[name="k"]') == "2"
        page.wait_for_function("document.getElementById('budget-eta-limit').textContent.includes('env-step cap')")

        ensembles.ensemble_get_or_create(run=run, k=2)
        page.wait_for_function("document.getElementById('ensembles-count').textContent === '1'")

        sizes = page.evaluate(
            "(() => { const t = document.getElementById('leaderboard');"
            " const box = t.closest('.card'); return [t.scrollWidth, box.clientWidth]; })()"
        )
        screenshot(page, "run-live-1190")
        assert sizes[0] <= sizes[1], f"the leaderboard is {sizes[0]} px wide in a {sizes[1]} px card"
    finally:
        context.close()

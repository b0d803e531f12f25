"""The New run form's bounds in Chromium: inputs carry the limits (the browser flags 1e300
initial cash), and the server answers every error at once, each next to its field (the form
posts without the browser's own check so that every error is the server's)."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import create_dataset, create_task  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_out_of_bounds_inputs_are_flagged_and_all_refused_together(page, live_url, e2e_user, login, screenshot):
    from webapp.runs import services

    create_dataset(e2e_user)
    services.budget_create(actor=e2e_user, name="bounds", max_concurrent_pods=1, env_step_cap=10**9)
    login(page, e2e_user)
    page.goto("/runs/new/")
    assert page.text_content("label[for=id_hmax]").strip() == "Max shares per trade"
    page.select_option("#id_budget", index=1)
    page.fill("#id_generation_steps", "16384")
    page.dispatch_event("#id_generation_steps", "input")
    estimate = page.text_content("#run-estimate")
    assert "Env steps per generation: 16,384." in estimate
    assert "Generations the budget allows: 61,035 (limit: env steps left)." in estimate  # 10^9 // 16,384
    # pods at once = min(2 pods, the budget's 1, the training workers alive the page was given)
    workers = page.evaluate("JSON.parse(document.getElementById('estimate-inputs').textContent).training_workers")
    assert isinstance(workers, int)
    if workers:
        alive = f"{workers} training worker{'s' if workers != 1 else ''} alive"
        assert f"Pods training at once: 1 (2 pods, budget allows 1, {alive})." in estimate
    else:
        assert "No training worker is alive: the run waits until one starts" in estimate
    page.fill("#id_initial_cash", "1e300")
    page.fill("#id_hmax", "0")
    page.fill("#id_num_pods", "0")
    page.fill("#id_leaderboard_size", "100000")
    page.fill("#id_generation_steps", "1000000000000")
    for name in ("initial_cash", "hmax", "num_pods", "leaderboard_size", "generation_steps"):
        assert page.evaluate(f"!document.getElementById('id_{name}').checkValidity()"), name  # the input's limits
    page.select_option("#id_dataset", index=1)
    page.select_option("#id_budget", index=1)
    page.fill("#id_train_start", "2018-06-01")
    page.fill("#id_train_end", "2019-12-31")
    page.fill("#id_validation_start", "2020-01-01")
    page.fill("#id_validation_end", "2020-06-30")
    page.fill("#id_test_start", "2020-07-01")
    page.fill("#id_test_end", "2020-12-31")
    page.click("button[type=submit].primary")
    page.wait_for_selector("[data-error-for]")
    flagged = set(page.eval_on_selector_all("[data-error-for]", "els => els.map(e => e.dataset.errorFor)"))
    assert {"initial_cash", "hmax", "num_pods", "leaderboard_size", "generation_steps"} <= flagged, flagged
    assert "1e+300" in page.text_content('[data-error-for="initial_cash"]')
    assert page.url.endswith("/runs/new/"), "nothing was created"
    screenshot(page, "run-form-bounds")

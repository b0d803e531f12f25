"""A mixed-algorithm run from the New run form in Chromium: tick a second algorithm, give it a
setting of its own, create the run; the worker trains one pod of each and the live leaderboard
shows both in its algorithm column."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import DOW30_FILE

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TINY_PPO = {"num_envs": 4, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32], "update_epochs": 2}
ALGORITHM_CELLS = "table#leaderboard tbody tr[data-agent-id] td[data-col=algorithm]"


def test_a_user_ticks_a2c_beside_ppo_and_the_leaderboard_shows_both_algorithms(
    page, live_url, celery_worker, e2e_user, data_dir, login, screenshot
):
    from webapp.market import services as market_services
    from webapp.runs import services
    from webapp.runs.models import Run

    dataset = market_services.dataset_create_from_files(
        owner=e2e_user, name="dow30 mini", paths=[DOW30_FILE], tickers=["AAPL", "MSFT", "JPM"]
    )
    budget = services.budget_create(actor=e2e_user, name="mixed cpu", max_concurrent_pods=2, env_step_cap=256 * 12)
    login(page, e2e_user)
    page.goto("/runs/new/")
    page.fill("#id_name", "mixed browser run")
    page.select_option("#id_dataset", str(dataset.id))
    for name, value in {
        "train_start": "2018-06-01",
        "train_end": "2019-12-31",
        "validation_start": "2020-01-01",
        "validation_end": "2020-06-30",
        "test_start": "2020-07-01",
        "test_end": "2020-12-31",
    }.items():
        page.fill(f"#id_{name}", value)
    page.select_option("#id_algorithm", "ppo")
    page.fill("#id_hyperparameters", json.dumps(TINY_PPO))
    page.check("input[name=algorithms][value=a2c]")
    page.fill("#id_algorithm_hyperparameters", json.dumps({"a2c": {"learning_rate": 0.001}}))
    page.select_option("#id_budget", str(budget.id))
    page.fill("#id_num_pods", "2")
    page.fill("#id_generation_steps", "256")
    page.fill("#id_leaderboard_size", "20")  # room for all 12 agents: both algorithms stay on it
    # every generation fresh: with one worker, pod 1 would otherwise start after pod 0's PPO agent
    # reached the leaderboard and most likely continue it (children keep their parent's algorithm)
    page.fill("#id_fresh_probability", "1")
    screenshot(page, "run-form-mixed")
    # The first POST imports the trainer's config classes (torch) in the server: allow for it.
    with page.expect_navigation(timeout=120_000):
        page.click("#create-run")
    assert re.search(r"/runs/\d+/$", page.url), page.url
    run = Run.objects.get(name="mixed browser run")
    assert run.task.algorithms == ["ppo", "a2c"]
    assert run.task.algorithm_hyperparameters["a2c"]["learning_rate"] == 0.001

    assert "Algorithm" in page.eval_on_selector_all("table#leaderboard thead th", "ths => ths.map(t => t.textContent)")
    # pod 0 trains PPO and pod 1 A2C: both reach the leaderboard without a reload
    page.wait_for_function(
        "sel => { const seen = new Set([...document.querySelectorAll(sel)].map(td => td.textContent.trim()));"
        " return seen.has('PPO') && seen.has('A2C'); }",
        arg=ALGORITHM_CELLS,
        timeout=180_000,
    )
    screenshot(page, "run-live-mixed")
    # the env-step cap (12 generations) ends the run; nothing is left running for the next test
    page.wait_for_selector("#run-status[data-status=finished]", timeout=180_000)

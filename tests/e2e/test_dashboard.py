"""The dashboard in a real browser: daphne, a Celery worker training tiny generations, Redis,
Chromium. Log in, create a run through the form, watch the leaderboard fill and change without
a reload, download an agent bundle, see a form error; screenshots of every page."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from tests.conftest import DOW30_FILE

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TINY_PPO = {"num_envs": 4, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32], "update_epochs": 2}
ROWS = "table#leaderboard tbody tr[data-agent-id]"


@pytest.fixture
def alice_data(e2e_user, data_dir):
    """A Dow-30 dataset (3 tickers) and a budget for the browser user."""
    from webapp.market import services as market_services
    from webapp.runs import services

    dataset = market_services.dataset_create_from_files(
        owner=e2e_user, name="dow30 mini", paths=[DOW30_FILE], tickers=["AAPL", "MSFT", "JPM"]
    )
    budget = services.budget_create(actor=e2e_user, name="alice cpu", max_concurrent_pods=2, env_step_cap=256 * 40)
    return dataset, budget


def _fill_run_form(page, dataset, budget, hyperparameters: dict) -> None:
    page.goto("/runs/new/")
    page.fill("#id_name", "browser run")
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
    # a portfolio task's form starts at the direct learner (the portfolio default): these runs are PPO
    page.select_option("#id_algorithm", "ppo")
    page.fill("#id_hyperparameters", json.dumps(hyperparameters))
    page.select_option("#id_budget", str(budget.id))
    page.fill("#id_num_pods", "2")
    page.fill("#id_generation_steps", "256")
    page.fill("#id_leaderboard_size", "3")


def test_a_user_creates_a_run_and_watches_the_leaderboard_live(
    page, live_url, celery_worker, e2e_user, alice_data, login, screenshot
):
    dataset, budget = alice_data
    login(page, e2e_user)
    screenshot(page, "dashboard")

    _fill_run_form(page, dataset, budget, TINY_PPO)
    # The first POST imports the trainer's config classes (torch) in the server: allow for it.
    with page.expect_navigation(timeout=120_000):
        page.click("#create-run")
    assert re.search(r"/runs/\d+/$", page.url), page.url
    page.wait_for_selector("#live-indicator[data-state=live]")
    assert page.text_content("#live-indicator") == "live"
    page.evaluate("window.__sameDocument = true")

    # The worker trains generations; rows appear and then change, on the same document.
    page.wait_for_selector(ROWS, timeout=180_000)
    first = page.eval_on_selector_all(ROWS, "rows => rows.map(r => r.dataset.agentId + ':' + r.dataset.score)")
    page.wait_for_function(
        "([sel, before]) => { const now = [...document.querySelectorAll(sel)]"
        ".map(r => r.dataset.agentId + ':' + r.dataset.score); return now.join() !== before.join(); }",
        arg=[ROWS, first],
        timeout=180_000,
    )
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("#pods .pod-card").count() == 2
    page.wait_for_function("document.querySelector('#score-chart .main-svg') !== null")
    screenshot(page, "run-detail-live")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#btn-stop")
    # A user's stop ends the run cancelled at once; the badge changes without a reload.
    page.wait_for_selector("#run-status[data-status=cancelled]", timeout=30_000)
    assert page.evaluate("window.__sameDocument") is True
    # The rows the script added (checked once the run is stopped, so no new agent reorders them
    # meanwhile) compare like with like, as the server renders them: the agent's Sharpe ratio
    # next to the baselines', its excess over 1/N and QQQ.
    from webapp.runs.models import Agent
    from webapp.runs.selectors import baselines

    live_id = page.get_attribute(ROWS, "data-agent-id")
    texts = baselines.agent_baselines(Agent.objects.get(pk=live_id))["texts"]
    assert "1/N" in texts["sharpe"] and texts["vs_equal_weight"]
    for col in ("untrained", "sharpe", "vs_equal_weight", "vs_qqq"):
        shown = page.text_content(f'{ROWS}[data-agent-id="{live_id}"] td[data-col="{col}"]').replace(
            " within noise", ""
        )
        assert shown == (texts[col] or "–"), col
    # the verdict above the table, kept current by the same events, reads the server's leaderboard
    from webapp.runs.selectors.payloads import run_snapshot

    verdict = run_snapshot(Agent.objects.get(pk=live_id).run)["verdict"]
    assert verdict["judged"] >= 1 and page.text_content("#leaderboard-verdict").strip() == verdict["text"]

    # Agent page and its bundle: the download's SHA-256 is the ETag the server announced.
    agent_id = page.get_attribute(ROWS, "data-agent-id")
    page.goto(f"/agents/{agent_id}/")
    screenshot(page, "agent")
    with page.expect_download() as info:
        page.click("#download-bundle")
    body = open(info.value.path(), "rb").read()
    head = page.request.get(f"/agents/{agent_id}/bundle/")
    assert head.headers["etag"] == f'"{hashlib.sha256(body).hexdigest()}"'
    assert int(head.headers["content-length"]) == len(body)

    page.goto("/runs/")
    assert page.locator("#runs-table tbody tr").count() == 1
    screenshot(page, "runs-list")
    # Full-page screenshots are taken after the clicks: one just before a click made Chromium
    # drop that click.
    for name, url in [
        ("run-new", "/runs/new/"),
        ("budgets", "/budgets/"),
        ("datasets", "/datasets/"),
        ("dataset-detail", f"/datasets/{dataset.id}/"),
        ("api-token", "/account/token/"),
    ]:
        page.goto(url)
        if name == "dataset-detail":
            page.wait_for_selector("#price-chart .main-svg")
        screenshot(page, name)


def test_a_bad_hyperparameter_shows_an_error_next_to_the_field(page, live_url, e2e_user, alice_data, login, screenshot):
    dataset, budget = alice_data
    login(page, e2e_user)
    _fill_run_form(page, dataset, budget, {**TINY_PPO, "learning_rate": -0.5})
    with page.expect_navigation(timeout=120_000):
        page.click("#create-run")
    error = page.locator('#field-hyperparameters [data-error-for="hyperparameters"]')
    assert "learning_rate" in error.text_content()
    error.scroll_into_view_if_needed()
    screenshot(page, "run-new-error")

"""The leaderboard's live rows (``static/js/run_live.js``) show each score with its standard
error and mark the agents within one SE of the best (the run's deliverable) as the
server-rendered rows do."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import make_world, submit_agent, trained_checkpoint  # noqa: F401, F811  (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_live_row_shows_score_plus_minus_se_and_the_one_se_badge(
    page,
    live_url,
    e2e_user,
    login,
    monkeypatch,
    trained_checkpoint,  # noqa: F811
):
    from webapp.runs.services import budgets

    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)  # this test is the worker
    se = float(trained_checkpoint["metrics"]["score_se"])
    world = make_world(e2e_user, "ada-live-se", checkpoint=trained_checkpoint, scores=(1.0,))
    login(page, e2e_user)
    page.goto(f"/runs/{world.run.id}/")
    page.wait_for_selector("#live-indicator[data-state=live]")

    far = submit_agent(world.run, trained_checkpoint, 1.0 - 3.0 * se)  # ranks while the page is open
    top = submit_agent(world.run, trained_checkpoint, 1.0 + 0.5 * se)
    for agent in (far, top):
        page.wait_for_selector(f'#leaderboard tbody tr[data-agent-id="{agent.id}"]', timeout=30_000)

    def score(agent) -> str:
        return page.text_content(f'#leaderboard tbody tr[data-agent-id="{agent.id}"] td[data-col="score"]').strip()

    assert score(top) == f"{1.0 + 0.5 * se:.3f} ± {se:.3f} one SE"
    assert score(far) == f"{1.0 - 3.0 * se:.3f} ± {se:.3f}", "three SEs below the best: no badge"

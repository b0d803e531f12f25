"""The leaderboard's live rows (``static/js/run_live.js``) follow the short-window rule as the
server-rendered ones do: an agent that ranks while the page is open, validated on 35 days, shows
its score, Sharpe figures and DSR as "n/a" with the reason in the cells' title, and so does the
run's best score."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import submit_agent
from tests.webapp.runs.test_short_window_and_counts import NOTE, make_short_world, short_checkpoint  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_live_row_of_a_short_window_shows_na_with_the_reason(
    page,
    live_url,
    e2e_user,
    login,
    screenshot,
    monkeypatch,
    short_checkpoint,  # noqa: F811
):
    from webapp.runs.services import budgets

    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)  # this test is the worker
    world = make_short_world(e2e_user, short_checkpoint, scores=(0.5,))
    login(page, e2e_user)
    page.goto(f"/runs/{world.run.id}/")
    page.wait_for_selector("#live-indicator[data-state=live]")

    agent = submit_agent(world.run, short_checkpoint, 2.0)  # ranks first while the page is open
    row = f'#leaderboard tbody tr[data-agent-id="{agent.id}"]'
    page.wait_for_selector(row, timeout=30_000)

    def cell(col: str) -> tuple[str, str | None]:
        selector = f'{row} td[data-col="{col}"]'
        return page.text_content(selector).strip(), page.get_attribute(selector, "title")

    assert cell("score") == ("n/a", NOTE)
    assert cell("sharpe") == (NOTE, NOTE)
    assert cell("untrained") == ("n/a", NOTE)
    assert cell("dsr") == ("n/a", NOTE)
    for col in ("vs_equal_weight", "vs_qqq"):
        text, title = cell(col)
        assert text.endswith("· Sharpe n/a") and title == NOTE, text
    page.wait_for_function("document.querySelector('#best-score').textContent === 'n/a'", timeout=15_000)
    assert page.get_attribute("#best-score", "title") == NOTE
    screenshot(page, "run-detail-short-window")

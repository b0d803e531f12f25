"""The all-agents page in Chromium: reached from the run page, sortable table, the lineage
tree indenting each child under its parent, and the score-vs-env-steps scatter by lineage."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import make_world, trained_checkpoint  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_all_agents_lineage_tree_and_scatter(
    page,
    live_url,
    e2e_user,
    login,
    screenshot,
    monkeypatch,
    trained_checkpoint,  # noqa: F811
):
    from webapp.runs.models import Agent
    from webapp.runs.services import budgets

    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)  # no worker takes them
    world = make_world(e2e_user, "lineage", checkpoint=trained_checkpoint, scores=[0.5, 1.5, 1.0, 0.2, 0.9, 1.1])
    login(page, e2e_user)
    page.goto(f"/runs/{world.run.id}/")
    page.click("#all-agents-link")
    page.wait_for_selector("#agents-table")
    rows = page.locator("#agents-table tbody tr")
    assert rows.count() == 6  # every agent, not the top 3
    assert page.text_content("#agents-table tbody tr:first-child td[data-col=score]") == "1.500"
    page.click("#agents-table th[data-col=score] a")  # toggles to ascending
    page.wait_for_url("**sort=score**")
    assert page.text_content("#agents-table tbody tr:first-child td[data-col=score]") == "0.200"

    child = Agent.objects.filter(run=world.run, parent__isnull=False).first()
    assert child is not None
    parent_box = page.locator(f'#lineage-tree li[data-agent-id="{child.parent_id}"]').evaluate(
        "el => parseFloat(getComputedStyle(el).paddingLeft)"
    )
    child_box = page.locator(f'#lineage-tree li[data-agent-id="{child.id}"]').evaluate(
        "el => parseFloat(getComputedStyle(el).paddingLeft)"
    )
    assert child_box > parent_box, "a child is indented under its parent"
    assert f"{child.total_env_steps:,}" in page.text_content(f'#lineage-tree li[data-agent-id="{child.id}"]')

    page.wait_for_function("(document.getElementById('scatter-chart').data || []).length >= 1")
    n = page.evaluate("document.getElementById('scatter-chart').data.reduce((s, t) => s + t.x.length, 0)")
    assert n == 6
    lines = page.evaluate("document.getElementById('scatter-chart').data.map(t => t.name)")
    assert set(lines) == {f"line of #{a.lineage_id}" for a in Agent.objects.filter(run=world.run)}
    screenshot(page, "run-agents-lineage")

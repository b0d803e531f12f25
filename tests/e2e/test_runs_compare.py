"""Comparing runs in Chromium: tick two runs on the runs list, see their best-score curves,
the agents' hyperparameters as parallel coordinates and only the settings that differ."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import make_world, trained_checkpoint  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_two_runs_compared_from_the_runs_list(
    page,
    live_url,
    e2e_user,
    login,
    screenshot,
    monkeypatch,
    trained_checkpoint,  # noqa: F811
):
    from webapp.runs import services

    monkeypatch.setattr(services.budgets, "send_generation_tasks", lambda ids: None)
    first = make_world(e2e_user, "first", checkpoint=trained_checkpoint, scores=[0.5, 1.2, 0.8])
    second = make_world(e2e_user, "second", checkpoint=trained_checkpoint, scores=[0.3, 0.9])
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, e2e_user)
    page.goto("/runs/")
    page.check(f'input[name=ids][value="{first.run.id}"]')
    page.check(f'input[name=ids][value="{second.run.id}"]')
    page.click("#compare-runs")
    page.wait_for_function("(document.getElementById('runs-score-chart').data || []).length === 2")
    page.wait_for_function("(document.getElementById('runs-parallel-chart').data || []).length === 1")
    best = page.evaluate(
        "Object.fromEntries(document.getElementById('runs-score-chart').data.map(t => [t.name, t.y[t.y.length - 1]]))"
    )
    assert best == {first.run.name: 1.2, second.run.name: 0.9}
    assert page.evaluate("document.getElementById('runs-parallel-chart').data[0].dimensions.length") >= 1
    assert page.is_hidden('#runs-diff tr[data-key="algorithm"]'), "equal settings hidden by default"
    assert page.is_visible('#runs-diff tr[data-key="budget"]')
    page.uncheck("#diff-only")
    assert page.is_visible('#runs-diff tr[data-key="algorithm"]')
    page.check("#diff-only")
    assert errors == []
    screenshot(page, "runs-compare")

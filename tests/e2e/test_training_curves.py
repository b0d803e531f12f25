"""Training curves on the run page (live, per lineage or pod, smoothing, log x, hover with the
agent) and on the agent page (the agent's curve and its ancestors')."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import create_dataset, create_task, submit_agent, trained_checkpoint  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _traces(page) -> list[dict]:
    return page.evaluate(
        "Array.from(document.getElementById('metrics-chart').data || [])"
        ".map(t => ({name: t.name, n: t.x.filter(v => v !== null).length, text: t.text, y: t.y}))"
    )


def test_training_curves_grow_live_and_follow_lineage_pod_smoothing_and_log_x(
    page,
    live_url,
    e2e_user,
    login,
    screenshot,
    monkeypatch,
    trained_checkpoint,  # noqa: F811
):
    from webapp.runs import services
    from webapp.runs.models import Agent, Generation
    from webapp.runs.services import budgets, telemetry

    monkeypatch.setattr(budgets, "send_generation_tasks", lambda ids: None)  # this test is the worker
    task = create_task(e2e_user, create_dataset(e2e_user))
    budget = services.budget_create(actor=e2e_user, name="curves", max_concurrent_pods=2, env_step_cap=10**9)
    run = services.run_start(
        run=services.run_create(
            owner=e2e_user,
            task=task,
            budget=budget,
            num_pods=2,
            generation_steps=256,
            mutation={"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 1.25]},
        )
    )
    first = submit_agent(run, trained_checkpoint, 0.8)  # pod 0, a fresh line with its curve

    login(page, e2e_user)
    page.goto(f"/runs/{run.id}/")
    page.wait_for_selector("#live-indicator[data-state=live]")
    page.wait_for_function("(document.getElementById('metrics-chart').data || []).length === 1")
    traces = _traces(page)
    assert traces[0]["name"] == f"line of #{first.id}"
    assert traces[0]["n"] == len(trained_checkpoint["telemetry"])
    assert f"agent #{first.id}" in traces[0]["text"][0]  # hover names the agent
    assert page.is_hidden("#metrics-empty")

    # one line per pod; pod 1 trains: its points arrive live over the WebSocket, before any agent exists
    page.select_option("#metric-group", "pod")
    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    claim = services.generation_claim(generation_id=gen.id, worker="browser-test")
    for steps in (64, 128, 192):
        telemetry.point_record(
            run_id=run.id,
            generation_id=gen.id,
            attempt=claim.attempt,
            pod_index=claim.pod_index,
            point={
                "env_steps": steps,
                "generation_env_steps": steps,
                "total_env_steps": steps,
                "episode_return_mean": steps / 64.0,
            },
        )
    page.wait_for_function(
        "(document.getElementById('metrics-chart').data || []).some(t => t.name === 'pod 1' && t.x.length === 3)"
    )
    live = [t for t in _traces(page) if t["name"] == "pod 1"][0]
    assert live["y"] == [1.0, 2.0, 3.0]
    assert "training (pod" in live["text"][0]

    # smoothing averages the live curve (debiased EMA: starts at the first value)
    page.fill("#metric-smoothing", "0.9")
    page.dispatch_event("#metric-smoothing", "input")
    page.wait_for_function(
        "(document.getElementById('metrics-chart').data || []).some(t => t.y.length === 3 && t.y[2] < 2.9 && t.y[2] > 2.0)"
    )
    page.fill("#metric-smoothing", "0")
    page.dispatch_event("#metric-smoothing", "input")

    # another metric; log x
    assert sorted(t["name"] for t in _traces(page)) == ["pod 0", "pod 1"]
    page.select_option("#metric-select", "entropy")
    page.wait_for_function("document.getElementById('metrics-chart').layout.yaxis.title.text === 'Entropy'")
    page.check("#metric-logx")
    page.wait_for_function("document.getElementById('metrics-chart').layout.xaxis.type === 'log'")
    screenshot(page, "run-training-curves")

    # the CSV link downloads the same points
    csv_text = page.evaluate("fetch(document.getElementById('metrics-csv').href).then(r => r.text())")
    assert csv_text.splitlines()[0].startswith("generation_id,pod,number,agent_id")
    assert len(csv_text.splitlines()) == 1 + len(trained_checkpoint["telemetry"]) + 3

    # a child continues its parent's line: the agent page shows both curves, parent first
    child = submit_agent(run, trained_checkpoint, 0.9)
    while child is not None and child.parent_id is None:
        child = submit_agent(run, trained_checkpoint, 0.9)
    assert child is not None and child.parent_id is not None
    child = Agent.objects.get(pk=child.pk)
    page.goto(f"/agents/{child.id}/")
    assert "generation 2 of its line" in page.text_content("#agent-depth")
    page.wait_for_function("(document.getElementById('metrics-chart').data || []).length === 2")
    names = [t["name"] for t in _traces(page)]
    assert names == [f"agent #{child.parent_id}", f"agent #{child.id}"]
    xs = page.evaluate("document.getElementById('metrics-chart').data.map(t => t.x.filter(v => v !== null))")
    assert min(xs[1]) > max(xs[0]), "the child's curve starts where the parent's line ended"
    screenshot(page, "agent-training-curves")

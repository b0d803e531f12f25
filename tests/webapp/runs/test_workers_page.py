"""Run states seen from outside a run: why a pod waits, and the staff workers page."""

from __future__ import annotations

import pytest

from webapp.runs import services
from webapp.runs.models import Generation, Pod
from webapp.runs.selectors.payloads import pod_payload

pytestmark = pytest.mark.django_db


def test_a_queued_pod_says_it_waits_for_a_budget_slot_or_a_worker_or_a_resume(make_budget, make_run):
    run = services.run_start(run=make_run(make_budget(max_concurrent_pods=1), num_pods=2))
    gen = Generation.objects.filter(run=run).order_by("id").first()
    services.generation_claim(generation_id=gen.id, worker="w@test")
    waiting = Pod.objects.get(run=run, index=1)
    assert waiting.state == Pod.State.QUEUED
    reason = pod_payload(waiting)["queued_reason"]
    assert reason.startswith("waiting for a budget slot: 1 of 1 pods") and run.budget.name in reason

    other = services.run_start(run=make_run(make_budget(max_concurrent_pods=4), num_pods=1))
    pod = Pod.objects.get(run=other)
    assert pod_payload(pod)["queued_reason"] == "waiting for a free worker on the gpu queue"
    services.run_pause(run=other)
    assert pod_payload(Pod.objects.get(run=other))["queued_reason"] == "run paused: resume it to train"
    running = Pod.objects.get(run=run, index=0)
    assert pod_payload(running)["queued_reason"] == ""


def test_only_staff_see_the_workers_page(client, user, staff):
    client.force_login(user)
    assert client.get("/workers/").status_code == 404
    assert client.get("/workers/log/1/").status_code == 404
    client.force_login(staff)
    assert client.get("/workers/").status_code == 200


def test_the_workers_page_lists_each_worker_with_its_generation_and_failures_with_their_reason(
    client, staff, make_budget, make_run
):
    run = services.run_start(run=make_run(make_budget(max_concurrent_pods=2), num_pods=2))
    first, second = Generation.objects.filter(run=run).order_by("id")
    services.generation_claim(generation_id=first.id, worker="celery@gpu0")
    claim = services.generation_claim(generation_id=second.id, worker="celery@gpu1")
    services.generation_fail(claim=claim, error="RuntimeError: CUDA out of memory", retry=False)
    client.force_login(staff)
    html = client.get("/workers/").content.decode()
    workers = html.split('id="workers-table"', 1)[1].split("</table>", 1)[0]
    assert 'data-worker="celery@gpu0"' in workers and "not answering" in workers  # no real worker runs here
    assert f"pod 0 generation {first.number}" in workers
    failed = html.split('id="failed-table"', 1)[1].split("</table>", 1)[0]
    assert "RuntimeError: CUDA out of memory" in failed and f"/workers/log/{run.id}/?pod=1" in failed


def test_the_log_page_shows_the_lines_of_one_run_and_pod(client, staff, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "worker-gpu.log").write_text(
        "t level=INFO logger=x run=7 pod=1 generation 3 done\n"
        "t level=INFO logger=x run=7 pod=0 generation 2 done\n"
        "t level=INFO logger=x run=77 pod=1 other run\n"
    )
    client.force_login(staff)
    html = client.get("/workers/log/7/?pod=1").content.decode()
    assert "generation 3 done" in html and "generation 2 done" not in html and "other run" not in html
    for bad in ("²", "abc", "-1", "1" * 30):  # "²".isdigit() is true, yet int("²") raised: a 500
        response = client.get("/workers/log/7/", {"pod": bad})
        assert response.status_code == 400
        assert "pod: expected a pod index (a whole number)" in response.content.decode()


def test_healthz_tells_an_anonymous_remote_caller_only_up_or_down(client, user):
    remote = client.get("/healthz", REMOTE_ADDR="203.0.113.5")
    assert set(remote.json()) == {"ok", "status"} and remote.json()["status"] in ("up", "down")
    proxied = client.get("/healthz", HTTP_X_FORWARDED_FOR="203.0.113.5")  # via a proxy on this host
    assert set(proxied.json()) == {"ok", "status"}
    client.force_login(user)
    assert "checks" in client.get("/healthz", REMOTE_ADDR="203.0.113.5").json()


def test_the_new_run_estimate_uses_the_speed_measured_on_done_generations(world, user):
    import datetime as dt

    from webapp.runs.selectors import estimate

    assert estimate.measured_speed(algorithm="sac") is None
    done = Generation.objects.filter(run=world.run, status=Generation.Status.DONE)
    for gen in done:  # 256 env steps in 2 s each
        Generation.objects.filter(pk=gen.pk).update(finished_at=gen.started_at + dt.timedelta(seconds=2))
    speed = estimate.measured_speed(algorithm="ppo")
    assert speed["generations"] == done.count() and speed["steps_per_s"] == pytest.approx(128.0)
    room = estimate.budget_room(world.budget)
    assert room["env_steps_left"] == world.budget.env_step_cap - world.budget.env_steps_used
    assert room["device_seconds_left"] is None and room["max_concurrent_pods"] == 8


def test_the_new_run_estimate_counts_the_training_workers_alive_as_healthz_reads_them(client, user, settings):
    """Pods at once are capped by the training workers alive: the workers' heartbeats in Redis
    (the source /healthz reads); a worker of the cpu queue only does not train."""
    import json

    import redis

    from webapp.core.health import check_workers
    from webapp.core.workers import HEARTBEAT_KEY
    from webapp.runs.selectors import estimate

    conn = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    names = ["celery@srvfix-gpu", "celery@srvfix-cpu"]
    try:
        before = estimate.training_workers()
        for name, queues in zip(names, (["gpu"], ["cpu"])):
            beat = {"name": name, "queues": queues, "device": "cpu", "gpu": None, "pid": 1, "at": 0}
            conn.set(HEARTBEAT_KEY + name, json.dumps(beat), ex=30)
        alive = {w["name"] for w in check_workers()["workers"]}
        assert set(names) <= alive  # the same heartbeats /healthz lists
        assert estimate.training_workers() == before + 1  # only the gpu-queue worker trains
        client.force_login(user)
        html = client.get("/runs/new/").content.decode()
        inputs = json.loads(html.split('id="estimate-inputs"', 1)[1].split(">", 1)[1].split("</script>", 1)[0])
        assert inputs["training_workers"] == before + 1
    finally:
        conn.delete(*(HEARTBEAT_KEY + n for n in names))
    assert estimate.training_workers() == before

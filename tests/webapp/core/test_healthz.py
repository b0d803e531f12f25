"""``/healthz`` in-process, and what each worker reports about its device."""

from __future__ import annotations

import pytest

from tests.harness import free_port
from webapp import engine
from webapp.core.workers import device_label, physical_gpus, worker_device


@pytest.fixture
def redis_down(settings):
    """Point the app at a port where no Redis listens."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.django_db
def test_healthz_is_503_and_names_redis_when_redis_is_down(client, redis_down):
    response = client.get("/healthz")

    assert response.status_code == 503
    report = response.json()
    assert report["ok"] is False
    assert report["down"][0] == "redis"
    assert report["checks"]["database"]["ok"] is True
    assert report["checks"]["workers"] == {"ok": False, "error": "Redis is down"}


@pytest.mark.django_db
def test_login_page_still_renders_when_redis_is_down(client, redis_down):
    response = client.get("/accounts/login/")

    assert response.status_code == 200
    assert b"Log in to Paddock" in response.content


def test_healthz_answers_only_get(client):
    assert client.post("/healthz").status_code == 405


@pytest.mark.parametrize(
    ("environ", "device", "gpu"),
    [
        # pinned to physical GPU 3, the worker's process sees it as cuda:0
        ({"PADDOCK_WORKER_DEVICE": "cuda", "CUDA_VISIBLE_DEVICES": "3"}, "cuda:0", "3"),
        ({"CUDA_VISIBLE_DEVICES": "1"}, "cuda:0", "1"),
        ({"CUDA_VISIBLE_DEVICES": "GPU-5c1e"}, "cuda:0", "GPU-5c1e"),
        ({"PADDOCK_WORKER_DEVICE": "cuda:1"}, "cuda:1", None),  # unpinned: an ordinal of all GPUs
        ({"PADDOCK_WORKER_DEVICE": "cuda", "PADDOCK_WORKER_GPU": "2"}, "cuda:0", "2"),  # docker device_ids
        ({"CUDA_VISIBLE_DEVICES": ""}, "cpu", ""),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, "cpu", ""),
        ({}, "auto", None),
    ],
)
def test_worker_reports_the_ordinal_it_uses_and_the_physical_gpu_apart(environ, device, gpu):
    assert worker_device(environ) == device
    assert physical_gpus(environ) == gpu


def test_a_generation_records_the_ordinal_and_the_physical_gpu():
    assert device_label("cuda:0", "3") == "cuda:0 (GPU 3)"
    assert device_label("cuda:1", None) == "cuda:1"
    assert device_label("cpu", "") == "cpu"


@pytest.mark.parametrize(
    ("run", "worker", "device"),
    [
        ("cpu", "cuda:0", "cpu"),
        ("auto", "cpu", "cpu"),
        ("cpu", "auto", "cpu"),
    ],
)
def test_the_worker_resolves_a_runs_kind_of_device_to_its_own(run, worker, device):
    assert engine.resolve_device(run, worker) == device


@pytest.mark.parametrize("run", ["cuda", "cuda:1"])  # cuda:1: a row stored before runs lost the ordinal
def test_a_cuda_run_on_a_cpu_worker_fails_naming_the_device(run):
    with pytest.raises(engine.TrainerError) as info:
        engine.resolve_device(run, "cpu")
    assert info.value.details == {"field": "device"}


@pytest.mark.django_db
def test_healthz_require_lets_a_probe_ignore_what_it_does_not_need(client, redis_down):
    # a web server's readiness: the database answers, so the pages can be served
    ready = client.get("/healthz?require=database")
    # liveness: the process answers at all
    alive = client.get("/healthz?require=")
    full = client.get("/healthz")

    assert (ready.status_code, alive.status_code, full.status_code) == (200, 200, 503)
    assert ready.json()["checks"]["redis"]["ok"] is False  # still reported, just not required
    assert client.get("/healthz?require=redis").status_code == 503


def test_healthz_require_names_an_unknown_check(client):
    response = client.get("/healthz?require=database,gpus")

    assert response.status_code == 400
    assert response.json()["fields"] == {
        "require": "unknown check gpus; expected some of database, redis, channel_layer, workers"
    }


def test_worker_alive_follows_the_workers_heartbeat_in_redis(settings):
    import redis
    from django.core.management import CommandError, call_command

    from webapp.core.workers import HEARTBEAT_KEY

    node = f"probe-test-{free_port()}@host"
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.set(HEARTBEAT_KEY + node, "{}", ex=10)
        call_command("worker_alive", node)  # exit 0
        client.delete(HEARTBEAT_KEY + node)
        with pytest.raises(CommandError, match="no heartbeat") as failed:
            call_command("worker_alive", node)
        assert failed.value.returncode == 1
    finally:
        client.delete(HEARTBEAT_KEY + node)
        client.close()


def test_worker_alive_does_not_fail_a_worker_for_a_redis_outage(redis_down, capsys):
    from django.core.management import call_command

    call_command("worker_alive", "gpu@nowhere")  # no exception: exit 0

    assert "Redis does not answer" in capsys.readouterr().err

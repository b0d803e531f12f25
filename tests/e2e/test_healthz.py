"""``/healthz`` served by the real ASGI server, with a real Celery worker or with Redis down."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.e2e.conftest import start_daphne
from tests.harness import free_port, http_status, stop_process

pytestmark = pytest.mark.django_db(transaction=True)


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_healthz_lists_the_running_worker_with_its_queues_and_device(live_url, celery_worker):
    status, report = get_json(live_url + "/healthz")

    assert status == 200, report
    assert report["ok"] is True and report["down"] == []
    assert report["checks"]["database"]["ok"] and report["checks"]["channel_layer"]["ok"]
    worker = next(w for w in report["checks"]["workers"]["workers"] if w["name"] == celery_worker)
    assert worker["queues"] == ["cpu", "gpu"]
    assert worker["device"] == "cpu"


def test_with_redis_down_healthz_names_redis_and_pages_still_render(e2e_env):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    proc, base = start_daphne({**e2e_env, "REDIS_URL": closed}, name="daphne-no-redis")
    try:
        status, report = get_json(base + "/healthz")
        login_status = http_status(base + "/accounts/login/")
    finally:
        stop_process(proc)

    assert status == 503
    assert "redis" in report["down"]
    assert report["checks"]["redis"]["ok"] is False
    assert "Error" in report["checks"]["redis"]["error"]
    assert report["checks"]["database"]["ok"] is True
    assert login_status == 200

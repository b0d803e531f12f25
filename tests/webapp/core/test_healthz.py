"""``/healthz`` in-process, and what each worker reports about its device."""

from __future__ import annotations

import pytest

from tests.harness import free_port
from webapp.core.workers import worker_device


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
    ("environ", "device"),
    [
        ({"PADDOCK_WORKER_DEVICE": "cuda:3", "CUDA_VISIBLE_DEVICES": "3"}, "cuda:3"),
        ({"CUDA_VISIBLE_DEVICES": "1"}, "cuda:1"),
        ({"CUDA_VISIBLE_DEVICES": ""}, "cpu"),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, "cpu"),
        ({}, "auto"),
    ],
)
def test_worker_reports_the_device_it_was_pinned_to(environ, device):
    assert worker_device(environ) == device

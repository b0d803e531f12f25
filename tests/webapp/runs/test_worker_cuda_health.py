"""Workers that notice a broken GPU (issue 27), with real Celery workers and Redis.

* A worker started for CUDA (``PADDOCK_WORKER_DEVICE=cuda``) runs a test kernel first; on this
  CPU-only machine (as after a driver/wheel mismatch) it fails, and the worker refuses the
  ``gpu`` queue, says why in its log and in its heartbeat, which ``/healthz`` shows.
* A CUDA error that breaks the process's CUDA context ("sticky": illegal memory access,
  device-side assert) ends that pool process; Celery starts a fresh one, which trains the
  generation's next attempt. The error is simulated (``PADDOCK_TEST_FAULT_FILE``): the
  generation raises the RuntimeError PyTorch raises for ``cudaErrorIllegalAddress``.
"""

from __future__ import annotations

import os
import time

import pytest
import torch

from tests.harness import Workers
from tests.webapp.runs.conftest import worker_env
from webapp.core.workers import read_heartbeats
from webapp.runs import services
from webapp.runs.models import Generation, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {seconds:.0f} s"
        time.sleep(0.25)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where CUDA does not work")
def test_a_cuda_worker_whose_test_kernel_fails_refuses_the_gpu_queue_and_says_why(isolated_redis, data_dir, tmp_path):
    from django.test import Client

    pool = Workers(worker_env(isolated_redis, data_dir, PADDOCK_WORKER_DEVICE="cuda"), tmp_path)
    node = pool.start("brokengpu")
    try:
        beat = _wait(
            lambda: next(
                (b for b in read_heartbeats(isolated_redis) if b.get("name") == node and b.get("error")), None
            ),
            90,
            "the worker's heartbeat named its device problem",
        )
        assert "cuda:0 does not work in this worker" in beat["error"] and "CUDA is not available" in beat["error"]
        _wait(lambda: "gpu" not in next(b for b in read_heartbeats(isolated_redis) if b["name"] == node)["queues"], 30,
              "the worker stopped consuming the gpu queue")  # fmt: skip
        assert "cpu" in next(b for b in read_heartbeats(isolated_redis) if b["name"] == node)["queues"]
        health = Client().get("/healthz").json()["checks"]["workers"]
        mine = next(w for w in health["workers"] if w["name"] == node)
        assert "CUDA is not available" in mine["error"] and "gpu" not in mine["queues"]
        if not any("gpu" in w["queues"] for w in health["workers"]):  # no other session's worker on this Redis db
            assert health["ok"] is False and "refused" in health["error"] and "CUDA is not available" in health["error"]
        log = (tmp_path / "brokengpu.log").read_text()
        assert "will not take generations" in log and "refusing the gpu queue" in log
    finally:
        pool.stop_all()


def test_a_sticky_cuda_error_ends_the_pool_process_and_the_next_attempt_runs_in_a_fresh_one(
    isolated_redis, data_dir, tmp_path, make_budget, make_run
):
    fault = tmp_path / "fault"
    fault.write_text("sticky-cuda")
    pool = Workers(worker_env(isolated_redis, data_dir, PADDOCK_WORKER_DEVICE="cpu",
                              PADDOCK_TEST_FAULT_FILE=str(fault)), tmp_path)  # fmt: skip
    pool.start("poisoned")
    try:
        run = services.run_start(
            run=make_run(make_budget(env_step_cap=256), num_pods=1, generation_steps=256, device="auto")
        )
        poisoned_pid = int(_wait(lambda: fault.read_text().strip().isdigit() and fault.read_text(), 120,
                                 "the first attempt hit the injected CUDA error"))  # fmt: skip

        def gone() -> bool:
            try:
                os.kill(poisoned_pid, 0)
            except ProcessLookupError:
                return True
            return False

        _wait(gone, 60, "the poisoned pool process ended")
        _wait(lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk) == Run.Status.FINISHED, 180,
              "the run finished on a fresh pool process")  # fmt: skip
        generation = Generation.objects.get(run=run)
        assert generation.status == Generation.Status.DONE and generation.attempt == 2
        log = (tmp_path / "poisoned.log").read_text()
        assert f"ending pool process {poisoned_pid}" in log and "illegal memory access" in log
    finally:
        pool.stop_all()

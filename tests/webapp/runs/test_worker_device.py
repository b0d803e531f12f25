"""A generation trains on the device of the Celery worker that claims it.

On a CPU-only machine the worker trains on the CPU; with CUDA (``benchmarks/gpu_check.sh``) the
worker is pinned like a docker-compose GPU worker (``PADDOCK_WORKER_DEVICE=cuda``, physical
GPU named in ``PADDOCK_WORKER_GPU``) and the generation must record ``cuda:0 (GPU <n>)``.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.harness import Workers, log_tail, wait_for
from tests.webapp.runs.conftest import worker_env
from webapp.runs import services
from webapp.runs.models import Agent, Generation, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ON_GPU = torch.cuda.is_available()
PHYSICAL_GPU = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"


@pytest.fixture
def worker(isolated_redis, data_dir, tmp_path):
    env = worker_env(
        isolated_redis,
        data_dir,
        PADDOCK_WORKER_DEVICE="cuda" if ON_GPU else "cpu",
        PADDOCK_WORKER_GPU=PHYSICAL_GPU if ON_GPU else "",
    )
    pool = Workers(env, tmp_path)
    pool.start("device")
    yield pool
    pool.stop_all()


def test_a_generation_records_the_workers_device_ordinal_and_physical_gpu(worker, make_budget, make_run):
    run = services.run_start(
        run=make_run(make_budget(env_step_cap=256), num_pods=1, generation_steps=256, device="auto")
    )

    def pending() -> str:
        status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
        generations = list(Generation.objects.filter(run=run).values_list("id", "status", "attempt", "worker"))
        proc = next(iter(worker.procs.values()), None)
        return f"run {status}, generations {generations}; worker log:\n{log_tail(proc) if proc else '(no worker)'}"

    wait_for(
        lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk) == Run.Status.FINISHED,
        timeout=180,
        what="the run to finish",
        pending=pending,
        step=0.5,
    )
    generation = Generation.objects.get(run=run)
    expected = f"cuda:0 (GPU {PHYSICAL_GPU})" if ON_GPU else "cpu"
    assert generation.device == expected
    assert Agent.objects.filter(run=run).count() == 1

"""Latency of policy serving: HTTP endpoints next to the in-process ONNX floor.

One PPO agent (default 64x64 networks) is trained for one short generation on all Dow-30 tickers
(obs_dim 291) and submitted through the real services. Then, for one observation and for a batch
of 256, each measured ``--requests`` times one after the other by one client (HTTP keep-alive):

* **floor**: ``trainer.serving.ServedPolicy.act`` in this process (onnxruntime, one thread);
* **trainer serve**: ``python -m trainer serve BUNDLE.zip`` in a subprocess, over TCP;
* **Django**: ``POST /api/agents/{id}/act`` on a real daphne server in a subprocess (token
  authentication, owner check, Redis rate limit, call counting), over TCP.

HTTP time includes JSON encoding on the client and decoding of the answer. The table gives p50,
p99 and requests/s (1 / mean latency) and the HTTP overhead (p50 minus the floor's p50); the
target is an overhead under 5 ms for one observation. The rate limit is raised for the run.

Usage (a scratch database and Redis database; each run adds a user)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/paddock_bench REDIS_URL=redis://127.0.0.1:6379/11 \\
        DEBUG=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/serving.py [--requests 500]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("PADDOCK_VAR_DIR", str(ROOT / "var" / "bench"))

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.core.management import call_command  # noqa: E402

DOW30 = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
USERNAME = f"serving-bench-{int(time.time())}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def setup_agent():
    """A user, a Dow-30 task, a started run and one really trained agent; returns (user, agent)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from webapp import engine
    from webapp.market import services as market_services
    from webapp.runs import services
    from webapp.runs.models import Generation

    user = get_user_model().objects.create_user(username=USERNAME, password="bench-password-123")
    dataset = market_services.dataset_create_from_files(owner=user, name="dow30", paths=[DOW30], tickers=None)
    splits = {"train": ["2015-01-01", "2019-12-31"], "validation": ["2020-01-01", "2020-12-31"],
              "test": ["2021-01-01", "2022-11-15"]}  # fmt: skip
    task = services.task_create(
        owner=user, dataset=dataset, name="serving bench", tickers=None, splits=splits,
        hyperparameters={"num_envs": 16, "rollout_steps": 16},
    )  # fmt: skip
    budget = services.budget_create(actor=user, name="serving bench", max_concurrent_pods=8)
    run = services.run_create(owner=user, task=task, budget=budget, num_pods=1, generation_steps=256)
    services.run_start(run=run)
    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    claim = services.generation_claim(generation_id=gen.id, worker="bench")
    out = Path(tempfile.mkdtemp(prefix="serving-bench-")) / "agent.pt"
    result = engine.train_generation(
        claim.task, env_steps=256, out_path=str(out), parent_path=None, hyperparameters=claim.hyperparameters,
        seed=0, device="cpu", data_dir=str(settings.PADDOCK_DATA_DIR), cache_dir=str(settings.PADDOCK_CACHE_DIR),
    )  # fmt: skip
    agent = services.generation_complete(claim=claim, result=result, local_checkpoint=str(out))
    return user, agent


def time_calls(call, requests: int) -> list[float]:
    for _ in range(min(20, requests)):  # warm-up: sessions, caches, connections
        call()
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def http_caller(port: int, path: str, body: dict, headers: dict):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call():
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:300]!r}")
        return json.loads(data)

    return call


def wait_for(port: int, path: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="timed requests per row (default 500)")
    args = parser.parse_args()

    from rest_framework.authtoken.models import Token

    from tests.harness import free_port
    from trainer.serving.policy import ServedPolicy
    from webapp.runs import services

    call_command("migrate", verbosity=0)
    user, agent = setup_agent()
    from django.core.files.storage import default_storage

    bundle = Path(default_storage.path(services.agent_bundle(agent).name))
    policy = ServedPolicy.load(bundle)
    token = Token.objects.create(user=user).key
    rng = np.random.default_rng(0)
    bodies = {n: rng.normal(size=(n, policy.obs_dim)).astype(np.float32) for n in (1, 256)}
    print(f"agent {agent.id}: obs_dim {policy.obs_dim}, action_dim {policy.action_dim}, {args.requests} requests a row")

    env = {**os.environ, "PADDOCK_SERVE_RATE_LIMIT": "1000000000", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    servers = {}
    log = open(ROOT / "var" / "bench-serving.log", "wb")  # noqa: SIM115 - closed below
    try:
        port = free_port()
        servers["trainer serve"] = (port, "/act", {}, subprocess.Popen(
            [sys.executable, "-m", "trainer", "serve", str(bundle), "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip
        port = free_port()
        servers["Django (daphne)"] = (port, f"/api/agents/{agent.id}/act", {"Authorization": f"Token {token}"},
                                      subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.config.asgi:application"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        ))  # fmt: skip
        for port, _, _, proc in servers.values():
            wait_for(port, "/healthz", proc)

        rows = []
        for n, obs in bodies.items():
            floor = time_calls(lambda obs=obs: policy.act(obs), args.requests)
            rows.append((n, "ONNX in-process (floor)", floor, None))
            body = {"observations": obs.tolist()}
            for name, (port, path, headers, _) in servers.items():
                call = http_caller(port, path, body, headers)
                check = np.array(call()["actions"], dtype=np.float32)
                np.testing.assert_allclose(check, policy.act(obs), atol=1e-5)
                rows.append((n, name, time_calls(call, args.requests), statistics.median(floor)))
    finally:
        for _, _, _, proc in servers.values():
            proc.terminate()
            proc.wait(10)
        log.close()

    print("\n| observations | path | p50 ms | p99 ms | requests/s | HTTP overhead p50 ms |")
    print("|---:|---|---:|---:|---:|---:|")
    verdict = []
    for n, name, times, floor_p50 in rows:
        p50, p99 = statistics.median(times), percentile(times, 99)
        overhead = "" if floor_p50 is None else f"{p50 - floor_p50:.2f}"
        print(f"| {n} | {name} | {p50:.3f} | {p99:.3f} | {1000.0 / statistics.fmean(times):,.0f} | {overhead} |")
        if n == 1 and floor_p50 is not None:
            verdict.append(f"{name}: {p50 - floor_p50:.2f} ms ({'met' if p50 - floor_p50 < 5 else 'MISSED'})")
    print("\ntarget: HTTP overhead p50 < 5 ms for one observation; " + "; ".join(verdict))
    print(f"load average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

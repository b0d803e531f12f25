"""Dispatch overhead of the generation protocol, with 1 and then 2 real Celery workers.

Generations here train for ~0 env steps (one step of one env) on real Dow-30 data and are
scored on a short validation window, so what is measured is the orchestration around them:
claim (budget row lock, parent selection), checkpoint storage, the one-transaction result
(agent, leaderboard, usage, next generation), events, and the Redis round trip to the worker.

Printed per worker count:
    gap p50/p99: time from one generation's ``finished_at`` to the ``started_at`` of the same
        pod's next generation (target p50 < 100 ms);
    generations/s: finished generations over the wall time from first start to last finish.

Usage: ``.venv/bin/python benchmarks/dispatch.py [--generations 60]``. It uses its own SQLite
database under a temporary folder and Redis database 14 (flushed), and never touches var/.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DATA_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


def _setup_env(var_dir: Path, redis_url: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DEBUG": "1",
        "PADDOCK_VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{var_dir / 'bench.sqlite3'}",
        "REDIS_URL": redis_url,
        "PADDOCK_TORCH_THREADS": "1",
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings",
    }
    os.environ.update(env)
    return env


def _start_worker(env: dict[str, str], name: str, log_dir: Path) -> subprocess.Popen:
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the worker
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp.config.celery", "worker", "-Q", "gpu,cpu", "-c", "1"]
        + ["--pool=prefork", "-n", f"{name}@bench", "--without-gossip", "--without-mingle", "--without-heartbeat"]
        + ["-l", "WARNING"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _measure(n_workers: int, generations: int, env: dict[str, str], log_dir: Path, owner, task) -> dict[str, float]:
    from webapp.runs import services
    from webapp.runs.models import Generation, Run

    pods = n_workers  # one pod per worker: a gap is pure dispatch, not waiting for a busy worker
    budget = services.budget_create(
        actor=owner, name=f"bench-{n_workers}", max_concurrent_pods=pods, env_step_cap=generations
    )
    run = services.run_create(
        owner=owner,
        task=task,
        budget=budget,
        num_pods=pods,
        generation_steps=1,
        leaderboard_size=5,
        fresh_probability=0.5,
        device="cpu",
    )
    procs = [_start_worker(env, f"w{n_workers}-{i}", log_dir) for i in range(n_workers)]
    try:
        # Warm-up run: workers import torch and load the data once.
        warm_budget = services.budget_create(
            actor=owner, name=f"warm-{n_workers}", max_concurrent_pods=pods, env_step_cap=pods
        )
        warm = services.run_create(
            owner=owner, task=task, budget=warm_budget, num_pods=pods, generation_steps=1, device="cpu"
        )
        services.run_start(run=warm)
        _wait_finished(warm.pk, timeout=180)
        services.run_start(run=run)
        _wait_finished(run.pk, timeout=600)
    finally:
        _stop(procs)
    rows = list(
        Generation.objects.filter(run=run, status=Generation.Status.DONE)
        .order_by("pod_id", "number")
        .values_list("pod_id", "number", "started_at", "finished_at")
    )
    gaps = []
    for prev, nxt in zip(rows, rows[1:]):
        if prev[0] == nxt[0] and nxt[1] == prev[1] + 1:
            gaps.append((nxt[2] - prev[3]).total_seconds() * 1000.0)
    durations = [(r[3] - r[2]).total_seconds() * 1000.0 for r in rows]
    wall = (max(r[3] for r in rows) - min(r[2] for r in rows)).total_seconds()
    assert Run.objects.get(pk=run.pk).status == Run.Status.FINISHED
    return {
        "workers": n_workers,
        "generations": len(rows),
        "gap_p50_ms": _percentile(gaps, 0.5),
        "gap_p99_ms": _percentile(gaps, 0.99),
        "generation_p50_ms": _percentile(durations, 0.5),
        "generations_per_s": len(rows) / wall if wall > 0 else float("nan"),
    }


def _wait_finished(run_id: int, *, timeout: float) -> None:
    from webapp.runs import services
    from webapp.runs.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if Run.objects.filter(pk=run_id, status=Run.Status.FINISHED).exists():
            return
        services.runs_ensure_work(redispatch_after=30)
        time.sleep(0.25)
    raise SystemExit(f"run {run_id} did not finish within {timeout} s; see the worker logs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=60, help="generations measured per worker count")
    parser.add_argument("--redis-db", type=int, default=14)
    args = parser.parse_args()

    var_dir = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    data_dir = Path(os.environ.get("PADDOCK_DATA_DIR") or REPO.parent / "shared" / "data")
    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    env = _setup_env(var_dir, redis_url)
    env["PADDOCK_DATA_DIR"] = os.environ["PADDOCK_DATA_DIR"] = str(data_dir)

    import django
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from webapp.market import services as market_services
    from webapp.runs import services

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="bench", password="bench-pass-123")
    dataset = market_services.dataset_create_from_files(
        owner=owner, name="dow30", paths=[DATA_FILE], tickers=["AAPL", "MSFT", "JPM"]
    )
    task = services.task_create(
        owner=owner,
        dataset=dataset,
        name="zero-step",
        tickers=["AAPL", "MSFT", "JPM"],
        splits={
            "train": ["2019-01-01", "2019-12-31"],
            "validation": ["2020-01-01", "2020-03-31"],
            "test": ["2020-04-01", "2020-06-30"],
        },
        algorithm="ppo",
        hyperparameters={
            "num_envs": 1,
            "rollout_steps": 1,
            "num_minibatches": 1,
            "hidden_sizes": [16],
            "update_epochs": 1,
        },
    )
    results = [_measure(n, args.generations, env, var_dir, owner, task) for n in (1, 2)]
    print(f"{'workers':>7} {'gens':>5} {'gap p50 ms':>11} {'gap p99 ms':>11} {'gen p50 ms':>11} {'gens/s':>7}")
    for r in results:
        print(
            f"{r['workers']:>7} {r['generations']:>5} {r['gap_p50_ms']:>11.1f} {r['gap_p99_ms']:>11.1f} "
            f"{r['generation_p50_ms']:>11.1f} {r['generations_per_s']:>7.2f}"
        )
    print(f"2 workers / 1 worker throughput: {results[1]['generations_per_s'] / results[0]['generations_per_s']:.2f}x")
    redis.Redis.from_url(redis_url).flushdb()


if __name__ == "__main__":
    main()

"""Recovery times of the generation protocol, with real processes: two Celery workers, Celery
beat, a private ``redis-server`` (killed and started again, empty) and PostgreSQL.

Printed:
    worker kill: SIGKILL of the worker training a generation -> the generation trains again
        on the other worker (bounded by ``PADDOCK_STALE_AFTER_S``, set to 10 s here, plus the
        beat tick of up to 30 s);
    broker restart: Redis killed for ``--outage`` seconds and started again empty -> the first
        generation claimed after Redis is back (target: within 5 s);
    database blip: every PostgreSQL backend of the workers terminated mid-generation -> the
        generation's next heartbeat (on a new connection);
    deliveries per generation in a busy run: ``run_generation`` messages received by the
        workers (their logs) over the generations created, with more pods than workers, so
        messages wait in the queue through beat's sweeps (target: <= 1.1);
    /healthz: the health check, in this process, against the workers' Redis heartbeats, with
        the peer being the previous check (a broadcast ping waiting 1 s for replies).

Usage: ``DATABASE_URL=postgres://... .venv/bin/python benchmarks/recovery.py [--outage 10]``. It
creates (and drops) the database ``paddock_bench_recovery`` (``--database``) on that server,
uses a temporary var folder and its own Redis; OMP/torch threads are 1. ``--only worker-kill``
measures the kill alone (a few minutes); ``--stale-after default`` keeps the setting's default
(120 s) instead of 10 s, so the kill is recovered through the expired worker heartbeat alone.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DATA_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
DB_NAME = "paddock_bench_recovery"
STALE_AFTER_S = 10
RECEIVED = re.compile(r"Task webapp\.runs\.tasks\.run_generation\[[^\]]+\] received")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Redis, workers and beat, each the leader of its own process group, logs in ``log_dir``."""

    def __init__(self, env: dict[str, str], log_dir: Path, redis_port: int) -> None:
        self.env, self.log_dir, self.redis_port = env, log_dir, redis_port
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.procs[name] = subprocess.Popen(
            argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def start_redis(self) -> None:
        argv = ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", ""]
        self.start("redis", [*argv, "--appendonly", "no", "--dir", str(self.log_dir)])
        import redis

        client = redis.Redis(port=self.redis_port)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        raise SystemExit("the private redis-server did not start")

    def start_worker(self, name: str) -> None:
        argv = [sys.executable, "-m", "celery", "-A", "webapp.config.celery", "worker", "-Q", "gpu,cpu", "-c", "1"]
        argv += ["--pool=prefork", "-n", f"{name}@bench", "--without-gossip", "--without-mingle"]
        self.start(name, [*argv, "--without-heartbeat", "-l", "INFO"])

    def start_beat(self) -> None:
        argv = [sys.executable, "-m", "celery", "-A", "webapp.config.celery", "beat", "-l", "INFO"]
        self.start("beat", [*argv, "-s", str(self.log_dir / "beat-schedule")])

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def deliveries(self) -> int:
        return sum(len(RECEIVED.findall(path.read_text(errors="replace"))) for path in self.log_dir.glob("worker*.log"))


def _database(url: str, name: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql", "pgsql"):
        raise SystemExit("DATABASE_URL must name a PostgreSQL server (the database blip terminates its backends)")
    import psycopg

    admin = urlunparse(parsed._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parsed._replace(path=f"/{name}"))


def _drop_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    admin = urlunparse(parsed._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parsed.path.lstrip("/")}" WITH (FORCE)')


def _until(predicate, timeout: float, what: str, step: float = 0.05) -> float:
    """Poll ``predicate``; the ``time.time()`` at which it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.time()
        time.sleep(step)
    raise SystemExit(f"timed out after {timeout} s waiting for {what}; logs in the var folder")


def _run(owner, task, *, pods: int, steps: int, generations: int, concurrency: int | None = None):
    from webapp.runs import services

    budget = services.budget_create(
        actor=owner,
        name=f"bench-{time.monotonic_ns()}",
        max_concurrent_pods=concurrency or pods,
        env_step_cap=steps * generations,
    )
    run = services.run_create(
        owner=owner, task=task, budget=budget, num_pods=pods, generation_steps=steps, leaderboard_size=3, device="cpu"
    )
    services.run_start(run=run)
    return run


def _training(run):
    from webapp.runs.models import Generation

    return Generation.objects.filter(run=run, status=Generation.Status.RUNNING, pod__env_steps__gt=0)


def _finish(run, timeout: float = 600) -> None:
    from webapp.runs.models import Run

    _until(
        lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).exists(), timeout, "the run to finish", 0.5
    )


def worker_kill(procs: Processes, owner, task) -> float:
    from webapp.runs.models import Generation

    run = _run(owner, task, pods=1, steps=262_144, generations=1)
    _until(lambda: _training(run).exists(), 120, "a generation to train")
    gen = _training(run).get()
    victim = gen.worker.split("@")[0]
    procs.kill(victim)
    killed = time.time()
    back = _until(
        lambda: (
            Generation.objects.filter(pk=gen.pk, attempt__gt=gen.attempt, pod__env_steps__gt=0).exists()
            and Generation.objects.filter(pk=gen.pk, status=Generation.Status.RUNNING).exists()
        ),
        180,
        "the generation to train again",
    )
    procs.start_worker(victim)
    from webapp.runs import services

    services.run_stop(run=run)
    return back - killed


def broker_restart(procs: Processes, owner, task, outage_s: float) -> float:
    from webapp.runs.models import Generation

    run = _run(owner, task, pods=2, steps=16_384, generations=12)
    _until(lambda: _training(run).count() == 2, 120, "two generations to train")
    procs.kill("redis")
    time.sleep(outage_s)
    procs.start_redis()
    back = time.time()
    from datetime import UTC, datetime

    since = datetime.fromtimestamp(back, UTC)
    resumed = _until(
        lambda: Generation.objects.filter(run=run, started_at__gt=since).exists(), 120, "a generation claimed"
    )
    _finish(run)
    return resumed - back


def database_blip(owner, task) -> float:
    import psycopg
    from django.db import connection

    from webapp.runs import services
    from webapp.runs.models import Generation

    run = _run(owner, task, pods=1, steps=262_144, generations=1)
    _until(lambda: _training(run).exists(), 120, "a generation to train")
    gen = _training(run).get()
    own = connection.cursor().connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s",
            [own],
        )
    killed = time.time()
    from datetime import UTC, datetime

    since = datetime.fromtimestamp(killed, UTC)
    resumed = _until(
        lambda: (
            Generation.objects.filter(pk=gen.pk, heartbeat_at__gt=since).exists()
            or Generation.objects.filter(pk=gen.pk, status=Generation.Status.QUEUED).exists()
        ),
        120,
        "a heartbeat on a new connection",
    )
    services.run_stop(run=run)
    return resumed - killed


def busy_deliveries(procs: Processes, owner, task, generations: int) -> tuple[int, int]:
    from webapp.runs.models import Generation

    before = procs.deliveries()
    runs = [_run(owner, task, pods=3, steps=8_192, generations=generations) for _ in range(2)]
    for run in runs:
        _finish(run, timeout=900)
    created = Generation.objects.filter(run__in=runs).count()
    return procs.deliveries() - before, created


def healthz_ms() -> tuple[float, float]:
    from webapp.config.celery import app
    from webapp.core import health
    from webapp.core.workers import WORKER_INFO_COMMAND

    ours = []
    for _ in range(20):
        start = time.perf_counter()
        report = health.check_all()
        ours.append((time.perf_counter() - start) * 1000)
        assert report["ok"], report
    peer = []
    for _ in range(3):
        start = time.perf_counter()
        app.control.broadcast(WORKER_INFO_COMMAND, reply=True, timeout=1.0)
        peer.append((time.perf_counter() - start) * 1000)
    return statistics.median(ours), statistics.median(peer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage", type=float, default=10.0, help="seconds Redis stays down")
    parser.add_argument("--generations", type=int, default=12, help="generations of each busy run")
    parser.add_argument("--only", choices=("all", "worker-kill"), default="all", help="what to measure")
    parser.add_argument(
        "--stale-after", default=str(STALE_AFTER_S), help="PADDOCK_STALE_AFTER_S of the workers, or 'default'"
    )
    parser.add_argument("--database", default=DB_NAME, help="database created (and dropped) for the run")
    args = parser.parse_args()
    stale = None if args.stale_after == "default" else args.stale_after

    var_dir = Path(tempfile.mkdtemp(prefix="paddock-recovery-"))
    data_dir = Path(os.environ.get("PADDOCK_DATA_DIR") or REPO.parent / "shared" / "data")
    redis_port = _free_port()
    database_url = _database(os.environ.get("DATABASE_URL", ""), args.database)
    env = {
        **os.environ,
        "DEBUG": "1",
        "PADDOCK_VAR_DIR": str(var_dir),
        "PADDOCK_DATA_DIR": str(data_dir),
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        **({"PADDOCK_STALE_AFTER_S": stale} if stale else {}),
        "PADDOCK_TORCH_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings",
    }
    os.environ.update(env)
    procs = Processes(env, var_dir, redis_port)
    procs.start_redis()

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from webapp.market import services as market_services
    from webapp.runs import services

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="bench", password="bench-pass-123")
    tickers = ["AAPL", "MSFT", "JPM"]
    dataset = market_services.dataset_create_from_files(owner=owner, name="dow30", paths=[DATA_FILE], tickers=tickers)
    task = services.task_create(
        owner=owner,
        dataset=dataset,
        name="small ppo",
        tickers=tickers,
        splits={
            "train": ["2018-06-01", "2019-12-31"],
            "validation": ["2020-01-01", "2020-06-30"],
            "test": ["2020-07-01", "2020-12-31"],
        },
        algorithm="ppo",
        hyperparameters={"num_envs": 64, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32]},
    )
    try:
        procs.start_worker("worker1")
        procs.start_worker("worker2")
        procs.start_beat()
        warm = _run(owner, task, pods=2, steps=2_048, generations=2)
        _finish(warm, timeout=300)
        if args.only == "all":
            health_ms, peer_ms = healthz_ms()
            print(f"measured /healthz: {health_ms:.1f} ms (peer {peer_ms:.0f} ms)", flush=True)
            deliveries, created = busy_deliveries(procs, owner, task, args.generations)
            print(f"measured deliveries: {deliveries}/{created}", flush=True)
            restart_s = broker_restart(procs, owner, task, args.outage)
            print(f"measured broker restart: {restart_s:.1f} s", flush=True)
            blip_s = database_blip(owner, task)
            print(f"measured database blip: {blip_s:.1f} s", flush=True)
        kill_s = worker_kill(procs, owner, task)
    finally:
        procs.stop_all()
        from django.db import connections

        connections.close_all()
        _drop_database(os.environ["DATABASE_URL"])
    shown = f"{stale} s" if stale else "the default, 120 s"
    print(f"worker kill (SIGKILL mid-generation) -> trains again:   {kill_s:6.1f} s  (stale after {shown})")
    if args.only != "all":
        print(f"logs: {var_dir}")
        return
    print(f"broker restart ({args.outage:g} s outage) -> next claim:      {restart_s:6.1f} s  (target < 5 s)")
    print(f"database blip (backends terminated) -> heartbeat: {blip_s:6.1f} s")
    print(
        f"deliveries per generation, 2 runs x 3 pods on 2 workers: {deliveries}/{created} = "
        f"{deliveries / created:.2f}  (target <= 1.1)"
    )
    print(f"/healthz check p50: {health_ms:.1f} ms; broadcast ping (previous check): {peer_ms:.0f} ms; ", end="")
    print(f"{peer_ms / health_ms:.0f}x faster")
    print(f"logs: {var_dir}")


if __name__ == "__main__":
    main()

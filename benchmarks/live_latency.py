"""Live-update latency and list server times of the dashboard.

1. Latency: a real daphne server and Chromium on a run page; 100 times, an agent is committed
   through the real generation services (claim + complete, which publish the events), and the
   time from the commit of that transaction to the row ``tr[data-agent-id=...]`` appearing in
   the page's DOM is measured (browser and server share one clock). Target: p95 <= 250 ms.
2. Server time (in-process Django test client, median of 5) of the runs list with 10,000 runs
   and of a 10,000-agent leaderboard. Target: <= 300 ms.

Usage (a scratch database and Redis database; both are emptied)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/paddock_bench REDIS_URL=redis://127.0.0.1:6379/11 \\
        DEBUG=1 .venv/bin/python benchmarks/live_latency.py [--updates 100]
"""

from __future__ import annotations

import argparse
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

import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402
from django.db.models.signals import post_save  # noqa: E402
from django.test import Client  # noqa: E402

PASSWORD = "bench-password-123"
DOW30 = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def setup_world():
    """A user with a dataset, a task, a roomy budget and a started run."""
    from django.contrib.auth import get_user_model

    from webapp.market import services as market_services
    from webapp.runs import services

    user = get_user_model().objects.create_user(username="bench", password=PASSWORD)
    dataset = market_services.dataset_create_from_files(
        owner=user, name="dow", paths=[DOW30], tickers=["AAPL", "MSFT", "JPM"]
    )
    task = services.task_create(
        owner=user,
        dataset=dataset,
        name="bench",
        tickers=None,
        splits={
            "train": ["2018-06-01", "2019-12-31"],
            "validation": ["2020-01-01", "2020-06-30"],
            "test": ["2020-07-01", "2020-12-31"],
        },
        hyperparameters={"num_envs": 4},
    )
    budget = services.budget_create(actor=user, name="bench", max_concurrent_pods=64)
    run = services.run_create(
        owner=user, task=task, budget=budget, num_pods=2, generation_steps=256, leaderboard_size=5
    )
    services.run_start(run=run)
    return user, task, budget, run


def commit_agent(run, checkpoint: Path, score: float) -> tuple[int, float]:
    """Submit one agent through the services; returns (agent id, commit time in ms since epoch)."""
    from webapp import engine
    from webapp.runs import services
    from webapp.runs.models import Agent, Generation

    stamp: dict[str, float] = {}

    def on_agent(sender, instance, created, **kwargs):
        if created:  # runs right after COMMIT, before the events' own on_commit sends
            transaction.on_commit(lambda: stamp.setdefault("t", time.time() * 1000))

    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    claim = services.generation_claim(generation_id=gen.id, worker="bench")
    post_save.connect(on_agent, sender=Agent)
    try:
        agent = services.generation_complete(
            claim=claim,
            result=engine.TrainedGeneration(
                sha256="0" * 64,
                score=score,
                metrics={},
                env_steps=256,
                hyperparameters=claim.hyperparameters,
                cancelled=False,
                duration_s=0.1,
            ),
            local_checkpoint=str(checkpoint),
        )
    finally:
        post_save.disconnect(on_agent, sender=Agent)
    return agent.id, stamp["t"]


def measure_latency(user, run, updates: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, free_port, http_status

    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = open(ROOT / "var" / "bench-daphne.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.config.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while http_status(base + "/accounts/login/") != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("daphne did not start")
            time.sleep(0.25)
        checkpoint = Path(tempfile.mkstemp(suffix=".pt")[1])
        checkpoint.write_bytes(b"\0" * 1024)
        latencies = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_context(base_url=base).new_page()
            page.goto("/accounts/login/")
            page.fill("#id_username", user.username)
            page.fill("#id_password", PASSWORD)
            with page.expect_navigation():
                page.click("#login-form button[type=submit]")
            page.goto(f"/runs/{run.id}/")
            page.wait_for_selector("#live-indicator[data-state=live]")
            page.evaluate(
                """() => { window.__seen = {};
                new MutationObserver((records) => { const t = Date.now();
                  for (const r of records) for (const n of r.addedNodes)
                    if (n.dataset && n.dataset.agentId && !(n.dataset.agentId in window.__seen)) window.__seen[n.dataset.agentId] = t;
                }).observe(document.querySelector('#leaderboard tbody'), {childList: true}); }"""
            )
            for i in range(updates):
                agent_id, committed = commit_agent(run, checkpoint, score=10.0 + i)  # always a new best
                page.wait_for_function(f"window.__seen['{agent_id}'] !== undefined", timeout=10_000)
                seen = page.evaluate(f"window.__seen['{agent_id}']")
                latencies.append(seen - committed)
            browser.close()
        checkpoint.unlink()
        return latencies
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def seed_bulk(user, task, budget, *, runs: int, agents: int):
    """``runs`` runs for the list and one run whose leaderboard holds ``agents`` agents."""
    from webapp.runs.models import Agent, Generation, Pod, Run

    statuses = [s for s, _ in Run.Status.choices]
    Run.objects.bulk_create(
        [
            Run(
                owner=user,
                task=task,
                budget=budget,
                name=f"bulk run {i}",
                generation_steps=256,
                status=statuses[i % len(statuses)],
                best_score=i / 1000,
            )
            for i in range(runs)
        ],
        batch_size=2000,
    )
    big = Run.objects.create(
        owner=user,
        task=task,
        budget=budget,
        name="big board",
        generation_steps=256,
        leaderboard_size=agents,
        status="running",
    )
    pods = Pod.objects.bulk_create([Pod(run=big, index=i) for i in range(8)])
    gens = Generation.objects.bulk_create(
        [Generation(run=big, pod=pods[i % 8], number=i // 8 + 1, status="done", env_steps=256) for i in range(agents)],
        batch_size=2000,
    )
    Agent.objects.bulk_create(
        [
            Agent(
                run=big,
                generation=g,
                pod=g.pod,
                score=(i * 7919 % agents) / agents,
                hyperparameters={"learning_rate": 3e-4},
                checkpoint="x",
                sha256="0" * 64,
                created_seq=i + 1,
                on_leaderboard=True,
            )
            for i, g in enumerate(gens)
        ],
        batch_size=2000,
    )
    return big


def server_ms(client: Client, url: str, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
        assert response.status_code == 200, (url, response.status_code)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=10_000)
    args = parser.parse_args()

    call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    user, task, budget, run = setup_world()

    latencies = measure_latency(user, run, args.updates)
    print(f"live latency over {len(latencies)} leaderboard commits (commit -> row in Chromium's DOM):")
    print(
        f"  p50 {percentile(latencies, 50):.0f} ms   p95 {percentile(latencies, 95):.0f} ms   max {max(latencies):.0f} ms  (target p95 <= 250 ms)"
    )

    big = seed_bulk(user, task, budget, runs=args.runs, agents=args.agents)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    print(f"server time, median of 5 ({args.runs} runs, a {args.agents}-agent leaderboard; target <= 300 ms):")
    for label, url in [
        ("runs list page 1", "/runs/"),
        ("runs list page 100", "/runs/?page=100"),
        ("runs list filtered", "/runs/?status=running&algorithm=ppo&q=bulk"),
        ("API runs list", "/api/runs/"),
        ("API leaderboard (page of 50)", f"/api/runs/{big.id}/leaderboard/"),
        ("API leaderboard page 150", f"/api/runs/{big.id}/leaderboard/?page=150"),
        ("run page, 10k-agent leaderboard", f"/runs/{big.id}/"),
    ]:
        print(f"  {label:32s} {server_ms(client, url):7.1f} ms")
    redis.Redis.from_url(settings.REDIS_URL).flushdb()


if __name__ == "__main__":
    main()

"""End-to-end orchestration: real Celery worker processes train tiny generations on real
Dow-30 data, sharing the test database and an isolated Redis database.

The reaper is called from the test loop where a beat process would call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.harness import deadline_s
from webapp.runs import services
from webapp.runs.models import Agent, Generation, Run
from webapp.runs.selectors.payloads import leaderboard

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _generation_intervals(run) -> list[tuple]:
    """``(started_at, finished_at)`` of the run's finished generations, by start time."""
    return list(
        Generation.objects.filter(run=run, finished_at__isnull=False, started_at__isnull=False)
        .order_by("started_at")
        .values_list("started_at", "finished_at")
    )


def _wait(
    predicate: Callable[[], bool],
    *,
    timeout: float,
    reap_after: float | None = None,
    orphans: bool = False,
    what: str,
) -> None:
    """Poll ``predicate`` for ``timeout`` seconds (scaled: ``tests.harness.deadline_s``), doing
    the beat's sweeps meanwhile: the stale reaper after ``reap_after`` s, or (``orphans``) only
    the reaper of generations whose worker's heartbeat expired, with the default stale time."""
    timeout = deadline_s(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if reap_after is not None:
            services.generations_reap_stale(stale_after=reap_after)
            services.runs_ensure_work(redispatch_after=30)
        if orphans:
            services.generations_reap_orphaned()
            services.runs_ensure_work(redispatch_after=30)
        time.sleep(0.2)
    pending = list(Generation.objects.exclude(status=Generation.Status.DONE).values_list("id", "status", "worker"))
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; generations not done: {pending}")


def _trained_agents(run: Run):
    """The run's agents that pods trained: the end-of-run backtests add the top-3 ensemble as an
    agent of its own (kind "ensemble", no generation), whenever the backtest worker gets to it."""
    return Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED)


def _status(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def _max_overlap(intervals) -> int:
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1]))
    current = peak = 0
    for _, delta in points:
        current += delta
        peak = max(peak, current)
    return peak


def _assert_one_agent_per_done_generation(run: Run) -> None:
    done = Generation.objects.filter(run=run, status=Generation.Status.DONE)
    assert _trained_agents(run).count() == done.count()
    assert set(_trained_agents(run).values_list("generation_id", flat=True)) == set(done.values_list("id", flat=True))
    assert not Generation.objects.filter(run=run, status__in=Generation.OPEN).exists()


def test_a_three_pod_run_completes_within_its_budget_and_ranks_its_agents(workers, make_budget, make_run):
    workers.start("alpha")
    workers.start("beta")
    # Nine generations fit the env-step cap; at most two may run at once.
    budget = make_budget(max_concurrent_pods=2, env_step_cap=9 * 256)
    run = services.run_start(run=make_run(budget, num_pods=3, generation_steps=256, leaderboard_size=4))
    _wait(lambda: _status(run) == Run.Status.FINISHED, timeout=120, reap_after=60, what="the run to finish")

    run.refresh_from_db()
    agents = _trained_agents(run)
    assert agents.count() == 9
    _assert_one_agent_per_done_generation(run)
    board = leaderboard(run)
    assert len(board) == 4
    scores = [a.score for a in board]
    assert scores == sorted(scores, reverse=True)
    others = [a.score for a in agents.filter(on_leaderboard=False) if a.score is not None]
    assert all(s <= scores[-1] for s in others), "pruned agents score no better than the last kept one"
    assert run.best_score == scores[0]
    assert set(Generation.objects.filter(run=run).values_list("pod__index", flat=True)) == {0, 1, 2}
    budget.refresh_from_db()
    assert budget.env_steps_used == 9 * 256
    assert budget.gpu_seconds_used > 0
    # The concurrency cap held across both workers.
    assert _max_overlap(_generation_intervals(run)) <= 2
    assert len(set(Generation.objects.filter(run=run).exclude(worker="").values_list("worker", flat=True))) == 2
    assert any(a.parent_id for a in agents), "later generations start from leaderboard agents"


def test_a_worker_killed_mid_generation_loses_no_agent_and_makes_no_duplicate(workers, make_budget, make_run):
    # A generation trains for several seconds here (PPO is fast: size it up), so the kill
    # lands in the middle of one.
    while len(workers.procs) < 2:  # also when this test runs alone
        workers.start(f"spare{len(workers.procs)}")
    budget = make_budget(max_concurrent_pods=2, env_step_cap=3 * 196608)
    run = services.run_start(run=make_run(budget, num_pods=2, generation_steps=196608))

    def training() -> bool:
        return Generation.objects.filter(run=run, status=Generation.Status.RUNNING, pod__env_steps__gt=0).exists()

    _wait(training, timeout=60, what="a generation to train")
    victim_gen = Generation.objects.filter(run=run, status=Generation.Status.RUNNING).first()
    victim = victim_gen.worker
    assert victim in workers.procs
    workers.kill9(victim)
    workers.start("gamma")

    # With the default stale time (120 s) the share is released as soon as the victim's Redis
    # heartbeat expires (10 s), not after 120 s + a 30 s sweep; the live worker's generations
    # are not re-run, however long they go without a heartbeat of their own.
    def requeued() -> bool:
        return Generation.objects.filter(pk=victim_gen.pk, attempt__gt=victim_gen.attempt).exists() or (
            Generation.objects.filter(pk=victim_gen.pk, status=Generation.Status.QUEUED).exists()
        )

    _wait(requeued, timeout=45, orphans=True, what="the killed worker's generation to be queued again")
    _wait(lambda: _status(run) == Run.Status.FINISHED, timeout=300, orphans=True, what="the run to finish")

    victim_gen.refresh_from_db()
    assert victim_gen.status == Generation.Status.DONE
    assert victim_gen.attempt >= 2 and victim_gen.worker != victim
    others = Generation.objects.filter(run=run).exclude(pk=victim_gen.pk)
    # attempt 0: queued, never claimed (cancelled when the budget ran out); 1: ran once
    assert max(others.values_list("attempt", flat=True)) <= 1, "no live worker's generation re-ran"
    assert _trained_agents(run).count() == 3
    _assert_one_agent_per_done_generation(run)


def test_a_worker_added_mid_run_takes_work_and_pods_scaled_up_train(workers, make_budget, make_run):
    budget = make_budget(max_concurrent_pods=3)
    run = services.run_start(run=make_run(budget, num_pods=1, generation_steps=2048))
    live = list(workers.procs)
    _wait(lambda: Agent.objects.filter(run=run).exists(), timeout=60, what="a first agent")
    services.run_scale(run=run, num_pods=3)
    workers.start(f"delta{len(live)}")

    def new_pods_trained() -> bool:
        return Agent.objects.filter(run=run, pod__index__in=[1, 2]).values("pod").distinct().count() == 2

    _wait(new_pods_trained, timeout=90, reap_after=60, what="the new pods' first agents")
    services.run_stop(run=run)
    assert _status(run) == Run.Status.CANCELLED

    def generations_closed() -> bool:
        return not Generation.objects.filter(run=run, status__in=Generation.OPEN).exists()

    _wait(generations_closed, timeout=60, what="the stopped run's generations to end")

    workers_used = set(Generation.objects.filter(run=run).exclude(worker="").values_list("worker", flat=True))
    assert len(workers_used) >= 2
    _assert_one_agent_per_done_generation(run)
    assert _max_overlap(_generation_intervals(run)) <= 3


def test_watchers_receive_numbered_progress_pod_leaderboard_and_run_events(workers, make_budget, make_run):
    import asyncio

    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from webapp.runs import events

    layer = get_channel_layer()
    budget = make_budget(max_concurrent_pods=1, env_step_cap=2 * 2048)
    run = make_run(budget, num_pods=1, generation_steps=2048)
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(run.pk), channel)
    services.run_start(run=run)
    _wait(lambda: _status(run) == Run.Status.FINISHED, timeout=90, reap_after=60, what="the run to finish")

    async def drain() -> list[dict]:
        received = []
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=2)
            except TimeoutError:
                return received
            received.append(message["event"])

    received = async_to_sync(drain)()
    kinds = {e["type"] for e in received}
    assert {events.RUN_UPDATE, events.POD_UPDATE, events.LEADERBOARD_UPDATE, events.PROGRESS} <= kinds
    seqs = [e["seq"] for e in received]
    assert len(set(seqs)) == len(seqs), "every event has its own number"
    assert max(seqs) == Run.objects.get(pk=run.pk).event_seq
    assert received[-1]["type"] == events.RUN_UPDATE and received[-1]["run"]["status"] == "finished"

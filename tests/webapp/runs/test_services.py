"""Services of the run lifecycle and the generation protocol, without workers.

Task messages are not sent here (``on_commit`` callbacks do not run inside these test
transactions); the orchestration tests run real workers.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.core.files.storage import default_storage

from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import events, services
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run
from webapp.runs.selectors.budgets import budget_usage
from webapp.runs.selectors.payloads import leaderboard, run_snapshot

pytestmark = pytest.mark.django_db


def _result(score, env_steps=256, cancelled=False):
    return engine.TrainedGeneration(
        sha256="0" * 64,
        score=score,
        metrics={"total_return": 0.01},
        env_steps=env_steps,
        hyperparameters={"learning_rate": 3e-4},
        cancelled=cancelled,
        duration_s=0.1,
    )


def _checkpoint(tmp_path, name="agent.pt"):
    path = tmp_path / name
    path.write_bytes(b"not a real checkpoint: the services only store the file")
    return str(path)


def _claim_next(run):
    gen = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).order_by("id").first()
    return services.generation_claim(generation_id=gen.id, worker="w@test")


def test_starting_a_run_queues_one_generation_per_pod_and_dispatches_only_free_slots(make_budget, make_run):
    budget = make_budget(max_concurrent_pods=2)
    run = services.run_start(run=make_run(budget, num_pods=3))
    assert run.status == Run.Status.RUNNING
    gens = Generation.objects.filter(run=run)
    assert gens.count() == 3
    assert all(g.status == Generation.Status.QUEUED for g in gens)
    assert gens.filter(dispatched_at__isnull=False).count() == 2
    assert sorted(Pod.objects.filter(run=run).values_list("index", flat=True)) == [0, 1, 2]


def test_a_second_delivery_of_a_claimed_generation_is_a_no_op(make_budget, make_run):
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    gen = Generation.objects.get(run=run)
    first = services.generation_claim(generation_id=gen.id, worker="w1@test")
    second = services.generation_claim(generation_id=gen.id, worker="w2@test")
    assert first is not None and first.attempt == 1
    assert second is None
    gen.refresh_from_db()
    assert (gen.status, gen.worker, gen.attempt) == (Generation.Status.RUNNING, "w1@test", 1)


def test_a_budget_never_runs_more_generations_than_its_max_concurrent_pods(make_budget, make_run):
    budget = make_budget(max_concurrent_pods=1)
    run_a = services.run_start(run=make_run(budget, num_pods=1))
    run_b = services.run_start(run=make_run(budget, num_pods=1))
    assert _claim_next(run_a) is not None
    waiting = Generation.objects.get(run=run_b)
    assert services.generation_claim(generation_id=waiting.id, worker="w2@test") is None
    waiting.refresh_from_db()
    assert waiting.status == Generation.Status.QUEUED
    assert waiting.dispatched_at is None, "a waiting generation is dispatched again when a slot frees"
    assert budget_usage(budget)["pods_running"] == 1


def test_finishing_a_generation_dispatches_the_oldest_waiting_generation_of_the_budget(make_budget, make_run, tmp_path):
    budget = make_budget(max_concurrent_pods=1)
    run_a = services.run_start(run=make_run(budget, num_pods=1))
    run_b = services.run_start(run=make_run(budget, num_pods=1))
    claim = _claim_next(run_a)
    waiting = Generation.objects.get(run=run_b)
    services.generation_claim(generation_id=waiting.id, worker="w2@test")
    services.generation_complete(claim=claim, result=_result(0.5), local_checkpoint=_checkpoint(tmp_path))
    waiting.refresh_from_db()
    assert waiting.dispatched_at is not None
    next_a = Generation.objects.get(run=run_a, number=2)
    assert next_a.dispatched_at is None, "run A's next generation queues behind run B's older one"


def test_starting_a_run_on_a_spent_budget_is_refused_with_the_reason(make_budget, make_run):
    budget = make_budget(env_step_cap=1000)
    run = make_run(budget, generation_steps=256)
    ClusterBudget.objects.filter(pk=budget.pk).update(env_steps_used=900)  # spent after the run was made
    with pytest.raises(AppError) as exc:
        services.run_start(run=run)
    assert exc.value.status == 409
    assert "env-step cap" in exc.value.message
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_a_spent_gpu_hours_cap_refuses_new_runs(make_budget, make_run):
    budget = make_budget(gpu_hours_cap=0.5)
    ClusterBudget.objects.filter(pk=budget.pk).update(gpu_seconds_used=1800.0)
    with pytest.raises(AppError, match="GPU-hours cap") as exc:
        make_run(budget)
    assert exc.value.status == 409 and not Run.objects.filter(budget=budget).exists()


def test_completing_a_generation_accounts_real_duration_and_env_steps(make_budget, make_run, tmp_path):
    budget = make_budget()
    run = services.run_start(run=make_run(budget, num_pods=1))
    claim = _claim_next(run)
    gen = Generation.objects.get(pk=claim.generation_id)
    agent = services.generation_complete(claim=claim, result=_result(1.5), local_checkpoint=_checkpoint(tmp_path))
    budget.refresh_from_db()
    gen.refresh_from_db()
    assert budget.env_steps_used == 256
    real = (gen.finished_at - gen.started_at).total_seconds()
    assert budget.gpu_seconds_used == pytest.approx(real, abs=1e-3)
    assert agent.on_leaderboard and agent.score == 1.5
    assert default_storage.exists(agent.checkpoint)
    run.refresh_from_db()
    assert run.best_score == 1.5
    assert Generation.objects.filter(run=run, number=2, status=Generation.Status.QUEUED).exists()


def test_the_leaderboard_keeps_the_best_k_agents_best_first(make_budget, make_run, tmp_path):
    run = services.run_start(run=make_run(make_budget(max_concurrent_pods=1), num_pods=1, leaderboard_size=2))
    for i, score in enumerate([0.1, 0.9, 0.5, None]):
        claim = _claim_next(run)
        services.generation_complete(
            claim=claim, result=_result(score), local_checkpoint=_checkpoint(tmp_path, f"a{i}.pt")
        )
    board = leaderboard(run)
    assert [a.score for a in board] == [0.9, 0.5]
    assert Agent.objects.filter(run=run).count() == 4
    assert list(Agent.objects.filter(run=run).order_by("created_seq").values_list("created_seq", flat=True)) == [
        1,
        2,
        3,
        4,
    ]


def test_a_late_result_of_a_reaped_attempt_is_discarded(make_budget, make_run, tmp_path):
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    first = _claim_next(run)
    Generation.objects.filter(pk=first.generation_id).update(
        heartbeat_at=Generation.objects.get(pk=first.generation_id).heartbeat_at.replace(year=2000)
    )
    assert services.generations_reap_stale(stale_after=30) == [first.generation_id]
    assert Generation.objects.get(pk=first.generation_id).status == Generation.Status.STALE
    second = services.generation_claim(generation_id=first.generation_id, worker="w2@test")
    assert second is not None and second.attempt == 2
    late = services.generation_complete(claim=first, result=_result(3.0), local_checkpoint=_checkpoint(tmp_path))
    assert late is None
    assert not services.generation_still_mine(generation_id=first.generation_id, attempt=1)
    assert services.generation_superseded(generation_id=first.generation_id, attempt=1), "logged as discarded"
    agent = services.generation_complete(claim=second, result=_result(1.0), local_checkpoint=_checkpoint(tmp_path))
    assert agent is not None
    assert not services.generation_superseded(generation_id=first.generation_id, attempt=2)
    assert Agent.objects.filter(generation_id=first.generation_id).count() == 1


def test_the_reaper_leaves_generations_with_a_fresh_heartbeat_alone(make_budget, make_run):
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    claim = _claim_next(run)
    assert services.generation_heartbeat(generation_id=claim.generation_id, attempt=1, env_steps=10, steps_per_s=5.0)
    assert services.generations_reap_stale(stale_after=30) == []
    assert Pod.objects.get(run=run).env_steps == 10


def test_paused_runs_start_no_generation_until_resumed(make_budget, make_run, tmp_path):
    run = services.run_start(run=make_run(make_budget(), num_pods=2))
    claim = _claim_next(run)
    services.run_pause(run=run)
    other = Generation.objects.get(run=run, pod__index=1)
    assert services.generation_claim(generation_id=other.id, worker="w@test") is None
    assert services.generation_still_mine(generation_id=claim.generation_id, attempt=1), "pause lets it finish"
    services.generation_complete(claim=claim, result=_result(0.2), local_checkpoint=_checkpoint(tmp_path))
    assert not Generation.objects.filter(run=run, number=2).exists()
    services.run_resume(run=run)
    assert Generation.objects.filter(run=run, pod__index=0, number=2, status=Generation.Status.QUEUED).exists()
    assert services.generation_claim(generation_id=other.id, worker="w@test") is not None


def test_a_user_stop_cancels_the_run_and_its_running_generation_never_ranks(make_budget, make_run, tmp_path):
    run = services.run_start(run=make_run(make_budget(), num_pods=2))
    claim = _claim_next(run)
    services.run_stop(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert run.status_reason == "cancelled by user"
    assert not services.generation_still_mine(generation_id=claim.generation_id, attempt=claim.attempt)
    queued = Generation.objects.get(run=run, pod__index=1)
    assert queued.status == Generation.Status.CANCELLED
    # the generation finished training before it saw the stop: its result is still not ranked
    services.generation_complete(claim=claim, result=_result(0.3, env_steps=64), local_checkpoint=_checkpoint(tmp_path))
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert not Agent.objects.filter(run=run).exists() and run.best_score is None
    assert Generation.objects.get(pk=claim.generation_id).status == Generation.Status.CANCELLED
    assert run.budget.__class__.objects.get(pk=run.budget_id).env_steps_used == 64, "its env steps were spent"


def test_stopping_backtests_the_best_agents_only_when_asked(
    make_budget, make_run, monkeypatch, django_capture_on_commit_callbacks
):
    triggered = []
    # the runs app announces the end (runs.signals.run_ended); the reports app's receiver queues
    monkeypatch.setattr("webapp.reports.receivers.backtest_top_agents", SimpleNamespace(delay=triggered.append))
    for backtest in (False, True):
        run = services.run_start(run=make_run(make_budget(), num_pods=1))
        with django_capture_on_commit_callbacks(execute=True):
            services.run_stop(run=run, backtest=backtest)
        assert triggered == ([run.pk] if backtest else []), backtest
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED


def test_a_budget_spent_mid_run_finishes_the_run_after_its_last_generation(make_budget, make_run, tmp_path):
    budget = make_budget(max_concurrent_pods=2, env_step_cap=3 * 256)
    run = services.run_start(run=make_run(budget, num_pods=2))
    claims = [_claim_next(run), _claim_next(run)]
    for i, claim in enumerate(claims):
        services.generation_complete(claim=claim, result=_result(i), local_checkpoint=_checkpoint(tmp_path, f"{i}.pt"))
    third = _claim_next(run)
    assert third is not None
    fourth = Generation.objects.get(run=run, status=Generation.Status.QUEUED)
    assert services.generation_claim(generation_id=fourth.id, worker="w@test") is None, "the last steps are taken"
    services.generation_complete(claim=third, result=_result(2.0), local_checkpoint=_checkpoint(tmp_path))
    run.refresh_from_db()
    fourth.refresh_from_db()
    assert run.status == Run.Status.FINISHED and "env-step cap" in run.status_reason
    assert fourth.status == Generation.Status.CANCELLED
    assert Agent.objects.filter(run=run).count() == 3


def test_the_env_step_cap_counts_the_whole_rollouts_a_generation_trains_not_the_steps_asked(
    make_budget, make_run, tmp_path
):
    """200 steps asked of a 4 x 32 = 128-step rollout train 256: after one generation (256 used)
    a second would end at 512, past the 460-step cap, so none is queued, though 256 + 200 asked
    would fit; the budget is never overdrawn, and the reason gives the steps trained."""
    budget = make_budget(max_concurrent_pods=1, env_step_cap=460)
    run = services.run_start(run=make_run(budget, num_pods=1, generation_steps=200))
    first = _claim_next(run)
    assert first.env_steps == 256
    assert Generation.objects.get(pk=first.generation_id).env_steps == 256  # what it holds of the cap
    services.generation_complete(
        claim=first, result=_result(1.0, env_steps=first.env_steps), local_checkpoint=_checkpoint(tmp_path)
    )
    assert not Generation.objects.filter(run=run, status=Generation.Status.QUEUED).exists()
    run.refresh_from_db()
    budget.refresh_from_db()
    assert run.status == Run.Status.FINISHED and "a generation needs 256" in run.status_reason
    assert budget.env_steps_used == 256 <= budget.env_step_cap


def test_a_run_whose_generation_trains_more_than_the_whole_cap_is_a_400_on_generation_steps(make_budget, make_run):
    """200 steps asked fit a 220-step cap, but the 256 steps of two whole rollouts do not."""
    with pytest.raises(AppError) as exc:
        make_run(make_budget(env_step_cap=220), num_pods=1, generation_steps=200)
    assert exc.value.status == 400
    assert "trains 256 env steps (whole rollouts)" in exc.value.fields["generation_steps"]


def test_a_run_whose_first_rollout_is_past_what_is_left_of_the_cap_is_refused_at_start(make_budget, make_run):
    budget = make_budget(env_step_cap=1000)
    run = make_run(budget, num_pods=1, generation_steps=200)
    ClusterBudget.objects.filter(pk=budget.pk).update(env_steps_used=800)  # 200 asked would fit, 256 do not
    with pytest.raises(AppError, match="a generation needs 256") as exc:
        services.run_start(run=run)
    assert exc.value.status == 409


def test_scaling_down_retires_pods_and_scaling_up_queues_new_ones(make_budget, make_run, tmp_path):
    run = services.run_start(run=make_run(make_budget(max_concurrent_pods=4), num_pods=3))
    claim = _claim_next(run)  # pod 0 trains
    services.run_scale(run=run, num_pods=1)
    assert Generation.objects.filter(run=run, pod__index__in=[1, 2], status=Generation.Status.CANCELLED).count() == 2
    assert set(Pod.objects.filter(run=run, index__gte=1).values_list("state", flat=True)) == {Pod.State.RETIRED}
    services.run_scale(run=run, num_pods=4)
    open_pods = Generation.objects.filter(run=run, status=Generation.Status.QUEUED).values_list("pod__index", flat=True)
    assert sorted(open_pods) == [1, 2, 3]
    services.generation_complete(claim=claim, result=_result(0.1), local_checkpoint=_checkpoint(tmp_path))
    assert Generation.objects.filter(run=run, pod__index=0, number=2).exists()


def test_only_staff_may_assign_a_budget_to_another_user(user, other_user, staff):
    with pytest.raises(AppError) as exc:
        services.budget_create(actor=user, name="gift", owner=other_user)
    assert exc.value.status == 403
    budget = services.budget_create(actor=staff, name="for bob", owner=other_user, max_concurrent_pods=4)
    assert budget.owner == other_user


def test_a_bad_budget_limit_names_the_field(user):
    with pytest.raises(AppError) as exc:
        services.budget_create(actor=user, name="x", max_concurrent_pods=0)
    assert "max_concurrent_pods" in exc.value.fields


def test_another_users_task_cannot_be_used_for_a_run(other_user, task, make_budget):
    budget = services.budget_create(actor=other_user, name="bob's")
    with pytest.raises(AppError) as exc:
        services.run_create(owner=other_user, task=task, budget=budget, generation_steps=256)
    assert exc.value.status == 404


def test_a_bad_hyperparameter_names_its_dotted_field(user, dataset):
    from tests.webapp.conftest import SPLITS

    with pytest.raises(AppError) as exc:
        services.task_create(
            owner=user,
            dataset=dataset,
            name="bad",
            tickers=["AAPL"],
            splits=SPLITS,
            hyperparameters={"learning_rate": -1},
        )
    assert "hyperparameters.learning_rate" in exc.value.fields


def test_a_mutation_of_an_unknown_hyperparameter_is_refused(user, task, make_budget):
    with pytest.raises(AppError) as exc:
        services.run_create(
            owner=user, task=task, budget=make_budget(), generation_steps=256, mutation={"bounds": {"nope": [0, 1]}}
        )
    assert any(k.startswith("mutation.") for k in exc.value.fields)


def test_events_carry_a_per_run_increasing_sequence_and_the_snapshot_has_the_latest(make_budget, make_run, tmp_path):
    run = services.run_start(run=make_run(make_budget(), num_pods=2))
    seq_after_start = Run.objects.get(pk=run.pk).event_seq
    assert seq_after_start >= 3, "run.update plus one pod.update per pod"
    claim = _claim_next(run)
    services.generation_complete(claim=claim, result=_result(0.7), local_checkpoint=_checkpoint(tmp_path))
    snap = run_snapshot(run)
    assert snap["type"] == "run.snapshot" and snap["seq"] > seq_after_start
    assert snap["run"]["status"] == "running"
    assert [p["index"] for p in snap["pods"]] == [0, 1]
    assert snap["pods"][0]["generation"]["number"] == 2
    assert [a["score"] for a in snap["leaderboard"]] == [0.7]
    assert snap["leaderboard"][0]["env_steps"] == 256, "fills the live page's env steps column"


def test_every_active_run_on_a_budget_is_told_when_a_pod_starts_or_stops_training(
    make_budget, make_run, tmp_path, monkeypatch
):
    budget = make_budget(max_concurrent_pods=2)
    run_a = services.run_start(run=make_run(budget, num_pods=1))
    run_b = services.run_start(run=make_run(budget, num_pods=1))
    published = []
    original = events.publish
    monkeypatch.setattr(
        events,
        "publish",
        lambda run_id, kind, payload: published.append((run_id, kind, payload)) or original(run_id, kind, payload),
    )

    def pods_running_seen_by(run):
        # a service hands over a function that builds the payload after commit (these tests never
        # commit: the last update is built now, as its on_commit hook would)
        updates = [p for rid, kind, p in published if rid == run.pk and kind == events.RUN_UPDATE]
        return (
            (updates[-1]() if callable(updates[-1]) else updates[-1])["run"]["budget"]["pods_running"]
            if updates
            else None
        )

    claim = _claim_next(run_a)
    assert pods_running_seen_by(run_a) == 1, "the run page's 'pods running on this budget' follows"
    assert pods_running_seen_by(run_b) == 1, "so does the page of another run on the same budget"
    services.generation_complete(claim=claim, result=_result(0.5), local_checkpoint=_checkpoint(tmp_path))
    assert pods_running_seen_by(run_a) == 0
    assert pods_running_seen_by(run_b) == 0


def test_staff_raising_a_budgets_pod_limit_starts_waiting_pods_at_once(make_budget, make_run, staff):
    budget = make_budget(max_concurrent_pods=1)
    run = services.run_start(run=make_run(budget, num_pods=3))
    waiting = Generation.objects.filter(run=run, status=Generation.Status.QUEUED, dispatched_at__isnull=True)
    assert waiting.count() == 2, "one slot: one generation sent, two wait"
    services.budget_update(actor=staff, budget=budget, max_concurrent_pods=3, name="  wider  ")
    assert waiting.count() == 0
    budget.refresh_from_db()
    assert (budget.max_concurrent_pods, budget.name) == (3, "wider")


def test_budget_owner_cannot_change_limits_nor_anyone_the_usage_counters(make_budget, user, staff):
    budget = make_budget()
    with pytest.raises(AppError) as exc:
        services.budget_update(actor=user, budget=budget, max_concurrent_pods=50)
    assert exc.value.status == 403
    with pytest.raises(AppError) as exc:
        services.budget_update(actor=staff, budget=budget, env_steps_used=0, gpu_hours_cap=-2)
    assert set(exc.value.fields) == {"env_steps_used", "gpu_hours_cap"}
    assert ClusterBudget.objects.get(pk=budget.pk).max_concurrent_pods == 2


def test_a_run_whose_last_agents_all_score_zero_stops_itself_with_the_reason(make_budget, make_run, tmp_path, settings):
    settings.PADDOCK_ZERO_SCORE_GENERATIONS = 3
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    for score in (0.0, 0.4, 0.0, 0.0):  # a non-zero agent resets the count
        claim = _claim_next(run)
        services.generation_complete(claim=claim, result=_result(score), local_checkpoint=_checkpoint(tmp_path))
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    claim = _claim_next(run)
    services.generation_complete(claim=claim, result=_result(0.0), local_checkpoint=_checkpoint(tmp_path))
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "last 3 agents all scored exactly 0" in run.status_reason and "initial cash" in run.status_reason
    assert not Generation.objects.filter(run=run, status__in=Generation.OPEN).exists()


def test_flatten_at_close_is_refused_on_a_daily_dataset_naming_the_field(user, dataset):
    from tests.webapp.conftest import SPLITS

    with pytest.raises(AppError) as exc:
        services.task_create(
            owner=user,
            dataset=dataset,
            name="flat",
            tickers=["AAPL"],
            splits=SPLITS,
            kind="portfolio",
            env={"flatten_at_close": True},
        )
    assert "intraday bars" in exc.value.fields["env.flatten_at_close"]


def test_a_no_trade_band_of_1_over_n_or_more_is_refused_naming_the_field(user, dataset):
    from tests.webapp.conftest import SPLITS

    common = {"owner": user, "dataset": dataset, "splits": SPLITS, "kind": "portfolio"}
    with pytest.raises(AppError) as exc:  # two tickers: 1/N = 0.5
        services.task_create(name="wide", tickers=["AAPL", "MSFT"], env={"rebalance_band": 0.5}, **common)
    assert "below 1/N = 0.5 for 2 tickers" in exc.value.fields["env.rebalance_band"]
    task = services.task_create(name="ok", tickers=["AAPL", "MSFT"], env={"rebalance_band": 0.01}, **common)
    assert task.env["rebalance_band"] == 0.01 and task.env["turnover_penalty"] == 0.0

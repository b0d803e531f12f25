"""The demo's definitions: sizing from a measured rate, the dataset, the budget, reruns.

The full path (``./paddock demo`` and a shortened run in a browser) is covered by
``tests/e2e/test_acceptance.py``; these tests check the decisions that make it repeatable.
"""

from __future__ import annotations

import io

import pandas as pd
import pytest
from django.core.management import call_command

from webapp import engine
from webapp.core.errors import AppError
from webapp.demo.data import ensure_demo_files, import_demo_dataset, import_intraday_dataset
from webapp.demo.launch import active_demo_run, ensure_budget, ensure_task, is_demo_run, start_demo_run
from webapp.demo.profiles import (
    BENCHMARK_BUDGET,
    BUDGET_NAME,
    CI_PROFILE,
    CPU_PROFILE,
    DEMO_ALGORITHM,
    DEMO_KIND,
    DIRECT_BUDGET,
    DOW30_FILE,
    GENERATION_EFFICIENCY,
    GPU_PROFILE,
    INTRADAY_BUDGET_NAME,
    INTRADAY_CPU_PROFILE,
    INTRADAY_DATASET_NAME,
    INTRADAY_FILE,
    INTRADAY_REWARD_SCALE,
    INTRADAY_SPLITS,
    PORTFOLIO_REWARD_SCALE,
    RUN_NAME,
    SPLITS,
    TASK_NAME,
    demo_algorithm,
    with_benchmark_budget,
)
from webapp.demo.sizing import measure_rate, size_run
from webapp.runs import services
from webapp.runs.models import ClusterBudget, Generation, Run, Task

pytestmark = pytest.mark.django_db


def test_generations_are_sized_from_the_measured_rate_in_whole_rollouts():
    sizing = size_run(CPU_PROFILE, steps_per_s=4000.0, device="cpu", training_workers=1)

    batch = CPU_PROFILE.rollout_batch
    assert sizing.generation_steps % batch == 0
    expected = 4000.0 * GENERATION_EFFICIENCY * CPU_PROFILE.generation_s
    assert expected - batch < sizing.generation_steps <= expected
    # About training_s of generations one at a time, and at least two per pod.
    assert sizing.generations >= 2 * CPU_PROFILE.num_pods
    assert sizing.generations * CPU_PROFILE.generation_s <= CPU_PROFILE.training_s + 30
    assert sizing.env_steps == sizing.generations * sizing.generation_steps
    assert sizing.max_wall_clock_s == 2 * CPU_PROFILE.training_s + CPU_PROFILE.generation_s


def test_the_env_step_cap_ends_the_demo_even_at_half_the_measured_rate():
    # The run shares the cores with the web server and other processes: the backstop must not
    # end it while it trains at half the rate measured on idle workers (a loaded VM saw 79 %).
    for profile, rate in ((CPU_PROFILE, 90_600.0), (GPU_PROFILE, 200_000.0), (CPU_PROFILE, 4000.0)):
        sizing = size_run(profile, steps_per_s=rate, device="cpu", training_workers=1)
        half_speed = 0.5 * rate * GENERATION_EFFICIENCY
        time_to_cap = sizing.env_steps / (half_speed * sizing.concurrent_pods)
        assert time_to_cap < sizing.max_wall_clock_s, (profile.name, rate, time_to_cap, sizing)


def test_more_training_workers_allow_more_generations_in_the_same_time():
    one = size_run(GPU_PROFILE, steps_per_s=200_000.0, device="cuda", training_workers=1)
    four = size_run(GPU_PROFILE, steps_per_s=200_000.0, device="cuda", training_workers=8)

    assert four.concurrent_pods == GPU_PROFILE.num_pods
    assert four.generation_steps == one.generation_steps
    assert four.generations == pytest.approx(4 * one.generations, abs=4)


def test_a_very_slow_machine_still_trains_one_rollout_per_generation():
    sizing = size_run(CPU_PROFILE, steps_per_s=10.0, device="cpu", training_workers=1)

    assert sizing.generation_steps == CPU_PROFILE.rollout_batch


def test_the_ci_profile_has_fixed_numbers():
    sizing = size_run(CI_PROFILE, steps_per_s=None, device="cpu", training_workers=1)

    assert (sizing.generation_steps, sizing.generations) == (2048, 8)


def test_the_daily_portfolio_ppo_demo_trains_the_benchmarks_budget_on_any_machine():
    """The configuration the learning-quality benchmark studied gets the budget chosen there on
    validation, whatever the measured rate; what no study covered keeps time-based sizing."""
    import dataclasses

    assert BENCHMARK_BUDGET == {"num_pods": 3, "generation_steps": 262_144, "generations": 9}
    for profile, rate in ((CPU_PROFILE, 4000.0), (CPU_PROFILE, 90_600.0), (GPU_PROFILE, 200_000.0)):
        sized = with_benchmark_budget(profile)
        assert sized.kind == "portfolio" and sized.algorithm == "ppo" and sized.num_pods == 3
        sizing = size_run(sized, steps_per_s=rate, device="cpu", training_workers=2)
        assert (sizing.generation_steps, sizing.generations, sizing.env_steps) == (262_144, 9, 2_359_296)
        assert sizing.generation_steps % sized.rollout_batch == 0
    for other in (
        dataclasses.replace(CPU_PROFILE, kind="stock_trading"),
        dataclasses.replace(CPU_PROFILE, algorithm="sac"),
        INTRADAY_CPU_PROFILE,
    ):
        assert with_benchmark_budget(other) == other


def test_the_daily_demo_trains_the_default_chosen_on_validation_with_its_budget_on_any_machine():
    """docs/default-selection.md: the daily portfolio demo trains ``direct`` with its defaults and
    the chosen 2M env steps per fresh agent; stock trading and the intraday demo keep PPO."""
    import dataclasses

    assert demo_algorithm() == "direct" == DEMO_ALGORITHM and TASK_NAME == "Dow 30 DIRECT demo"
    assert demo_algorithm("stock_trading") == "ppo" and demo_algorithm(intraday=True) == "ppo"
    chosen = services.default_generation_steps("direct", engine.default_hyperparameters("direct"))
    assert DIRECT_BUDGET == {"num_pods": 3, "generation_steps": chosen, "generations": 6}
    for profile, rate in ((CPU_PROFILE, 4000.0), (GPU_PROFILE, 200_000.0)):
        sized = with_benchmark_budget(dataclasses.replace(profile, algorithm="direct"))
        assert sized.hyperparameters == {} and sized.num_pods == 3  # direct's own defaults, not PPO's sizes
        sizing = size_run(sized, steps_per_s=rate, device="cpu", training_workers=2)
        assert (sizing.generation_steps, sizing.generations) == (2_021_376, 6)
        assert sizing.generation_steps % sized.rollout_batch == 0 and sized.rollout_batch == 1024 * 21


def test_demo_dataset_drops_dow_with_a_note_and_is_imported_once(user, data_dir):
    dataset, created = import_demo_dataset(user, root=data_dir, allow_download=False)
    again, created_again = import_demo_dataset(user, root=data_dir, allow_download=False)

    assert created and not created_again and again.pk == dataset.pk
    assert len(dataset.tickers) == 29 and "DOW" not in dataset.tickers
    assert dataset.notes[0].startswith("DOW: dropped from the demo dataset")
    assert "2019-03-20" in dataset.notes[0]
    assert str(dataset.start_date) == "2010-01-04" and str(dataset.end_date) == "2022-11-15"


def test_missing_demo_data_without_download_says_which_files_to_copy_where(user, tmp_path):
    with pytest.raises(AppError) as caught:
        import_demo_dataset(user, root=tmp_path, allow_download=False)

    message = caught.value.message
    assert str(tmp_path) in message
    assert DOW30_FILE in message and "benchmark_etfs_daily_eodhd.csv.gz" in message
    assert "PADDOCK_DATA_DIR" in message


def test_a_second_demo_run_reuses_the_budget_and_raises_its_env_step_cap(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    sizing = size_run(CI_PROFILE, steps_per_s=None, device="cpu", training_workers=1)

    first, budget = start_demo_run(user, dataset, CI_PROFILE, sizing)
    assert active_demo_run(user) == first
    assert budget.env_step_cap == sizing.env_steps
    assert first.status == Run.Status.RUNNING
    assert Generation.objects.filter(run=first).count() == CI_PROFILE.num_pods

    # The first run trained some steps and ended; the next one gets its own share of the cap.
    ClusterBudget.objects.filter(pk=budget.pk).update(env_steps_used=4096)
    Run.objects.filter(pk=first.pk).update(status=Run.Status.FINISHED)
    assert active_demo_run(user) is None
    second, same_budget = start_demo_run(user, dataset, CI_PROFILE, sizing)

    assert same_budget.pk == budget.pk
    assert ClusterBudget.objects.filter(owner=user).count() == 1
    assert same_budget.env_step_cap == 4096 + sizing.env_steps
    assert second.task_id == first.task_id
    assert second.pk != first.pk and second.seed == 1


def test_a_benchmark_file_without_qqq_is_refused_and_left_alone(user, data_dir, tmp_path):
    (tmp_path / DOW30_FILE).symlink_to(data_dir / DOW30_FILE)
    benchmark = tmp_path / "benchmark_etfs_daily_eodhd.csv.gz"
    frame = pd.read_csv(data_dir / "benchmark_etfs_daily_eodhd.csv.gz")
    frame[frame["tic"] == "SPY"].to_csv(benchmark, index=False)  # real prices, but no QQQ
    before = benchmark.read_bytes()

    with pytest.raises(AppError) as caught:
        import_demo_dataset(user, root=tmp_path, allow_download=True)

    assert "does not hold QQQ" in caught.value.message
    assert benchmark.read_bytes() == before


def test_the_cpu_and_gpu_demos_train_ppos_default_network_and_epochs(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    for profile in (CPU_PROFILE, GPU_PROFILE):
        task = ensure_task(user, dataset, profile)
        assert task.hyperparameters["hidden_sizes"] == [64, 64]
        assert task.hyperparameters["update_epochs"] == 2
    assert GPU_PROFILE.hyperparameters["num_envs"] > CPU_PROFILE.hyperparameters["num_envs"]


def test_a_demo_task_made_with_other_network_sizes_is_not_reused(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    current = ensure_task(user, dataset, CPU_PROFILE)
    assert ensure_task(user, dataset, CPU_PROFILE).pk == current.pk, "same settings: reused"
    Task.objects.filter(pk=current.pk).update(
        hyperparameters={**current.hyperparameters, "hidden_sizes": [128, 128], "update_epochs": 10}
    )

    fresh = ensure_task(user, dataset, CPU_PROFILE)

    assert fresh.pk != current.pk and fresh.hyperparameters["hidden_sizes"] == [64, 64]


def test_a_benchmark_file_elsewhere_is_found_through_its_setting(user, data_dir, tmp_path, settings):
    (tmp_path / DOW30_FILE).symlink_to(data_dir / DOW30_FILE)
    elsewhere = tmp_path / "benchmarks" / "qqq.csv.gz"
    elsewhere.parent.mkdir()
    elsewhere.symlink_to(data_dir / "benchmark_etfs_daily_eodhd.csv.gz")
    settings.PADDOCK_DATA_DIR = tmp_path / "data"
    settings.PADDOCK_BENCHMARK_FILE = elsewhere

    files = ensure_demo_files(tmp_path, allow_download=False)

    assert files.benchmark == str(elsewhere)


def _users_own_run(user, dataset, *, name, task_name="My PPO", start=False):
    """A run the user made by hand on the demo budget (not one the demo started)."""
    budget, _ = ensure_budget(user, size_run(CI_PROFILE, steps_per_s=None, device="cpu", training_workers=1))
    task = services.task_create(
        owner=user,
        dataset=dataset,
        name=task_name,
        tickers=list(CI_PROFILE.tickers),
        splits=SPLITS,
        algorithm="ppo",
        hyperparameters=dict(CI_PROFILE.hyperparameters),
    )
    run = services.run_create(owner=user, task=task, budget=budget, name=name, num_pods=1, generation_steps=2048)
    return services.run_start(run=run) if start else run


def test_the_users_own_runs_on_the_demo_budget_are_not_taken_for_the_demo_run(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    _users_own_run(user, dataset, name="mine, never started")
    _users_own_run(user, dataset, name="mine, training", start=True)
    _users_own_run(user, dataset, name="on a task named like the demo's", task_name=TASK_NAME, start=True)
    assert active_demo_run(user) is None

    # A demo run created but never started (its start failed) is not "going" either.
    sizing = size_run(CI_PROFILE, steps_per_s=None, device="cpu", training_workers=1)
    task = ensure_task(user, dataset, CI_PROFILE)
    budget = ClusterBudget.objects.get(owner=user, name=BUDGET_NAME)
    services.run_create(owner=user, task=task, budget=budget, name=f"{RUN_NAME} #9", num_pods=1, generation_steps=2048)
    assert active_demo_run(user) is None

    run, _ = start_demo_run(user, dataset, CI_PROFILE, sizing)
    assert is_demo_run(run) and active_demo_run(user) == run


def _fake_measurement(monkeypatch):
    """demo_setup without the 4 s PPO measurement or Celery workers to ask."""
    from webapp.demo.management.commands import demo_setup

    monkeypatch.setattr(demo_setup, "measure_rate", lambda *a, **k: {"steps_per_s": 4000.0, "device": "cpu"})
    monkeypatch.setattr(demo_setup, "_training_workers", lambda: (1, "cpu"))


def test_demo_setup_starts_a_demo_run_beside_the_users_own_run_on_the_demo_budget(
    user, data_dir, settings, monkeypatch
):
    settings.PADDOCK_DATA_DIR = data_dir
    monkeypatch.setenv("PADDOCK_BASE_URL", "http://127.0.0.1:8631/")
    _fake_measurement(monkeypatch)
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    mine = _users_own_run(user, dataset, name="mine, never started")

    out = io.StringIO()
    call_command("demo_setup", username=user.username, no_download=True, stdout=out)

    started = active_demo_run(user)
    assert started is not None and started.pk != mine.pk
    # the default chosen in docs/default-selection.md: direct with its defaults, 2M-step
    # generations (94 gradient steps of 1,024 windows x 21 days), 3 pods x 2 generations
    task = started.task
    assert task.algorithm == "direct" and task.name == "Dow 30 DIRECT demo" and task.kind == "portfolio"
    assert (task.hyperparameters["turnover_penalty"], task.hyperparameters["tracking_penalty"]) == (0.02, 20.0)
    assert task.hyperparameters["num_envs"] == 1024 and task.env["rebalance_band"] == 0.01
    assert (started.num_pods, started.generation_steps) == (3, 2_021_376)
    assert started.budget.env_step_cap >= 6 * 2_021_376
    assert "measuring DIRECT training speed" in out.getvalue() and "(1024 envs, 29 tickers)" in out.getvalue()
    assert "already going" not in out.getvalue()
    assert f"demo: live run page: http://127.0.0.1:8631/runs/{started.pk}/\n" in out.getvalue()
    mine.refresh_from_db()
    assert mine.status == Run.Status.QUEUED, "the user's run is left alone"

    # Again, and with --new-run: the demo run is reused, then replaced; the user's run untouched.
    again = io.StringIO()
    call_command("demo_setup", username=user.username, no_download=True, stdout=again)
    assert f"runs/{started.pk}/  (the demo run already going)" in again.getvalue()
    call_command("demo_setup", username=user.username, no_download=True, new_run=True, stdout=io.StringIO())
    started.refresh_from_db()
    mine.refresh_from_db()
    assert started.status not in Run.ACTIVE and mine.status == Run.Status.QUEUED


def test_demo_setup_by_hand_says_which_address_its_link_assumes(user, data_dir, settings, monkeypatch):
    settings.PADDOCK_DATA_DIR = data_dir
    monkeypatch.delenv("PADDOCK_BASE_URL", raising=False)
    _fake_measurement(monkeypatch)

    out = io.StringIO()
    call_command("demo_setup", username=user.username, no_download=True, stdout=out)
    lines = out.getvalue().splitlines()

    page = next(line for line in lines if line.startswith("demo: live run page: "))
    assert page.startswith("demo: live run page: http://127.0.0.1:8000/runs/")
    assert any("--base-url" in line and "PADDOCK_BASE_URL" in line and "8000" in line for line in lines)
    assert lines[-1].startswith("demo: login: username ada"), "the login comes last"

    elsewhere = io.StringIO()
    call_command("demo_setup", username=user.username, no_download=True, base_url="http://h:9/", stdout=elsewhere)
    assert "demo: live run page: http://h:9/runs/" in elsewhere.getvalue()
    assert "PADDOCK_BASE_URL" not in elsewhere.getvalue()


def test_the_demo_trains_the_portfolio_task_the_benchmark_chose_and_stock_trading_on_request(user, data_dir, settings):
    import dataclasses

    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    task = ensure_task(user, dataset, CI_PROFILE)
    assert task.kind == DEMO_KIND == "portfolio"
    assert task.hyperparameters["reward_scale"] == PORTFOLIO_REWARD_SCALE
    assert task.env["observation"] == "scale_free" and task.selection["rule"] == "mean_minus_std"
    assert (
        task.env["rebalance_band"] == 0.01
    )  # the no-trade band chosen on validation (docs/results/learning-quality.md)
    assert ensure_task(user, dataset, CI_PROFILE) == task  # reused, not duplicated
    # a demo task from before the band trades every difference: not reused
    Task.objects.filter(pk=task.pk).update(env={**task.env, "rebalance_band": 0.0})
    fresh = ensure_task(user, dataset, CI_PROFILE)
    assert fresh.pk != task.pk and fresh.env["rebalance_band"] == 0.01
    task = fresh
    stock = ensure_task(user, dataset, dataclasses.replace(CI_PROFILE, kind="stock_trading"))
    assert stock.kind == "stock_trading" and stock != task


def test_the_demo_measures_sizes_and_starts_the_chosen_algorithm(user, data_dir, settings, monkeypatch):
    import dataclasses

    from webapp import engine

    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    profile = dataclasses.replace(CI_PROFILE, algorithm="td3", generation_steps=None, generations=None)
    measured = []
    real = engine.measure_training_throughput
    monkeypatch.setattr(
        engine, "measure_training_throughput", lambda spec, **k: measured.append(spec) or real(spec, **k)
    )
    rate = measure_rate(profile, dataset, device="cpu", seconds=0.5)
    assert [spec["algorithm"] for spec in measured] == ["td3"]
    assert "rollout_steps" not in measured[0]["hyperparameters"]  # a PPO setting TD3 has not
    assert rate["steps_per_s"] > 0
    sizing = size_run(profile, steps_per_s=rate["steps_per_s"], device="cpu", training_workers=1)
    assert profile.rollout_batch == 32  # one vector step of 32 envs, not a 32 x 16 rollout
    assert sizing.generation_steps > 0 and sizing.generation_steps % 32 == 0
    run, _ = start_demo_run(user, dataset, profile, sizing)
    assert run.task.algorithm == "td3" and run.name == "Dow 30 TD3 demo #1" and run.task.name == "Dow 30 TD3 demo"
    assert set(run.mutation["bounds"]) == {"actor_learning_rate", "critic_learning_rate"}
    assert is_demo_run(run) and active_demo_run(user) == run


def test_demo_setup_trains_the_algorithm_asked_for(user, data_dir, settings, monkeypatch):
    settings.PADDOCK_DATA_DIR = data_dir
    _fake_measurement(monkeypatch)
    out = io.StringIO()
    call_command("demo_setup", username=user.username, no_download=True, algorithm="a2c", stdout=out)
    assert "measuring A2C training speed" in out.getvalue() and "pods, A2C, train" in out.getvalue()
    run = active_demo_run(user)
    assert run.task.algorithm == "a2c" and set(run.mutation["bounds"]) == {"learning_rate", "ent_coef"}


def test_demo_setup_intraday_trains_on_5_minute_bars_beside_the_daily_demo(user, data_dir, settings, monkeypatch):
    settings.PADDOCK_DATA_DIR = data_dir
    _fake_measurement(monkeypatch)
    call_command("demo_setup", username=user.username, no_download=True, stdout=io.StringIO())
    daily = active_demo_run(user)
    out = io.StringIO()
    call_command("demo_setup", username=user.username, intraday=True, stdout=out)
    text = out.getvalue()
    assert "5-minute bars in the same file" in text and "QQQ's 5-minute bars" in text
    assert "train 2024-03-11..2025-06-30, validation 2025-07-01..2025-12-31, test 2026-01-02..2026-08-21" in text
    run = active_demo_run(user, intraday=True)
    assert run is not None and run != daily and is_demo_run(run)
    assert run.name == "5-min AAPL MSFT NVDA PPO demo #1" and run.budget.name == INTRADAY_BUDGET_NAME
    task = run.task
    assert task.tickers == ["AAPL", "MSFT", "NVDA"] and task.dataset.name == INTRADAY_DATASET_NAME
    assert {k: [v["start"], v["end"]] for k, v in task.splits.items()} == INTRADAY_SPLITS
    assert task.hyperparameters["reward_scale"] == INTRADAY_REWARD_SCALE
    assert any("5m bars" in n for n in task.data_notes)
    assert active_demo_run(user) == daily  # the daily demo run is left alone
    # again: the intraday run is still going, so its page is printed again
    again = io.StringIO()
    call_command("demo_setup", username=user.username, intraday=True, stdout=again)
    assert "already going" in again.getvalue()
    assert Run.objects.filter(task=task).count() == 1


def test_the_intraday_demo_names_its_file_when_it_is_missing(user, tmp_path, settings):
    settings.PADDOCK_DATA_DIR = tmp_path
    with pytest.raises(AppError) as err:
        import_intraday_dataset(user, root=tmp_path)
    assert INTRADAY_FILE in err.value.message and str(tmp_path) in err.value.message

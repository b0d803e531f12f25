"""Limits that keep a task from asking for impossible memory, empty splits or short generations.

Each limit is a ``ConfigError`` naming the field (HTTP 400 on the web, exit status 2 in the CLI)
raised before any training starts.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from trainer.cli.main import default_data_dir, main
from trainer.data.splits import MIN_SPLIT_DAYS, check_split_days, check_window
from trainer.demo import demo_task_dict
from trainer.envs.kinds import observation_dim
from trainer.envs.stock_config import EnvConfig
from trainer.errors import ConfigError
from trainer.pod import run_generation
from trainer.task import MAX_BUFFER_BYTES, TaskSpec, buffer_bytes, check_buffer_memory, check_env_steps
from trainer.util.device import buffer_memory_limit


def task_with(**hyperparameters) -> dict:
    task = demo_task_dict()
    task["data"]["tickers"] = ["AAPL", "MSFT", "JPM"]
    task["hyperparameters"] = hyperparameters
    return task


def field_of(task: dict) -> str:
    with pytest.raises(ConfigError) as err:
        TaskSpec.from_dict(task)
    return err.value.details["field"]


@pytest.mark.parametrize(
    ("algorithm", "hyperparameters", "field"),
    [
        ("ppo", {"num_envs": 100_000_000}, "hyperparameters.num_envs"),
        ("ppo", {"hidden_sizes": [100_000, 64]}, "hyperparameters.hidden_sizes"),
        ("ppo", {"hidden_sizes": [64] * 9}, "hyperparameters.hidden_sizes"),
        ("ppo", {"rollout_steps": 4_097}, "hyperparameters.rollout_steps"),
        ("ppo", {"update_epochs": 1_000}, "hyperparameters.update_epochs"),
        ("sac", {"num_envs": 65_537}, "hyperparameters.num_envs"),
        ("sac", {"buffer_size": 2**22 + 1}, "hyperparameters.buffer_size"),
        ("sac", {"batch_size": 10**6}, "hyperparameters.batch_size"),
        ("sac", {"updates_per_step": 1_000}, "hyperparameters.updates_per_step"),
        ("sac", {"hidden_sizes": [5_000]}, "hyperparameters.hidden_sizes"),
    ],
)
def test_absurd_hyperparameters_are_refused_naming_the_field(algorithm, hyperparameters, field):
    task = task_with(**hyperparameters)
    task["algorithm"] = algorithm
    assert field_of(task) == field


def test_the_largest_allowed_values_are_accepted_one_at_a_time():
    spec = TaskSpec.from_dict(task_with(num_envs=65_536, rollout_steps=1, hidden_sizes=[4_096] * 8))
    assert spec.hyperparameters["num_envs"] == 65_536


def test_a_rollout_buffer_over_the_memory_limit_is_refused_naming_num_envs():
    task = task_with(num_envs=65_536, rollout_steps=4_096)
    task["data"]["tickers"] = [f"T{i}" for i in range(30)]  # 2**28 transitions of 301 floats: 363 GiB
    with pytest.raises(ConfigError, match=r"GiB") as err:
        TaskSpec.from_dict(task)
    assert err.value.details["field"] == "hyperparameters.num_envs"


def test_a_replay_buffer_over_the_devices_memory_limit_is_refused_naming_buffer_size():
    task = demo_task_dict()  # all 30 Dow tickers named, 8 indicators: 4M transitions are 9.9 GiB
    task["data"]["tickers"] = [f"T{i}" for i in range(30)]
    task["algorithm"] = "sac"
    task["hyperparameters"] = {"buffer_size": 2**22}
    spec = TaskSpec.from_dict(task)  # under the 48 GiB any device may get: a valid task
    obs_dim, _ = observation_dim(EnvConfig(observation="finrl"), 30, 8)
    with pytest.raises(ConfigError, match=r"9\.9 GiB, more than the 8 GiB allowed") as err:
        check_buffer_memory("sac", spec.hyperparameters, obs_dim, 30, limit=8 * 2**30)  # a 24 GB GPU
    assert err.value.details["field"] == "hyperparameters.buffer_size"
    check_buffer_memory("sac", spec.hyperparameters, obs_dim, 30, limit=47 * 2**30)  # a 141 GB GPU


def test_the_buffer_limit_of_a_cpu_worker_is_a_quarter_of_its_memory():
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert buffer_memory_limit(torch.device("cpu")) == ram // 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_buffer_limit_of_a_gpu_is_a_third_of_its_memory():
    total = torch.cuda.get_device_properties(0).total_memory
    assert buffer_memory_limit(torch.device("cuda", 0)) == total // 3


def test_the_default_ppo_rollout_of_the_dow_30_needs_about_22_mb():
    obs_dim, _ = observation_dim(EnvConfig(observation="finrl"), 29, 8)
    assert obs_dim == 291
    hp = TaskSpec.from_dict(demo_task_dict()).hyperparameters
    assert buffer_bytes("ppo", hp, obs_dim, 29) == 16 * 1024 * (291 + 29 + 8) * 4
    assert buffer_bytes("ppo", hp, obs_dim, 29) < MAX_BUFFER_BYTES / 100


def test_a_generation_shorter_than_one_rollout_is_refused_naming_the_field():
    hp = {"num_envs": 1024, "rollout_steps": 16}
    with pytest.raises(ConfigError, match="one rollout") as err:
        check_env_steps("ppo", hp, 2048, field="generation_steps")
    assert err.value.details["field"] == "generation_steps"
    check_env_steps("ppo", hp, 16_384, field="generation_steps")
    check_env_steps("sac", hp, 1024, field="generation_steps")  # one vector step is enough for SAC
    with pytest.raises(ConfigError):
        check_env_steps("sac", hp, 1023, field="generation_steps")


# --- splits against the data's trading days -------------------------------------------------

DAYS = np.arange(np.datetime64("2020-01-01"), np.datetime64("2021-01-01"))  # every day of 2020


def split_error(**ranges) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        check_split_days(ranges, DAYS)
    return err.value


def test_a_split_after_the_data_is_refused_naming_its_start():
    err = split_error(test=("2030-01-01", "2031-11-15"))
    assert err.details["field"] == "test.start"
    assert "2020-12-31" in err.message


def test_a_split_before_the_data_is_refused_naming_its_end():
    assert split_error(train=("2010-01-01", "2010-12-31")).details["field"] == "train.end"


def test_a_three_day_train_split_is_refused_naming_its_end_and_the_minimum():
    err = split_error(train=("2020-01-01", "2020-01-03"))
    assert err.details["field"] == "train.end"
    assert f"at least {MIN_SPLIT_DAYS['train']}" in err.message and "3 trading day" in err.message


def test_a_one_day_validation_split_is_refused():
    assert split_error(validation=("2020-06-01", "2020-06-01")).details["field"] == "validation.end"


def test_long_enough_splits_are_counted():
    counts = check_split_days(
        {
            "train": ("2020-01-01", "2020-06-30"),
            "validation": ("2020-07-01", "2020-09-30"),
            "test": ("2020-10-01", "2021-01-04"),  # 4 days past the data: the edge allowed
        },
        DAYS,
    )
    assert counts == {"train": 182, "validation": 92, "test": 92}


def test_run_generation_refuses_a_three_day_train_split_before_training(data_dir, tmp_path):
    task = task_with(num_envs=4, rollout_steps=8, num_minibatches=1, hidden_sizes=[8])
    task["train"] = {"start": "2019-12-27", "end": "2019-12-31"}
    with pytest.raises(ConfigError) as err:
        run_generation(task, env_steps=32, out_path=tmp_path / "x.pt", data_dir=data_dir, device="cpu")
    assert err.value.details["field"] == "train.end"
    assert not (tmp_path / "x.pt").exists()


# --- the CLI ---------------------------------------------------------------------------------


def test_cli_test_split_after_the_data_exits_2_naming_test_start(data_dir, tmp_path, capsys):
    code = main(["train", "--data-dir", str(data_dir), "--test", "2030-01-01", "2031-01-01", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: test.start: 2030-01-01 is after the last data day 2022-11-15 in dow30_")
    assert not list(tmp_path.iterdir())


def test_cli_test_split_ending_46_days_past_the_data_exits_2_not_clipped(data_dir, tmp_path, capsys):
    argv = ["train", "--data-dir", str(data_dir), "--test", "2022-07-01", "2022-12-31", "--out", str(tmp_path)]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: test.end: 2022-12-31 is after the last data day 2022-11-15 in dow30_")
    assert not list(tmp_path.iterdir())


def test_one_window_rule_a_range_may_end_four_calendar_days_past_the_data():
    days = np.array(["2022-11-14", "2022-11-15"], dtype="datetime64[D]")
    check_window("test", "2022-11-10", "2022-11-19", first=days[0], last=days[-1])  # a weekend and a holiday
    with pytest.raises(ConfigError, match=r"test\.end: 2022-11-20 is after the data, which ends on 2022-11-15"):
        check_window("test", "2022-11-14", "2022-11-20", first=days[0], last=days[-1])
    with pytest.raises(ConfigError, match=r"^start: 2022-11-09 is before the data, which starts on 2022-11-14"):
        check_window("", "2022-11-09", "2022-11-15", first=days[0], last=days[-1])
    with pytest.raises(ConfigError) as err:
        check_split_days({"test": ("2022-11-14", "2022-12-31")}, days, minimum={"test": 1})
    assert err.value.details["field"] == "test.end"


def test_cli_budget_smaller_than_one_rollout_exits_2_naming_env_steps(data_dir, tmp_path, capsys):
    code = main(["train", "--data-dir", str(data_dir), "--env-steps", "1000", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: env_steps: 1000 env steps are less than one rollout")


def test_cli_data_dir_defaults_to_paddock_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("PADDOCK_DATA_DIR", str(tmp_path))
    assert default_data_dir() == str(tmp_path)


def test_cli_missing_data_file_names_the_full_path_and_how_to_point_elsewhere(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PADDOCK_DATA_DIR", str(tmp_path))
    assert main(["train", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz") in err
    assert "--data-dir" in err and "PADDOCK_DATA_DIR" in err and err.count("\n") == 1


def test_split_errors_names_every_split_problem_at_once():
    from trainer.task import split_errors

    errors = split_errors(
        {
            "train": ["2019-12-31", "2018-01-01"],
            "validation": ["2020-01-01", "2020-06-30"],
            "test": ["2020-12-31", "2020-07-01"],
        }
    )
    assert set(errors) == {"train.end", "test.end"}
    assert "is before train.start" in errors["train.end"] and "is before test.start" in errors["test.end"]
    overlap = split_errors(
        {"train": ["2018-01-01", "2020-03-31"], "validation": ["2020-01-01", "2020-06-30"], "test": None}
    )
    assert set(overlap) == {"validation.start", "test"}
    assert "do not overlap" in overlap["validation.start"]
    fine = {
        "train": ["2018-01-01", "2019-12-31"],
        "validation": ["2020-01-01", "2020-06-30"],
        "test": ["2020-07-01", "2020-12-31"],
    }
    assert split_errors(fine) == {}

"""A batch too small for the algorithm's statistics is refused up front, naming both fields, at
the config, the command line (exit 2) and the task validation the web uses."""

from __future__ import annotations

import pytest

from trainer.cli.main import main
from trainer.errors import ConfigError
from trainer.task import validate_hyperparameters


@pytest.mark.parametrize("algorithm", ["ppo", "a2c"])
def test_a_rollout_of_one_sample_is_refused_naming_num_envs_and_rollout_steps(algorithm):
    hp = {"num_envs": 1, "rollout_steps": 1, **({"num_minibatches": 1} if algorithm == "ppo" else {})}
    with pytest.raises(ConfigError) as exc:
        validate_hyperparameters(algorithm, hp)
    assert exc.value.details["field"] == "hyperparameters.rollout_steps"
    assert "num_envs" in exc.value.message and "learning_rate" not in exc.value.message
    # two samples have a variance: accepted
    assert validate_hyperparameters(algorithm, {**hp, "rollout_steps": 2})["rollout_steps"] == 2


@pytest.mark.parametrize("algorithm", ["sac", "td3", "ddpg"])
def test_a_batch_larger_than_the_replay_buffer_is_refused_naming_both(algorithm):
    hp = {"num_envs": 4, "batch_size": 512, "buffer_size": 256}
    with pytest.raises(ConfigError) as exc:
        validate_hyperparameters(algorithm, hp)
    assert exc.value.details["field"] == "hyperparameters.batch_size"
    assert "buffer_size" in exc.value.message
    assert validate_hyperparameters(algorithm, {**hp, "buffer_size": 512})["batch_size"] == 512


def test_the_cli_exits_2_on_a_one_sample_rollout_before_training(data_dir, tmp_path, capsys):
    argv = ["train", "--data-dir", str(data_dir), "--algo", "a2c", "--num-envs", "1", "--hp", "rollout_steps=1"]
    assert main([*argv, "--env-steps", "64", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rollout_steps" in err and "num_envs" in err and "diverged" not in err
    assert not any(tmp_path.iterdir())  # nothing trained, nothing written

"""The default configuration of a new task (docs/default-selection.md, rule 5): a portfolio task
that names no algorithm trains ``direct`` with its defaults, which are the ``direct-conservative``
candidate with its held-out challenger gate (``direct-gated``, rule 4b); stock trading keeps PPO. One source, :mod:`trainer.algorithms`, for
the task file, the CLI and (through the engine) the web side."""

from __future__ import annotations

import pytest

from trainer.agents.direct import DirectConfig
from trainer.agents.direct_gate import CLOSED_GATE, GATE_SHARE, HOLDOUT_FOLDS, HOLDOUT_FRACTION
from trainer.algorithms import DEFAULT_ALGORITHMS, default_algorithm
from trainer.cli.inputs import task_from_args
from trainer.cli.main import build_parser
from trainer.demo import demo_task_dict
from trainer.envs.kinds import KINDS
from trainer.envs.portfolio_config import RECOMMENDED_REBALANCE_BAND
from trainer.errors import ConfigError
from trainer.task import TaskSpec

WALK = ["walk-forward", "--start", "2010-01-01", "--end", "2019-12-31", "--first-test-year", "2018"]


def test_every_task_kind_has_a_default_algorithm_and_portfolio_tasks_train_direct():
    assert set(DEFAULT_ALGORITHMS) == set(KINDS)
    assert default_algorithm("portfolio") == "direct" and default_algorithm("stock_trading") == "ppo"
    with pytest.raises(ConfigError) as caught:
        default_algorithm("futures")
    assert caught.value.details["field"] == "kind" and "'futures'" in caught.value.message


def test_direct_defaults_are_the_gated_candidate_chosen_on_validation():
    config = DirectConfig()
    # the anchor: twice the learner's former 0.01 and 10 (the "direct" candidate of
    # benchmarks/default_selection.py), direct-conservative
    assert (config.turnover_penalty, config.tracking_penalty) == (0.02, 20.0)
    assert (config.num_envs, config.rollout_steps) == (1024, 21)
    # its held-out challenger gate: direct-gated, chosen by rule 4b; 35 % held out by rule 4c;
    # two folds, half the budget and a challenger tilt bound of 2 by rule 4d
    assert (config.challenger_alpha, config.challenger_kappa) == (0.05, 2.0)
    assert (HOLDOUT_FRACTION, HOLDOUT_FOLDS, GATE_SHARE) == (0.35, 2, 0.5)
    assert CLOSED_GATE == "hold" and not config.hold_equal_weight  # a closed gate holds 1/N: rule 4e
    assert config.challenger() == config.replace(
        turnover_penalty=0.0, tracking_penalty=0.0, kappa=2.0, challenger_alpha=0.0
    )


def test_a_portfolio_task_file_without_an_algorithm_trains_direct_with_its_defaults():
    task = {k: v for k, v in demo_task_dict("portfolio").items() if k != "algorithm"}

    spec = TaskSpec.from_dict(task)

    assert spec.algorithm == "direct"
    assert spec.hyperparameters == DirectConfig().to_dict()
    assert TaskSpec.from_dict({**task, "algorithm": None}).algorithm == "direct"
    stock = {k: v for k, v in demo_task_dict().items() if k != "algorithm"}
    assert TaskSpec.from_dict(stock).algorithm == "ppo"


@pytest.mark.parametrize("command", [["train"], WALK])
def test_the_cli_trains_direct_on_env_portfolio_unless_algo_names_another(command):
    parse = build_parser().parse_args

    portfolio = task_from_args(parse([*command, "--env", "portfolio"]))
    assert portfolio["algorithm"] == "direct" and portfolio["kind"] == "portfolio"
    assert portfolio["env"]["rebalance_band"] == RECOMMENDED_REBALANCE_BAND
    assert task_from_args(parse([*command]))["algorithm"] == "ppo"
    assert task_from_args(parse([*command, "--env", "portfolio", "--algo", "ppo"]))["algorithm"] == "ppo"


def test_the_algo_help_says_the_default_depends_on_env(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: the task file's, else the default of --env: direct for portfolio" in text


def test_walk_forward_leaves_the_budget_to_the_algorithm_unless_env_steps_is_given():
    from trainer.cli.walk_forward import WALK_FORWARD_DIRECT_ENV_STEPS, WALK_FORWARD_ENV_STEPS

    assert build_parser().parse_args(WALK).env_steps is None  # resolved by cmd_walk_forward
    assert (WALK_FORWARD_DIRECT_ENV_STEPS, WALK_FORWARD_ENV_STEPS) == (2_000_000, 500_000)
    assert build_parser().parse_args([*WALK, "--env-steps", "1000"]).env_steps == 1000

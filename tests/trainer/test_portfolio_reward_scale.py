"""A portfolio task that leaves ``reward_scale`` out trains with its reward's own scale
(``RECOMMENDED_REWARD_SCALES``: the learning-quality benchmark's), whoever builds it (CLI, web,
the trainer alone); one it gives, a stock-trading task and an algorithm without the setting are
left alone."""

from __future__ import annotations

import pytest

from trainer.demo import demo_task_dict
from trainer.envs.portfolio_config import RECOMMENDED_REWARD_SCALES
from trainer.task import TaskSpec


def _spec(kind: str, reward: str | None = None, algorithm: str = "ppo", **hp) -> TaskSpec:
    d = demo_task_dict()
    d.update(kind=kind, algorithm=algorithm, hyperparameters=hp, env={"reward": reward} if reward else {})
    return TaskSpec.from_dict(d)


@pytest.mark.parametrize("reward", sorted(RECOMMENDED_REWARD_SCALES))
def test_each_portfolio_reward_gets_its_scale_when_the_task_leaves_it_out(reward):
    spec = _spec("portfolio", reward)
    assert spec.hyperparameters["reward_scale"] == RECOMMENDED_REWARD_SCALES[reward]
    assert RECOMMENDED_REWARD_SCALES == {"log_return": 100.0, "excess_log_return": 100.0, "differential_sharpe": 1.0}


def test_a_given_scale_stock_trading_and_the_stored_task_are_left_alone():
    assert _spec("portfolio", "log_return", reward_scale=3.0).hyperparameters["reward_scale"] == 3.0
    assert _spec("stock_trading").hyperparameters["reward_scale"] == 1.0
    a2c = _spec("portfolio", algorithm="a2c")
    assert a2c.hyperparameters["reward_scale"] == 100.0
    # the complete dict a checkpoint stores reads back unchanged
    again = TaskSpec.from_dict(_spec("portfolio", "differential_sharpe").to_dict())
    assert again.hyperparameters["reward_scale"] == 1.0

"""A closed gate holds 1/N (``direct_gate.CLOSED_GATE = "hold"``, the default since rule 4e of
docs/default-selection.md): the agent's policy acts exactly 1/N, its line keeps holding without
training, and its steps are accounted as held."""

from __future__ import annotations

import pytest
import torch

from tests.trainer.agents.test_direct_gate import SMALL, learner, synthetic_env
from trainer.agents import direct_gate
from trainer.agents.direct import DirectConfig
from trainer.errors import ConfigError


@pytest.fixture
def holding():
    assert direct_gate.CLOSED_GATE == "hold"  # the default (rule 4e)


def _zero_action(agent, env) -> bool:
    obs = env.reset()[0]
    return bool(torch.equal(agent.act(obs), torch.zeros_like(agent.act(obs))))


def test_a_closed_gate_on_the_placebo_holds_1_over_n_and_the_line_keeps_holding(tmp_path, holding):
    env = synthetic_env(tmp_path, ic=0.0)
    agent = learner(env)
    stats = agent.learn(env, 30 * 64 * 10)
    assert not stats["challenger"]["kept"], stats["challenger"]
    assert agent.config.hold_equal_weight and agent.config.challenger_alpha == 0.0
    assert stats["updates"] == 12 and stats["held_env_steps"] == 18 * 64 * 10  # four trainings of 3 steps, then held
    assert stats["env_steps"] == 30 * 64 * 10
    assert _zero_action(agent, env)  # the zero action: exactly 1/N through the env
    again = agent.learn(env, 3 * 64 * 10)  # the next generation of the line
    assert again["updates"] == 12 and again["held_env_steps"] == 3 * 64 * 10
    assert again["challenger"] == {"held": True, "closed_gate": "hold"}  # the agent page says why it holds
    assert direct_gate.verdict_text(again["challenger"]).startswith("closed earlier in this line")


def test_an_open_gate_trades_the_edge_as_before(tmp_path, holding):
    env = synthetic_env(tmp_path, ic=0.3)
    agent = learner(env)
    stats = agent.learn(env, 30 * 64 * 10)
    assert stats["challenger"]["kept"] and not agent.config.hold_equal_weight
    assert "held_env_steps" not in stats and stats["updates"] == 30 and not _zero_action(agent, env)


def test_a_holding_agent_saved_and_loaded_still_holds(tmp_path):
    env = synthetic_env(tmp_path, ic=0.3)
    agent = learner(env, hold_equal_weight=True)
    stats = agent.learn(env, 10 * 64 * 10)
    assert stats["updates"] == 0 and stats["challenger"]["held"] and _zero_action(agent, env)
    other = learner(env)
    other.load_state_dict(agent.state_dict())
    assert other.config.hold_equal_weight and _zero_action(other, env)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_hold_equal_weight_must_be_a_boolean(value):
    with pytest.raises(ConfigError) as err:
        DirectConfig.from_dict({**SMALL, "hold_equal_weight": value})
    assert err.value.details["field"] == "direct.hold_equal_weight"


def test_the_gate_line_says_the_agent_holds_1_over_n(tmp_path, holding):
    from trainer.agents.direct_gate import verdict_text

    env = synthetic_env(tmp_path, ic=0.0)
    verdict = learner(env).learn(env, 30 * 64 * 10)["challenger"]
    assert verdict["closed_gate"] == "hold"
    assert verdict_text(verdict).startswith("closed, no edge shown: the agent holds 1/N: held-out Sharpe difference")


def test_the_cli_says_how_many_steps_were_held(tmp_path, capsys, holding):
    from synthetic_market import generate, write_csv

    from tests.trainer.agents.test_direct_gate import END, START
    from trainer.cli.main import main

    path = write_csv(generate(3, ic=0.0, tickers=6, start=START, end=END), tmp_path / "placebo.csv.gz")
    args = ["train", "--env", "portfolio", "--data", str(path), "--out", str(tmp_path / "out"), "--no-progress"]
    args += ["--train", START, "2014-06-20", "--validation", "2014-07-01", "2014-12-31", "--test", "2015-01-02", END]
    args += ["--env-steps", str(30 * 64 * 10)]
    args += [f"--hp={k}={v}" for k, v in {"num_envs": 64, "rollout_steps": 10, "hidden_sizes": "[8]"}.items()]
    assert main(args) == 0
    out = capsys.readouterr().out
    gate = next(x for x in out.splitlines() if x.startswith("gate:"))
    trained = next(x for x in out.splitlines() if x.startswith("trained:"))
    assert "closed, no edge shown: the agent holds 1/N" in gate, gate
    assert f"{30 * 64 * 10:,} env steps" in trained and f"{18 * 64 * 10:,} of them held at 1/N" in trained, trained

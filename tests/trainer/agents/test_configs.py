"""Algorithm configs (PPO, A2C, SAC, TD3, DDPG): validation and (de)serialisation, and make_agent."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from trainer.agents import ALGORITHMS, make_agent
from trainer.agents.ppo import PPOAgent, PPOConfig
from trainer.agents.sac import SACAgent, SACConfig
from trainer.agents.td3 import DDPGConfig, TD3Agent, TD3Config
from trainer.errors import ConfigError


@pytest.mark.parametrize(
    ("algo", "changes", "field"),
    [
        ("ppo", {"learning_rate": -1e-3}, "ppo.learning_rate"),
        ("ppo", {"num_envs": 0}, "ppo.num_envs"),
        ("ppo", {"num_envs": 8, "rollout_steps": 4, "num_minibatches": 33}, "ppo.num_minibatches"),
        ("ppo", {"gamma": 0.0}, "ppo.gamma"),
        ("ppo", {"gamma": 1.01}, "ppo.gamma"),
        ("ppo", {"clip_coef": 0.0}, "ppo.clip_coef"),
        ("ppo", {"gae_lambda": 1.5}, "ppo.gae_lambda"),
        ("ppo", {"ent_coef": -0.1}, "ppo.ent_coef"),
        ("ppo", {"hidden_sizes": [64, 0]}, "ppo.hidden_sizes"),
        ("ppo", {"value_clip_coef": -0.2}, "ppo.value_clip_coef"),
        ("sac", {"actor_learning_rate": 0.0}, "sac.actor_learning_rate"),
        ("sac", {"critic_learning_rate": float("nan")}, "sac.critic_learning_rate"),
        ("sac", {"num_envs": 0}, "sac.num_envs"),
        ("sac", {"tau": 1.5}, "sac.tau"),
        ("sac", {"gamma": -0.5}, "sac.gamma"),
        ("sac", {"num_envs": 64, "buffer_size": 32}, "sac.buffer_size"),
        ("sac", {"batch_size": 0}, "sac.batch_size"),
        ("a2c", {"learning_rate": 0.0}, "a2c.learning_rate"),
        ("a2c", {"rollout_steps": 0}, "a2c.rollout_steps"),
        ("a2c", {"gae_lambda": -0.1}, "a2c.gae_lambda"),
        ("td3", {"policy_delay": 0}, "td3.policy_delay"),
        ("td3", {"target_policy_noise": -0.2}, "td3.target_policy_noise"),
        ("td3", {"num_envs": 64, "buffer_size": 32}, "td3.buffer_size"),
        ("ddpg", {"exploration_noise": float("nan")}, "ddpg.exploration_noise"),
        ("ddpg", {"tau": 0.0}, "ddpg.tau"),
    ],
)
def test_impossible_values_raise_config_error_naming_the_field(algo, changes, field):
    with pytest.raises(ConfigError) as err:
        ALGORITHMS[algo][1].from_dict(changes)
    assert err.value.details["field"] == field


@pytest.mark.parametrize("config_cls", [cls for _, cls in ALGORITHMS.values()])
def test_unknown_key_is_rejected_by_name(config_cls):
    with pytest.raises(ConfigError) as err:
        config_cls.from_dict({"learning_rat": 1e-3})
    assert err.value.details["field"] == f"{config_cls.algorithm}.learning_rat"
    # the message lists the names the algorithm does have (SAC/TD3 have no plain learning_rate)
    some_field = dataclasses.fields(config_cls)[0].name
    assert f"{config_cls.algorithm} has: " in err.value.message and some_field in err.value.message


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("0.001", "learning_rate"),
        (True, "num_envs"),
        (2.5, "update_epochs"),
        ("64", "hidden_sizes"),
        (1, "normalize_advantages"),
    ],
)
def test_wrong_types_are_rejected(value, key):
    with pytest.raises(ConfigError) as err:
        PPOConfig.from_dict({key: value})
    assert err.value.details["field"] == f"ppo.{key}"


@pytest.mark.parametrize("config_cls", [cls for _, cls in ALGORITHMS.values()])
def test_config_round_trips_through_json(config_cls):
    changes = {"num_envs": 16, "hidden_sizes": [32, 16], "gamma": 0.9}
    names = {f.name for f in dataclasses.fields(config_cls)}
    config = config_cls.from_dict({k: v for k, v in changes.items() if k in names})  # direct has no gamma
    again = config_cls.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config
    assert again.hidden_sizes == (32, 16)


def test_integral_json_numbers_are_accepted_for_integer_fields():
    assert SACConfig.from_dict({"buffer_size": 1e6}).buffer_size == 1_000_000


@pytest.mark.parametrize("config_cls", [cls for _, cls in ALGORITHMS.values()])
def test_defaults_are_valid_for_a_1024_env_pod(config_cls):
    config = config_cls()
    config.validate()
    assert config.num_envs == 1024


def test_make_agent_builds_each_algorithm_with_overrides():
    ppo = make_agent("ppo", 5, 2, {"hidden_sizes": [8], "num_envs": 2, "num_minibatches": 8}, device="cpu", seed=1)
    sac = make_agent("sac", 5, 2, {"hidden_sizes": [8], "num_envs": 2}, device="cpu", seed=1)
    assert isinstance(ppo, PPOAgent) and ppo.config.hidden_sizes == (8,)
    assert isinstance(sac, SACAgent) and sac.hyperparameters()["num_envs"] == 2


def test_make_agent_rejects_unknown_algorithm():
    with pytest.raises(ConfigError) as err:
        make_agent("dqn", 5, 2, {}, device="cpu", seed=0)
    assert err.value.details["field"] == "algorithm"


def test_the_torch_free_algorithm_names_match_the_agents_built():
    from trainer.algorithms import ALGORITHM_NAMES

    assert list(ALGORITHM_NAMES) == list(ALGORITHMS)


def test_ddpg_is_td3_with_one_critic_no_target_smoothing_and_no_delay():
    td3, ddpg = make_agent("td3", 5, 2, {"num_envs": 2}), make_agent("ddpg", 5, 2, {"num_envs": 2})
    assert (td3.config.twin_critics, td3.config.target_policy_noise, td3.config.policy_delay) == (True, 0.2, 2)
    assert (ddpg.config.twin_critics, ddpg.config.target_policy_noise, ddpg.config.policy_delay) == (False, 0.0, 1)
    assert len(td3.critic.qs) == 2 and len(ddpg.critic.qs) == 1
    assert isinstance(ddpg, TD3Agent) and ddpg.algorithm == "ddpg"
    # every other field keeps TD3's default
    same = {
        k: v
        for k, v in TD3Config().to_dict().items()
        if k not in ("twin_critics", "target_policy_noise", "policy_delay")
    }
    assert {k: DDPGConfig().to_dict()[k] for k in same} == same


def test_td3_updates_its_actor_every_policy_delay_critic_updates():
    from trainer.envs.pendulum import PendulumVecEnv

    hp = {"num_envs": 2, "hidden_sizes": [8], "batch_size": 4, "buffer_size": 64, "learning_starts": 4}
    for algo, delay in (("td3", 3), ("ddpg", 1)):
        agent = make_agent(algo, 3, 1, {**hp, "policy_delay": delay}, seed=0)
        agent.learn(PendulumVecEnv(2, seed=0), 4)  # fills the buffer up to learning_starts
        done = agent.updates
        changes = []
        for _ in range(6):
            before = [p.detach().clone() for p in agent.actor.parameters()]
            agent._update()
            changes.append(any(not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters())))
        expected = [(done + n) % delay == 0 for n in range(1, 7)]
        assert changes == expected, algo

"""Agent API shared by PPO, A2C, SAC, TD3 and DDPG: exact resume, acting, export, hyperparameters, cancel, progress."""

from __future__ import annotations

import io
import time

import numpy as np
import onnxruntime as ort
import pytest
import torch

from trainer.agents import agent_from_state_dict, make_agent
from trainer.envs.pendulum import PendulumVecEnv
from trainer.errors import ConfigError

# tiny configs: a few hundred transitions, enough updates to move every parameter and optimizer state
TINY = {
    "ppo": {"num_envs": 4, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [16, 16]},
    "sac": {
        "num_envs": 2,
        "hidden_sizes": [16, 16],
        "batch_size": 8,
        "buffer_size": 64,  # small enough to wrap around during the test
        "learning_starts": 16,
        "updates_per_step": 2,
    },
    "a2c": {"num_envs": 4, "rollout_steps": 8, "hidden_sizes": [16, 16]},
}
_TINY_TD3 = dict(TINY["sac"])
TINY["td3"] = TINY["ddpg"] = _TINY_TD3
ALGOS = ["ppo", "a2c", "sac", "td3", "ddpg"]
OFF_POLICY = ("sac", "td3", "ddpg")


def _agent(algo: str, seed: int = 0):
    return make_agent(algo, 3, 1, TINY[algo], device="cpu", seed=seed)


def _env(algo: str) -> PendulumVecEnv:
    return PendulumVecEnv(TINY[algo]["num_envs"], seed=5)


def _state_dict(agent):
    if agent.algorithm in OFF_POLICY:
        return agent.state_dict(include_replay_buffer=True)
    return agent.state_dict()


def _params(agent) -> list[torch.Tensor]:
    return [p.detach().clone() for p in agent.policy_module().parameters()] + [
        p.detach().clone() for p in agent.critic.parameters()
    ]


@pytest.mark.parametrize("algo", ALGOS)
def test_save_load_and_continue_is_bit_identical_to_training_straight_through(algo, tmp_path):
    straight = _agent(algo)
    env = _env(algo)
    straight.learn(env, 96)
    straight.learn(env, 64)

    first = _agent(algo)
    first.learn(_env(algo), 96)
    path = tmp_path / "agent.pt"
    torch.save(_state_dict(first), path)
    resumed = _agent(algo, seed=123)  # a different seed: everything must come from the file
    resumed.load_state_dict(torch.load(path, weights_only=True))
    resumed.learn(_env(algo), 64)

    for a, b in zip(_params(straight), _params(resumed), strict=True):
        assert torch.equal(a, b)
    assert resumed.env_steps == straight.env_steps and resumed.updates == straight.updates
    # and training did change the parameters
    assert any(not torch.equal(a, b) for a, b in zip(_params(straight), _params(_agent(algo)), strict=True))


@pytest.mark.parametrize("algo", ALGOS)
def test_agent_from_state_dict_rebuilds_the_same_policy(algo):
    agent = _agent(algo)
    agent.learn(_env(algo), 64)
    copy = agent_from_state_dict(torch.load(_save(agent), weights_only=True))
    obs = torch.randn(7, 3)
    torch.testing.assert_close(copy.act(obs), agent.act(obs), rtol=0, atol=0)


def _save(agent) -> io.BytesIO:
    buf = io.BytesIO()
    torch.save(agent.state_dict(), buf)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("algo", ALGOS)
def test_actions_are_bounded_and_policy_module_matches_deterministic_act(algo):
    agent = _agent(algo)
    agent.learn(_env(algo), 64)
    obs = torch.randn(50, 3) * 20.0
    for deterministic in (True, False):
        action = agent.act(obs, deterministic=deterministic)
        assert action.shape == (50, 1) and action.abs().max() <= 1.0
    policy = agent.policy_module()
    torch.testing.assert_close(policy(obs), agent.act(obs))


@pytest.mark.parametrize("algo", ALGOS)
def test_policy_module_exports_to_onnx_with_the_same_outputs(algo, tmp_path):
    agent = _agent(algo)
    agent.learn(_env(algo), 64)
    policy = agent.policy_module()
    obs = torch.randn(5, 3)
    path = tmp_path / "policy.onnx"
    torch.onnx.export(
        policy,
        (obs,),
        str(path),
        input_names=["obs"],
        output_names=["action"],
        dynamic_axes={"obs": {0: "batch"}},
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"obs": obs.numpy()})
    np.testing.assert_allclose(out, agent.act(obs).numpy(), atol=1e-5)


def test_ppo_set_hyperparameters_updates_optimizer_learning_rate_and_entropy_weight():
    agent = _agent("ppo")
    agent.set_hyperparameters(learning_rate=1e-2, ent_coef=0.05)
    assert [g["lr"] for g in agent.optimizer.param_groups] == [1e-2]
    assert agent.hyperparameters()["ent_coef"] == 0.05


@pytest.mark.parametrize("algo", OFF_POLICY)
def test_off_policy_set_hyperparameters_updates_actor_and_critic_optimizers(algo):
    agent = _agent(algo)
    agent.set_hyperparameters(actor_learning_rate=1e-2, critic_learning_rate=2e-2)
    assert agent.actor_optimizer.param_groups[0]["lr"] == 1e-2
    assert agent.critic_optimizer.param_groups[0]["lr"] == 2e-2


@pytest.mark.parametrize("algo", ALGOS)
def test_set_hyperparameters_rejects_bad_values_and_architecture_changes(algo):
    agent = _agent(algo)
    lr_key = "actor_learning_rate" if algo in OFF_POLICY else "learning_rate"
    with pytest.raises(ConfigError) as err:
        agent.set_hyperparameters(**{lr_key: -1.0})
    assert err.value.details["field"] == f"{algo}.{lr_key}"
    with pytest.raises(ConfigError) as err:
        agent.set_hyperparameters(hidden_sizes=[32])
    assert err.value.details["field"] == f"{algo}.hidden_sizes"
    assert agent.hyperparameters()[lr_key] > 0  # unchanged after the rejected calls


@pytest.mark.parametrize("algo", ALGOS)
def test_should_stop_ends_learning_early_and_reports_cancelled(algo):
    agent = _agent(algo)
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 2

    stats = agent.learn(_env(algo), 10_000, should_stop=stop)
    assert stats["cancelled"] is True
    assert stats["env_steps"] < 10_000


@pytest.mark.parametrize("algo", ALGOS)
def test_progress_reports_at_most_four_times_a_second_with_returns(algo):
    agent = _agent(algo)
    reports = []
    start = time.monotonic()
    env = _env(algo)
    stats = agent.learn(env, 210 * env.num_envs, progress=reports.append)  # every env finishes a 200-step episode
    elapsed = time.monotonic() - start
    assert 1 <= len(reports) <= elapsed * 4 + 1
    assert {"env_steps", "steps_per_s", "episode_return_mean"} <= set(reports[-1])
    assert stats["episodes"] > 0 and stats["episode_return_mean"] < 0


@pytest.mark.parametrize("algo", ALGOS)
def test_learning_on_an_env_of_other_dimensions_is_a_config_error(algo):
    agent = make_agent(algo, 4, 1, TINY[algo], device="cpu", seed=0)
    with pytest.raises(ConfigError) as err:
        agent.learn(_env(algo), 10)
    assert err.value.details["field"] == "env"


# ----------------------------------------------------------------------------- telemetry
@pytest.mark.parametrize(("total", "max_points"), [(1, 50), (3, 50), (49, 50), (50, 50), (51, 50), (1000, 50), (7, 2)])
def test_telemetry_records_at_most_max_points_including_the_last(total, max_points):
    from trainer.agents._common import telemetry_due

    due = [i for i in range(total) if telemetry_due(i, total, max_points)]
    assert 1 <= len(due) <= max_points
    assert due[-1] == total - 1
    if total <= max_points - 1:
        assert len(due) == total  # short calls record every iteration


PPO_CURVES = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance"}
CURVES = {
    "ppo": PPO_CURVES,
    "a2c": {"policy_loss", "value_loss", "entropy", "explained_variance"},
    "sac": {"critic_loss", "actor_loss", "alpha_loss", "alpha"},
    "td3": {"critic_loss", "actor_loss"},
    "ddpg": {"critic_loss", "actor_loss"},
}


@pytest.mark.parametrize("algo", ALGOS)
def test_telemetry_points_follow_env_steps_with_losses_and_learning_rate(algo):
    agent = _agent(algo)
    points = []
    stats = agent.learn(_env(algo), 256, telemetry=points.append)
    steps = [p["env_steps"] for p in points]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert steps[-1] == stats["env_steps"] == 256
    assert [p["total_env_steps"] for p in points] == steps  # a fresh agent: its life is this call
    assert all(p["steps_per_s"] > 0 and p["elapsed_s"] > 0 for p in points)
    last = points[-1]
    curves = CURVES[algo]
    assert curves <= set(last), f"missing {curves - set(last)}"
    lr_name = "actor_learning_rate" if algo in OFF_POLICY else "learning_rate"
    assert last["learning_rate"] == pytest.approx(getattr(agent.config, lr_name))
    if algo in ("ppo", "a2c"):
        # the last point's losses are the returned stats' (the same rollout)
        for name in curves:
            assert last[name] == pytest.approx(stats[name], nan_ok=True)
        assert last["explained_variance"] is None or last["explained_variance"] <= 1.0
    if algo == "ppo":
        assert 0.0 <= last["clip_fraction"] <= 1.0 and last["approx_kl"] is not None
    elif algo == "sac":
        assert last["alpha"] > 0


def test_telemetry_of_a_long_call_is_bounded_and_spread():
    agent = make_agent("ppo", 3, 1, {**TINY["ppo"], "num_envs": 2, "rollout_steps": 2, "update_epochs": 1}, seed=0)
    points = []
    agent.learn(PendulumVecEnv(2, seed=5), 4 * 120, telemetry=points.append)  # 120 rollouts
    assert len(points) <= 50
    gaps = np.diff([p["env_steps"] for p in points])
    assert gaps.max() <= 2 * gaps.min() + 4  # evenly spread, not bunched at one end

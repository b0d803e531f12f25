"""The hand-written PPO step (closed-form gradient, FlatAdam) against the autograd reference
(``torch.autograd`` + ``torch.optim.Adam`` + ``clip_grad_norm_``): one full update each, from the
same state and the same rollout, must leave the same parameters."""

from __future__ import annotations

import pytest
import torch

from trainer.agents import make_agent
from trainer.envs.pendulum import PendulumVecEnv

TINY = {"num_envs": 8, "rollout_steps": 16, "num_minibatches": 4, "update_epochs": 3, "hidden_sizes": [16, 16]}


def _pair(hyperparameters: dict):
    fast = make_agent("ppo", 3, 1, {**TINY, **hyperparameters}, device="cpu", seed=0)
    fast.learn(PendulumVecEnv(8, seed=1), 128)  # a state with non-zero Adam moments
    reference = make_agent("ppo", 3, 1, {**TINY, **hyperparameters}, device="cpu", seed=0)
    reference.load_state_dict(fast.state_dict())
    reference.set_hyperparameters(update_impl="autograd")
    assert fast.config.update_impl == "fast" and reference.config.update_impl == "autograd"
    return fast, reference


@pytest.mark.parametrize("hyperparameters", [{}, {"value_clip_coef": 0.2, "ent_coef": 0.05, "max_grad_norm": 0.1}])
def test_one_full_update_of_the_fast_path_equals_the_autograd_reference(hyperparameters):
    fast, reference = _pair(hyperparameters)
    torch.testing.assert_close(reference.net.flat, fast.net.flat, rtol=0, atol=0)
    # one rollout (identical: it does not depend on the update) and one full update each
    # (update_epochs x num_minibatches gradient steps)
    fast_stats = fast.learn(PendulumVecEnv(8, seed=2), TINY["num_envs"] * TINY["rollout_steps"])
    ref_stats = reference.learn(PendulumVecEnv(8, seed=2), TINY["num_envs"] * TINY["rollout_steps"])
    assert fast.updates == reference.updates == 2 * TINY["update_epochs"] * TINY["num_minibatches"]
    torch.testing.assert_close(reference.net.flat, fast.net.flat, rtol=0, atol=1e-5)
    torch.testing.assert_close(reference.optimizer.exp_avg, fast.optimizer.exp_avg, rtol=1e-4, atol=1e-7)
    assert reference.optimizer.steps == fast.optimizer.steps
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"):
        assert ref_stats[key] == pytest.approx(fast_stats[key], rel=1e-4, abs=1e-6)


def test_the_update_moves_the_parameters_so_the_comparison_means_something():
    fast, _ = _pair({})
    before = fast.net.flat.detach().clone()
    fast.learn(PendulumVecEnv(8, seed=2), TINY["num_envs"] * TINY["rollout_steps"])
    assert (fast.net.flat - before).abs().max() > 1e-3


def test_networks_the_fast_path_cannot_handle_train_with_the_reference():
    agent = make_agent("ppo", 3, 1, {**TINY, "critic_hidden_sizes": [32, 8, 8]}, device="cpu", seed=0)
    assert not agent.net.fast  # actor (16, 16) and critic (32, 8, 8) cannot be stacked
    before = agent.net.flat.detach().clone()
    stats = agent.learn(PendulumVecEnv(8, seed=1), 256)
    assert agent.updates == 2 * TINY["update_epochs"] * TINY["num_minibatches"]
    assert (agent.net.flat - before).abs().max() > 1e-3
    assert all(torch.isfinite(torch.tensor(stats[k])) for k in ("policy_loss", "value_loss"))
    again = make_agent("ppo", 3, 1, {**TINY, "critic_hidden_sizes": [32, 8, 8]}, device="cpu", seed=5)
    again.load_state_dict(agent.state_dict())
    torch.testing.assert_close(again.net.flat, agent.net.flat, rtol=0, atol=0)

"""A2C and TD3/DDPG loss pieces against hand-computed values."""

from __future__ import annotations

import torch

from trainer.ops.losses import (
    a2c_loss,
    diag_gaussian_entropy,
    diag_gaussian_log_prob,
    ppo_loss_gradients,
    td3_actor_loss,
    td3_critic_loss,
    td3_critic_target,
    td3_target_action,
)


def test_a2c_loss_matches_hand_values_and_sends_no_gradient_into_advantages_or_returns():
    log_prob = torch.tensor([-0.5, -1.0], requires_grad=True)
    entropy = torch.tensor([0.5, 1.5], requires_grad=True)
    values = torch.tensor([1.0, 0.0], requires_grad=True)
    advantages = torch.tensor([2.0, 1.0], requires_grad=True)
    returns = torch.tensor([0.0, 2.0], requires_grad=True)
    out = a2c_loss(log_prob, entropy, values, advantages, returns, ent_coef=0.1, vf_coef=0.5)
    # policy: -mean(-0.5 * 2, -1 * 1) = 1; value: 0.5 * mean(1, 4) = 1.25; entropy: 1.0
    assert out.policy_loss.item() == 1.0
    assert out.value_loss.item() == 1.25
    assert out.entropy.item() == 1.0
    torch.testing.assert_close(out.loss, torch.tensor(1.0 - 0.1 * 1.0 + 0.5 * 1.25))
    out.loss.backward()
    torch.testing.assert_close(log_prob.grad, torch.tensor([-1.0, -0.5]))  # -A / B
    torch.testing.assert_close(values.grad, torch.tensor([0.25, -0.5]))  # vf_coef (V - R) / B
    torch.testing.assert_close(entropy.grad, torch.tensor([-0.05, -0.05]))  # -ent_coef / B
    assert advantages.grad is None and returns.grad is None


def test_a2c_gradient_equals_ppos_first_step_gradient_at_ratio_one():
    """A2C's policy gradient is PPO's at the rollout's own parameters (ratio 1, nothing clipped)."""
    gen = torch.Generator().manual_seed(0)
    means = torch.randn(6, 2, generator=gen).requires_grad_(True)
    values = torch.randn(6, generator=gen).requires_grad_(True)
    log_std = torch.tensor([-0.3, 0.2], requires_grad=True)
    actions = torch.randn(6, 2, generator=gen)
    advantages, returns = torch.randn(6, generator=gen), torch.randn(6, generator=gen)
    log_prob = diag_gaussian_log_prob(actions, means, log_std)
    entropy = diag_gaussian_entropy(log_std).expand(6)
    a2c_loss(log_prob, entropy, values, advantages, returns, ent_coef=0.01, vf_coef=0.5).loss.backward()
    ppo = ppo_loss_gradients(
        means.detach(),
        values.detach(),
        log_std.detach(),
        actions,
        log_prob.detach(),  # old = new: ratio 1
        advantages,
        values.detach(),
        returns,
        clip_coef=0.2,
        value_clip_coef=None,
        ent_coef=0.01,
        vf_coef=0.5,
    )
    torch.testing.assert_close(means.grad, ppo.means)
    torch.testing.assert_close(values.grad, ppo.values)
    torch.testing.assert_close(log_std.grad, ppo.log_std)


def test_td3_target_action_clips_the_noise_then_the_action():
    target = torch.tensor([[0.9, -0.2, 0.0]])
    noise = torch.tensor([[0.3, -0.7, 0.1]])
    out = td3_target_action(target, noise, noise_clip=0.5)
    # 0.9 + 0.3 = 1.2 -> 1; -0.2 + clip(-0.7) = -0.7; 0 + 0.1 = 0.1
    torch.testing.assert_close(out, torch.tensor([[1.0, -0.7, 0.1]]))
    # DDPG: no noise leaves the target actor's action as it is
    torch.testing.assert_close(td3_target_action(target, torch.zeros_like(noise), noise_clip=0.5), target)


def test_td3_critic_target_takes_the_smaller_target_critic_and_stops_at_termination():
    rewards = torch.tensor([1.0, 2.0])
    terminated = torch.tensor([False, True])
    next_q = torch.tensor([[3.0, 5.0], [4.0, 1.0]])  # (K=2, B=2)
    # row 0: 1 + 0.9 * min(3, 4) = 3.7; row 1 is terminal: 2
    torch.testing.assert_close(td3_critic_target(rewards, terminated, next_q, gamma=0.9), torch.tensor([3.7, 2.0]))
    # DDPG's single critic (K=1): row 0 = 1 + 0.9 * 3
    single = td3_critic_target(rewards, terminated, next_q[:1], gamma=0.9)
    torch.testing.assert_close(single, torch.tensor([3.7, 2.0]))
    torch.testing.assert_close(
        td3_critic_target(rewards, torch.tensor([0.0, 0.0]), next_q[1:], gamma=0.5), torch.tensor([3.0, 2.5])
    )


def test_td3_critic_loss_sums_half_mean_squared_errors_of_each_critic():
    q = torch.tensor([[1.0, 2.0], [3.0, 2.0]], requires_grad=True)
    target = torch.tensor([2.0, 2.0])
    loss = td3_critic_loss(q, target)
    # critic 1: 0.5 * mean(1, 0) = 0.25; critic 2: 0.5 * mean(1, 0) = 0.25
    assert loss.item() == 0.5
    loss.backward()
    torch.testing.assert_close(q.grad, torch.tensor([[-0.5, 0.0], [0.5, 0.0]]))  # (Q - y) / B


def test_td3_actor_loss_is_minus_the_mean_first_critic_value():
    q1_pi = torch.tensor([1.0, 3.0], requires_grad=True)
    loss = td3_actor_loss(q1_pi)
    assert loss.item() == -2.0
    loss.backward()
    torch.testing.assert_close(q1_pi.grad, torch.tensor([-0.5, -0.5]))

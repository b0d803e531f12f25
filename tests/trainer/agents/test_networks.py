"""Networks: observation normalizer, squashed Gaussian policy, fused actor-critic forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.agents.networks import (
    GaussianActor,
    RunningMeanStd,
    SquashedGaussianActor,
    ValueCritic,
    actor_critic_forward,
    fast_tanh,
)


def test_running_mean_std_merged_in_batches_equals_statistics_of_all_data():
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=gen) * torch.tensor([1.0, 10.0, 0.1]) + 5.0 for n in (7, 1, 30)]
    rms = RunningMeanStd(3, epsilon=1e-12)
    for b in batches:
        rms.update(b)
    data = torch.cat(batches).double().numpy()
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(0), rtol=1e-9)
    np.testing.assert_allclose(rms.var.numpy(), data.var(0), rtol=1e-9)
    normalized = rms(torch.cat(batches))
    np.testing.assert_allclose(normalized.mean(0).numpy(), 0.0, atol=1e-5)
    np.testing.assert_allclose(normalized.std(0, unbiased=False).numpy(), 1.0, atol=1e-5)


def test_normalized_observations_are_clipped():
    rms = RunningMeanStd(1, clip=5.0)
    rms.update(torch.tensor([[0.0], [2.0]]))  # mean 1, std 1
    assert rms(torch.tensor([[100.0], [-100.0]])).flatten().tolist() == [5.0, -5.0]


def test_squashed_gaussian_log_prob_is_the_change_of_variables_density():
    # For a 1-D action, pi(a) = N(atanh a) / (1 - a^2); check the returned log-densities of
    # samples against that formula evaluated independently with torch.distributions.
    torch.manual_seed(0)
    actor = SquashedGaussianActor(2, 1, (8,))
    obs = torch.randn(64, 2)
    action, log_prob = actor.sample(obs, torch.Generator().manual_seed(1))
    assert action.abs().max() < 1.0
    mean, log_std = actor._heads(obs)
    u = torch.atanh(action.clamp(-0.999999, 0.999999))
    expected = torch.distributions.Normal(mean, log_std.exp()).log_prob(u) - torch.log(1 - action.pow(2))
    torch.testing.assert_close(log_prob, expected.squeeze(-1), rtol=1e-3, atol=1e-3)


def test_fast_tanh_matches_torch_tanh_in_value_and_gradient():
    x = torch.linspace(-12.0, 12.0, 2001, requires_grad=True)
    y = fast_tanh(x)
    torch.testing.assert_close(y, torch.tanh(x), atol=3e-7, rtol=0)
    y.sum().backward()
    torch.testing.assert_close(x.grad, 1.0 - torch.tanh(x.detach()).pow(2), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("actor_sizes", "critic_sizes"), [((16, 8), (16, 8)), ((16,), (12, 8))])
def test_actor_critic_forward_equals_the_modules_and_trains_each_ones_parameters(actor_sizes, critic_sizes):
    torch.manual_seed(0)
    actor, critic = GaussianActor(5, 2, actor_sizes, -0.5), ValueCritic(5, critic_sizes)
    obs = torch.randn(33, 5)
    mean, value = actor_critic_forward(actor, critic, obs)
    torch.testing.assert_close(mean, actor(obs), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(value, critic(obs), atol=1e-6, rtol=1e-5)
    (mean.sum() + value.sum()).backward()
    expected = [torch.autograd.grad(actor(obs).sum(), list(actor.mean.parameters()))]
    expected.append(torch.autograd.grad(critic(obs).sum(), list(critic.parameters())))
    got = [[p.grad for p in actor.mean.parameters()], [p.grad for p in critic.parameters()]]
    for exp_grads, got_grads in zip(expected, got, strict=True):
        for e, g in zip(exp_grads, got_grads, strict=True):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)

"""Networks: observation normalizer, squashed Gaussian policy, the flat actor-critic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.agents.flat import FlatActorCritic, FlatAdam, fast_tanh
from trainer.agents.networks import GaussianActor, RunningMeanStd, SquashedGaussianActor, ValueCritic, batch_moments


def test_running_mean_std_merged_in_batches_equals_statistics_of_all_data():
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=gen) * torch.tensor([1.0, 10.0, 0.1]) + 5.0 for n in (7, 1, 30)]
    rms = RunningMeanStd(3, epsilon=1e-12)
    for b in batches:
        rms.update(b)
    data = torch.cat(batches).double().numpy()
    # batch moments in float32, merged in float64
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(0), rtol=1e-6)
    np.testing.assert_allclose(rms.var.numpy(), data.var(0), rtol=1e-6)
    normalized = rms(torch.cat(batches))
    np.testing.assert_allclose(normalized.mean(0).numpy(), 0.0, atol=1e-5)
    np.testing.assert_allclose(normalized.std(0, unbiased=False).numpy(), 1.0, atol=1e-5)


@pytest.mark.parametrize("fused", [True, False])  # var_mean (accelerators) and the CPU's two-pass
def test_float32_batch_moments_match_float64_statistics(fused):
    gen = torch.Generator().manual_seed(1)
    # a 4,096-env batch of 291 features with offsets and scales like the trading observations
    scale = torch.logspace(-2, 2, 291, dtype=torch.float64)
    x64 = torch.randn(4096, 291, generator=gen, dtype=torch.float64) * scale + 3.0 * scale
    mean, var = batch_moments(x64.float(), fused=fused)
    assert mean.dtype == var.dtype == torch.float32
    reference = x64.float().double()
    np.testing.assert_allclose(mean.numpy(), reference.mean(0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), reference.var(0, unbiased=False).numpy(), rtol=1e-5)


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


def test_fast_tanh_matches_torch_tanh():
    x = torch.linspace(-12.0, 12.0, 2001)
    torch.testing.assert_close(fast_tanh(x), torch.tanh(x), atol=3e-7, rtol=0)


def test_networks_the_fast_path_cannot_stack_still_live_in_one_flat_tensor():
    torch.manual_seed(0)
    actor, critic = GaussianActor(5, 2, (16,), -0.5), ValueCritic(5, (12, 8))
    obs = torch.randn(33, 5)
    with torch.no_grad():
        want_mean, want_value = actor(obs), critic(obs)
    net = FlatActorCritic(actor, critic)
    assert not net.fast
    assert net.flat.numel() == sum(p.numel() for p in [*actor.parameters(), *critic.parameters()])
    mean, value = net.forward(obs)
    torch.testing.assert_close(mean, want_mean, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(value, want_value, atol=1e-6, rtol=1e-5)
    with torch.no_grad():
        net.flat.add_(0.5)  # the modules read the flat tensor
    assert not torch.allclose(actor(obs), want_mean)


@pytest.mark.parametrize("hidden_sizes", [(16, 8), (12,), (8, 8, 8)])
def test_flat_actor_critic_matches_the_modules_and_backpropagates_like_autograd(hidden_sizes):
    torch.manual_seed(0)
    actor, critic = GaussianActor(5, 2, hidden_sizes, -0.5), ValueCritic(5, hidden_sizes)
    obs = torch.randn(33, 5)
    with torch.no_grad():
        want_mean, want_value = actor(obs), critic(obs)
    net = FlatActorCritic(actor, critic)
    # the modules now read the flat tensor: same outputs as before, and updates show through
    torch.testing.assert_close(actor(obs), want_mean)
    keep: list[torch.Tensor] = []
    mean, value = net.forward(obs, keep)
    torch.testing.assert_close(mean, want_mean, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(value, want_value, atol=1e-6, rtol=1e-5)

    grad_mean, grad_value, grad_log_std = torch.randn(33, 2), torch.randn(33), torch.randn(2)
    net.backward(keep, grad_mean, grad_value, grad_log_std)
    surrogate = (actor(obs) * grad_mean).sum() + (critic(obs) * grad_value).sum() + (actor.log_std * grad_log_std).sum()
    params = [*actor.parameters(), *critic.parameters()]
    expected = torch.autograd.grad(surrogate, params)
    for p, want in zip(params, expected, strict=True):
        # each parameter is a view of net.flat; its gradient sits at the same place in net.grad
        offset = (p.data_ptr() - net.flat.data_ptr()) // p.element_size()
        got = net.grad.as_strided(p.shape, p.stride(), offset)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_flat_adam_takes_the_same_steps_as_torch_adam():
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(50, generator=gen)
    reference = start.clone().requires_grad_()
    torch_adam = torch.optim.Adam([reference], lr=1e-2, eps=1e-5)
    param, grad = start.clone(), torch.zeros(50)
    flat_adam = FlatAdam(param, grad, lr=1e-2, eps=1e-5)
    for _ in range(5):
        g = torch.randn(50, generator=gen)
        reference.grad = g.clone()
        torch_adam.step()
        grad.copy_(g)
        flat_adam.step()
    torch.testing.assert_close(param, reference.detach(), atol=1e-6, rtol=1e-5)

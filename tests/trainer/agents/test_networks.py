"""Networks: observation normalizer and squashed Gaussian policy."""

from __future__ import annotations

import numpy as np
import torch

from trainer.agents.networks import RunningMeanStd, SquashedGaussianActor


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

"""The cross-sectional policy: exactly 1/N at zero output, permutation-equivariant, any universe size, bounded tilt."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.agents.cross_sectional import CrossSectionalPolicy, features_per_ticker, split_observation
from trainer.envs.portfolio_dynamics import target_weights
from trainer.envs.portfolio_layout import portfolio_obs_dim
from trainer.errors import ConfigError

K = 6


def observations(batch: int, n: int, seed: int = 0) -> torch.Tensor:
    """Random portfolio observations: z-scored features, then drifted weights that sum to 1."""
    g = torch.Generator().manual_seed(seed)
    market = torch.randn((batch, K * n), generator=g) * 2
    weights = torch.softmax(torch.randn((batch, n + 1), generator=g) * 0.3, dim=1)
    return torch.cat([market, weights], dim=1)


def trained_looking(policy: CrossSectionalPolicy, seed: int = 1, scale: float = 1.0) -> CrossSectionalPolicy:
    """The policy with a non-zero head, as after training."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        policy.head.weight.copy_(torch.randn(policy.head.weight.shape, generator=g) * scale)
        policy.head.bias.fill_(0.3)
        policy.weight_gain.fill_(-0.7)
    return policy


def test_a_fresh_policy_holds_exactly_the_env_equal_weight_portfolio():
    policy = CrossSectionalPolicy(K, (16,), kappa=0.5)
    obs = observations(32, 7)
    action = policy(obs)
    assert torch.equal(action, torch.zeros(32, 8))  # the zero action, bit for bit
    target = target_weights(action, logit_scale=4.0, cash_bias=20.0)
    assert torch.equal(target, target_weights(torch.zeros(32, 8), logit_scale=4.0, cash_bias=20.0))
    features, weights = split_observation(obs, K)
    assert torch.equal(policy.tilt_weights(features, weights), torch.full((32, 7), 1.0 / 7))


def test_shuffling_the_tickers_shuffles_the_actions_the_same_way():
    policy = trained_looking(CrossSectionalPolicy(K, (16, 8), kappa=0.5, cash=True))
    n = 9
    obs = observations(16, n)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(3))
    market = obs[:, : K * n].reshape(16, K, n)[:, :, perm].reshape(16, K * n)
    weights = obs[:, K * n :]
    shuffled = torch.cat([market, weights[:, :n][:, perm], weights[:, n:]], dim=1)
    action, action_shuffled = policy(obs), policy(shuffled)
    assert not torch.allclose(action[:, :n], torch.zeros(16, n))  # the test means something
    torch.testing.assert_close(action_shuffled[:, :n], action[:, :n][:, perm], rtol=0, atol=1e-6)
    torch.testing.assert_close(action_shuffled[:, n], action[:, n], rtol=0, atol=1e-6)  # cash: a set function


@pytest.mark.parametrize("n", [2, 5, 40])
def test_one_policy_acts_on_universes_of_any_size_with_the_tilt_bounded_by_kappa(n):
    kappa = 0.5
    policy = trained_looking(CrossSectionalPolicy(K, (16,), kappa=kappa), scale=50.0)  # saturated scores
    obs = observations(64, n, seed=n)
    action = policy(obs)
    assert action.shape == (64, n + 1) and action.abs().max() <= 2 * kappa / 4.0 + 1e-6
    target = target_weights(action, logit_scale=4.0, cash_bias=20.0)[:, :n]
    ratio = target.max(dim=1).values / target.min(dim=1).values
    assert ratio.max() <= math.exp(2 * kappa) * (1 + 1e-5)
    assert ratio.max() > 1.5  # saturated: the bound is what holds it
    features, weights = split_observation(obs, K)
    # the env's target is the policy's own weights (up to the zero action's e^-20 cash)
    torch.testing.assert_close(target, policy.tilt_weights(features, weights).double(), rtol=1e-6, atol=1e-7)


def test_sizes_that_are_not_a_portfolio_observation_are_refused_naming_the_env():
    assert features_per_ticker(portfolio_obs_dim(29, 9), 30) == 9
    with pytest.raises(ConfigError) as err:
        features_per_ticker(11, 4)  # 3 tickers: 11 - 4 = 7 market values is not 3 K
    assert err.value.details["field"] == "env"
    with pytest.raises(ConfigError) as err:
        CrossSectionalPolicy(K, (16,), kappa=0.0)
    assert err.value.details["field"] == "kappa"

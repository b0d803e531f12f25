"""PPO and SAC losses against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.ops.losses import (
    diag_gaussian_entropy,
    diag_gaussian_log_prob,
    diag_gaussian_log_prob_from_noise,
    ppo_loss_gradients,
    ppo_policy_loss,
    ppo_value_loss,
    sac_actor_loss,
    sac_critic_loss,
    sac_critic_target,
    sac_temperature_loss,
    tanh_gaussian_log_prob,
)


def test_ppo_policy_loss_clips_ratios_and_passes_no_gradient_through_clipped_samples():
    # ratios 1.5, 0.5, 1.1; advantages 1, -1, 2; clip 0.2
    #   sample 0: min(1.5 * 1, 1.2 * 1) = 1.2 (clipped)
    #   sample 1: min(0.5 * -1, 0.8 * -1) = -0.8 (clipped)
    #   sample 2: min(1.1 * 2, 1.1 * 2) = 2.2
    # loss = -(1.2 - 0.8 + 2.2) / 3 = -0.866667
    new = torch.log(torch.tensor([1.5, 0.5, 1.1])).requires_grad_()
    out = ppo_policy_loss(new, torch.zeros(3), torch.tensor([1.0, -1.0, 2.0]), 0.2)
    assert out.loss.item() == pytest.approx(-2.6 / 3, rel=1e-6)
    assert out.clip_fraction.item() == pytest.approx(2 / 3)
    # k3 estimator: mean((r - 1) - log r)
    kl = ((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5)) + (0.1 - math.log(1.1))) / 3
    assert out.approx_kl.item() == pytest.approx(kl, rel=1e-5)
    out.loss.backward()
    # d/dlogp of -(r * A) / 3 = -(r * A) / 3 = -(1.1 * 2) / 3 for the unclipped sample only
    torch.testing.assert_close(new.grad, torch.tensor([0.0, 0.0, -2.2 / 3]))


def test_ppo_value_loss_clipped_takes_the_worse_of_both_errors():
    # new V = 1, 3; old V = 2, 2; returns 0, 4; clip 0.5
    # unclipped errors: (1-0)^2 = 1, (3-4)^2 = 1
    # clipped values: 2 - 0.5 = 1.5 -> 2.25; 2 + 0.5 = 2.5 -> (2.5-4)^2 = 2.25
    new, old, ret = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0]), torch.tensor([0.0, 4.0])
    assert ppo_value_loss(new, old, ret, 0.5).item() == pytest.approx(0.5 * 2.25)
    assert ppo_value_loss(new, old, ret, None).item() == pytest.approx(0.5 * 1.0)


def test_gaussian_log_prob_and_entropy_match_hand_values_and_torch_distributions():
    # x = 0.5, mu = 0, sigma = 2: -0.5 * 0.25^2 - ln 2 - 0.5 ln(2 pi) = -1.643336
    lp = diag_gaussian_log_prob(torch.tensor([[0.5]]), torch.zeros(1, 1), torch.log(torch.tensor([2.0])))
    assert lp.item() == pytest.approx(-0.03125 - math.log(2) - 0.5 * math.log(2 * math.pi), rel=1e-6)
    # entropy of sigma = (1, 2): 2 * 0.5 * (1 + ln 2 pi) + ln 2 = 3.531025
    ent = diag_gaussian_entropy(torch.tensor([0.0, math.log(2.0)]))
    assert ent.item() == pytest.approx(1.0 + math.log(2 * math.pi) + math.log(2.0), rel=1e-6)
    gen = torch.Generator().manual_seed(0)
    x, mu, log_std = (torch.randn(4, 3, generator=gen) for _ in range(3))
    ref = torch.distributions.Normal(mu, log_std.exp())
    torch.testing.assert_close(diag_gaussian_log_prob(x, mu, log_std), ref.log_prob(x).sum(-1))
    torch.testing.assert_close(diag_gaussian_entropy(log_std), ref.entropy().sum(-1))


def test_tanh_log_prob_applies_the_jacobian_and_stays_finite_for_saturated_actions():
    u = torch.tensor([[0.3, -1.2]])
    mu, log_std = torch.tensor([[0.1, -0.5]]), torch.tensor([[-0.2, 0.4]])
    naive = diag_gaussian_log_prob(u, mu, log_std) - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    torch.testing.assert_close(tanh_gaussian_log_prob(u, mu, log_std), naive)
    # at u = 20, 1 - tanh^2 underflows in float32; exact: log(1 - tanh^2) ~= ln 4 - 40
    big = torch.tensor([[20.0]])
    lp = tanh_gaussian_log_prob(big, torch.tensor([[20.0]]), torch.zeros(1, 1))
    assert lp.item() == pytest.approx(-0.5 * math.log(2 * math.pi) - (math.log(4.0) - 40.0), rel=1e-5)


def test_sac_critic_target_uses_min_q_entropy_term_and_stops_at_termination():
    # sample 0: min(3, 4) - 0.2 * (-1) = 3.2; y = 1 + 0.9 * 3.2 = 3.88
    # sample 1: terminal, y = r = 2
    y = sac_critic_target(
        torch.tensor([1.0, 2.0]),
        torch.tensor([False, True]),
        torch.tensor([3.0, 5.0]),
        torch.tensor([4.0, 1.0]),
        torch.tensor([-1.0, 0.5]),
        gamma=0.9,
        alpha=0.2,
    )
    torch.testing.assert_close(y, torch.tensor([3.88, 2.0]))
    # 0.5 * mean(0.88^2, 0) + 0.5 * mean(0.12^2, 1^2) = 0.1936 + 0.2536
    loss = sac_critic_loss(torch.tensor([3.0, 2.0]), torch.tensor([4.0, 1.0]), y)
    assert loss.item() == pytest.approx(0.4472, rel=1e-5)


def test_sac_actor_loss_trades_entropy_against_the_smaller_q():
    # mean(0.5 * -1 - min(1, 2), 0.5 * 1 - min(2, 0)) = mean(-1.5, 0.5) = -0.5
    loss = sac_actor_loss(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 0.0]), torch.tensor([-1.0, 1.0]), 0.5)
    assert loss.item() == pytest.approx(-0.5)


def test_temperature_falls_when_entropy_exceeds_its_target():
    # alpha = 0.5, log pi = -1, -3 (entropy 2 nats > target -1)
    # J = -mean(0.5 * (-1 - 1), 0.5 * (-3 - 1)) = 1.5; dJ/dlog_alpha = J = 1.5 > 0 -> alpha decreases
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    loss = sac_temperature_loss(log_alpha, torch.tensor([-1.0, -3.0]), target_entropy=-1.0)
    assert loss.item() == pytest.approx(1.5, rel=1e-6)
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(1.5, rel=1e-6)


def test_log_prob_from_noise_equals_the_density_of_the_sampled_action():
    gen = torch.Generator().manual_seed(0)
    mu, log_std = torch.randn(6, 3, generator=gen), torch.tensor([-1.0, 0.0, 0.5])
    noise = torch.randn(6, 3, generator=gen)
    x = mu + noise * log_std.exp()
    torch.testing.assert_close(
        diag_gaussian_log_prob_from_noise(noise, log_std), diag_gaussian_log_prob(x, mu, log_std)
    )


@pytest.mark.parametrize("value_clip_coef", [None, 0.3])
def test_ppo_loss_gradients_equal_autograd_of_the_joint_loss(value_clip_coef):
    # ratios spread over [0.4, 2.5] so that some samples are clipped on each side
    gen = torch.Generator().manual_seed(0)
    b, a = 64, 2
    means = torch.randn(b, a, generator=gen, dtype=torch.float64).requires_grad_()
    values = torch.randn(b, generator=gen, dtype=torch.float64).requires_grad_()
    log_std = torch.tensor([-0.3, 0.2], dtype=torch.float64).requires_grad_()
    actions = torch.randn(b, a, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        old_log_prob = diag_gaussian_log_prob(actions, means, log_std) + torch.empty(b).uniform_(
            -0.9, 0.9, generator=gen
        )
    advantages = torch.randn(b, generator=gen, dtype=torch.float64)
    old_values = values.detach() + 0.5 * torch.randn(b, generator=gen, dtype=torch.float64)
    returns = torch.randn(b, generator=gen, dtype=torch.float64)
    coefs = {"clip_coef": 0.2, "value_clip_coef": value_clip_coef, "ent_coef": 0.01, "vf_coef": 0.5}

    pg = ppo_policy_loss(diag_gaussian_log_prob(actions, means, log_std), old_log_prob, advantages, 0.2)
    v_loss = ppo_value_loss(values, old_values, returns, value_clip_coef)
    entropy = diag_gaussian_entropy(log_std)
    loss = pg.loss - 0.01 * entropy + 0.5 * v_loss
    expected = torch.autograd.grad(loss, [means, values, log_std])
    got = ppo_loss_gradients(
        means.detach(),
        values.detach(),
        log_std.detach(),
        actions,
        old_log_prob,
        advantages,
        old_values,
        returns,
        **coefs,
    )
    assert 0 < pg.clip_fraction < 1
    for e, g in zip(expected, got[:3], strict=True):
        torch.testing.assert_close(g, e, atol=1e-12, rtol=1e-10)
    want_stats = torch.stack([pg.loss, v_loss, entropy, pg.approx_kl, pg.clip_fraction.double()]).detach()
    torch.testing.assert_close(got.stats, want_stats, atol=1e-12, rtol=1e-10)

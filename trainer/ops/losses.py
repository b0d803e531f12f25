"""Loss functions of PPO, A2C, SAC and TD3/DDPG and the Gaussian-policy densities they use.

Pure functions on tensors, so each formula can be checked against hand-computed values.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = [
    "A2CLoss",
    "PPOGradients",
    "PolicyLoss",
    "diag_gaussian_entropy",
    "diag_gaussian_log_prob",
    "diag_gaussian_log_normalizer",
    "diag_gaussian_log_prob_from_noise",
    "ppo_loss_gradients",
    "ppo_policy_loss",
    "ppo_value_loss",
    "sac_actor_loss",
    "sac_critic_loss",
    "sac_critic_target",
    "sac_temperature_loss",
    "tanh_gaussian_log_prob",
    "a2c_loss",
    "td3_actor_loss",
    "td3_critic_loss",
    "td3_critic_target",
    "td3_target_action",
]

_LOG_2PI = math.log(2.0 * math.pi)


def diag_gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log density of a diagonal Gaussian, summed over the action dimension.

    ``log N(x; mu, sigma) = sum_i [-(x_i - mu_i)^2 / (2 sigma_i^2) - log sigma_i - log(2 pi) / 2]``

    Args:
        x: (B, A) float32 points.
        mean: (B, A) float32 means.
        log_std: (A,) or (B, A) float32 natural-log standard deviations.

    Returns:
        (B,) float32 log densities (nats).
    """
    return diag_gaussian_log_prob_from_noise((x - mean) * torch.exp(-log_std), log_std)


def diag_gaussian_log_prob_from_noise(noise: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log density of ``x = mean + exp(log_std) * noise`` given the standard-normal ``noise``.

    The same value as :func:`diag_gaussian_log_prob` (``z = noise``), without recomputing
    ``z = (x - mean) / sigma``: ``sum_i [-noise_i^2 / 2 - log sigma_i - log(2 pi) / 2]``.

    Args:
        noise: (B, A) float32 standard-normal draws.
        log_std: (A,) or (B, A) float32 natural-log standard deviations.

    Returns:
        (B,) float32 log densities (nats).
    """
    return noise.pow(2).sum(dim=-1).mul(-0.5) - diag_gaussian_log_normalizer(log_std)


def diag_gaussian_log_normalizer(log_std: torch.Tensor) -> torch.Tensor:
    """The part of a diagonal Gaussian's log density that does not depend on the point:
    ``sum_i log sigma_i + A log(2 pi) / 2`` (``log N = -|z|^2 / 2 -`` this). The one place
    the Gaussian log-density's constant is written (the rollout hoists it, the closed-form PPO
    gradient and :func:`diag_gaussian_log_prob_from_noise` subtract it).

    Args:
        log_std: (A,) or (B, A) float32 natural-log standard deviations.

    Returns:
        () or (B,) float32 (nats).
    """
    return log_std.sum(dim=-1) + 0.5 * _LOG_2PI * log_std.shape[-1]


def diag_gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Differential entropy of a diagonal Gaussian, summed over the last dimension.

    ``H = sum_i [log sigma_i + (1 + log(2 pi)) / 2]`` nats.

    Args:
        log_std: (A,) or (B, A) float32.

    Returns:
        () or (B,) float32 entropies (nats).
    """
    return (log_std + 0.5 * (1.0 + _LOG_2PI)).sum(dim=-1)


def tanh_gaussian_log_prob(pre_tanh: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log density of ``a = tanh(u)``, ``u ~ N(mean, exp(log_std))``, summed over actions.

    Change of variables (Haarnoja et al. 2018, "Soft Actor-Critic", arXiv 1801.01290,
    appendix C, eq. 21): ``log pi(a) = log N(u) - sum_i log(1 - tanh(u_i)^2)``, with the
    numerically stable identity ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``.

    Args:
        pre_tanh: (B, A) float32 samples u before squashing.
        mean: (B, A) float32 Gaussian means.
        log_std: (B, A) float32 Gaussian log standard deviations.

    Returns:
        (B,) float32 log densities of the squashed actions (nats).
    """
    log_det = 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
    return diag_gaussian_log_prob(pre_tanh, mean, log_std) - log_det.sum(dim=-1)


class PolicyLoss(NamedTuple):
    """Result of :func:`ppo_policy_loss`.

    Attributes:
        loss: () float32 clipped surrogate loss to minimise.
        approx_kl: () float32 estimate of KL(old || new), ``mean((r - 1) - log r)`` (Schulman's
            low-variance "k3" estimator), detached.
        clip_fraction: () float32 fraction of samples whose ratio left ``[1 - c, 1 + c]``, detached.
    """

    loss: torch.Tensor
    approx_kl: torch.Tensor
    clip_fraction: torch.Tensor


def ppo_policy_loss(
    new_log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor, clip_coef: float
) -> PolicyLoss:
    """PPO clipped surrogate objective, negated for minimisation.

    Schulman et al. 2017, "Proximal Policy Optimization Algorithms", arXiv 1707.06347, eq. 7:
    ``L = -mean(min(r A, clip(r, 1 - c, 1 + c) A))`` with ``r = exp(log pi_new - log pi_old)``.

    Args:
        new_log_prob: (B,) float32 log pi_new(a|s), differentiable.
        old_log_prob: (B,) float32 log pi_old(a|s) from the rollout.
        advantages: (B,) float32 (normalised or not, the caller decides).
        clip_coef: c > 0.

    Returns:
        :class:`PolicyLoss`.
    """
    log_ratio = new_log_prob - old_log_prob
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    loss = -torch.min(unclipped, clipped).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return PolicyLoss(loss, approx_kl, clip_fraction)


def ppo_value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_coef: float | None
) -> torch.Tensor:
    """Value-function regression loss of PPO, optionally clipped around the rollout values.

    Unclipped: ``0.5 * mean((V - R)^2)``. Clipped (the OpenAI baselines variant, discussed in
    Engstrom et al. 2020, arXiv 2005.12729, and Andrychowicz et al. 2021, arXiv 2006.05990):
    ``0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2))``.

    Args:
        new_values: (B,) float32 V(s) under the current critic, differentiable.
        old_values: (B,) float32 V(s) recorded during the rollout.
        returns: (B,) float32 value targets.
        clip_coef: c > 0 to clip, or None for the plain squared error.

    Returns:
        () float32 loss.
    """
    unclipped = (new_values - returns).pow(2)
    if clip_coef is None:
        return 0.5 * unclipped.mean()
    clipped_values = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
    clipped = (clipped_values - returns).pow(2)
    return 0.5 * torch.max(unclipped, clipped).mean()


class PPOGradients(NamedTuple):
    """Result of :func:`ppo_loss_gradients`.

    Attributes:
        means: (B, A) float32 d loss / d policy means.
        values: (B,) float32 d loss / d state values.
        log_std: (A,) float32 d loss / d log std.
        stats: (5,) float32 policy loss, value loss, entropy, approx KL and clip fraction, as
            :func:`ppo_policy_loss`, :func:`ppo_value_loss` and :func:`diag_gaussian_entropy` give them.
    """

    means: torch.Tensor
    values: torch.Tensor
    log_std: torch.Tensor
    stats: torch.Tensor


def ppo_loss_gradients(
    means: torch.Tensor,
    values: torch.Tensor,
    log_std: torch.Tensor,
    actions: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    *,
    clip_coef: float,
    value_clip_coef: float | None,
    ent_coef: float,
    vf_coef: float,
) -> PPOGradients:
    """Closed-form gradient of PPO's joint loss for a Gaussian policy with state-independent std.

    The loss is ``ppo_policy_loss - ent_coef * entropy + vf_coef * ppo_value_loss`` with
    ``log pi = diag_gaussian_log_prob(actions, means, log_std)``; the gradient equals what
    autograd gives for it (``torch.min``/``torch.max`` ties split evenly, as in autograd), in
    about half the tensor operations and without building a graph. With ``r`` the ratio,
    ``z = (a - mu) / sigma`` and ``g = -r A / B`` where the unclipped surrogate is the minimum (0
    elsewhere): ``d/d mu = g z / sigma``, ``d/d log sigma = sum_b g (z^2 - 1) - ent_coef``.

    Args:
        means: (B, A) float32 policy means under the current parameters.
        values: (B,) float32 state values under the current parameters.
        log_std: (A,) float32 current log standard deviations.
        actions: (B, A) float32 unclipped actions of the rollout.
        old_log_prob: (B,) float32 log pi_old(a|s).
        advantages: (B,) float32 advantages.
        old_values: (B,) float32 V_old(s) (used only when ``value_clip_coef`` is set).
        returns: (B,) float32 value targets.
        clip_coef: policy ratio clip epsilon > 0.
        value_clip_coef: value clip > 0, or None for the plain squared error.
        ent_coef: entropy weight >= 0.
        vf_coef: value-loss weight >= 0.

    Returns:
        :class:`PPOGradients`.
    """
    batch = means.shape[0]
    inv_std = torch.exp(-log_std)
    z = (actions - means).mul_(inv_std)
    z2 = z * z
    log_prob = z2.sum(-1).mul_(-0.5).sub_(diag_gaussian_log_normalizer(log_std))
    log_ratio = log_prob.sub_(old_log_prob)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef).mul_(advantages)
    # ties (ratio inside the clip range) send half the gradient to each branch in autograd,
    # and both halves equal d(r A)/dr there, so the unclipped branch carries it all
    take = unclipped <= clipped
    surrogate = torch.where(take, unclipped, clipped)
    grad_log_prob = (unclipped * take).mul_(-1.0 / batch)
    grad_means = z.mul_(inv_std).mul_(grad_log_prob.unsqueeze(-1))
    grad_log_std = torch.mm(grad_log_prob.unsqueeze(0), z2.sub_(1.0)).squeeze(0).sub_(ent_coef)
    error = values - returns
    if value_clip_coef is None:
        value_loss = error.square().mean().mul_(0.5)
        grad_values = error.mul_(vf_coef / batch)
    else:
        delta = values - old_values
        clipped_error = torch.clamp(delta, -value_clip_coef, value_clip_coef).add_(old_values).sub_(returns)
        sq, clipped_sq = error.square(), clipped_error.square()
        value_loss = torch.maximum(sq, clipped_sq).mean().mul_(0.5)
        inside = (delta.abs() <= value_clip_coef).float()
        # max ties split evenly, as in autograd
        weight_plain = (sq > clipped_sq).float().add_((sq == clipped_sq).float(), alpha=0.5)
        grad_values = (error * weight_plain).add_(clipped_error * inside * (1.0 - weight_plain)).mul_(vf_coef / batch)
    entropy = (log_std + 0.5 * (1.0 + _LOG_2PI)).sum(dim=-1)
    approx_kl = (ratio - 1.0).sub_(log_ratio).mean()
    clip_fraction = ((ratio - 1.0).abs_() > clip_coef).float().mean()
    stats = torch.stack([surrogate.mean().neg_(), value_loss, entropy, approx_kl, clip_fraction])
    return PPOGradients(grad_means, grad_values, grad_log_std, stats)


def sac_critic_target(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    next_q1: torch.Tensor,
    next_q2: torch.Tensor,
    next_log_prob: torch.Tensor,
    *,
    gamma: float,
    alpha: float | torch.Tensor,
) -> torch.Tensor:
    """Soft Bellman target with clipped double Q.

    Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications", arXiv 1812.05905,
    eqs. 3 and 5 with the minimum of two target critics (Fujimoto et al. 2018, TD3):
    ``y = r + gamma * (1 - terminated) * (min(Q1'(s', a'), Q2'(s', a')) - alpha log pi(a'|s'))``,
    ``a' ~ pi(.|s')``. Truncated transitions are not terminal: the caller stores the final
    observation as ``s'`` and ``terminated = False``.

    Args:
        rewards: (B,) float32.
        terminated: (B,) bool or float32 (1 = terminal).
        next_q1, next_q2: (B,) float32 target-critic values at (s', a').
        next_log_prob: (B,) float32 log pi(a'|s').
        gamma: discount in (0, 1].
        alpha: entropy temperature, >= 0.

    Returns:
        (B,) float32 targets (no gradient is expected to flow; call under ``torch.no_grad``).
    """
    soft_value = torch.min(next_q1, next_q2) - alpha * next_log_prob
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * soft_value


def sac_critic_loss(q1: torch.Tensor, q2: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Sum of both critics' soft Bellman residuals (arXiv 1812.05905, eq. 5).

    ``J_Q = 0.5 * mean((Q1 - y)^2) + 0.5 * mean((Q2 - y)^2)``.

    Args:
        q1, q2: (B,) float32 critic values at (s, a), differentiable.
        target: (B,) float32 targets from :func:`sac_critic_target`.

    Returns:
        () float32 loss.
    """
    return 0.5 * (q1 - target).pow(2).mean() + 0.5 * (q2 - target).pow(2).mean()


def sac_actor_loss(
    q1_pi: torch.Tensor, q2_pi: torch.Tensor, log_prob: torch.Tensor, alpha: float | torch.Tensor
) -> torch.Tensor:
    """SAC policy loss (arXiv 1812.05905, eq. 7 with the reparameterised action of eq. 11).

    ``J_pi = mean(alpha log pi(a|s) - min(Q1(s, a), Q2(s, a)))``, ``a = tanh(mu + sigma eps)``.

    Args:
        q1_pi, q2_pi: (B,) float32 critic values at the freshly sampled actions.
        log_prob: (B,) float32 log pi(a|s), differentiable through the reparameterisation.
        alpha: temperature (not differentiated).

    Returns:
        () float32 loss.
    """
    return (alpha * log_prob - torch.min(q1_pi, q2_pi)).mean()


def sac_temperature_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """Automatic entropy tuning (arXiv 1812.05905, eq. 18).

    ``J(alpha) = mean(-alpha * (log pi(a|s) + H_target))`` with ``alpha = exp(log_alpha)``;
    gradient descent raises alpha when the policy entropy ``-log pi`` falls below the target.

    Args:
        log_alpha: () float32 learnable log temperature.
        log_prob: (B,) float32 log pi(a|s) of fresh samples (detached here).
        target_entropy: desired entropy in nats, usually ``-action_dim``.

    Returns:
        () float32 loss.
    """
    return -(log_alpha.exp() * (log_prob.detach() + target_entropy)).mean()


# ------------------------------------------------------------------------------------- A2C
class A2CLoss(NamedTuple):
    """Result of :func:`a2c_loss`.

    Attributes:
        loss: () float32 joint loss to minimise.
        policy_loss: () float32 ``-mean(log pi(a|s) A)``, detached.
        value_loss: () float32 ``0.5 mean((V - R)^2)``, detached.
        entropy: () float32 mean policy entropy (nats), detached.
    """

    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor


def a2c_loss(
    log_prob: torch.Tensor,
    entropy: torch.Tensor,
    values: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    *,
    ent_coef: float,
    vf_coef: float,
) -> A2CLoss:
    """Advantage actor-critic loss (Mnih et al. 2016, "Asynchronous Methods for Deep
    Reinforcement Learning", arXiv 1602.01783, sec. 4 and algorithm S3).

    ``L = -mean(log pi(a|s) A) - ent_coef * mean(H[pi(.|s)]) + vf_coef * 0.5 * mean((V(s) - R)^2)``.
    The advantages and returns are constants (computed from the rollout); the gradient of the
    first term is the policy gradient ``-mean(A grad log pi)``. It equals PPO's clipped surrogate's
    gradient at the rollout's own parameters (ratio 1), which is why A2C is a single gradient step
    per rollout.

    Args:
        log_prob: (B,) float32 log pi(a|s) of the rollout's actions, differentiable.
        entropy: (B,) float32 policy entropies, differentiable.
        values: (B,) float32 V(s), differentiable.
        advantages: (B,) float32 advantages (GAE; not differentiated).
        returns: (B,) float32 value targets (not differentiated).
        ent_coef: entropy weight >= 0.
        vf_coef: value-loss weight >= 0.

    Returns:
        :class:`A2CLoss`.
    """
    policy_loss = -(log_prob * advantages.detach()).mean()
    value_loss = 0.5 * (values - returns.detach()).pow(2).mean()
    mean_entropy = entropy.mean()
    loss = policy_loss - ent_coef * mean_entropy + vf_coef * value_loss
    return A2CLoss(loss, policy_loss.detach(), value_loss.detach(), mean_entropy.detach())


# ------------------------------------------------------------------------------- TD3 / DDPG
def td3_target_action(target_action: torch.Tensor, noise: torch.Tensor, *, noise_clip: float) -> torch.Tensor:
    """Target policy smoothing (Fujimoto et al. 2018, "Addressing Function Approximation Error in
    Actor-Critic Methods", arXiv 1802.09477, sec. 5.3, eq. 14).

    ``a' = clip(mu'(s') + clip(eps, -c, c), -1, 1)`` with ``eps ~ N(0, sigma^2)`` drawn by the
    caller; ``noise = 0`` gives DDPG's target action ``mu'(s')``.

    Args:
        target_action: (B, A) float32 target actor's actions mu'(s') in [-1, 1].
        noise: (B, A) float32 Gaussian noise already scaled by sigma.
        noise_clip: c >= 0.

    Returns:
        (B, A) float32 actions in [-1, 1].
    """
    return (target_action + noise.clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)


def td3_critic_target(
    rewards: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor, *, gamma: float
) -> torch.Tensor:
    """Clipped double-Q target (arXiv 1802.09477, sec. 4.2, eq. 10).

    ``y = r + gamma * (1 - terminated) * min_k Q'_k(s', a')`` over the K target critics; with one
    critic (K = 1) it is DDPG's target (Lillicrap et al. 2016, arXiv 1509.02971, algorithm 1).
    Truncated transitions are not terminal (the caller stores the final observation as ``s'``).

    Args:
        rewards: (B,) float32.
        terminated: (B,) bool or float32 (1 = terminal).
        next_q: (K, B) float32 target critics at (s', a').
        gamma: discount in (0, 1].

    Returns:
        (B,) float32 targets (call under ``torch.no_grad``).
    """
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * next_q.min(dim=0).values


def td3_critic_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Sum over the K critics of half their mean squared Bellman error (arXiv 1802.09477, alg. 1).

    ``J_Q = sum_k 0.5 * mean((Q_k(s, a) - y)^2)``.

    Args:
        q: (K, B) float32 critic values at (s, a), differentiable.
        target: (B,) float32 targets from :func:`td3_critic_target`.

    Returns:
        () float32 loss.
    """
    return 0.5 * (q - target.unsqueeze(0)).pow(2).mean(dim=1).sum()


def td3_actor_loss(q1_pi: torch.Tensor) -> torch.Tensor:
    """Deterministic policy gradient loss (Silver et al. 2014; arXiv 1802.09477, alg. 1):
    ``J_mu = -mean(Q_1(s, mu(s)))``, the first critic only.

    Args:
        q1_pi: (B,) float32 first critic at the actor's actions, differentiable through them.

    Returns:
        () float32 loss.
    """
    return -q1_pi.mean()

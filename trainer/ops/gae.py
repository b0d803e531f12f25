"""Generalized Advantage Estimation over a vectorized rollout with auto-reset envs."""

from __future__ import annotations

import torch

__all__ = ["compute_gae"]


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    last_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    final_values: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets for a rollout of T steps in E envs.

    GAE (Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", arXiv 1506.02438, eq. 16), computed backwards:

    ``delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)``
    ``A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}``, ``done_t = terminated_t or truncated_t``

    where ``s'_t`` is the state reached by step t: ``s_{t+1}`` while the episode goes on, the
    final observation of the episode when it was truncated (time limit, end of data: the
    return continues beyond the cut, so we bootstrap from its value, Pardo et al. 2018,
    arXiv 1712.00378), and nothing when it terminated (value 0). Because envs auto-reset,
    ``s_{t+1}`` after a done step belongs to a new episode and must never be bootstrapped from.

    Args:
        rewards: (T, E) float32 rewards r_t.
        values: (T, E) float32 V(s_t) under the behaviour-time critic.
        last_values: (E,) float32 V(s_T), the obs after the last step of the rollout.
        terminated: (T, E) bool, the episode ended in a terminal state at step t.
        truncated: (T, E) bool, the episode was cut at step t (takes effect only where not
            terminated).
        final_values: (T, E) float32 V(final observation); read only where ``truncated`` and
            not ``terminated`` (other entries may hold anything, e.g. zeros).
        gamma: discount factor in (0, 1].
        gae_lambda: GAE lambda in [0, 1].

    Returns:
        ``(advantages, returns)``, both (T, E) float32; ``returns = advantages + values`` are the
        TD(lambda) value targets.

    Raises:
        ValueError: the shapes do not agree.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (T, E), got shape {tuple(rewards.shape)}")
    num_steps, num_envs = rewards.shape
    for name, tensor in (("values", values), ("terminated", terminated), ("truncated", truncated)):
        if tuple(tensor.shape) != (num_steps, num_envs):
            raise ValueError(f"{name} must have shape {(num_steps, num_envs)}, got {tuple(tensor.shape)}")
    if tuple(final_values.shape) != (num_steps, num_envs):
        raise ValueError(f"final_values must have shape {(num_steps, num_envs)}, got {tuple(final_values.shape)}")
    if tuple(last_values.shape) != (num_envs,):
        raise ValueError(f"last_values must have shape ({num_envs},), got {tuple(last_values.shape)}")

    terminated = terminated.to(torch.bool)
    truncated = truncated.to(torch.bool) & ~terminated
    next_values = torch.cat([values[1:], last_values[None]], dim=0)
    next_values = torch.where(truncated, final_values, next_values)
    next_values = torch.where(terminated, torch.zeros_like(next_values), next_values)
    continues = (~(terminated | truncated)).to(rewards.dtype)

    deltas = rewards + gamma * next_values - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(last_values, dtype=rewards.dtype)
    for t in range(num_steps - 1, -1, -1):
        running = deltas[t] + gamma * gae_lambda * continues[t] * running
        advantages[t] = running
    return advantages, advantages + values

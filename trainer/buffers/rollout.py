"""On-policy rollout storage for PPO: T steps of E envs, kept on the env's device."""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["HostCopy", "RolloutBatch", "RolloutBuffer", "finished_returns"]


class RolloutBatch(NamedTuple):
    """A minibatch of flattened rollout samples (B = any subset of T * E).

    Attributes:
        obs: (B, obs_dim) float32 observations as the policy saw them (normalised if enabled).
        actions: (B, action_dim) float32 unclipped Gaussian samples.
        log_probs: (B,) float32 log pi_old(a|s).
        values: (B,) float32 V_old(s).
        advantages: (B,) float32 GAE advantages.
        returns: (B,) float32 value targets.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


def finished_returns(episode_returns: torch.Tensor, done: torch.Tensor) -> list[float]:
    """The entries of ``episode_returns`` where ``done``, in row-major (time, then env) order.

    One device-to-host copy of both tensors, masked on the host: selecting on the device would
    cost a second host sync (a boolean mask has a data-dependent size).

    Args:
        episode_returns: (..., E) float returns, any device.
        done: bool tensor of the same shape.
    """
    return HostCopy(episode_returns, done).returns()


class HostCopy:
    """The copy of :func:`finished_returns`, started now and read later.

    On CUDA the copy goes into pinned host memory with ``non_blocking=True`` and a CUDA event
    marks its end, so the host does not wait at the copy: the update that follows runs first,
    and :meth:`returns` waits only for what is left (usually nothing: the update's own read of
    its statistics has waited for the device by then). Elsewhere it is a plain copy.
    """

    def __init__(self, episode_returns: torch.Tensor, done: torch.Tensor) -> None:
        both = torch.stack([episode_returns.to(torch.float32), done.to(torch.float32)])
        self._event = None
        if both.device.type == "cuda":
            self._host = torch.empty(both.shape, dtype=both.dtype, pin_memory=True)
            self._host.copy_(both, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host = both.cpu()

    def returns(self) -> list[float]:
        """The finished episodes' returns, in row-major (time, then env) order."""
        if self._event is not None:
            self._event.synchronize()
        return self._host[0][self._host[1] > 0].tolist()


class RolloutBuffer:
    """Fixed-size storage for one PPO rollout; every tensor is indexed ``[t, env]``.

    Args:
        num_steps: rollout length T per env.
        num_envs: number of envs E.
        obs_dim: observation size.
        action_dim: action size.
        device: where the tensors live (the env's device, so nothing is copied per step).
    """

    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, action_dim: int, device: torch.device) -> None:
        self.num_steps, self.num_envs = num_steps, num_envs
        obs_shape, action_shape = (obs_dim,), (action_dim,)
        self.obs = torch.zeros((num_steps, num_envs) + obs_shape, device=device)
        self.actions = torch.zeros((num_steps, num_envs) + action_shape, device=device)
        self.log_probs = torch.zeros((num_steps, num_envs), device=device)
        self.rewards = torch.zeros((num_steps, num_envs), device=device)
        self.values = torch.zeros((num_steps, num_envs), device=device)
        self.terminated = torch.zeros((num_steps, num_envs), dtype=torch.bool, device=device)
        self.truncated = torch.zeros((num_steps, num_envs), dtype=torch.bool, device=device)
        # V(final observation) where an episode was truncated at step t, zero elsewhere
        self.final_values = torch.zeros((num_steps, num_envs), device=device)
        # undiscounted returns of episodes that ended at step t (only read where done)
        self.episode_returns = torch.zeros((num_steps, num_envs), device=device)
        self.advantages = torch.zeros((num_steps, num_envs), device=device)
        self.returns = torch.zeros((num_steps, num_envs), device=device)

    @property
    def size(self) -> int:
        """Number of samples T * E."""
        return self.num_steps * self.num_envs

    def finished_episode_returns(self) -> list[float]:
        """Returns of the K episodes that ended during this rollout, in time order (one host copy)."""
        return finished_returns(self.episode_returns, self.terminated | self.truncated)

    def start_finished_episode_returns(self) -> HostCopy:
        """As :meth:`finished_episode_returns`, read later (``.returns()``): the copy overlaps
        the update on CUDA (:class:`HostCopy`)."""
        return HostCopy(self.episode_returns, self.terminated | self.truncated)

    def flatten(self) -> RolloutBatch:
        """Views of the learning fields over all T * E samples, flattened time-major (no copy)."""
        flat = lambda x: x.reshape((self.size,) + x.shape[2:])  # noqa: E731
        return RolloutBatch(
            flat(self.obs),
            flat(self.actions),
            flat(self.log_probs),
            flat(self.values),
            flat(self.advantages),
            flat(self.returns),
        )

    @staticmethod
    def gather(flat: RolloutBatch, indices: torch.Tensor) -> RolloutBatch:
        """Rows ``indices`` (B,) int64 of a :meth:`flatten` result, as a new (copied) batch."""
        return RolloutBatch(*(x.index_select(0, indices) for x in flat))

    def minibatch(self, indices: torch.Tensor) -> RolloutBatch:
        """Gather flattened samples.

        Args:
            indices: (B,) int64 positions in ``[0, T * E)`` of the flattened ``[t, env]`` grid.
        """
        return self.gather(self.flatten(), indices)

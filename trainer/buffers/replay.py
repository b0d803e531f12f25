"""Circular replay buffer for off-policy agents, kept on the env's device."""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["ReplayBatch", "ReplayBuffer"]


class ReplayBatch(NamedTuple):
    """B transitions sampled uniformly.

    Attributes:
        obs: (B, obs_dim) float32 raw observations s.
        actions: (B, action_dim) float32 actions in [-1, 1].
        rewards: (B,) float32 (already scaled by the agent's reward scale).
        next_obs: (B, obs_dim) float32 s', the final observation where an episode ended.
        terminated: (B,) float32, 1 where s' is terminal (truncation is not).
    """

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor


class ReplayBuffer:
    """Stores the last ``capacity`` transitions; E transitions go in per vector env step.

    Memory is ``capacity * (2 * obs_dim + action_dim + 2) * 4`` bytes, e.g. 2**18 transitions of a
    300-dim obs with 29 actions take about 660 MB.

    Args:
        capacity: maximum number of transitions kept, >= 1; the oldest are overwritten.
        obs_dim: observation size.
        action_dim: action size.
        device: where the storage lives (the env's device).
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, device: torch.device) -> None:
        self.capacity = capacity
        self.device = torch.device(device)
        self.obs = torch.zeros((capacity, obs_dim), device=self.device)
        self.actions = torch.zeros((capacity, action_dim), device=self.device)
        self.rewards = torch.zeros((capacity,), device=self.device)
        self.next_obs = torch.zeros((capacity, obs_dim), device=self.device)
        self.terminated = torch.zeros((capacity,), device=self.device)
        self.pos = 0  # next row to write
        self.size = 0  # rows holding data

    def add(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Insert one transition per env, wrapping around when full.

        Args:
            obs: (E, obs_dim) float32.
            actions: (E, action_dim) float32.
            rewards: (E,) float32.
            next_obs: (E, obs_dim) float32.
            terminated: (E,) bool or float32.

        Raises:
            ValueError: E exceeds the capacity.
        """
        n = obs.shape[0]
        if n > self.capacity:
            raise ValueError(f"cannot insert {n} transitions into a buffer of capacity {self.capacity}")
        rows = (self.pos + torch.arange(n, device=self.device)) % self.capacity
        self.obs[rows] = obs
        self.actions[rows] = actions
        self.rewards[rows] = rewards
        self.next_obs[rows] = next_obs
        self.terminated[rows] = terminated.to(torch.float32)
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> ReplayBatch:
        """Draw ``batch_size`` transitions uniformly with replacement.

        Args:
            batch_size: B >= 1.
            generator: torch generator on the buffer's device (keeps sampling reproducible).

        Raises:
            ValueError: the buffer is empty.
        """
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = torch.randint(0, self.size, (batch_size,), device=self.device, generator=generator)
        return ReplayBatch(
            self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.terminated[idx]
        )

    def state_dict(self) -> dict:
        """Filled rows and write position, as plain tensors/ints (``torch.load(weights_only=True)``-safe)."""
        n = self.size
        return {
            "capacity": self.capacity,
            "pos": self.pos,
            "size": n,
            "obs": self.obs[:n].cpu(),
            "actions": self.actions[:n].cpu(),
            "rewards": self.rewards[:n].cpu(),
            "next_obs": self.next_obs[:n].cpu(),
            "terminated": self.terminated[:n].cpu(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore rows saved by :meth:`state_dict`.

        Raises:
            ValueError: the saved buffer had a different capacity or shapes.
        """
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"replay capacity {state['capacity']} does not match {self.capacity}")
        n = int(state["size"])
        for name in ("obs", "actions", "rewards", "next_obs", "terminated"):
            getattr(self, name)[:n] = state[name].to(self.device)
        self.size, self.pos = n, int(state["pos"])

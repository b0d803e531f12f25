"""Vectorized inverted pendulum in torch, matching Gymnasium's ``Pendulum-v1``.

The dynamics, reward and observation are those of
``gymnasium/envs/classic_control/pendulum.py`` (g = 10.0, m = 1, l = 1, dt = 0.05 s,
max_speed = 8 rad/s, max_torque = 2 N m). It is a small, fast, well-known control task used to
test the agents before they meet the market env; it follows the shared vectorized env API of
``docs/architecture.md`` (auto-reset, ``info["final_observation"]``, ``info["episode_return"]``).
"""

from __future__ import annotations

import math

import torch

from trainer.errors import ConfigError

__all__ = ["PendulumVecEnv"]


def _angle_normalize(theta: torch.Tensor) -> torch.Tensor:
    """Wrap angles to [-pi, pi), as Gymnasium's ``angle_normalize`` does with Python's ``%``."""
    return torch.remainder(theta + math.pi, 2 * math.pi) - math.pi


class PendulumVecEnv:
    """``num_envs`` independent pendulums stepped together on one device.

    State ``(theta, theta_dot)`` is kept in float64 (like Gymnasium's NumPy state) so that
    whole episodes track Gymnasium step for step; observations and rewards are float32.

    Args:
        num_envs: number of parallel pendulums E, >= 1.
        device: torch device holding every tensor.
        seed: seed of the env's own random generator (initial states); ``reset(seed=...)``
            reseeds it.
        max_episode_steps: episodes are truncated after this many steps (Gymnasium's
            ``TimeLimit`` for ``Pendulum-v1`` uses 200); there is no termination.

    Raises:
        ConfigError: ``num_envs`` or ``max_episode_steps`` is below 1.
    """

    gravity = 10.0
    mass = 1.0
    length = 1.0
    dt = 0.05
    max_speed = 8.0
    max_torque = 2.0
    obs_dim = 3
    action_dim = 1

    def __init__(
        self, num_envs: int, *, device: str | torch.device = "cpu", seed: int = 0, max_episode_steps: int = 200
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigError(f"num_envs must be an integer >= 1, got {num_envs!r}", field="num_envs")
        if not isinstance(max_episode_steps, int) or max_episode_steps < 1:
            raise ConfigError(
                f"max_episode_steps must be an integer >= 1, got {max_episode_steps!r}", field="max_episode_steps"
            )
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.max_episode_steps = max_episode_steps
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(seed)
        self._high = torch.tensor([math.pi, 1.0], dtype=torch.float64, device=self.device)
        # state[:, 0] = theta (rad, not wrapped), state[:, 1] = theta_dot (rad/s)
        self.state = torch.zeros((num_envs, 2), dtype=torch.float64, device=self.device)
        self.elapsed_steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.episode_return = torch.zeros(num_envs, dtype=torch.float32, device=self.device)
        self._sample_state(torch.ones(num_envs, dtype=torch.bool, device=self.device))

    def _sample_state(self, rows: torch.Tensor) -> None:
        """Draw theta ~ U[-pi, pi], theta_dot ~ U[-1, 1] for the rows where ``rows`` is true."""
        u = torch.rand((self.num_envs, 2), dtype=torch.float64, device=self.device, generator=self._generator)
        fresh = (2.0 * u - 1.0) * self._high
        self.state = torch.where(rows[:, None], fresh, self.state)
        self.elapsed_steps = torch.where(rows, 0, self.elapsed_steps)
        self.episode_return = torch.where(rows, 0.0, self.episode_return)

    def _obs(self) -> torch.Tensor:
        theta, theta_dot = self.state[:, 0], self.state[:, 1]
        return torch.stack([torch.cos(theta), torch.sin(theta), theta_dot], dim=1).to(torch.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[torch.Tensor, dict]:
        """Start a fresh episode in every env.

        Args:
            seed: reseeds the env's generator when given.
            options: unused; accepted for API compatibility.

        Returns:
            ``(obs, info)``: obs (E, 3) float32 ``[cos theta, sin theta, theta_dot]``; info is empty.
        """
        if seed is not None:
            self._generator.manual_seed(int(seed))
        self._sample_state(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self._obs(), {}

    def step(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Apply one torque per pendulum and advance dt seconds.

        Reward (Gymnasium ``Pendulum-v1``):
        ``r = -(angle_normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2)`` computed on the state
        *before* the step; then ``theta_dot += (3 g / (2 l) sin theta + 3 / (m l^2) u) dt``, clipped
        to +-8 rad/s, and ``theta += theta_dot dt`` (semi-implicit Euler).

        Args:
            action: (E, 1) float in [-1, 1]; clipped to that range and scaled to torque
                ``u = 2 * action`` N m.

        Returns:
            ``(obs, reward, terminated, truncated, info)``: obs (E, 3) float32 (already the reset
            obs where an episode ended); reward (E,) float32; terminated (E,) bool, always false;
            truncated (E,) bool, true after ``max_episode_steps`` steps; info has
            ``final_observation`` (E, 3) float32, the obs reached by this step before any reset
            (equal to ``obs`` in rows that did not end), and ``episode_return`` (E,) float32, the
            undiscounted return of episodes that ended (0 elsewhere).

        Raises:
            ValueError: ``action`` does not have shape (E, 1).
        """
        if tuple(action.shape) != (self.num_envs, self.action_dim):
            raise ValueError(f"action must have shape ({self.num_envs}, 1), got {tuple(action.shape)}")
        # written with in-place ops: on a few dozen envs the step costs per op, not per element
        u = action.to(device=self.device, dtype=torch.float64).view(-1).clamp(-1.0, 1.0).mul_(self.max_torque)
        theta, theta_dot = self.state[:, 0], self.state[:, 1]
        cost = _angle_normalize(theta).square_().addcmul_(theta_dot, theta_dot, value=0.1)
        cost.addcmul_(u, u, value=0.001)
        g, m, ell, dt = self.gravity, self.mass, self.length, self.dt
        accel = torch.sin(theta).mul_(3.0 * g / (2.0 * ell)).add_(u.mul_(3.0 / (m * ell**2)))
        new_theta_dot = accel.mul_(dt).add_(theta_dot).clamp_(-self.max_speed, self.max_speed)
        new_theta = theta + new_theta_dot * dt
        self.state = torch.stack([new_theta, new_theta_dot], dim=1)

        reward = cost.neg_().to(torch.float32)
        self.elapsed_steps = self.elapsed_steps + 1
        self.episode_return = self.episode_return + reward
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        truncated = self.elapsed_steps >= self.max_episode_steps
        final_obs = self._obs()
        episode_return = torch.where(truncated, self.episode_return, 0.0)
        obs = final_obs
        # on the CPU the check is free and skips the reset work on the 199 of 200 steps without
        # one; on an accelerator the rows are reset unconditionally to avoid a host sync
        if self.device.type != "cpu" or bool(truncated.any()):
            self._sample_state(truncated)
            obs = torch.where(truncated[:, None], self._obs(), final_obs)
        info = {"final_observation": final_obs, "episode_return": episode_return}
        return obs, reward, terminated, truncated, info

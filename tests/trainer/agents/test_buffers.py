"""Rollout and replay storage."""

from __future__ import annotations

import torch

from trainer.buffers.replay import ReplayBuffer
from trainer.buffers.rollout import RolloutBuffer


def _insert(buf: ReplayBuffer, first: float, n: int) -> None:
    values = torch.arange(first, first + n, dtype=torch.float32)
    buf.add(values[:, None].repeat(1, 3), values[:, None], values, values[:, None].repeat(1, 3) + 0.5, values > 1e9)


def test_replay_inserts_one_row_per_env_and_wraps_over_the_oldest():
    buf = ReplayBuffer(5, obs_dim=3, action_dim=1, device="cpu")
    _insert(buf, 0.0, 2)  # rows 0, 1
    _insert(buf, 2.0, 2)  # rows 2, 3
    _insert(buf, 4.0, 2)  # rows 4, 0 (0.0 overwritten by 5.0)
    assert buf.size == 5 and buf.pos == 1
    assert buf.rewards.tolist() == [5.0, 1.0, 2.0, 3.0, 4.0]
    torch.testing.assert_close(buf.next_obs[0], torch.full((3,), 5.5))


def test_replay_samples_only_filled_rows_with_matching_fields():
    buf = ReplayBuffer(100, obs_dim=3, action_dim=1, device="cpu")
    _insert(buf, 10.0, 4)
    batch = buf.sample(256, torch.Generator().manual_seed(0))
    assert set(batch.rewards.tolist()) == {10.0, 11.0, 12.0, 13.0}
    torch.testing.assert_close(batch.obs[:, 0], batch.rewards)
    torch.testing.assert_close(batch.next_obs[:, 2], batch.rewards + 0.5)


def test_replay_state_round_trip_restores_rows_and_position():
    buf = ReplayBuffer(5, obs_dim=3, action_dim=1, device="cpu")
    _insert(buf, 0.0, 3)
    other = ReplayBuffer(5, obs_dim=3, action_dim=1, device="cpu")
    other.load_state_dict(buf.state_dict())
    assert (other.size, other.pos) == (3, 3)
    torch.testing.assert_close(other.obs, buf.obs)


def test_rollout_minibatch_flattens_time_major():
    buf = RolloutBuffer(num_steps=3, num_envs=2, obs_dim=4, action_dim=1, device=torch.device("cpu"))
    assert buf.obs.shape == (3, 2, 4) and buf.size == 6
    buf.returns[:] = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])  # value = 2 t + env
    batch = buf.minibatch(torch.tensor([5, 0, 3]))
    assert batch.returns.tolist() == [5.0, 0.0, 3.0]

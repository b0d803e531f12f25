"""Rollout (on-policy) and replay (off-policy) storage on the env's device."""

from trainer.buffers.replay import ReplayBatch, ReplayBuffer
from trainer.buffers.rollout import RolloutBatch, RolloutBuffer

__all__ = ["ReplayBatch", "ReplayBuffer", "RolloutBatch", "RolloutBuffer"]

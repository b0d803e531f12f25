"""Pure tensor functions of the agents (GAE, PPO and SAC losses), unit-tested on their own."""

from trainer.ops.gae import compute_gae
from trainer.ops.losses import (
    PolicyLoss,
    PPOGradients,
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

__all__ = [
    "PPOGradients",
    "PolicyLoss",
    "compute_gae",
    "diag_gaussian_entropy",
    "diag_gaussian_log_prob",
    "diag_gaussian_log_prob_from_noise",
    "ppo_loss_gradients",
    "ppo_policy_loss",
    "ppo_value_loss",
    "sac_actor_loss",
    "sac_critic_loss",
    "sac_critic_target",
    "sac_temperature_loss",
    "tanh_gaussian_log_prob",
]

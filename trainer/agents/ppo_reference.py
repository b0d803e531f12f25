"""The readable PPO update: autograd, ``torch.optim.Adam`` and ``clip_grad_norm_``.

This is the reference the hand-written step of :class:`~trainer.agents.ppo.PPOAgent` (closed-form
gradient in :func:`trainer.ops.losses.ppo_loss_gradients`, backward in
:class:`~trainer.agents.networks.FlatActorCritic`, :class:`~trainer.agents.networks.FlatAdam`)
must equal: ``tests/trainer/agents/test_ppo_reference.py`` runs one full update of each from the
same state and batch and compares the parameters. A change to the loss or the networks goes
here first; the fast path follows, or the agent uses this one (``update_impl="autograd"``, and
automatically for networks the fast path cannot handle).

The loss (Schulman et al. 2017, arXiv 1707.06347, eq. 9, as a minimisation):
``ppo_policy_loss - ent_coef * entropy + vf_coef * ppo_value_loss`` with
``log pi = diag_gaussian_log_prob(actions, means, log_std)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.func import functional_call

from trainer.agents.flat import FlatActorCritic, FlatAdam
from trainer.buffers.rollout import RolloutBatch
from trainer.ops.losses import diag_gaussian_entropy, diag_gaussian_log_prob, ppo_policy_loss, ppo_value_loss

__all__ = ["reference_optimizer", "reference_step"]


def reference_optimizer(net: FlatActorCritic, moments: FlatAdam) -> torch.optim.Adam:
    """``torch.optim.Adam`` over ``net.flat`` that continues ``moments``'s state.

    The first and second moments are the same tensors as ``moments``'s (updated in place), the
    step count and the learning rate are copied: the agent keeps one optimizer state, whichever
    update computes a step. The caller adds 1 to ``moments.steps`` per step taken here.
    """
    beta1, beta2 = moments.betas
    adam = torch.optim.Adam(
        [net.flat], lr=moments.param_groups[0]["lr"], betas=(beta1, beta2), eps=moments.eps, foreach=False
    )
    adam.state[net.flat] = {
        "step": torch.tensor(float(moments.steps)),
        "exp_avg": moments.exp_avg,
        "exp_avg_sq": moments.exp_avg_sq,
    }
    return adam


def reference_step(
    net: FlatActorCritic, optimizer: torch.optim.Adam, batch: RolloutBatch, cfg: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """One PPO minibatch step with autograd.

    Args:
        net: the agent's networks; their parameters are views of ``net.flat``.
        optimizer: from :func:`reference_optimizer`.
        batch: the minibatch (observations as the actor reads them: normalised, or raw for the
            cross-sectional policy, whose critic standardises its own input).
        cfg: the agent's :class:`~trainer.agents.ppo.PPOConfig`.

    Returns:
        ``(stats, grad_norm)``: (5,) float32 policy loss, value loss, entropy, approx KL and clip
        fraction (detached), and () the gradient norm before clipping.
    """
    actor_params, critic_params = net.autograd_parameters()
    means = functional_call(net.actor, actor_params, (batch.obs,))
    values = functional_call(net.critic, critic_params, (batch.obs,))
    log_std = actor_params["log_std"]
    new_log_prob = diag_gaussian_log_prob(batch.actions, means, log_std)
    policy = ppo_policy_loss(new_log_prob, batch.log_probs, batch.advantages, cfg.clip_coef)
    value_loss = ppo_value_loss(values, batch.values, batch.returns, cfg.value_clip_coef)
    entropy = diag_gaussian_entropy(log_std)
    loss = policy.loss - cfg.ent_coef * entropy + cfg.vf_coef * value_loss

    optimizer.zero_grad(set_to_none=False)  # net.flat.grad is net.grad: keep the tensor
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_([net.flat], cfg.max_grad_norm)
    optimizer.step()
    stats = torch.stack([policy.loss, value_loss, entropy, policy.approx_kl, policy.clip_fraction]).detach()
    return stats, grad_norm.detach()

"""Neural networks shared by the agents: MLPs, policies, critics and an observation normalizer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from trainer.ops.losses import (
    diag_gaussian_entropy,
    diag_gaussian_log_prob,
    diag_gaussian_log_prob_from_noise,
    tanh_gaussian_log_prob,
)

# The fast path of PPO's update lives in trainer.agents.flat; its names stay importable here.
__all__ = [
    "DeterministicPolicy",
    "GaussianActor",
    "RunningMeanStd",
    "SquashedGaussianActor",
    "TwinQ",
    "ValueCritic",
    "mlp",
]


def mlp(
    in_dim: int,
    hidden_sizes: Sequence[int],
    out_dim: int,
    *,
    activation: type[nn.Module] = nn.Tanh,
    out_gain: float = 1.0,
    orthogonal: bool = True,
) -> nn.Sequential:
    """Fully connected network ``in_dim -> hidden_sizes... -> out_dim``.

    Args:
        in_dim: input features.
        hidden_sizes: widths of the hidden layers (may be empty for a linear map).
        out_dim: output features.
        activation: class of the nonlinearity between layers.
        out_gain: orthogonal-init gain of the last layer (0.01 for a policy mean keeps the
            first actions near 0, Andrychowicz et al. 2021, arXiv 2006.05990, sec. 3.2).
        orthogonal: orthogonal weights (gain sqrt(2) hidden) and zero biases when true, PyTorch's
            default init otherwise.
    """
    sizes = [in_dim, *hidden_sizes, out_dim]
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        linear = nn.Linear(sizes[i], sizes[i + 1])
        if orthogonal:
            last = i == len(sizes) - 2
            nn.init.orthogonal_(linear.weight, out_gain if last else math.sqrt(2.0))
            nn.init.zeros_(linear.bias)
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def batch_moments(x: torch.Tensor, *, fused: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature mean and (population) variance of a batch, computed in float32.

    Args:
        x: (B, dim) float observations (float32 is used as is; other dtypes are converted).
        fused: ``torch.var_mean`` (one kernel on an accelerator) when true; the two-pass
            ``mean((x - mean)**2)`` when false, because on the CPU ``var_mean`` reduces over
            dim 0 several times slower than an elementwise square plus a column sum. Default:
            fused everywhere but on the CPU.

    Returns:
        ``(mean, var)``, each (dim,) float32, ``var`` with divisor B (no Bessel correction).
    """
    x = x.to(torch.float32)
    if fused if fused is not None else x.device.type != "cpu":
        var, mean = torch.var_mean(x, dim=0, correction=0)
        return mean, var
    mean = x.mean(dim=0)
    return mean, (x - mean).square_().mean(dim=0)


class RunningMeanStd(nn.Module):
    """Running mean and variance of observations, used to standardise them.

    Statistics are float64 buffers (so they travel in ``state_dict`` and into exports). Each
    batch's moments are computed in float32 (:func:`batch_moments`: one (B, dim) float32
    temporary at most, instead of three float64 copies of the batch), and only the (dim,)
    statistics are merged in float64, with the parallel algorithm of Chan, Golub and LeVeque
    (1979).

    Args:
        dim: feature size.
        clip: normalised values are clipped to ``[-clip, clip]``.
        epsilon: added to the variance before the square root, and the initial count.
    """

    def __init__(self, dim: int, clip: float = 10.0, epsilon: float = 1e-8) -> None:
        super().__init__()
        self.clip = clip
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge a batch into the statistics (no host sync).

        Args:
            x: (B, dim) float observations.
        """
        batch_mean, batch_var = batch_moments(x)
        batch_mean, batch_var = batch_mean.to(torch.float64), batch_var.to(torch.float64)
        batch_count = x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        new_mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta.pow(2) * self.count * batch_count / total
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standardise ``x`` (B, dim) float32 -> (B, dim) float32 in ``[-clip, clip]``."""
        mean = self.mean.to(x.dtype)
        std = torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return torch.clamp((x - mean) / std, -self.clip, self.clip)


class GaussianActor(nn.Module):
    """PPO policy: ``a ~ N(mu(s), diag(exp(log_std))^2)`` with a state-independent ``log_std``.

    Args:
        obs_dim: observation size.
        action_dim: action size A.
        hidden_sizes: MLP widths.
        init_log_std: initial log standard deviation of every action dimension.
        mean: a module (B, obs_dim) -> (B, A) float32 computing ``mu(s)`` in place of the MLP
            (the cross-sectional policy of :mod:`trainer.agents.cross_sectional`); ``hidden_sizes``
            is then unused. Only the MLP mean fits PPO's hand-written update
            (:class:`~trainer.agents.flat.FlatActorCritic`).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: Sequence[int],
        init_log_std: float,
        *,
        mean: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.mean = (
            mean if mean is not None else mlp(obs_dim, hidden_sizes, action_dim, activation=nn.Tanh, out_gain=0.01)
        )
        self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Mean action (B, A) float32 (unbounded; clip to [-1, 1] before sending to the env)."""
        return self.mean(obs)

    def sample(self, obs: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw actions and their log densities.

        Returns:
            ``(actions (B, A) float32 unclipped, log_probs (B,) float32)``.
        """
        return self.sample_around(self.mean(obs), generator)

    def sample_around(self, mean: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw actions around given policy means (B, A); same returns as :meth:`sample`.

        The log density comes from the standard-normal noise in closed form, which skips
        recomputing ``(a - mean) / std``.
        """
        noise = torch.randn(mean.shape, device=mean.device, generator=generator)
        actions = torch.addcmul(mean, noise, self.log_std.exp())
        return actions, diag_gaussian_log_prob_from_noise(noise, self.log_std)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log densities (B,) and entropies (B,) of given unclipped actions under the current policy
        (A2C's autograd update)."""
        mean = self.mean(obs)
        entropy = diag_gaussian_entropy(self.log_std).expand(obs.shape[0])
        return diag_gaussian_log_prob(actions, mean, self.log_std), entropy


class SquashedGaussianActor(nn.Module):
    """SAC policy: ``a = tanh(u)``, ``u ~ N(mu(s), diag(sigma(s))^2)`` (arXiv 1801.01290, app. C).

    ``log sigma`` is squashed into ``[log_std_min, log_std_max]`` with a tanh, which keeps its
    gradient alive at the bounds (unlike a hard clamp).

    Args:
        obs_dim: observation size.
        action_dim: action size A.
        hidden_sizes: MLP widths.
        log_std_min, log_std_max: bounds of the log standard deviation.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: Sequence[int],
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__()
        self.trunk = mlp(obs_dim, hidden_sizes[:-1], hidden_sizes[-1], activation=nn.ReLU, orthogonal=False)
        self.act = nn.ReLU()
        self.mean = nn.Linear(hidden_sizes[-1], action_dim)
        self.log_std = nn.Linear(hidden_sizes[-1], action_dim)
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def _heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.act(self.trunk(obs))
        log_std = torch.tanh(self.log_std(h))
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1.0)
        return self.mean(h), log_std

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action ``tanh(mu(s))`` (B, A) float32 in [-1, 1]."""
        mean, _ = self._heads(obs)
        return torch.tanh(mean)

    def sample(self, obs: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised sample.

        Returns:
            ``(actions (B, A) float32 in [-1, 1], log_probs (B,) float32)``, differentiable.
        """
        mean, log_std = self._heads(obs)
        noise = torch.randn(mean.shape, device=mean.device, generator=generator)
        pre_tanh = mean + noise * log_std.exp()
        return torch.tanh(pre_tanh), tanh_gaussian_log_prob(pre_tanh, mean, log_std)


class ValueCritic(nn.Module):
    """State-value network V(s): (B, obs_dim) -> (B,) float32.

    Args:
        obs_dim: observation size.
        hidden_sizes: MLP widths (tanh).
        normalizer: a :class:`RunningMeanStd` the critic standardises its input with, when
            its observations arrive raw (the on-policy agents' cross-sectional policy, whose
            actor reads them raw); None (default) reads them as given. The agent updates its
            statistics; here they are only applied.
    """

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], *, normalizer: RunningMeanStd | None = None) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden_sizes, 1, activation=nn.Tanh, out_gain=1.0)
        self.normalizer = normalizer if normalizer is not None else nn.Identity()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.normalizer(obs)).squeeze(-1)


class TwinQ(nn.Module):
    """Two independent action-value networks Q1, Q2(s, a) (Fujimoto et al. 2018, TD3)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.q1 = mlp(obs_dim + action_dim, hidden_sizes, 1, activation=nn.ReLU, orthogonal=False)
        self.q2 = mlp(obs_dim + action_dim, hidden_sizes, 1, activation=nn.ReLU, orthogonal=False)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q1, Q2)``, each (B,) float32, for obs (B, obs_dim) and actions (B, A)."""
        x = torch.cat([obs, actions], dim=-1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


class DeterministicPolicy(nn.Module):
    """Raw observation -> deterministic action in [-1, 1], normalizer included (for export).

    Args:
        actor: a :class:`GaussianActor` (its mean is clipped) or :class:`SquashedGaussianActor`
            (its forward already squashes with tanh).
        normalizer: the agent's :class:`RunningMeanStd`, or None when observations are used raw.
    """

    def __init__(self, actor: nn.Module, normalizer: RunningMeanStd | None) -> None:
        super().__init__()
        self.actor = actor
        self.normalizer = normalizer if normalizer is not None else nn.Identity()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs (B, obs_dim) float32 raw -> actions (B, A) float32 in [-1, 1]."""
        return torch.clamp(self.actor(self.normalizer(obs)), -1.0, 1.0)

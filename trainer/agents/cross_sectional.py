"""A cross-sectional portfolio policy anchored at the equal-weight portfolio (1/N).

The flat MLP of PPO has one input block and one output per ticker, so it can learn "overweight
ticker j", which in a universe chosen from today's index members is survivorship look-ahead
turned into a parameter (issue 25). This policy instead scores every ticker with the **same**
small network from that ticker's own features, in the spirit of the EIIE topology of Jiang, Xu
& Liang (2017, arXiv 1706.10059, sec. 4: "identical independent evaluators") and of DeepSets
(Zaheer et al. 2017, arXiv 1703.06114: a sum/mean-pooled context keeps a set function
permutation-equivariant).

**Network.** For ticker ``i`` with features ``x_i`` (K,) and pre-trade weight ``w_i``::

    h_i = phi(x_i)                               (shared MLP, tanh)
    c   = mean_i h_i                             (pooled market context)
    s_i = v . [h_i, c] + g (N w_i - 1) + b       (linear head, zero-initialised)

``N w_i - 1`` (0 at 1/N) is the weight relative to 1/N. It enters the score linearly, after
the embedding: the embedding of every day of a window then runs as one batched pass, and
only the cheap head runs day by day inside the differentiated dynamics (the direct learner's
cost is dominated by that loop).

**Tilt** (bounded, exactly 1/N at zero output). With ``u_i = kappa * tanh(s_i)``::

    w*_i = exp(u_i) / sum_j exp(u_j)             (stocks; long only, sums to 1)

so ``w*_i / w*_j`` lies in ``[e^-2 kappa, e^2 kappa]``: each weight stays within a factor
``e^2 kappa`` of 1/N, the portfolio cannot concentrate, and a zero score (the initial network,
or any network whose head is zero) holds **exactly** 1/N (``tanh(0) = 0``).

**Env action** (the inverse of :func:`trainer.envs.portfolio_dynamics.target_weights`). The env maps an
action ``a`` to ``softmax(logit_scale * a)`` over stocks and a cash logit ``logit_scale * a_cash
- cash_bias * (1 - a_cash)``. The policy emits stock logits normalised so that ``sum_i e^z_i =
N``, as at the zero action::

    z_i = u_i - log(mean_j exp(u_j)),   a_i = z_i / logit_scale,   a_cash = 0

so the env's target equals ``w*`` up to the same tiny cash weight ``e^-cash_bias / (N +
e^-cash_bias)`` a zero action holds, and a zero score is the zero action bit for bit
(``mean(exp(0)) = 1``, ``log 1 = 0``). ``|z_i| <= 2 kappa``, so the action stays in [-1, 1]
when ``2 kappa <= logit_scale`` (:func:`check_kappa`; the direct learner and the on-policy
agents' ``policy="cross_sectional"`` check it against their env). With
``cash=True`` a second zero-initialised head reads the context: ``a_cash = tanh(g(c))`` (0 at
zero output, i.e. the env's default near-zero cash; up to ``a_cash = 1``, cash logit
``logit_scale``).

**Shapes.** ``N`` is read from the observation's width, ``obs_dim = N K + N + 1`` (the market
block feature-major, :func:`trainer.envs.portfolio.portfolio_market_block`, then the ``N + 1``
weights), so one network runs on a universe of any size; shuffling the tickers (the columns of
every feature row and the weights alike) shuffles the actions the same way.

**Users.** The direct learner (:mod:`trainer.agents.direct`) trains this policy through the
env's dynamics; PPO and A2C use it as the mean of their Gaussian actor
(``policy="cross_sectional"``, :func:`gaussian_actor`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from trainer.agents.networks import GaussianActor, mlp
from trainer.errors import ConfigError

__all__ = ["CrossSectionalPolicy", "check_kappa", "features_per_ticker", "gaussian_actor", "split_observation"]


def features_per_ticker(obs_dim: int, action_dim: int) -> int:
    """``K`` of a portfolio observation ``obs_dim = N K + N + 1`` with ``action_dim = N + 1``.

    Raises:
        ConfigError: the sizes are not those of a portfolio observation (field ``env``).
    """
    n = action_dim - 1
    if n < 1 or obs_dim <= action_dim or (obs_dim - action_dim) % n:
        raise ConfigError(
            f"env: obs_dim {obs_dim} and action_dim {action_dim} are not a portfolio observation "
            "(N*K market features, then N+1 weights; action N+1): the cross-sectional policy needs a portfolio task",
            field="env",
        )
    return (obs_dim - action_dim) // n


def check_kappa(kappa: float, logit_scale: float, *, field: str, hint: str = "") -> None:
    """The policy's action ``z / logit_scale`` with ``|z| <= 2 kappa`` must fit in [-1, 1].

    Args:
        kappa: the policy's tilt bound.
        logit_scale: the env's ``logit_scale``.
        field: the setting's name in the error, e.g. ``"direct.kappa"``, ``"ppo.kappa"``.
        hint: text appended to the error (e.g. that the value is a default the user never set).

    Raises:
        ConfigError: ``2 kappa > logit_scale`` (``field``).
    """
    if 2 * kappa > logit_scale:
        raise ConfigError(
            f"{field}: {kappa:g} tilts weights by up to e^(2 kappa), beyond the env's logit_scale "
            f"{logit_scale:g} (the action would be clipped); use kappa <= logit_scale / 2{hint}",
            field=field,
        )


def check_universe(num_tickers: int | None, *, cash: bool, algorithm: str) -> None:
    """The policy weighs tickers against each other: without its cash head, one ticker leaves it
    a single portfolio (all in that ticker, whatever it learns).

    Args:
        num_tickers: tickers the task trades (``None``: not known yet, nothing to check).
        cash: the policy has its cash head (``direct``'s ``cash``).
        algorithm: named in the message, e.g. ``"direct"``.

    Raises:
        ConfigError: fewer than 2 tickers and no cash head (field ``tickers``).
    """
    if num_tickers is not None and num_tickers < 2 and not cash:
        advice = "or set cash: true" if algorithm == "direct" else "or use policy mlp"
        raise ConfigError(
            f"tickers: {algorithm}'s cross-sectional policy weighs tickers against each other, and with "
            f"{num_tickers} ticker and no cash its only portfolio is all in it; choose at least 2 tickers {advice}",
            field="tickers",
        )


def split_observation(obs: torch.Tensor, num_features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split portfolio observations into per-ticker features and weights.

    Args:
        obs: (B, N K + N + 1) float32, the market block feature-major, then the weights.
        num_features: ``K``.

    Returns:
        ``(features (B, N, K), weights (B, N + 1))``, the weights in ticker order then cash.

    Raises:
        ValueError: the width is not ``N (K + 1) + 1`` for a whole ``N >= 1``.
    """
    width = int(obs.shape[1])  # a plain int also while tracing (ONNX export)
    n, rest = divmod(width - 1, num_features + 1)
    if n < 1 or rest:
        raise ValueError(f"observation width {width} is not N*({num_features}+1)+1 for a whole N")
    market = obs[:, : n * num_features].reshape(obs.shape[0], num_features, n).transpose(1, 2)
    return market, obs[:, n * num_features :]


class CrossSectionalPolicy(nn.Module):
    """Shared per-ticker scorer with a pooled context; see the module docstring.

    Args:
        num_features: ``K``, market features per ticker.
        hidden_sizes: widths of the shared per-ticker MLP ``phi`` (tanh after every layer);
            the last is the embedding size ``H``.
        kappa: tilt bound (> 0): weights stay within ``e^(2 kappa)`` of each other.
        cash: add the cash head (off: the env's near-zero cash of a zero action).
        logit_scale: the env's ``logit_scale`` the action is expressed in; a buffer, so a
            saved policy acts for the env it was trained on (the learner sets it).

    Raises:
        ConfigError: ``kappa`` <= 0 (field ``kappa``).
    """

    def __init__(
        self,
        num_features: int,
        hidden_sizes: Sequence[int],
        kappa: float,
        *,
        cash: bool = False,
        logit_scale: float = 4.0,
    ) -> None:
        super().__init__()
        if not kappa > 0:
            raise ConfigError(f"kappa must be > 0, got {kappa!r}", field="kappa")
        self.num_features = int(num_features)
        self.kappa = float(kappa)
        width = int(hidden_sizes[-1])
        self.embed = nn.Sequential(mlp(self.num_features, hidden_sizes[:-1], width, activation=nn.Tanh), nn.Tanh())
        self.head = nn.Linear(2 * width, 1)  # v and b
        self.weight_gain = nn.Parameter(torch.zeros(()))  # g
        self.cash_head: nn.Linear | None = nn.Linear(width, 1) if cash else None
        self.hold_equal_weight_()
        self.register_buffer("logit_scale", torch.tensor(float(logit_scale)))

    @torch.no_grad()
    def hold_equal_weight_(self) -> None:
        """Zero the head, the weight gain and the cash head, in place: every score is then 0 and
        the action exactly 1/N (the untrained policy, and the direct learner's closed gate)."""
        heads = [self.head] + ([self.cash_head] if self.cash_head is not None else [])
        for param in [self.weight_gain, *(p for h in heads for p in (h.weight, h.bias))]:
            param.zero_()

    def market_scores(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The part of the scores that does not depend on the weights.

        Args:
            features: (..., N, K) float32 per-ticker features (any leading batch dimensions).

        Returns:
            ``(v . [h_i, c] + b (..., N), cash score g(c) (...,) or None)``, float32.
        """
        h = self.embed(features)  # (..., N, H)
        context = h.mean(dim=-2)  # (..., H)
        width = h.shape[-1]
        v = self.head.weight[0]
        # v . [h_i, c] without materialising the concatenation
        base = h @ v[:width] + (context @ v[width:] + self.head.bias[0]).unsqueeze(-1)
        cash = self.cash_head(context).squeeze(-1) if self.cash_head is not None else None
        return base, cash

    def action_from_scores(self, base: torch.Tensor, cash: torch.Tensor | None, weights: torch.Tensor) -> torch.Tensor:
        """The env action from :meth:`market_scores` and the current weights (differentiable).

        Args:
            base: (B, N) float32; cash: (B,) float32 or None; weights: (B, N + 1) any float dtype.

        Returns:
            (B, N + 1) float32 actions (stocks, then cash); within [-1, 1] when ``2 kappa <=
            logit_scale``; exactly 0 where every score is 0.
        """
        n = base.shape[-1]
        s = base + self.weight_gain * (weights[:, :n].to(base.dtype) * n - 1.0)
        u = self.kappa * torch.tanh(s)
        z = u - torch.log(torch.exp(u).mean(dim=1, keepdim=True))
        a_cash = torch.tanh(cash) if cash is not None else torch.zeros_like(z[:, 0])
        return torch.cat([z / self.logit_scale, a_cash.unsqueeze(1)], dim=1)

    def tilt_action(self, features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The env action (B, N + 1) float32 for features (B, N, K) and weights (B, N + 1)."""
        base, cash = self.market_scores(features)
        return self.action_from_scores(base, cash, weights)

    def tilt_weights(self, features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The stock weights ``w*`` (B, N) float32 of the module docstring (sum to 1 per row)."""
        base, _ = self.market_scores(features)
        n = base.shape[-1]
        s = base + self.weight_gain * (weights[:, :n].to(base.dtype) * n - 1.0)
        return torch.softmax(self.kappa * torch.tanh(s), dim=1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw portfolio observations (B, N K + N + 1) float32 -> env actions (B, N + 1) float32
        in [-1, 1], for any ``N``."""
        features, weights = split_observation(obs, self.num_features)
        return torch.clamp(self.tilt_action(features, weights), -1.0, 1.0)


def gaussian_actor(
    obs_dim: int,
    action_dim: int,
    hidden_sizes: Sequence[int],
    kappa: float,
    init_log_std: float,
    *,
    field: str,
) -> GaussianActor:
    """PPO's and A2C's Gaussian actor with a :class:`CrossSectionalPolicy` (no cash head) as its mean.

    The mean action is the policy's env action (in [-1, 1], exactly 0, the 1/N action, while its
    head is zero, as it is initialised); ``log_std`` (A,) is the usual state-independent one,
    one entry per ticker and one for cash. The mean is permutation-equivariant and reads any
    universe size; the exploration noise, one scale per action entry, is tied to the trained
    universe (only training samples it: the deterministic policy is the mean).

    Args:
        obs_dim: ``N K + N + 1`` (a portfolio observation).
        action_dim: ``N + 1``.
        hidden_sizes: widths of the shared per-ticker MLP.
        kappa: tilt bound (> 0).
        init_log_std: initial log std of every action entry.
        field: the setting named when the sizes are not a portfolio's (e.g. ``"ppo.policy"``).

    Raises:
        ConfigError: sizes that are not a portfolio observation (``field``); ``kappa`` <= 0.
    """
    try:
        num_features = features_per_ticker(obs_dim, action_dim)
    except ConfigError:
        raise ConfigError(
            f"{field}: the cross-sectional policy reads portfolio observations (N*K market features, then N+1 "
            f"weights), not obs_dim {obs_dim} with action_dim {action_dim}: use it on portfolio tasks only",
            field=field,
        ) from None
    mean = CrossSectionalPolicy(num_features, hidden_sizes, kappa)
    return GaussianActor(obs_dim, action_dim, hidden_sizes, init_log_std, mean=mean)

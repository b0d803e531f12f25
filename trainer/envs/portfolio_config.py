"""Rules, reward and episode settings of the portfolio env (:class:`PortfolioConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainer.envs.config_base import EnvConfigBase
from trainer.envs.observations import PORTFOLIO_OBSERVATIONS, check_observation
from trainer.errors import ConfigError
from trainer.util.bounds import MAX_LOGIT, PENALTY, Bound

__all__ = ["BAND_MODES", "RECOMMENDED_REBALANCE_BAND", "RECOMMENDED_REWARD_SCALES", "REWARDS", "PortfolioConfig"]

REWARDS = ("log_return", "excess_log_return", "differential_sharpe")
#: Where a stock outside the no-trade band is traded to (:mod:`trainer.envs.portfolio_dynamics`).
BAND_MODES = ("target", "edge")
#: The no-trade band that new portfolio tasks of the web form, the CLI's ``--env portfolio`` and
#: the demo start with (the env's own default stays 0). Chosen on validation scores only, among
#: bands 0, 0.005, 0.01, a turnover penalty and a smaller exploration noise, in
#: ``benchmarks/learning_quality.py --select`` (docs/results/learning-quality.md).
RECOMMENDED_REBALANCE_BAND = 0.01
#: The ``reward_scale`` hyperparameter a portfolio task trains with when it leaves it out, per
#: reward: daily log returns are about 0.01, scaled by 100 to rewards of about 1 (PPO's value
#: loss and advantages are tuned for that size); the differential Sharpe ratio is about 1
#: already. Fixed from those sizes before any learning-quality run, which uses them
#: (docs/results/learning-quality.md). Intraday bars' returns are smaller still: the 5-minute demo gives 1000.
RECOMMENDED_REWARD_SCALES = {"log_return": 100.0, "excess_log_return": 100.0, "differential_sharpe": 1.0}


@dataclass
class PortfolioConfig(EnvConfigBase):
    """Rules, reward and episode settings of :class:`PortfolioVecEnv`.

    Attributes:
        initial_cash: starting value of every env, USD (100 to 1e10), all in cash.
        cost_pct: proportional cost of turnover (``1e-3`` = 0.1 % of the value traded), in [0, 0.1].
        reward: one of :data:`REWARDS` (see the module docstring).
        reward_scaling: multiplier of the reward, in (0, 1]; 1.0 keeps log-return units.
        dsr_eta: adaptation rate ``eta`` of the differential Sharpe ratio, in (0, 1).
        logit_scale: logits per unit of action (more than 0, at most 100,
            :data:`~trainer.util.bounds.MAX_LOGIT`); 4 lets one stock weigh up to ``e^8`` times
            another.
        cash_bias: logit of cash at a zero cash action is ``-cash_bias`` (0 to 100), so a zero
            action holds equal weights with (almost) no cash.
        observation: ``"scale_free"`` (default) or ``"finrl"``.
        episode_length: steps per episode (days, or bars of an intraday panel); ``None`` runs
            to the last row of the data.
        random_start: draw each episode's first day at random (per env); ``False``: day 0.
        flatten_at_close: intraday panels only: on the last bar of every session the target
            is all cash whatever the action (turnover costs paid), so no position is held
            overnight; the next session's first bar invests again. An error on daily data.
        rebalance_band: no-trade band, a fraction of portfolio value in [0, 1): a stock's weight
            is only moved to its target when ``|target - current| > rebalance_band``, else it
            is left where prices drifted it (cash takes the difference). ``0`` (default) trades
            every difference, as before. Must be below ``1/N`` (checked by the env), else a
            zero action would never leave the initial cash. Changes the dynamics, so it holds
            in evaluation and backtests too. See :mod:`trainer.envs.portfolio_dynamics`.
        band_mode: where a stock outside the band goes, one of :data:`BAND_MODES`:
            ``"target"`` (default, as before) trades it to its target, ``"edge"`` only to the
            nearer edge of the band ``target +- rebalance_band`` (Davis & Norman 1990). No
            effect without a band.
        trade_rate: partial adjustment ``eta`` in (0, 1]: each step moves the weights a
            fraction ``eta`` of the way to the (banded) target, ``w <- w + eta (w* - w)``
            (Garleanu & Pedersen 2013). ``1`` (default) trades all the way, as before.
        execution_lag: ``0`` (default) or ``1``: with 1 the target chosen on day ``t``'s
            observation is traded at day ``t+1``'s close (a pending order; the first step of
            every episode holds), so a policy cannot trade at the close it has just seen.
            ``0`` trades at the close of the observed day, as before.
        turnover_penalty: training-only reward surcharge per unit of turnover (0 to 1e6), in
            reward units before ``reward_scaling``: the reward is reduced by
            ``turnover_penalty * turnover``; the portfolio value (and every metric) is not.
            ``0`` (default) adds nothing.
    """

    initial_cash: float = 1e6
    cost_pct: float = 1e-3
    reward: str = "log_return"
    reward_scaling: float = 1.0
    dsr_eta: float = 1.0 / 63.0
    logit_scale: float = 4.0
    cash_bias: float = 20.0
    observation: str = "scale_free"
    episode_length: int | None = None
    random_start: bool = True
    flatten_at_close: bool = False
    rebalance_band: float = 0.0
    turnover_penalty: float = 0.0
    band_mode: str = "target"
    trade_rate: float = 1.0
    execution_lag: int = 0

    #: The limits of every numeric setting (see :mod:`trainer.util.bounds`); the ones the
    #: stock-trading env shares (cash, cost) are the same as there.
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "initial_cash": Bound(100, 1e10, unit=" USD"),
        "cost_pct": Bound(0, 0.1),
        "reward_scaling": Bound(0, 1, low_open=True),
        "dsr_eta": Bound(0, 1, low_open=True, high_open=True),
        # at most MAX_LOGIT: 1e308 overflowed float32 in the policy, a traceback
        "logit_scale": Bound(0, MAX_LOGIT, low_open=True),
        "cash_bias": Bound(0, MAX_LOGIT),
        "episode_length": Bound(1, integer=True, nullable=True),
        "rebalance_band": Bound(0, 1, high_open=True),
        "turnover_penalty": PENALTY,  # 0 to MAX_PENALTY: 1e300 made PPO's first loss NaN
        "trade_rate": Bound(0, 1, low_open=True),
        "execution_lag": Bound(0, 1, integer=True),
    }

    def validate(self, *, prefix: str = "env") -> PortfolioConfig:
        """Check every field and return ``self``.

        Raises:
            ConfigError: naming the field, e.g. ``"env.reward"``.
        """

        def bad(name: str, why: str) -> ConfigError:
            return self._bad(prefix, name, why)

        self.check_bounds(prefix)
        if self.reward not in REWARDS:
            raise bad("reward", f"must be one of {', '.join(REWARDS)}")
        check_observation(self.observation, field=f"{prefix}.observation", allowed=PORTFOLIO_OBSERVATIONS)
        if not isinstance(self.random_start, bool):
            raise bad("random_start", "must be true or false")
        if not isinstance(self.flatten_at_close, bool):
            raise bad("flatten_at_close", "must be true or false")
        if self.band_mode not in BAND_MODES:
            raise bad("band_mode", f"must be one of {', '.join(BAND_MODES)}")
        return self

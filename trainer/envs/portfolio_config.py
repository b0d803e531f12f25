"""Rules, reward and episode settings of the portfolio env (:class:`PortfolioConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.envs.config_base import EnvConfigBase
from trainer.envs.observations import PORTFOLIO_OBSERVATIONS, check_observation
from trainer.errors import ConfigError

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
        initial_cash: starting value of every env, USD (> 0), all in cash.
        cost_pct: proportional cost of turnover (``1e-3`` = 0.1 % of the value traded), in [0, 1).
        reward: one of :data:`REWARDS` (see the module docstring).
        reward_scaling: multiplier of the reward (> 0); 1.0 keeps log-return units.
        dsr_eta: adaptation rate ``eta`` of the differential Sharpe ratio, in (0, 1).
        logit_scale: logits per unit of action (> 0); 4 lets one stock weigh up to
            ``e^8`` times another.
        cash_bias: logit of cash at a zero cash action is ``-cash_bias`` (>= 0), so a zero
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
        turnover_penalty: training-only reward surcharge per unit of turnover (>= 0), in
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

    def validate(self, *, prefix: str = "env") -> PortfolioConfig:
        """Check every field and return ``self``.

        Raises:
            ConfigError: naming the field, e.g. ``"env.reward"``.
        """

        def bad(name: str, why: str) -> ConfigError:
            return self._bad(prefix, name, why)

        def real(name: str) -> float:
            return self._real(prefix, name)

        if real("initial_cash") <= 0:
            raise bad("initial_cash", "must be > 0")
        if not 0 <= real("cost_pct") < 1:
            raise bad("cost_pct", "must be a fraction in [0, 1), e.g. 0.001 for 0.1 %")
        if self.reward not in REWARDS:
            raise bad("reward", f"must be one of {', '.join(REWARDS)}")
        if real("reward_scaling") <= 0:
            raise bad("reward_scaling", "must be > 0")
        if not 0 < real("dsr_eta") < 1:
            raise bad("dsr_eta", "must be in (0, 1)")
        if real("logit_scale") <= 0:
            raise bad("logit_scale", "must be > 0")
        if real("cash_bias") < 0:
            raise bad("cash_bias", "must be >= 0")
        check_observation(self.observation, field=f"{prefix}.observation", allowed=PORTFOLIO_OBSERVATIONS)
        if self.episode_length is not None:
            value = self.episode_length
            if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 1:
                raise bad("episode_length", "must be a whole number >= 1 or null")
        if not isinstance(self.random_start, bool):
            raise bad("random_start", "must be true or false")
        if not isinstance(self.flatten_at_close, bool):
            raise bad("flatten_at_close", "must be true or false")
        if not 0 <= real("rebalance_band") < 1:
            raise bad("rebalance_band", "must be a fraction in [0, 1), e.g. 0.005 for half a percent of value")
        if real("turnover_penalty") < 0:
            raise bad("turnover_penalty", "must be >= 0 (reward units per unit of turnover)")
        if self.band_mode not in BAND_MODES:
            raise bad("band_mode", f"must be one of {', '.join(BAND_MODES)}")
        if not 0 < real("trade_rate") <= 1:
            raise bad("trade_rate", "must be in (0, 1]: the fraction of the way to the target traded per step")
        if isinstance(self.execution_lag, bool) or self.execution_lag not in (0, 1):
            raise bad("execution_lag", "must be 0 (trade at the observed close) or 1 (at the next close)")
        return self

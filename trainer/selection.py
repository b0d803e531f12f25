"""Selection that does not overfit: robust validation scores, baseline-relative results, DSR.

One validation year is one path: a tournament that keeps the agents with the best Sharpe ratio
on it keeps, among others, the luckiest. Three defences, all pure functions:

* **Sub-windows.** The validation episode's daily returns are cut into ``windows`` contiguous
  sub-windows of (almost) equal length (4 = quarters of a one-year split), each with its own
  annualised Sharpe ratio; the score is a robust statistic of them (:data:`RULES`):
  ``mean_minus_std`` = mean - ``k`` x standard deviation (ddof 0) of the sub-window Sharpes,
  ``worst_window`` = their minimum, ``full_sharpe`` = the Sharpe of the whole window (the old
  rule). A policy that is good in one quarter only scores low.
* **Baselines on the same days.** :func:`baseline_relative` gives the excess total return and
  the Sharpe difference against the equal-weight portfolio and QQQ.
* **Standard errors.** Every score carries one (:func:`score_standard_error`): the dispersion
  of its sub-window Sharpe ratios, or Lo's (2002) iid formula (:func:`sharpe_standard_error`);
  the tournament (:mod:`trainer.tournament`) reads scores in units of it.
* **Deflated Sharpe Ratio.** :func:`deflated_sharpe_ratio` (Bailey & López de Prado 2014, "The
  Deflated Sharpe Ratio: Correcting for Selection Bias, Backtest Overfitting and
  Non-Normality", Journal of Portfolio Management 40(5), eq. 2 and the expected maximum of
  ``N`` Sharpe ratios on p. 3): the probability that the true Sharpe ratio is above the best one
  expected from ``N`` trials of pure noise with the observed variance of Sharpe ratios.

Sharpe ratios here are ``mean / std (ddof=1) * sqrt(P)`` of simple per-period returns with a zero
risk-free rate, the convention of :mod:`trainer.backtest.metrics` (empyrical). ``P`` is the data's
periods per year: 252 for daily returns (the default), bars per session x 252 for intraday bars
(78 x 252 = 19,656 for 5-minute bars of the regular session; :class:`trainer.data.bars.BarInfo`,
:func:`trainer.data.timestamps.infer_periods_per_year`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from trainer.errors import ConfigError
from trainer.util.bounds import Bound

__all__ = [
    "DEFAULT_SELECTION",
    "EULER_GAMMA",
    "MAX_K",
    "RULES",
    "SelectionRule",
    "annual_sharpe",
    "baseline_relative",
    "deflated_sharpe_ratio",
    "deflated_sharpe_ratio_annualised",
    "equal_weight_returns",
    "expected_max_sharpe",
    "robust_score",
    "score_standard_error",
    "sharpe_standard_error",
    "window_bounds",
    "window_sharpes",
    "window_standard_error",
]

RULES = ("mean_minus_std", "worst_window", "full_sharpe")
TRADING_DAYS = 252
#: Euler-Mascheroni constant, in the expected maximum of N standard normals (Bailey & LdP 2014).
EULER_GAMMA = 0.5772156649015329

#: The largest weight of the sub-window Sharpe ratios' spread in ``mean_minus_std`` (default 1):
#: at 100 the score already ranks agents by their spread alone; 1e308 made the score -inf for
#: any spread above 1.8.
MAX_K = 100.0


@dataclass(frozen=True)
class SelectionRule:
    """How a task scores a validation episode (higher is better).

    Attributes:
        rule: one of :data:`RULES`.
        windows: number of contiguous validation sub-windows (2..12; 4 = quarters of a year).
        k: weight of the spread in ``mean_minus_std``, 0 to :data:`MAX_K`.
    """

    rule: str = "mean_minus_std"
    windows: int = 4
    k: float = 1.0

    #: The limits of the numeric settings (see :mod:`trainer.util.bounds`).
    BOUNDS: ClassVar[dict[str, Bound]] = {"windows": Bound(2, 12, integer=True), "k": Bound(0, MAX_K)}

    def validate(self, *, prefix: str = "selection") -> SelectionRule:
        """Return ``self`` or raise :class:`ConfigError` naming ``<prefix>.<field>``."""
        if self.rule not in RULES:
            raise ConfigError(f"{prefix}.rule: {self.rule!r} is not one of {', '.join(RULES)}", field=f"{prefix}.rule")
        if isinstance(self.windows, float):  # a count of windows, used as an int: 4.0 is refused
            raise ConfigError(f"{prefix}.windows: must be an integer, got {self.windows!r}", field=f"{prefix}.windows")
        for name, bound in self.BOUNDS.items():
            bound.check(getattr(self, name), f"{prefix}.{name}")
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, prefix: str = "selection") -> SelectionRule:
        """Build and validate; missing keys keep their defaults.

        Raises:
            ConfigError: not an object, an unknown key, or a bad value.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{prefix}: must be an object", field=prefix)
        for key in data:
            if key not in ("rule", "windows", "k"):
                raise ConfigError(f"{prefix}.{key}: unknown field (expected rule, windows, k)", field=f"{prefix}.{key}")
        return cls(**dict(data)).validate(prefix=prefix)

    def describe(self, split: str | None = "validation") -> str:
        """One line for people, e.g. ``"mean - 1 x std of the Sharpe ratios of 4 validation sub-windows"``.

        Args:
            split: the split the windows are cut from (``"validation"``, ``"test"``...);
                ``None`` for a date range that is no split (``"4 sub-windows of the range"``).
        """
        subs = f"{self.windows} {split} sub-windows" if split else f"{self.windows} sub-windows of the range"
        if self.rule == "mean_minus_std":
            return f"mean - {self.k:g} x std of the Sharpe ratios of {subs}"
        if self.rule == "worst_window":
            return f"worst Sharpe ratio of {subs}"
        return f"Sharpe ratio of the whole {split} window" if split else "Sharpe ratio of the whole range"


DEFAULT_SELECTION = SelectionRule()


def annual_sharpe(returns: np.ndarray, periods_per_year: int = TRADING_DAYS) -> float | None:
    """Annualised Sharpe ratio of simple per-period returns (zero risk-free rate).

    Args:
        returns: (T,) simple returns as fractions, one per period (day or bar).
        periods_per_year: periods in a year: 252 for daily returns, bars per session x 252 for
            intraday bars (19,656 for 5-minute bars).

    Returns:
        ``mean / std(ddof=1) * sqrt(periods_per_year)``; ``None`` with fewer than 2 returns or
        zero spread.
    """
    r = np.asarray(returns, dtype=np.float64)
    if r.size < 2:
        return None
    sd = float(np.std(r, ddof=1))
    if not sd > 1e-15:
        return None
    return float(np.mean(r) / sd * math.sqrt(periods_per_year))


def window_bounds(num_returns: int, windows: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` index ranges of ``windows`` contiguous sub-windows covering ``num_returns``.

    Lengths differ by at most one (the first ones are longer), e.g. 10 returns in 3 windows:
    ``[(0, 4), (4, 7), (7, 10)]``.

    Raises:
        ConfigError: fewer than 2 returns per window (field ``selection.windows``).
    """
    if num_returns < 2 * windows:
        raise ConfigError(
            f"selection.windows: {windows} sub-windows need at least {2 * windows} validation days, got {num_returns}",
            field="selection.windows",
        )
    bounds, lo = [], 0
    base, extra = divmod(num_returns, windows)
    for i in range(windows):
        hi = lo + base + (1 if i < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def window_sharpes(returns: np.ndarray, windows: int, periods_per_year: int = TRADING_DAYS) -> list[float | None]:
    """Annualised Sharpe ratio (:func:`annual_sharpe`) of each of ``windows`` contiguous
    sub-windows of ``returns``."""
    r = np.asarray(returns, dtype=np.float64)
    return [annual_sharpe(r[lo:hi], periods_per_year) for lo, hi in window_bounds(r.size, windows)]


def robust_score(
    returns: np.ndarray, rule: SelectionRule, *, periods_per_year: int = TRADING_DAYS
) -> tuple[float, list[float | None]]:
    """Score per-period returns with ``rule``; undefined Sharpe ratios (no spread) count as 0.

    Args:
        returns: (T,) simple returns of the validation episode, one per day or per bar.
        rule: the task's selection rule.
        periods_per_year: the data's periods per year (252 for days, 78 x 252 for 5-minute
            bars): every Sharpe ratio, of the sub-windows and of the whole window, is
            annualised with it.

    Returns:
        ``(score, sub_window_sharpes)``.
    """
    subs = window_sharpes(returns, rule.windows, periods_per_year)
    values = np.array([s if s is not None else 0.0 for s in subs])
    if rule.rule == "mean_minus_std":
        score = float(values.mean() - rule.k * values.std())
    elif rule.rule == "worst_window":
        score = float(values.min())
    else:
        full = annual_sharpe(returns, periods_per_year)
        score = float(full) if full is not None else 0.0
    return score, subs


def equal_weight_returns(close: np.ndarray, members: np.ndarray | None = None) -> np.ndarray:
    """Daily returns of the cost-free, daily-rebalanced equal-weight (1/N) portfolio.

    Args:
        close: (T, N) adjusted close prices.
        members: (T, N) bool point-in-time universe (``MarketData.members``), or ``None``
            (every ticker every day). Period ``t`` holds the members of day ``t``.

    Returns:
        (T-1,) simple returns, ``mean_i(close[t+1, i] / close[t, i]) - 1`` over ``i`` in the
        members of day ``t`` (0, all cash, on a day without members).
    """
    c = np.asarray(close, dtype=np.float64)
    gross = c[1:] / c[:-1]
    if members is None:
        return gross.mean(axis=1) - 1.0
    held = np.asarray(members, dtype=bool)[:-1]
    count = held.sum(axis=1)
    return np.where(count > 0, np.where(held, gross, 0.0).sum(axis=1) / np.maximum(count, 1), 1.0) - 1.0


def baseline_relative(
    agent_returns: np.ndarray, baseline_returns: np.ndarray, *, periods_per_year: int = TRADING_DAYS
) -> dict[str, float | None]:
    """Excess total return and Sharpe difference of the agent over a baseline on the same days.

    Args:
        agent_returns, baseline_returns: (T,) simple returns on the same dates (or bars).
        periods_per_year: annualisation of both Sharpe ratios (:func:`annual_sharpe`).

    Returns:
        ``{"excess_return": (prod(1+a) - 1) - (prod(1+b) - 1), "sharpe_difference": S(a) - S(b),
        "baseline_total_return": ..., "baseline_sharpe": ...}`` (``None`` where a Sharpe ratio
        is undefined).

    Raises:
        ValueError: different lengths.
    """
    a = np.asarray(agent_returns, dtype=np.float64)
    b = np.asarray(baseline_returns, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"agent returns {a.shape} and baseline returns {b.shape} cover different days")
    total_a, total_b = float(np.prod(1 + a) - 1), float(np.prod(1 + b) - 1)
    sa, sb = annual_sharpe(a, periods_per_year), annual_sharpe(b, periods_per_year)
    return {
        "excess_return": total_a - total_b,
        "sharpe_difference": (sa - sb) if sa is not None and sb is not None else None,
        "baseline_total_return": total_b,
        "baseline_sharpe": sb,
    }


def _norm_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _norm_ppf(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation refined by Newton steps)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    lo, hi = -40.0, 40.0
    x = 0.0
    for _ in range(200):  # bisection to 1e-15 is plenty here and has no tables to get wrong
        x = 0.5 * (lo + hi)
        if _norm_cdf(x) < p:
            lo = x
        else:
            hi = x
        if hi - lo < 1e-15:
            break
    return x


def expected_max_sharpe(num_trials: int, sharpe_variance: float) -> float:
    """Expected maximum Sharpe ratio of ``N`` independent trials with true Sharpe 0.

    ``SR_0 = sqrt(V) * ((1 - gamma) * Z^-1(1 - 1/N) + gamma * Z^-1(1 - 1/(N e)))``
    (Bailey & López de Prado 2014, p. 3; ``gamma`` the Euler-Mascheroni constant, ``Z^-1`` the
    inverse standard normal CDF). 0 for a single trial.

    Args:
        num_trials: ``N`` >= 1, the number of agents evaluated.
        sharpe_variance: ``V``, the variance of their Sharpe ratios (same periodicity as the
            Sharpe ratio being deflated).
    """
    if num_trials < 2 or sharpe_variance <= 0:
        return 0.0
    n = float(num_trials)
    return math.sqrt(sharpe_variance) * (
        (1 - EULER_GAMMA) * _norm_ppf(1 - 1 / n) + EULER_GAMMA * _norm_ppf(1 - 1 / (n * math.e))
    )


def deflated_sharpe_ratio(
    sharpe: float,
    *,
    num_trials: int,
    sharpe_variance: float,
    num_observations: int,
    skewness: float = 0.0,
    kurtosis: float = 3.0,
) -> float | None:
    """Deflated Sharpe Ratio (Bailey & López de Prado 2014, eq. 2).

    ``DSR = Z((SR - SR_0) * sqrt(T - 1) / sqrt(1 - g3 * SR + (g4 - 1) / 4 * SR^2))`` with
    ``SR_0`` from :func:`expected_max_sharpe`. All Sharpe ratios are **per period** (daily:
    divide an annualised one by ``sqrt(252)``), as in the paper.

    Args:
        sharpe: the selected agent's per-period Sharpe ratio.
        num_trials: agents evaluated so far in the run (``N`` >= 1).
        sharpe_variance: variance of their per-period Sharpe ratios.
        num_observations: ``T``, returns behind ``sharpe`` (>= 2).
        skewness: ``g3`` of those returns; kurtosis: ``g4`` (3 for normal returns, not excess).

    Returns:
        A probability in [0, 1]; ``None`` when the denominator is not positive.
    """
    if num_observations < 2:
        return None
    sr0 = expected_max_sharpe(num_trials, sharpe_variance)
    denom = 1.0 - skewness * sharpe + (kurtosis - 1.0) / 4.0 * sharpe * sharpe
    if denom <= 0:
        return None
    return _norm_cdf((sharpe - sr0) * math.sqrt(num_observations - 1) / math.sqrt(denom))


def deflated_sharpe_ratio_annualised(
    annual_sharpe: float,
    *,
    num_trials: int,
    annual_sharpe_variance: float,
    num_observations: int,
    periods_per_year: float | None = None,
) -> float | None:
    """:func:`deflated_sharpe_ratio` from annualised figures, as metrics store them: the Sharpe
    ratio is divided by ``sqrt(P)`` and the variance by ``P``, ``P`` the data's periods per year
    (``None``: daily data, :data:`TRADING_DAYS`; bars per session x 252 for intraday bars);
    returns taken as normal (skewness 0, kurtosis 3).

    Args:
        annual_sharpe: the selected agent's annualised Sharpe ratio.
        num_trials: agents evaluated (``N`` >= 1).
        annual_sharpe_variance: sample variance of their annualised Sharpe ratios.
        num_observations: ``T``, the agent's returns in the same periods (days or bars).
        periods_per_year: ``P``.

    Returns:
        As :func:`deflated_sharpe_ratio`.
    """
    periods = float(periods_per_year or TRADING_DAYS)
    return deflated_sharpe_ratio(
        float(annual_sharpe) / math.sqrt(periods),
        num_trials=int(num_trials),
        sharpe_variance=float(annual_sharpe_variance) / periods,
        num_observations=int(num_observations),
    )


def sharpe_standard_error(
    sharpe: float | None, num_returns: int, periods_per_year: float = TRADING_DAYS
) -> float | None:
    """Standard error of an annualised Sharpe ratio of ``T`` iid returns (Lo 2002).

    Lo (2002), "The Statistics of Sharpe Ratios", Financial Analysts Journal 58(4), iid case:
    a per-period Sharpe ratio ``SR_p`` estimated on ``T`` returns has asymptotic standard
    error ``sqrt((1 + SR_p^2 / 2) / T)``. Annualised by ``sqrt(P)`` (``SR = SR_p sqrt(P)``):
    ``SE = sqrt(P) * sqrt((1 + SR^2 / (2 P)) / T)``. A Sharpe ratio of 1.0 on a year of days
    (``T = P = 252``) has ``SE = sqrt(1 + 1/504) = 1.00099``.

    Args:
        sharpe: the annualised Sharpe ratio; ``None`` (undefined: no spread) counts as 0.
        num_returns: ``T``, the returns behind it (periods: days or bars).
        periods_per_year: ``P`` (252 for days, bars per session x 252 for bars).

    Returns:
        The annualised standard error; ``None`` for fewer than 2 returns.
    """
    if num_returns < 2:
        return None
    p = float(periods_per_year)
    sr = 0.0 if sharpe is None else float(sharpe)
    return math.sqrt(p) * math.sqrt((1.0 + sr * sr / (2.0 * p)) / num_returns)


def window_standard_error(window_scores: Any) -> float | None:
    """Standard error of the mean of ``W`` per-window scores: ``std(ddof=1) / sqrt(W)``.

    Scores ``[1, 2, 3, 6]``: mean 3, ``std = sqrt(14 / 3) = 2.1602``, ``SE = 1.0801``.

    Args:
        window_scores: (W,) scores (annualised Sharpe ratios) of the sub-windows; ``None``
            (undefined) counts as 0, as :func:`robust_score` counts it.

    Returns:
        The standard error, ``None`` with fewer than 2 windows.
    """
    values = np.array([0.0 if v is None else float(v) for v in window_scores], dtype=np.float64)
    if values.size < 2:
        return None
    return float(values.std(ddof=1) / math.sqrt(values.size))


def score_standard_error(
    window_scores: Any, *, full_sharpe: float | None, num_returns: int, periods_per_year: float = TRADING_DAYS
) -> tuple[float | None, str]:
    """The standard error a score carries, and where it came from.

    Preferred: the dispersion of the score's sub-window Sharpe ratios
    (:func:`window_standard_error`, source ``"sub_windows"``): it measures how much the same
    policy's result moves from one stretch of days to the next, fat tails and autocorrelation
    included. Every selection rule's score is read with this SE (for ``mean_minus_std`` and
    ``worst_window`` it is the SE of the mean sub-window Sharpe, the figure they shade).
    When there are fewer than 2 sub-windows, or they are all equal (a policy that never
    trades scores 0 in each), the iid formula of :func:`sharpe_standard_error` on the whole
    window stands in (source ``"lo_2002"``).

    Args:
        window_scores: (W,) sub-window Sharpe ratios (``None`` counts as 0).
        full_sharpe: the whole window's annualised Sharpe ratio (``None``: undefined).
        num_returns: returns of the whole window.
        periods_per_year: the data's periods per year.

    Returns:
        ``(se, source)``; ``(None, "none")`` with fewer than 2 returns.
    """
    se = window_standard_error(window_scores)
    if se is not None and se > 0:
        return se, "sub_windows"
    lo = sharpe_standard_error(full_sharpe, num_returns, periods_per_year)
    return (lo, "lo_2002") if lo is not None else (None, "none")

"""Statistics of an agent against a benchmark on the same days: is it better than 1/N, or lucky?

:func:`vs_equal_weight` compares two series of per-period **simple net returns** (fractions,
0.01 = 1 %, after costs; one per day, or per bar for intraday data) that cover the **same
periods**: the agent's and a benchmark's (in Paddock the equal-weight 1/N portfolio, cost-free or
traded with the task's costs). It reports

* the active return ``a_t = r_t - b_t``: its annualised mean ``mean(a) * P``, the tracking error
  ``std(a, ddof=1) * sqrt(P)`` and the information ratio (their ratio; Grinold & Kahn,
  "Active Portfolio Management", ch. 5), ``P`` the periods per year;
* the difference of the two annualised Sharpe ratios (zero risk-free rate, ``mean / std(ddof=1)
  * sqrt(P)``, the convention of :mod:`trainer.selection`) with a 95 % interval and a one-sided
  p-value (H0: the agent's Sharpe ratio is at most the benchmark's) from the **studentised
  circular block bootstrap** of Ledoit & Wolf (2008), "Robust performance hypothesis testing
  with the Sharpe ratio", Journal of Empirical Finance 15(5), section 3.2;
* a verdict: ``beats`` when the interval lies above 0, ``trails`` when below, else
  ``indistinguishable``.

How the interval is built (Ledoit & Wolf 2008, section 3.2). With ``v = (mean r, mean b,
mean r^2, mean b^2)`` the difference is a smooth function ``f(v)``; its standard error is the
delta method ``s = sqrt(grad f' Psi grad f / T)`` with ``Psi`` the Newey-West (Bartlett kernel)
long-run covariance of ``(r - mean r, b - mean b, r^2 - mean r^2, b^2 - mean b^2)`` with as many
lags as the block length. ``arch.bootstrap.CircularBlockBootstrap`` (Politis & Romano 1992)
draws ``reps`` paired samples of whole blocks (the agent's and the benchmark's day ``t`` stay
together, so their correlation is kept); on each the difference ``d*`` and its standard error
``s*`` are recomputed. The symmetric studentised interval is ``d +/- q * s``, ``q`` the 95 %
quantile of ``|d* - d| / s*``; the p-value is ``(1 + #{(d* - d) / s* >= d / s}) / (reps + 1)``.
The block length is ``arch.bootstrap.optimal_block_length`` (Politis & White 2004, with Patton,
Politis & White 2009's correction) of the four moment series, the largest, rounded up and kept in
``[1, T // 8]`` (at least 1), unless given.

The Deflated Sharpe Ratio against 1/N (:func:`deflated_information_ratio`) deflates the
**information ratio** of the active returns (Bailey & López de Prado 2014, "The Deflated Sharpe
Ratio", eq. 2, applied to ``a_t``): the null is "no better than the benchmark", not "no better
than zero".

Everything is deterministic given ``seed``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from arch.bootstrap import CircularBlockBootstrap, optimal_block_length

from trainer.errors import DataError
from trainer.selection import deflated_sharpe_ratio

__all__ = [
    "DEFAULT_REPS",
    "MIN_PERIODS",
    "VERDICTS",
    "active_statistics",
    "deflated_information_ratio",
    "deflated_information_ratio_annualised",
    "vs_equal_weight",
]

#: Bootstrap replications by default (Ledoit & Wolf 2008 use M = 4,999; 2,000 keeps the
#: interval's end points within about 0.01 of each other across seeds on a year of days).
DEFAULT_REPS = 2000
#: Fewest periods :func:`vs_equal_weight` accepts: with fewer, blocks and a studentised interval
#: are meaningless.
MIN_PERIODS = 20
VERDICTS = ("beats", "trails", "indistinguishable")
_SPREAD_EPS = 1e-15


def _check_pair(returns: Any, benchmark_returns: Any, *, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    """Both series as (T,) float64 arrays, or a DataError naming the field."""
    pair = []
    for name, values in (("returns", returns), ("benchmark_returns", benchmark_returns)):
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{name} must hold numbers: {exc}", field=name) from exc
        if arr.ndim != 1:
            raise DataError(f"{name} must be one series (1-D), got shape {arr.shape}", field=name)
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise DataError(f"{name} has a non-finite value at period {int(bad[0])}", field=name, row=int(bad[0]))
        pair.append(arr)
    a, b = pair
    if a.size != b.size:
        raise DataError(
            f"returns ({a.size} periods) and benchmark_returns ({b.size} periods) must cover the same periods",
            field="benchmark_returns",
        )
    if a.size < minimum:
        raise DataError(f"returns: need at least {minimum} periods, got {a.size}", field="returns")
    return a, b


def active_statistics(returns: Any, benchmark_returns: Any, *, periods_per_year: float) -> dict[str, float | None]:
    """Active return, tracking error and information ratio of ``returns`` over a benchmark.

    Args:
        returns, benchmark_returns: (T,) simple per-period net returns as fractions on the same
            periods, T >= 2.
        periods_per_year: ``P``, 252 for days, bars per session x 252 for intraday bars.

    Returns:
        ``{"active_return_annual": mean(a) * P, "tracking_error": std(a, ddof=1) * sqrt(P),
        "information_ratio": active_return_annual / tracking_error}`` with ``a = r - b``; the
        ratio is ``None`` when the tracking error is 0.

    Raises:
        DataError: different lengths, fewer than 2 periods, or a non-finite value (field named).
    """
    a, b = _check_pair(returns, benchmark_returns, minimum=2)
    active = a - b
    mean = float(active.mean()) * periods_per_year
    te = float(active.std(ddof=1)) * math.sqrt(periods_per_year)
    return {
        "active_return_annual": mean,
        "tracking_error": te,
        "information_ratio": mean / te if te > _SPREAD_EPS else None,
    }


def _sharpe_parts(x: np.ndarray) -> tuple[float, float, float]:
    """Per-period Sharpe ratio (ddof=1) of ``x`` and its partial derivatives with respect to
    ``mean x`` and ``mean x^2`` (the delta method of Ledoit & Wolf 2008, eq. 3); all 0 for a
    series without spread (cash: no risk, no reward)."""
    n = x.size
    mu, gamma = float(x.mean()), float(np.mean(x * x))
    var = gamma - mu * mu
    if not var > _SPREAD_EPS**2:
        return 0.0, 0.0, 0.0
    scale = math.sqrt(n / (n - 1))  # ddof=1 in the Sharpe ratio, a constant factor
    sharpe = mu / math.sqrt(var) / scale
    d_mu = gamma / var**1.5 / scale
    d_gamma = -mu / (2.0 * var**1.5) / scale
    return sharpe, d_mu, d_gamma


def _newey_west(y: np.ndarray, lags: int) -> np.ndarray:
    """Bartlett-kernel long-run covariance (Newey & West 1987) of the (T, k) demeaned ``y``."""
    n = y.shape[0]
    psi = y.T @ y / n
    for lag in range(1, min(lags, n - 1) + 1):
        gamma = y[lag:].T @ y[:-lag] / n
        psi += (1.0 - lag / (lags + 1.0)) * (gamma + gamma.T)
    return psi


def _difference_and_se(a: np.ndarray, b: np.ndarray, lags: int) -> np.ndarray:
    """``[d, s]``: per-period Sharpe difference of ``a`` over ``b`` and its HAC delta-method
    standard error (Ledoit & Wolf 2008, eq. 3-4)."""
    sa, dmu_a, dg_a = _sharpe_parts(a)
    sb, dmu_b, dg_b = _sharpe_parts(b)
    grad = np.array([dmu_a, -dmu_b, dg_a, -dg_b])
    y = np.column_stack([a - a.mean(), b - b.mean(), a * a - np.mean(a * a), b * b - np.mean(b * b)])
    variance = float(grad @ _newey_west(y, lags) @ grad) / a.size
    return np.array([sa - sb, math.sqrt(variance) if variance > 0 else 0.0])


def _block_length(a: np.ndarray, b: np.ndarray) -> int:
    """Politis-White optimal circular block length of the four moment series (the largest),
    rounded up, in ``[1, max(1, T // 8)]``."""
    moments = np.column_stack([a, b, a * a, b * b])
    spread = moments.std(axis=0) > _SPREAD_EPS
    if not spread.any():
        return 1
    table = optimal_block_length(moments[:, spread])
    length = float(np.nanmax(table["circular"].to_numpy()))
    length = math.ceil(length) if math.isfinite(length) else 1
    return int(min(max(length, 1), max(1, a.size // 8)))


def _verdict(low: float, high: float) -> str:
    if low > 0:
        return "beats"
    if high < 0:
        return "trails"
    return "indistinguishable"


def vs_equal_weight(
    returns: Any,
    benchmark_returns: Any,
    *,
    periods_per_year: float,
    seed: int = 0,
    reps: int = DEFAULT_REPS,
    block_length: int | None = None,
) -> dict[str, Any]:
    """Paired comparison of an agent with a benchmark (1/N) on the same periods.

    Args:
        returns: (T,) float64 simple per-period net returns of the agent, fractions (0.01 = 1 %).
        benchmark_returns: (T,) float64 simple per-period returns of the benchmark on the same
            periods (T >= :data:`MIN_PERIODS`).
        periods_per_year: ``P`` (252 for days, bars per session x 252 for intraday bars); every
            annualised figure uses it.
        seed: seed of the bootstrap's generator (same inputs and seed, same result).
        reps: bootstrap replications (>= 100).
        block_length: circular block length in periods; ``None`` picks it (module docstring).

    Returns:
        A JSON-able dict: ``sharpe_ratio`` and ``benchmark_sharpe_ratio`` (annualised),
        ``sharpe_difference`` (their difference), ``ci95`` ``[low, high]`` (annualised),
        ``p_value`` (one-sided, H0: agent Sharpe <= benchmark Sharpe), ``standard_error``
        (annualised HAC delta-method), ``active_return_annual``, ``tracking_error``,
        ``information_ratio`` (``None`` with zero tracking error), ``active_skewness`` and
        ``active_kurtosis`` (of ``r - b``, non-excess; ``None`` without spread; the DSR's
        inputs), ``verdict`` (one of
        :data:`VERDICTS`), ``n_periods``, ``periods_per_year``, ``block_length``, ``reps``,
        ``seed`` and ``method``.

    Raises:
        DataError: different lengths, fewer than :data:`MIN_PERIODS` periods, a non-finite
            value, or bad ``reps``/``block_length`` (field named).
    """
    a, b = _check_pair(returns, benchmark_returns, minimum=MIN_PERIODS)
    if int(reps) != reps or reps < 100:
        raise DataError(f"reps must be an integer >= 100, got {reps!r}", field="reps")
    if block_length is not None and not (isinstance(block_length, int) and 1 <= block_length <= a.size // 2):
        raise DataError(
            f"block_length must be an integer in [1, {a.size // 2}], got {block_length!r}", field="block_length"
        )
    if not periods_per_year > 0:
        raise DataError(f"periods_per_year must be positive, got {periods_per_year!r}", field="periods_per_year")
    length = block_length or _block_length(a, b)
    root = math.sqrt(periods_per_year)
    d, s = (float(v) for v in _difference_and_se(a, b, length))
    boot = CircularBlockBootstrap(length, a, b, seed=np.random.default_rng(seed))
    draws = boot.apply(lambda x, y: _difference_and_se(x, y, length), int(reps))
    d_star, s_star = draws[:, 0], draws[:, 1]
    if s > 0:
        ok = s_star > 0
        pivots = (d_star[ok] - d) / s_star[ok]
        q = float(np.quantile(np.abs(pivots), 0.95)) if pivots.size else 0.0
        low, high = float(d - q * s), float(d + q * s)
        p_value = (1.0 + float(np.sum(pivots >= d / s))) / (pivots.size + 1.0)
    else:  # identical series (or both without spread): no uncertainty, no evidence
        low = high = d
        p_value = 1.0 if d <= 0 else 0.0
    sa, _, _ = _sharpe_parts(a)
    sb, _, _ = _sharpe_parts(b)
    _, skew, kurt = _moments(a - b) or (None, None, None)
    return {
        "sharpe_ratio": sa * root,
        "benchmark_sharpe_ratio": sb * root,
        "sharpe_difference": d * root,
        "ci95": [low * root, high * root],
        "p_value": min(1.0, p_value),
        "standard_error": s * root,
        **active_statistics(a, b, periods_per_year=periods_per_year),
        "active_skewness": skew,
        "active_kurtosis": kurt,
        "verdict": _verdict(low, high),
        "n_periods": int(a.size),
        "periods_per_year": float(periods_per_year),
        "block_length": int(length),
        "reps": int(reps),
        "seed": int(seed),
        "method": "studentised circular block bootstrap (Ledoit & Wolf 2008), arch.bootstrap",
    }


def deflated_information_ratio(
    active_returns: Any,
    *,
    num_trials: int,
    trial_variance: float,
    periods_per_year: float,
) -> float | None:
    """Deflated Sharpe Ratio of the active returns against a benchmark: the probability that the
    agent's true information ratio is above the best one expected from ``num_trials`` skill-less
    trials (Bailey & López de Prado 2014, eq. 2, with the expected maximum on p. 3, applied to
    ``a_t = r_t - b_t``: the null is "no better than the benchmark").

    Args:
        active_returns: (T,) float64 per-period active returns ``r - b`` (fractions), T >= 2.
        num_trials: ``N`` >= 1, agents evaluated (the trial ledger).
        trial_variance: sample variance of those trials' **annualised** information ratios
            (divided by ``P`` here, as the paper works per period).
        periods_per_year: ``P``.

    Returns:
        A probability in [0, 1], using the active returns' own skewness and (non-excess)
        kurtosis; ``None`` without tracking error or when the paper's denominator is not
        positive.

    Raises:
        DataError: fewer than 2 values or a non-finite one; num_trials < 1 (field named).
    """
    zeros = np.zeros(np.asarray(active_returns, dtype=np.float64).shape)
    x, _ = _check_pair(active_returns, zeros, minimum=2)
    moments = _moments(x)
    if moments is None:
        return None
    ir, skew, kurt = moments
    return deflated_information_ratio_annualised(
        ir * math.sqrt(periods_per_year),
        num_observations=int(x.size),
        skewness=skew,
        kurtosis=kurt,
        num_trials=num_trials,
        trial_variance=trial_variance,
        periods_per_year=periods_per_year,
    )


def _moments(x: np.ndarray) -> tuple[float, float, float] | None:
    """Per-period IR (ddof=1), skewness and non-excess kurtosis of active returns ``x``;
    ``None`` without spread."""
    sd = float(x.std(ddof=1))
    if not sd > _SPREAD_EPS:
        return None
    centred = x - x.mean()
    m2 = float(np.mean(centred**2))
    return float(x.mean()) / sd, float(np.mean(centred**3)) / m2**1.5, float(np.mean(centred**4)) / m2**2


def deflated_information_ratio_annualised(
    information_ratio: float,
    *,
    num_observations: int,
    skewness: float,
    kurtosis: float,
    num_trials: int,
    trial_variance: float,
    periods_per_year: float,
) -> float | None:
    """:func:`deflated_information_ratio` from stored figures (a ``vs_equal_weight`` object's
    ``information_ratio``, ``n_periods``, ``active_skewness`` and ``active_kurtosis``).

    Args:
        information_ratio: the agent's annualised information ratio over 1/N.
        num_observations: ``T`` >= 2, active returns behind it.
        skewness, kurtosis: of those returns (kurtosis not excess: 3 for normal returns).
        num_trials: ``N`` >= 1 (the trial ledger).
        trial_variance: sample variance of the trials' annualised information ratios.
        periods_per_year: ``P``; the ratio and the variance are taken per period.

    Raises:
        DataError: num_trials < 1 (field ``num_trials``).
    """
    if num_trials < 1:
        raise DataError(f"num_trials must be >= 1, got {num_trials}", field="num_trials")
    return deflated_sharpe_ratio(
        float(information_ratio) / math.sqrt(periods_per_year),
        num_trials=int(num_trials),
        sharpe_variance=float(trial_variance) / float(periods_per_year),
        num_observations=int(num_observations),
        skewness=float(skewness),
        kurtosis=float(kurtosis),
    )

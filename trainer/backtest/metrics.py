"""Performance metrics of daily or intraday return series, on empyrical's contract.

Intraday series (bar-end stamps) are annualised with the data's own periods per year (bars per
session x 252) and also reported per session ("daily" figures); see :func:`compute_metrics`.

Every ratio here is computed by (or checked against) `empyrical-reloaded`_ so that numbers in
Paddock reports mean exactly what they mean in pyfolio/empyrical reports. This module adds what
empyrical lacks: the dates and length of the maximum drawdown, a daily win rate, input
validation with :class:`~trainer.errors.DataError`, and a JSON-able summary
(:func:`compute_metrics`) where undefined values are ``None`` instead of NaN/inf.

.. _empyrical-reloaded: https://github.com/stefan-jansen/empyrical-reloaded
"""

from __future__ import annotations

import math
from typing import Any

import empyrical
import numpy as np
import pandas as pd

from trainer.backtest.contract import MIN_ANNUALISED_DAYS
from trainer.errors import DataError
from trainer.util.jsonable import finite_or_none

TRADING_DAYS_PER_YEAR = 252
"""Periods per year used to annualise daily figures (empyrical's ``DAILY`` factor)."""


def _as_returns(returns: Any, name: str = "returns") -> pd.Series:
    """Validate a return series: a 1-D float Series with unique, increasing labels, no inf."""
    if isinstance(returns, pd.DataFrame):
        raise DataError(f"{name} must be one series of daily returns, got a table", field=name)
    series = pd.Series(returns, dtype="float64") if not isinstance(returns, pd.Series) else returns
    try:
        series = series.astype("float64")
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must hold numbers: {exc}", field=name) from exc
    if not series.index.is_unique:
        dup = series.index[series.index.duplicated()][0]
        raise DataError(f"{name} has the date {_label(dup)} more than once", field=name, date=_label(dup))
    if len(series) > 1 and not series.index.is_monotonic_increasing:
        raise DataError(f"{name} dates must be in increasing order", field=name)
    bad = np.isinf(series.to_numpy())
    if bad.any():
        when = _label(series.index[np.flatnonzero(bad)[0]])
        raise DataError(f"{name} has an infinite return on {when}", field=name, date=when)
    return series


def _label(value: Any) -> str | None:
    """A date label as ``YYYY-MM-DD``, an intraday bar-end stamp as ``YYYY-MM-DD HH:MM``
    (other labels as ``str``); ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, pd.Timestamp | np.datetime64):
        stamp = pd.Timestamp(value)
        return str(stamp.date()) if stamp == stamp.normalize() else str(stamp)[:16]
    if hasattr(value, "isoformat"):
        return value.isoformat()[:10]
    return str(value)


def returns_from_values(values: pd.Series) -> pd.Series:
    """Simple daily returns of an account value (or price) series.

    Args:
        values: (T,) float, account values in USD (or prices) on consecutive trading days,
            indexed by date in increasing order.

    Returns:
        (T - 1,) float64 simple returns ``v[t] / v[t-1] - 1`` as fractions, indexed by the
        later date of each pair (the first date is the starting point and has no return).

    Raises:
        DataError: ``values`` is not a series, has fewer than one value, holds NaN, zero,
            negative or infinite values, or its dates repeat or are not increasing.
    """
    if not isinstance(values, pd.Series):
        raise DataError("values must be a pandas Series indexed by date", field="values")
    if len(values) == 0:
        raise DataError("values is empty; need at least one account value", field="values")
    arr = values.to_numpy(dtype="float64")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        when = _label(values.index[i])
        raise DataError(f"values must be positive and finite; got {arr[i]} on {when}", field="values", date=when)
    _as_returns(values, name="values")
    out = pd.Series(arr[1:] / arr[:-1] - 1.0, index=values.index[1:], name=values.name)
    return out


def cumulative_return(returns: pd.Series) -> float:
    """Compounded return over the whole series, ``prod(1 + r) - 1`` (empyrical ``cum_returns_final``).

    Args:
        returns: (T,) simple daily returns as fractions.

    Returns:
        The total return as a fraction; NaN for an empty series.
    """
    r = _as_returns(returns)
    if len(r) == 0:
        return float("nan")
    return float(empyrical.cum_returns_final(r))


def _year(periods_per_year: int) -> dict[str, Any]:
    """empyrical's annualisation arguments: its ``DAILY`` period for 252 (the daily path, as it
    always was), else ``annualization=periods_per_year`` (e.g. 78 x 252 for 5-minute bars)."""
    if periods_per_year == TRADING_DAYS_PER_YEAR:
        return {"period": empyrical.DAILY}
    if not (isinstance(periods_per_year, int | np.integer) and periods_per_year > 0):
        raise DataError(
            f"periods_per_year must be a positive integer, got {periods_per_year!r}", field="periods_per_year"
        )
    return {"annualization": int(periods_per_year)}


def annual_return(returns: pd.Series, periods_per_year: int = TRADING_DAYS_PER_YEAR) -> float:
    """Compound annual growth rate (empyrical ``annual_return``).

    Args:
        returns: (T,) simple returns per period (day, or bar for intraday data) as fractions.
        periods_per_year: 252 for days; bars per session x 252 for bars.

    Returns:
        ``(1 + cumulative) ** (periods_per_year / T) - 1`` as a fraction; NaN for an empty series.
    """
    return float(empyrical.annual_return(_as_returns(returns), **_year(periods_per_year)))


def annual_volatility(returns: pd.Series, periods_per_year: int = TRADING_DAYS_PER_YEAR) -> float:
    """Sample standard deviation (ddof 1) of the returns times sqrt(periods_per_year) (empyrical).

    Args:
        returns: (T,) simple returns per period as fractions.
        periods_per_year: 252 for days; bars per session x 252 for bars.

    Returns:
        Annualised volatility as a fraction; NaN with fewer than two returns.
    """
    return float(empyrical.annual_volatility(_as_returns(returns), **_year(periods_per_year)))


def sharpe_ratio(returns: pd.Series, risk_free: float = 0.0, periods_per_year: int = TRADING_DAYS_PER_YEAR) -> float:
    """Annualised Sharpe ratio, ``mean(r - rf) / std(r - rf, ddof 1) * sqrt(periods_per_year)``
    (empyrical).

    Args:
        returns: (T,) simple returns per period (day, or bar) as fractions.
        risk_free: per-period risk-free return as a fraction (not annual).
        periods_per_year: 252 for days; bars per session x 252 for bars.

    Returns:
        The ratio; NaN with fewer than two returns, +/-inf when all excess returns are equal
        and non-zero.
    """
    return float(empyrical.sharpe_ratio(_as_returns(returns), risk_free=risk_free, **_year(periods_per_year)))


def sortino_ratio(returns: pd.Series, risk_free: float = 0.0, periods_per_year: int = TRADING_DAYS_PER_YEAR) -> float:
    """Annualised Sortino ratio with the risk-free rate as required return (empyrical).

    Formula (empyrical ``sortino_ratio``): ``mean(r - rf) * P / downside_risk`` where
    ``downside_risk = sqrt(mean(min(r - rf, 0) ** 2)) * sqrt(P)``, ``P = periods_per_year``.

    Args:
        returns: (T,) simple returns per period as fractions.
        risk_free: per-period required return as a fraction.
        periods_per_year: 252 for days; bars per session x 252 for bars.

    Returns:
        The ratio; NaN with fewer than two returns; inf when no return is below ``risk_free``.
    """
    return float(empyrical.sortino_ratio(_as_returns(returns), required_return=risk_free, **_year(periods_per_year)))


def max_drawdown(returns: pd.Series) -> float:
    """Largest peak-to-trough fall of wealth, starting at 1 before the first return (empyrical).

    Args:
        returns: (T,) simple daily returns as fractions.

    Returns:
        A fraction ``<= 0`` (``-0.2`` = a 20 % fall); NaN for an empty series.
    """
    return float(empyrical.max_drawdown(_as_returns(returns)))


def calmar_from(annual_return_value: float, max_drawdown_value: float) -> float | None:
    """Calmar ratio from its two parts: annual return / |max drawdown|.

    Args:
        annual_return_value: annual return as a fraction (1.03591 = 103.591 %).
        max_drawdown_value: max drawdown as a fraction ``<= 0`` (-0.17187 = -17.187 %).

    Returns:
        The ratio, or ``None`` when there is no drawdown (``max_drawdown_value == 0``) or an
        input is missing/NaN (empyrical returns NaN in those cases).
    """
    a, m = finite_or_none(annual_return_value), finite_or_none(max_drawdown_value)
    if a is None or m is None or m >= 0:
        return None
    return a / abs(m)


def calmar_ratio(returns: pd.Series, periods_per_year: int = TRADING_DAYS_PER_YEAR) -> float | None:
    """Annual return divided by |max drawdown| (empyrical ``calmar_ratio``).

    Args:
        returns: (T,) simple returns per period as fractions.
        periods_per_year: 252 for days; bars per session x 252 for bars.

    Returns:
        The ratio, or ``None`` when the series never draws down or is empty.
    """
    r = _as_returns(returns)
    return calmar_from(annual_return(r, periods_per_year), max_drawdown(r))


def drawdown_details(returns: pd.Series, *, start_date: Any = None) -> dict[str, Any]:
    """Dates and length of the maximum drawdown.

    Wealth starts at 1 *before* the first return (the anchor) and compounds each return;
    NaN returns count as 0 (empyrical's ``cum_returns`` does the same). The peak is the last
    time wealth stood at its running maximum before the deepest trough; the recovery is the
    first later day on which wealth is back at (or above) that peak.

    Args:
        returns: (T,) simple daily returns as fractions, indexed by date.
        start_date: label of the anchor (the day before the first return, e.g. the first
            day of a backtest); reported as the peak date when the peak is the anchor.

    Returns:
        ``{"max_drawdown": float <= 0 | None, "peak_date", "trough_date", "recovery_date":
        "YYYY-MM-DD" | None, "duration_days": int | None, "recovered": bool | None}``.
        ``duration_days`` counts trading days from the peak to the recovery, or to the last
        day when the drawdown has not recovered (``recovery_date`` is then ``None``). With no
        drawdown, ``max_drawdown`` is 0.0, ``duration_days`` 0 and the dates ``None``.
    """
    r = _as_returns(returns)
    empty = dict(
        max_drawdown=None, peak_date=None, trough_date=None, recovery_date=None, duration_days=None, recovered=None
    )
    if len(r) == 0:
        return empty
    wealth = np.concatenate([[1.0], np.cumprod(1.0 + np.nan_to_num(r.to_numpy(), nan=0.0))])
    running_peak = np.maximum.accumulate(wealth)
    drawdown = wealth / running_peak - 1.0
    trough = int(np.argmin(drawdown))
    if drawdown[trough] >= 0:
        return dict(empty, max_drawdown=0.0, duration_days=0, recovered=True)
    peak_level = running_peak[trough]
    peak = int(np.flatnonzero(wealth[: trough + 1] >= peak_level)[-1])
    later = np.flatnonzero(wealth[trough + 1 :] >= peak_level)
    recovery = trough + 1 + int(later[0]) if len(later) else None
    labels = [start_date, *r.index]  # wealth position k <-> returns label k - 1
    return dict(
        max_drawdown=float(drawdown[trough]),
        peak_date=_label(labels[peak]),
        trough_date=_label(labels[trough]),
        recovery_date=_label(labels[recovery]) if recovery is not None else None,
        duration_days=(recovery if recovery is not None else len(r)) - peak,
        recovered=recovery is not None,
    )


def _aligned_benchmark(returns: pd.Series, benchmark_returns: Any) -> pd.Series:
    """The benchmark on exactly the dates of ``returns``; missing dates raise, extras are dropped."""
    bench = _as_returns(benchmark_returns, name="benchmark_returns")
    missing = returns.index.difference(bench.index)
    if len(missing):
        shown = ", ".join(_label(d) for d in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise DataError(
            f"benchmark_returns lacks {len(missing)} date(s) of the returns: {shown}{more}",
            field="benchmark_returns",
            date=_label(missing[0]),
        )
    return bench.reindex(returns.index)


def alpha_beta(
    returns: pd.Series,
    benchmark_returns: pd.Series,
    risk_free: float = 0.0,
    periods_per_year: int = TRADING_DAYS_PER_YEAR,
) -> tuple[float, float]:
    """Jensen's alpha (annualised, compounded) and beta vs a benchmark (empyrical ``alpha_beta``).

    ``beta = cov(r - rf, b - rf) / var(b - rf)`` over periods where both are known;
    ``alpha = (1 + mean((r - rf) - beta * (b - rf))) ** periods_per_year - 1``.

    Args:
        returns: (T,) simple daily returns as fractions, indexed by date.
        benchmark_returns: benchmark daily returns covering every date of ``returns``.
        risk_free: per-day risk-free return as a fraction.

    Returns:
        ``(alpha, beta)``; NaN with fewer than two returns.

    Raises:
        DataError: the benchmark lacks dates of ``returns`` (named in the message).
    """
    r = _as_returns(returns)
    b = _aligned_benchmark(r, benchmark_returns)
    a, be = empyrical.alpha_beta_aligned(r.to_numpy(), b.to_numpy(), risk_free=risk_free, **_year(periods_per_year))
    return float(a), float(be)


def information_ratio(returns: pd.Series, benchmark_returns: pd.Series) -> float:
    """Information ratio as empyrical defines it (``excess_sharpe``; formerly ``information_ratio``).

    ``mean(r - b) / std(r - b, ddof 1)``, per day, *not* annualised (multiply by sqrt(252)
    for the annual figure some other tools report).

    Args:
        returns: (T,) simple daily returns as fractions, indexed by date.
        benchmark_returns: benchmark daily returns covering every date of ``returns``.

    Returns:
        The ratio; NaN with fewer than two returns or a zero tracking error.

    Raises:
        DataError: the benchmark lacks dates of ``returns``.
    """
    r = _as_returns(returns)
    b = _aligned_benchmark(r, benchmark_returns)
    return float(empyrical.excess_sharpe(r.to_numpy(), b.to_numpy()))


def win_rate(returns: pd.Series) -> float:
    """Share of days with a return above zero, among days with a known return.

    Args:
        returns: (T,) simple daily returns as fractions.

    Returns:
        A fraction in [0, 1]; NaN when no return is known.
    """
    r = _as_returns(returns).dropna()
    return float((r > 0).mean()) if len(r) else float("nan")


def _daily_sharpe(r: pd.Series, risk_free: float) -> float | None:
    """mean(r - rf) / std(r - rf, ddof 1), per day (not annualised); None when undefined."""
    excess = (r - risk_free).dropna()
    sd = float(excess.std(ddof=1)) if len(excess) > 1 else float("nan")
    return finite_or_none(float(excess.mean()) / sd) if sd > 0 else None


def compute_metrics(
    returns: pd.Series,
    benchmark_returns: pd.Series | None = None,
    *,
    risk_free: float = 0.0,
    turnover: pd.Series | None = None,
    start_date: Any = None,
    periods_per_year: int | None = None,
) -> dict[str, Any]:
    """All summary metrics of a return series as a JSON-able dict (see ``METRIC_CONTRACT``).

    Args:
        returns: (T,) simple returns as fractions, one per day (midnight date labels) or per
            intraday bar (naive exchange-time bar-end stamps), in increasing order.
        benchmark_returns: optional benchmark returns (e.g. QQQ) on the same periods, covering
            every label of ``returns`` (extra labels are ignored); adds ``alpha``, ``beta``,
            ``information_ratio`` and ``benchmark_cumulative_return``.
        risk_free: per-period risk-free return as a fraction (default 0).
        turnover: optional (T',) turnover fractions per period (:func:`~trainer.backtest.engine.turnover_series`); adds
            ``turnover_daily_mean`` and ``turnover_annual`` (daily mean times 252).
        start_date: label of the period before the first return (e.g. the first backtest day),
            used as the drawdown peak date when wealth peaks at its start.
        periods_per_year: annualisation factor; ``None`` infers it from the labels
            (:func:`trainer.data.timestamps.infer_periods_per_year`: 252 for days, bars per
            session x 252 for bars).

    Returns:
        Dict with ``num_days`` (int), ``start``/``end`` (first/last return date),
        ``cumulative_return``, ``annual_return``, ``annual_volatility``, ``sharpe_ratio``,
        ``sortino_ratio``, ``calmar_ratio``, ``max_drawdown`` and its ``max_drawdown_peak``,
        ``max_drawdown_trough``, ``max_drawdown_recovery`` dates and
        ``max_drawdown_duration_days``, ``win_rate``, ``risk_free``, the per-day
        ``daily_mean_return``, ``daily_volatility`` and ``daily_sharpe_ratio``, and
        ``short_window`` (fewer than :data:`MIN_ANNUALISED_DAYS` days: the
        :data:`ANNUALISED_KEYS` are kept but must be shown as :func:`short_window_text`) with
        ``min_annualised_days`` (+ the benchmark and turnover keys above). Floats are plain
        Python floats; undefined values (NaN, inf, e.g. the Sharpe ratio of a single day) are
        ``None``. Intraday labels add ``num_periods`` (bars), ``periods_per_year``,
        ``max_drawdown_duration_bars``, ``turnover_bar_mean`` (with ``turnover``) and
        ``daily``: this same dict computed from the bars aggregated to session closes (252
        periods a year); the per-day keys of the top level are then per bar (the contract).

    Raises:
        DataError: infinite or duplicated returns, labels out of order, a benchmark missing
            labels of ``returns``, or a ``periods_per_year`` that is not a positive integer.
    """
    from trainer.backtest.bars import session_count, session_returns, session_sums, sessions_between
    from trainer.data.timestamps import has_time_of_day, infer_periods_per_year

    r = _as_returns(returns)
    if not math.isfinite(risk_free):
        raise DataError(f"risk_free must be a finite per-day rate, got {risk_free}", field="risk_free")
    intraday = has_time_of_day(r.index)
    ppy = infer_periods_per_year(r.index) if periods_per_year is None else periods_per_year
    _year(ppy)  # validates
    dd = drawdown_details(r, start_date=start_date)
    mdd = max_drawdown(r) if len(r) else float("nan")
    ann = annual_return(r, ppy) if len(r) else float("nan")
    sessions = session_count(r.index) if intraday else len(r)
    out: dict[str, Any] = {
        "num_days": int(sessions),
        "start": _label(r.index[0]) if len(r) else None,
        "end": _label(r.index[-1]) if len(r) else None,
        "cumulative_return": finite_or_none(cumulative_return(r)),
        "annual_return": finite_or_none(ann),
        "annual_volatility": finite_or_none(annual_volatility(r, ppy)),
        "sharpe_ratio": finite_or_none(sharpe_ratio(r, risk_free, ppy)),
        "sortino_ratio": finite_or_none(sortino_ratio(r, risk_free, ppy)),
        "calmar_ratio": calmar_from(ann, mdd),
        "max_drawdown": finite_or_none(mdd),
        "max_drawdown_peak": dd["peak_date"],
        "max_drawdown_trough": dd["trough_date"],
        "max_drawdown_recovery": dd["recovery_date"],
        "max_drawdown_duration_days": dd["duration_days"],
        "win_rate": finite_or_none(win_rate(r)),
        "risk_free": float(risk_free),
        # per-day (per-bar for intraday) figures, never annualised: what a short window can honestly say
        "daily_mean_return": finite_or_none(r.mean()) if len(r) else None,
        "daily_volatility": finite_or_none(r.std(ddof=1)) if len(r) > 1 else None,
        "daily_sharpe_ratio": _daily_sharpe(r, risk_free),
        "short_window": bool(sessions < MIN_ANNUALISED_DAYS),
        "min_annualised_days": MIN_ANNUALISED_DAYS,
    }
    b = None
    if benchmark_returns is not None:
        b = _aligned_benchmark(r, benchmark_returns)
        alpha, beta = alpha_beta(r, b, risk_free, ppy)
        out["alpha"] = finite_or_none(alpha)
        out["beta"] = finite_or_none(beta)
        out["information_ratio"] = finite_or_none(information_ratio(r, b))
        out["benchmark_cumulative_return"] = finite_or_none(cumulative_return(b)) if len(b) else None
    t = None
    if turnover is not None:
        t = pd.Series(turnover, dtype="float64").dropna()
        if (t < 0).any() or not np.isfinite(t.to_numpy()).all():
            raise DataError("turnover must be finite and non-negative", field="turnover")
        per_day = session_sums(t) if intraday and has_time_of_day(t.index) else t
        mean = float(per_day.mean()) if len(per_day) else float("nan")
        out["turnover_daily_mean"] = finite_or_none(mean)
        out["turnover_annual"] = finite_or_none(mean * TRADING_DAYS_PER_YEAR)
        if intraday:
            out["turnover_bar_mean"] = finite_or_none(float(t.mean())) if len(t) else None
    if intraday:
        out["num_periods"] = int(len(r))
        out["periods_per_year"] = int(ppy)
        out["max_drawdown_duration_bars"] = dd["duration_days"]
        if dd["duration_days"]:
            out["max_drawdown_duration_days"] = sessions_between(r.index, dd["peak_date"], dd["recovery_date"])
        bars_per_day = ppy / TRADING_DAYS_PER_YEAR
        out["daily"] = compute_metrics(
            session_returns(r),
            session_returns(b) if b is not None else None,
            risk_free=(1.0 + risk_free) ** bars_per_day - 1.0,
            turnover=session_sums(t) if t is not None and has_time_of_day(t.index) else None,
            start_date=pd.Timestamp(start_date).normalize() if start_date is not None else None,
            periods_per_year=TRADING_DAYS_PER_YEAR,
        )
    return out

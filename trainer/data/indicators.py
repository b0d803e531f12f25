"""Technical indicators (stockstats) and FinRL's turbulence index, both strictly causal.

Every value of day ``t`` uses data of days ``<= t`` only: stockstats' moving averages, EMAs and
Wilder smoothing look backwards, warm-up gaps are filled forwards or with 0 (never back-filled
from the future), and the turbulence window ends the day before ``t``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import stockstats
from threadpoolctl import threadpool_limits

from trainer.errors import ConfigError

DEFAULT_INDICATORS: tuple[str, ...] = (
    "macd",
    "boll_ub",
    "boll_lb",
    "rsi_30",
    "cci_30",
    "dx_30",
    "close_30_sma",
    "close_60_sma",
)
"""FinRL's default ``INDICATORS`` list (finrl/config.py), computed with stockstats."""

TURBULENCE_WINDOW = 252
"""Trading days of returns behind each turbulence value (one year), as in FinRL."""

# stockstats can also compute columns from *future* rows (e.g. ``close_2_s`` is the close two
# days ahead, ``cr`` shifts its averages), which would leak the future into observations.
# Only these backward-looking families are accepted.
_CAUSAL = re.compile(
    r"^(?:"
    r"macd|macds|macdh|boll|boll_ub|boll_lb|adx|adxr|trix|tema|log-ret"
    r"|(?:rsi|stochrsi|cci|dx|pdi|ndi|atr|wr|mfi|kdjk|kdjd|kdjj|vwma)(?:_\d+)?"
    r"|(?:open|high|low|close|volume)_\d+_(?:sma|ema|smma|mstd|mvar|mad)"
    r"|(?:open|high|low|close|volume)_-\d+_[sdr]"
    r")$"
)


def validate_indicators(names: Sequence[str], *, field: str = "indicators") -> tuple[str, ...]:
    """Return ``names`` as a tuple after checking each is a backward-looking stockstats column.

    Raises:
        ConfigError: a name is not a string, repeats, or is not in the causal allow-list
            (``field`` names the list, e.g. ``"data.indicators"``).
    """
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ConfigError(f"{field} must be a list of indicator names", field=field)
    out: list[str] = []
    for i, name in enumerate(names):
        if not isinstance(name, str) or not _CAUSAL.match(name):
            raise ConfigError(
                f"{field}[{i}]: {name!r} is not a supported backward-looking stockstats indicator "
                f"(e.g. {', '.join(DEFAULT_INDICATORS)})",
                field=f"{field}[{i}]",
            )
        if name in out:
            raise ConfigError(f"{field}[{i}]: {name!r} is listed twice", field=f"{field}[{i}]")
        out.append(name)
    return tuple(out)


def compute_indicators(ohlcv: pd.DataFrame, indicators: Sequence[str]) -> np.ndarray:
    """Compute stockstats indicators for one ticker's consecutive daily bars.

    Args:
        ohlcv: columns ``open, high, low, close, volume`` (adjusted prices, USD; shares) of one
            ticker, oldest row first, one row per trading day.
        indicators: stockstats column names (see :func:`validate_indicators`).

    Returns:
        (T, F) float64 in each indicator's own units (prices in USD, RSI/CCI/DX in points).
        Warm-up NaN/inf values are forward-filled from the ticker's own earlier rows, and
        values with no earlier finite value are 0; nothing is back-filled.
    """
    frame = ohlcv[["open", "high", "low", "close", "volume"]].reset_index(drop=True).astype("float64")
    sdf = stockstats.wrap(frame.copy())
    columns = []
    with warnings.catch_warnings():
        # stockstats divides by zero on flat bars (e.g. zero-volume days); handled below
        warnings.simplefilter("ignore", RuntimeWarning)
        for name in indicators:
            columns.append(np.asarray(sdf[name], dtype="float64"))
    values = np.stack(columns, axis=1) if columns else np.zeros((len(frame), 0))
    return forward_fill_then_zero(values)


def forward_fill_then_zero(values: np.ndarray) -> np.ndarray:
    """Replace non-finite entries along axis 0 by the last finite value above, else by 0.

    Args:
        values: (T, ...) float array, time on axis 0.

    Returns:
        A new array of the same shape and dtype with only finite values.
    """
    out = np.array(values, dtype=values.dtype, copy=True)
    finite = np.isfinite(out)
    if finite.all():
        return out
    t = out.shape[0]
    idx = np.where(finite, np.arange(t).reshape((t,) + (1,) * (out.ndim - 1)), -1)
    np.maximum.accumulate(idx, axis=0, out=idx)
    filled = np.take_along_axis(out, np.clip(idx, 0, None), axis=0)
    return np.where(idx >= 0, filled, 0.0).astype(values.dtype)


def turbulence_index(close: np.ndarray, *, window: int = TURBULENCE_WINDOW) -> np.ndarray:
    """FinRL's turbulence index of each day (``FeatureEngineer.calculate_turbulence``).

    Kritzman & Li (2010), "Skulls, Financial Turbulence, and Risk Management", as FinRL
    implements it: with daily returns ``r_t = close_t / close_{t-1} - 1`` per ticker,

        turbulence_t = (r_t - mu) Sigma^+ (r_t - mu)^T

    where ``mu`` and ``Sigma`` are the mean and sample covariance (ddof=1) of the returns of
    the ``window`` days before ``t`` (rows ``t - window .. t - 1``) and ``Sigma^+`` is the
    Moore-Penrose pseudo-inverse (``np.linalg.pinv(..., hermitian=True)``: an eigen-decomposition
    of the symmetric matrix, equal to FinRL's SVD-based ``pinv`` up to rounding). Matching FinRL:

    * days ``t < window`` get 0;
    * inside each window, the leading ``k`` rows are skipped where ``k`` is the smallest count
      of missing returns among tickers, then tickers still missing a return are left out
      (tickers that listed late join once they have a full window);
    * a non-positive or non-finite value gives 0, and so do the first two positive values
      (FinRL's ``count <= 2`` rule, "avoid large outlier because the calculation just begins").

    Args:
        close: (T, N) float64 adjusted close in USD, NaN where a ticker has no price yet.
        window: number of past days in the mean/covariance estimate.

    Returns:
        (T,) float64 turbulence (squared Mahalanobis distance, unitless), 0 where undefined.
    """
    close = np.asarray(close, dtype="float64")
    t_days = close.shape[0]
    returns = np.full_like(close, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        returns[1:] = close[1:] / close[:-1] - 1.0
    out = np.zeros(t_days, dtype="float64")
    missing = np.isnan(returns)
    # thousands of tiny covariance/pinv calls: BLAS threads only add wake-up latency, which on a
    # busy machine made this loop 5-10x slower than on one thread
    with threadpool_limits(limits=1, user_api="blas"):
        _turbulence_loop(returns, missing, window, out)
    return out


def turbulence_index_batched(close: np.ndarray, *, window: int = TURBULENCE_WINDOW, chunk: int = 2048) -> np.ndarray:
    """:func:`turbulence_index` computed in batches, for long intraday panels (one row per bar).

    The same definition, FinRL's rules included, with the mean and covariance of each window
    from running sums of the returns and their outer products, and the pseudo-inverse from a
    batched eigen-decomposition (eigenvalues at or below ``1e-15`` times the largest are
    dropped, as ``np.linalg.pinv(..., hermitian=True)`` does). Rows whose window holds a
    missing return (a ticker before its first bar) use :func:`turbulence_index`'s loop. Equal
    to the loop up to rounding (``tests/trainer/data/test_sessions.py``); the daily pipeline keeps
    the loop, so daily features are unchanged bit for bit.

    Args:
        close: (T, N) float64 close in USD, NaN where a ticker has no price yet.
        window: rows of returns behind each value (252 bars on an intraday panel).
        chunk: rows per batch (memory about ``chunk * N * N * 8`` bytes, twice).

    Returns:
        (T,) float64 turbulence, 0 where undefined.
    """
    close = np.asarray(close, dtype="float64")
    t_rows, n = close.shape
    returns = np.full_like(close, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        returns[1:] = close[1:] / close[:-1] - 1.0
    raw = np.full(t_rows, np.nan)
    if t_rows <= window or n == 0:
        return np.zeros(t_rows)
    missing = np.isnan(returns)
    # rows t whose window t-window..t-1 and own return are complete take the batched path
    bad = np.concatenate([[0], np.cumsum(missing.any(axis=1))])
    full = np.zeros(t_rows, dtype=bool)
    rows = np.arange(window, t_rows)
    full[rows] = (bad[rows] - bad[rows - window] == 0) & ~missing[rows].any(axis=1)
    r0 = np.where(missing, 0.0, returns)
    csum = np.concatenate([np.zeros((1, n)), np.cumsum(r0, axis=0)])
    with threadpool_limits(limits=1, user_api="blas"):
        for a in range(window, t_rows, chunk):
            b = min(a + chunk, t_rows)
            idx = np.arange(a, b)[full[a:b]]
            if not len(idx):
                continue
            lo = idx.min() - window
            block = r0[lo : idx.max()]
            outer = np.einsum("ti,tj->tij", block, block)
            c2 = np.concatenate([np.zeros((1, n, n)), np.cumsum(outer, axis=0)])
            s1 = csum[idx] - csum[idx - window]
            s2 = c2[idx - lo] - c2[idx - window - lo]
            mu = s1 / window
            cov = (s2 - window * np.einsum("ti,tj->tij", mu, mu)) / (window - 1)
            w, v = np.linalg.eigh(cov)
            top = np.abs(w).max(axis=1, keepdims=True)
            inv = np.where(np.abs(w) > 1e-15 * top, 1.0 / np.where(w == 0, 1.0, w), 0.0)
            proj = np.einsum("tij,ti->tj", v, returns[idx] - mu)
            raw[idx] = np.einsum("tj,tj->t", proj * proj, inv)
        rest = np.flatnonzero(~full[window:]) + window
        if len(rest):
            partial = np.zeros(t_rows)
            _turbulence_loop(returns, missing, window, partial, rows=rest, count_rule=False)
            raw[rest] = np.where(partial[rest] > 0, partial[rest], np.nan)
    positive = np.isfinite(raw) & (raw > 0)
    seen = np.cumsum(positive)
    return np.where(positive & (seen > 2), raw, 0.0)


def _turbulence_loop(
    returns: np.ndarray, missing: np.ndarray, window: int, out: np.ndarray, *, rows=None, count_rule: bool = True
) -> None:
    positive_seen = 0
    for t in range(window, returns.shape[0]) if rows is None else rows:
        hist = returns[t - window : t]
        hist_missing = missing[t - window : t]
        skip = int(hist_missing.sum(axis=0).min()) if hist.shape[1] else 0
        hist = hist[skip:]
        keep = ~hist_missing[skip:].any(axis=0)
        if not keep.any() or hist.shape[0] < 2:
            continue
        sample = hist[:, keep]
        mu = sample.mean(axis=0)
        cov = np.cov(sample, rowvar=False, ddof=1).reshape(keep.sum(), keep.sum())
        diff = returns[t, keep] - mu
        value = float(diff @ np.linalg.pinv(cov, hermitian=True) @ diff)
        if np.isfinite(value) and value > 0:
            positive_seen += 1
            if positive_seen > 2 or not count_rule:
                out[t] = value

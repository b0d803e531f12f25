"""Synthetic markets for honesty checks: a placebo with nothing to predict, or a planted edge.

Daily simple returns of ``N`` tickers on business days, one market factor plus idiosyncratic
noise (a one-factor model):

    r[t+1, i] = mu + m[t+1] + sigma * (ic * s[t, i] + sqrt(1 - ic^2) * e[t+1, i])

with ``m ~ N(0, market_vol^2)`` and ``e ~ N(0, 1)`` iid. ``s[t, i]`` is the **signal**: the
cross-sectional z-score of minus the ticker's ``lookback``-day log return up to day ``t``
(short-term reversal), a feature of past closes only, which the portfolio env observes
(``logret_5``, :mod:`trainer.envs.observations`). Its cross-sectional correlation with the next
day's idiosyncratic return is ``ic`` by construction, the **information coefficient** (Grinold &
Kahn, "Active Portfolio Management", 2nd ed. 2000, ch. 6). ``ic = 0`` is the **placebo**:
returns are iid given the market factor, nothing in the past predicts the cross-section, and
every strategy's edge over 1/N is luck.

:func:`write_csv` writes the long layout the loader reads (``date, tic, open, high, low, close,
volume``; open = the previous close, high/low bracket the two); :func:`signal_tilt_returns`
is the oracle-free baseline that uses the planted feature (it knows the feature's definition,
not ``ic``): each day it holds ``1/N + strength * s[t] / N`` (clipped at 0, renormalised) and
earns the next day's returns, cost-free.

Usage: ``.venv/bin/python benchmarks/synthetic_market.py OUT.csv.gz [--ic 0.05] [--seed 0]
[--tickers 10] [--start 2010-01-04] [--end 2016-12-30]``
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["SyntheticMarket", "aim_tilt_returns", "generate", "signal", "signal_tilt_returns", "write_csv"]

LOOKBACK = 5


@dataclass(frozen=True)
class SyntheticMarket:
    """A generated market.

    Attributes:
        dates: (T,) ``datetime64[D]`` business days.
        tickers: N names ``S00``, ``S01``, ...
        close: (T, N) float64 prices in USD (100 on the first day).
        ic: the planted information coefficient (0 = placebo).
    """

    dates: np.ndarray
    tickers: tuple[str, ...]
    close: np.ndarray
    ic: float


def signal(close: np.ndarray, lookback: int = LOOKBACK) -> np.ndarray:
    """(T, N) cross-sectional z-scores of ``-log(close[t] / close[t - lookback])`` (0 for the first
    ``lookback`` days); day ``t`` uses closes up to ``t`` only."""
    c = np.log(np.asarray(close, dtype=np.float64))
    past = np.zeros_like(c)
    past[lookback:] = -(c[lookback:] - c[:-lookback])
    mean = past.mean(axis=1, keepdims=True)
    std = past.std(axis=1, keepdims=True)
    return np.where(std > 0, (past - mean) / np.where(std > 0, std, 1.0), 0.0)


def generate(
    seed: int,
    *,
    ic: float = 0.0,
    tickers: int = 10,
    start: str = "2010-01-04",
    end: str = "2016-12-30",
    mu: float = 0.0003,
    market_vol: float = 0.008,
    sigma: float = 0.015,
    lookback: int = LOOKBACK,
) -> SyntheticMarket:
    """Generate a market (see the module docstring for the model).

    Args:
        seed: seed of the generator (same arguments, same market).
        ic: information coefficient of the planted signal, in [0, 1) (0: placebo).
        tickers: N >= 2.
        start, end: first and last business day.
        mu: daily drift of every ticker (fraction).
        market_vol, sigma: daily volatility of the market factor and of the idiosyncratic part.
        lookback: days of the reversal signal.

    Raises:
        ValueError: ``ic`` outside [0, 1) or fewer than 2 tickers.
    """
    if not 0 <= ic < 1:
        raise ValueError(f"ic must lie in [0, 1), got {ic}")
    if tickers < 2:
        raise ValueError(f"tickers must be >= 2, got {tickers}")
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range(start, end).values.astype("datetime64[D]")
    t_len = len(dates)
    log_close = np.zeros((t_len, tickers))
    noise = math.sqrt(1 - ic**2)
    for t in range(t_len - 1):
        if t >= lookback:
            past = -(log_close[t] - log_close[t - lookback])
            s = (past - past.mean()) / past.std() if past.std() > 0 else np.zeros(tickers)
        else:
            s = np.zeros(tickers)
        r = mu + rng.normal(0, market_vol) + sigma * (ic * s + noise * rng.normal(size=tickers))
        log_close[t + 1] = log_close[t] + np.log1p(np.maximum(r, -0.5))
    return SyntheticMarket(
        dates=dates,
        tickers=tuple(f"S{i:02d}" for i in range(tickers)),
        close=100.0 * np.exp(log_close),
        ic=float(ic),
    )


def signal_tilt_returns(
    close: np.ndarray, *, strength: float = 0.5, lookback: int = LOOKBACK, cost_pct: float = 0.0
) -> np.ndarray:
    """(T-1,) returns of holding ``1/N + strength * s[t] / N`` (clipped at 0 and renormalised)
    from day ``t``'s close to day ``t+1``'s.

    ``cost_pct`` (fraction of the value traded, the portfolio env's ``cost_pct``) is paid each
    day on ``sum_i |w_t,i - w~_i|``, ``w~`` being the previous day's weights after their drift
    (the first day enters from 1/N, not from cash); 0 (default) is the cost-free tilt.
    """
    c = np.asarray(close, dtype=np.float64)
    n = c.shape[1]
    w = np.clip(1.0 / n + strength * signal(c, lookback) / n, 0.0, None)
    w = w / w.sum(axis=1, keepdims=True)
    growth = c[1:] / c[:-1]
    gross = (w[:-1] * growth).sum(axis=1)
    if cost_pct == 0:
        return gross - 1.0
    drifted = np.vstack([np.full((1, n), 1.0 / n), w[:-2] * growth[:-1] / gross[:-1, None]])
    traded = np.abs(w[:-1] - drifted).sum(axis=1)
    return (1.0 - cost_pct * traded) * gross - 1.0


def aim_tilt_returns(
    close: np.ndarray,
    *,
    strength: float = 2.0,
    trade_rate: float = 0.5,
    lookback: int = LOOKBACK,
    cost_pct: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(T-1,) returns and (T-1,) value traded (fraction of the portfolio, both sides summed) of
    trading **partially** towards the signal tilt of :func:`signal_tilt_returns` each close:
    ``w <- w + trade_rate * (aim - w)`` (the env's ``trade_rate``; Garleanu & Pedersen 2013,
    "Dynamic trading with predictable returns and transaction costs": trade part of the way to
    the aim portfolio), paying ``cost_pct`` of the value traded, from 1/N on the first day.

    With ``strength`` 2 and ``trade_rate`` 0.5, the best of the grid (strength 0.25-2, rate
    0.25-1) on 40-year markets at the env's 0.1 % cost, it is what the planted feature is worth
    to a policy that knows it: the ceiling a learner's gain is read against.
    """
    c = np.asarray(close, dtype=np.float64)
    n = c.shape[1]
    aim = np.clip(1.0 / n + strength * signal(c, lookback) / n, 0.0, None)
    aim /= aim.sum(axis=1, keepdims=True)
    growth = c[1:] / c[:-1]
    w = np.full(n, 1.0 / n)
    returns = np.empty(len(growth))
    traded = np.empty(len(growth))
    for t in range(len(growth)):
        new = w + trade_rate * (aim[t] - w)
        traded[t] = np.abs(new - w).sum()
        gross = float(new @ growth[t])
        returns[t] = (1.0 - cost_pct * traded[t]) * gross - 1.0
        w = new * growth[t] / gross
    return returns, traded


def write_csv(market: SyntheticMarket, path: str | Path) -> Path:
    """Write the market in the loader's long layout (gzip when the name ends in ``.gz``)."""
    close = market.close
    opens = np.vstack([close[:1], close[:-1]])
    rows = {
        "date": np.repeat(market.dates.astype(str), len(market.tickers)),
        "tic": np.tile(market.tickers, len(market.dates)),
        "open": opens.ravel(),
        "high": np.maximum(opens, close).ravel() * 1.001,
        "low": np.minimum(opens, close).ravel() * 0.999,
        "close": close.ravel(),
        "volume": np.full(close.size, 1_000_000),
    }
    out = Path(path)
    pd.DataFrame(rows).to_csv(out, index=False, float_format="%.6f")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="CSV file to write (.csv or .csv.gz)")
    parser.add_argument("--ic", type=float, default=0.0, help="planted information coefficient (default 0: placebo)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tickers", type=int, default=10)
    parser.add_argument("--start", default="2010-01-04")
    parser.add_argument("--end", default="2016-12-30")
    args = parser.parse_args()
    market = generate(args.seed, ic=args.ic, tickers=args.tickers, start=args.start, end=args.end)
    print(
        f"wrote {write_csv(market, args.out)}: {len(market.dates)} days x {len(market.tickers)} tickers, ic {args.ic}"
    )


if __name__ == "__main__":
    main()

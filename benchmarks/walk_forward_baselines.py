"""The walk-forward protocol of the learning-quality benchmark: what simple baselines reach.

Issue 24, section 4: before any learner is judged, measure the ceiling this data allows. On the
Dow 30 and the Nasdaq-100 files of ``PADDOCK_DATA_DIR`` (tickers with the full 2010-2022
history, the loader's ``drop`` policy), anchored yearly folds tested on 2014, 2015, ..., 2022
(the last ends 2022-11-15; :func:`trainer.data.folds.plan_folds`, 252 validation days, 5-day
gaps), the same test days for every baseline:

* ``1/N (cost-free)``: rebalanced to equal weight every day, no costs: the headline benchmark
  every ``vs_equal_weight`` is against;
* ``1/N with costs``: the same, paying the portfolio env's default ``cost_pct`` (0.1 %) on the
  value traded each day to undo the drift;
* ``inverse volatility``: weights proportional to 1 / the trailing 63-day volatility;
* ``12-1 momentum tilt``: ``1/N x (1 + z)`` clipped at 0, ``z`` the cross-sectional z-score of
  the return from 252 to 21 trading days ago (Jegadeesh & Titman 1993);
* ``low-volatility tilt``: ``1/N x (1 + z)`` clipped at 0, ``z`` the z-score of minus the
  trailing 63-day volatility (Ang, Hodrick, Xing & Zhang 2006).

The three signal portfolios rebalance every 21 trading days (and hold, drifting, in between),
pay 0.1 % of the value traded, and use closes up to the rebalancing day only. None has a
parameter fitted on the data, so the validation spans select nothing here; the folds matter
for the learner this table is the ceiling for. Each row: the stitched 2014-2022 record's
annual return, Sharpe ratio, maximum drawdown and ``vs_equal_weight`` (Sharpe difference with
its 95 % interval and verdict) against the cost-free 1/N on the same days.

The window 2021-01..2022-11 (the old headline test of ``learning_quality.py``) has been looked
at too often to count as a test any more: here it is the last two folds' test years, and in any
study that selects on it, validation.

Usage: ``.venv/bin/python benchmarks/walk_forward_baselines.py [--data-dir DIR]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from trainer.backtest.relative import vs_equal_weight  # noqa: E402
from trainer.data.folds import plan_folds  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.data.spec import DataSpec  # noqa: E402
from trainer.selection import annual_sharpe  # noqa: E402

FILES = {
    "Dow 30": "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz",
    "Nasdaq-100": "nasdaq100_daily_eodhd_2010-01-04_2022-11-15.csv.gz",
}
START, END, FIRST_TEST_YEAR = "2010-01-04", "2022-11-15", 2014
COST = 1e-3
REBALANCE_DAYS = 21
VOL_DAYS = 63


def _zscore(x: np.ndarray) -> np.ndarray:
    std = x.std()
    return (x - x.mean()) / std if std > 0 else np.zeros_like(x)


def targets(close: np.ndarray, t: int, rule: str) -> np.ndarray:
    """(N,) target weights of ``rule`` from closes up to day ``t`` (inclusive)."""
    n = close.shape[1]
    if rule == "equal":
        return np.full(n, 1.0 / n)
    logret = np.diff(np.log(close[max(0, t - VOL_DAYS) : t + 1]), axis=0)
    vol = logret.std(axis=0) + 1e-12
    if rule == "inverse_vol":
        w = 1.0 / vol
    elif rule == "momentum":
        w = np.clip(1.0 + _zscore(close[t - 21] / close[t - 252] - 1.0), 0.0, None)
    elif rule == "low_vol":
        w = np.clip(1.0 + _zscore(-vol), 0.0, None)
    else:
        raise ValueError(rule)
    return w / w.sum()


def portfolio_returns(close: np.ndarray, days: slice, rule: str, *, every: int, cost: float) -> np.ndarray:
    """Net daily returns over ``days`` (the span's days but its first) of holding ``rule``'s
    targets, rebalanced every ``every`` days from the span's first day, paying ``cost`` per unit
    of value traded."""
    w = targets(close, days.start, rule)
    paid = cost  # entering from cash on the first day
    out = []
    for t in range(days.start, days.stop - 1):
        growth = close[t + 1] / close[t]
        gross = float(w @ growth)
        out.append((1.0 - paid) * gross - 1.0)
        drifted = w * growth / gross
        if (t + 1 - days.start) % every == 0 and t + 1 < days.stop - 1:
            new = targets(close, t + 1, rule)
            paid = cost * float(np.abs(new - drifted).sum())
            w = new
        else:
            paid, w = 0.0, drifted
    return np.asarray(out)


BASELINES = {
    "1/N (cost-free)": ("equal", 1, 0.0),
    "1/N with costs": ("equal", 1, COST),
    "inverse volatility": ("inverse_vol", REBALANCE_DAYS, COST),
    "12-1 momentum tilt": ("momentum", REBALANCE_DAYS, COST),
    "low-volatility tilt": ("low_vol", REBALANCE_DAYS, COST),
}


def universe_table(name: str, path: Path) -> list[str]:
    market = load_market_data(DataSpec(paths=[str(path)], start=START, end=END), data_dir=None)
    days = market.dates.astype("datetime64[D]")
    folds = plan_folds(days, start=START, end=END, first_test_year=FIRST_TEST_YEAR)
    spans = []
    for fold in folds:
        lo = int(np.searchsorted(days, np.datetime64(fold.test[0], "D")))
        hi = int(np.searchsorted(days, np.datetime64(fold.test[1], "D"), side="right"))
        spans.append(slice(lo, hi))
    records = {
        label: np.concatenate([portfolio_returns(market.close, s, rule, every=k, cost=c) for s in spans])
        for label, (rule, k, c) in BASELINES.items()
    }
    headline = records["1/N (cost-free)"]
    lines = [
        f"#### {name}: {len(market.tickers)} tickers, {len(folds)} folds, test {folds[0].test[0]}..{folds[-1].test[1]}"
        f" ({len(headline)} return days)",
        "",
        "| baseline | annual return | Sharpe | max drawdown | Sharpe diff. vs 1/N | 95 % interval | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in records.items():
        wealth = np.cumprod(1 + r)
        annual = wealth[-1] ** (252 / len(r)) - 1
        drawdown = float(np.min(wealth / np.maximum.accumulate(wealth) - 1))
        rel = vs_equal_weight(r, headline, periods_per_year=252, seed=0)
        low, high = rel["ci95"]
        lines.append(
            f"| {label} | {100 * annual:.1f} % | {annual_sharpe(r):.2f} | {100 * drawdown:.1f} % | "
            f"{rel['sharpe_difference']:+.3f} | [{low:+.3f}, {high:+.3f}] | {rel['verdict']} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("PADDOCK_DATA_DIR") or str(REPO.parent / "shared" / "data")
    parser.add_argument("--data-dir", default=default)
    args = parser.parse_args()
    started = time.monotonic()
    for name, file in FILES.items():
        print("\n".join(universe_table(name, Path(args.data_dir) / file)), end="\n\n")
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()

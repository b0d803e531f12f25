"""Load time and memory of intraday files: ``load_panel`` against a bare pandas read in the same run.

Two data sets:

* ``real``: the 5-minute file of ``../shared/data`` (5 tickers, 2024-03-11..2026-08-21, UTC
  bar-start stamps, 238,770 rows);
* ``synthetic``: ``--tickers`` x 390 one-minute bars x ``--days`` sessions (the Podracer paper's
  shape is 100 x 390 x 252, about 9.8 M rows a year), random-walk prices, written once to a
  temporary Parquet file (the format a file that size would come in) with naive ET bar-end
  stamps. Not run in CI.

The peer is what a user would do by hand: ``pandas.read_csv``/``read_parquet`` of the same file
plus the conversion of the stamps to exchange time, without any check. ``load_panel`` also
detects the interval and bar label, checks order, duplicates, the session grid and every price,
and fills missing bars; the ratio says what that costs. Peak memory is the process's maximum
resident set size after each step (it only grows).

Usage: ``.venv/bin/python benchmarks/intraday_loading.py [--tickers 100 --days 252] [--skip-real]``
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from trainer.data.bars import bar_info  # noqa: E402
from trainer.data.loading import load_panel  # noqa: E402

DATA = Path(os.environ.get("PADDOCK_DATA_DIR") or REPO.parent / "shared" / "data")
REAL = DATA / "intraday_5min_ib_2024-03-11_2026-08-21.csv.gz"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def synthetic(path: Path, tickers: int, days: int, seed: int = 0) -> int:
    """Write ``tickers`` x ``days`` sessions of 390 one-minute bars; returns the row count."""
    rng = np.random.default_rng(seed)
    sessions = pd.bdate_range("2021-01-04", periods=days)
    minutes = pd.to_timedelta(np.arange(1, 391) + 9 * 60 + 30, unit="min")
    stamps = (sessions.values[:, None] + minutes.values[None, :]).ravel()
    n = stamps.size
    frames = []
    for k in range(tickers):
        close = 100.0 * np.exp(np.cumsum(rng.normal(0, 5e-4, n)))
        open_ = np.concatenate([[close[0]], close[:-1]])
        spread = np.abs(rng.normal(0, 2e-4, n)) * close
        frames.append(
            pd.DataFrame(
                {
                    "datetime_et": stamps,
                    "tic": f"T{k:03d}",
                    "open": open_,
                    "high": np.maximum(open_, close) + spread,
                    "low": np.minimum(open_, close) - spread,
                    "close": close,
                    "volume": rng.integers(100, 100_000, n).astype("float64"),
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    frame.to_parquet(path, index=False)
    return len(frame)


def peer_csv_utc(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    stamps = pd.to_datetime(frame["datetime_utc"]).dt.tz_localize("UTC").dt.tz_convert("America/New_York")
    return frame.assign(date=stamps.dt.tz_localize(None))


def report(name: str, rows: int, ours: float, peer: float, panel: pd.DataFrame) -> None:
    info = bar_info(panel)
    print(
        f"{name}: {rows:,} rows, {info.interval} bars, {panel['tic'].nunique()} tickers, "
        f"{info.missing_bars} missing bars filled; load_panel {ours:.2f} s ({ours / rows * 1e6:.2f} us/row), "
        f"bare pandas read + tz {peer:.2f} s; ratio {ours / peer:.1f}x; panel {panel.memory_usage(deep=True).sum() / 1e6:.0f} MB, "
        f"peak RSS so far {rss_mb():.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickers", type=int, default=20)
    parser.add_argument("--days", type=int, default=21)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args()

    if not args.skip_real:
        peer, raw = timed(lambda: peer_csv_utc(REAL), args.repeats)
        ours, panel = timed(lambda: load_panel(REAL), args.repeats)
        report(REAL.name, len(raw), ours, peer, panel)
        del raw, panel

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic_1min.parquet"
        t = time.perf_counter()
        rows = synthetic(path, args.tickers, args.days)
        print(f"synthetic file written in {time.perf_counter() - t:.1f} s ({path.stat().st_size / 1e6:.0f} MB Parquet)")
        peer, raw = timed(lambda: pd.read_parquet(path), args.repeats)
        del raw
        ours, panel = timed(lambda: load_panel(path), 1)
        report(f"synthetic {args.tickers} tickers x 390 x {args.days} days", rows, ours, peer, panel)


if __name__ == "__main__":
    main()

"""Env-steps per second of StockTradingVecEnv and PortfolioVecEnv against peers measured in the same run.

Data: the real Dow-30 panel (29 tickers with full history, 2010-2019, FinRL's 8 indicators),
read from ``PADDOCK_DATA_DIR`` (default ``../shared/data``). Peers:

* ``SyncVectorEnv``: Gymnasium's synchronous vector env over our single-env adapter
  ``StockTradingEnv`` (same dynamics, one Python env per portfolio);
* ``numpy``: a FinRL-style single NumPy env (``finrl_style_numpy_env.py``), one Python call per day.

Actions are drawn once into a small pool before timing, so the figures measure the envs, not
the random number generator. Auto-resets (random start days) are part of the measured steps.

Data (``--data``):

* ``dow30`` (default): the real Dow-30 daily panel above;
* ``5min``: the real 5-minute file (AAPL, MSFT, NVDA, QQQ, SPY, 2024-03-11..2026-08-21, 47,754
  bars each, 238,770 rows), loaded through the intraday loader and the feature pipeline; the
  load time is printed next to a plain ``pandas.read_csv`` of the same file (the peer);
* ``synthetic``: the Podracer paper's shape, 100 stocks x 390 one-minute bars x 252 days
  (98,280 bars, 9.8 M rows; ``--synthetic-days`` for fewer), a random walk with real session
  features (bar of day, overnight gap) and 8 random float32 indicators (the pipeline's
  stockstats pass is not run at this size); prints the env's tensor memory and the process's
  peak RSS. Benchmark only, never in CI.

Usage: ``.venv/bin/python benchmarks/env_throughput.py [--data 5min] [--sizes 1 64 1024 4096] [--seconds 1.5]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: turbulence uses small LAPACK calls

import argparse  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from finrl_style_numpy_env import FinRLStyleNumpyEnv  # noqa: E402

from trainer.data.loading import load_panel  # noqa: E402
from trainer.data.market import MarketData  # noqa: E402
from trainer.data.pipeline import build_market_data, load_market_data  # noqa: E402
from trainer.data.sessions import SESSION_FEATURES, session_features  # noqa: E402
from trainer.data.spec import DataSpec  # noqa: E402
from trainer.envs.gym_adapter import StockTradingEnv  # noqa: E402
from trainer.envs.portfolio import PortfolioVecEnv  # noqa: E402
from trainer.envs.portfolio_config import PortfolioConfig  # noqa: E402
from trainer.envs.stock_config import EnvConfig  # noqa: E402
from trainer.envs.stock_trading import StockTradingVecEnv  # noqa: E402
from trainer.util.device import configure_device  # noqa: E402

DOW30_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
FIVE_MIN_FILE = "intraday_5min_ib_2024-03-11_2026-08-21.csv.gz"
POOL = 16  # distinct action batches cycled through while timing


def timed(step, min_seconds: float, min_calls: int = 20) -> tuple[int, float, float]:
    """Call ``step()`` until ``min_seconds`` of wall time; return (calls, wall s, process CPU s).

    The process CPU time leaves out the time other processes held the cores, so it shows the
    env's own cost on a shared machine (with 2 threads it adds up both threads).
    """
    for _ in range(5):  # warm-up: allocator, first auto-resets
        step()
    calls, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        for _ in range(min_calls):
            step()
        calls += min_calls
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls, elapsed, time.process_time() - cpu_start


def make_stock_trading(data, num_envs: int, device: str):
    return StockTradingVecEnv(data, EnvConfig(), num_envs=num_envs, device=device, seed=0)


def make_portfolio(data, num_envs: int, device: str):
    return PortfolioVecEnv(data, PortfolioConfig(), num_envs=num_envs, device=device, seed=0)


ENVS = {"StockTradingVecEnv": make_stock_trading, "PortfolioVecEnv": make_portfolio}


def bench_vec(data, num_envs: int, device: str, seconds: float, make=make_stock_trading) -> tuple[float, float]:
    env = make(data, num_envs, device)
    g = torch.Generator().manual_seed(0)
    actions = [(torch.rand(num_envs, env.action_dim, generator=g) * 2 - 1).to(device) for _ in range(POOL)]
    i = 0

    def step():
        nonlocal i
        env.step(actions[i % POOL])
        i += 1

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    calls, elapsed, cpu = timed(step, seconds)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        calls, elapsed, cpu = timed(step, seconds)
        torch.cuda.synchronize()
    return calls * num_envs / elapsed, calls * num_envs / cpu


def bench_sync_vector(data, num_envs: int, seconds: float) -> tuple[float, float]:
    envs = gym.vector.SyncVectorEnv(
        [lambda k=k: StockTradingEnv(data, EnvConfig(), seed=k) for k in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, size=(POOL, num_envs, data.num_stocks)).astype(np.float32)
    i = 0

    def step():
        nonlocal i
        envs.step(actions[i % POOL])
        i += 1

    calls, elapsed, cpu = timed(step, seconds)
    envs.close()
    return calls * num_envs / elapsed, calls * num_envs / cpu


def bench_numpy(data, seconds: float) -> tuple[float, float]:
    env = FinRLStyleNumpyEnv(data.close, data.features, seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, size=(POOL, data.num_stocks))
    i = 0

    def step():
        nonlocal i
        env.step(actions[i % POOL])
        i += 1

    calls, elapsed, cpu = timed(step, seconds, min_calls=200)
    return calls / elapsed, calls / cpu


def load_five_minute(data_dir: str) -> MarketData:
    """The real 5-minute file through the loader and the pipeline, with timings against a plain
    ``pandas.read_csv`` of the same file (the peer)."""
    path = Path(data_dir) / FIVE_MIN_FILE
    start = time.perf_counter()
    pd.read_csv(path)
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    panel = load_panel(path)
    panel_s = time.perf_counter() - start
    start = time.perf_counter()
    data = build_market_data(panel)
    build_s = time.perf_counter() - start
    print(
        f"5-minute load: {len(panel):,} rows; pandas.read_csv alone (peer) {read_s:.2f} s; load_panel (detection, "
        f"validation, missing bars) {panel_s:.2f} s; features and turbulence {build_s:.2f} s; "
        f"total {panel_s + build_s:.2f} s = {(panel_s + build_s) / read_s:.1f}x the plain read"
    )
    return data


def synthetic_minutes(days: int, stocks: int = 100, bars: int = 390, seed: int = 0) -> MarketData:
    """A random-walk panel of the paper's shape: ``stocks`` x ``bars`` one-minute bars x ``days``
    sessions (bar ends 09:31..16:00 New York time), session features computed, 8 random
    float32 indicators."""
    rng = np.random.default_rng(seed)
    sessions = pd.bdate_range("2025-01-02", periods=days)
    minutes = pd.timedelta_range(start="09:31:00", periods=bars, freq="1min")
    stamps = (sessions.values[:, None] + minutes.values[None, :]).reshape(-1)
    t = len(stamps)
    log_close = np.cumsum(rng.normal(0.0, 1e-3, size=(t, stocks)), axis=0) + np.log(100.0)
    close = np.exp(log_close)
    open_ = close * np.exp(rng.normal(0.0, 2e-4, size=(t, stocks)))
    feats = np.empty((t, stocks, 8 + len(SESSION_FEATURES)), dtype=np.float32)
    feats[:, :, :8] = rng.standard_normal((t, stocks, 8), dtype=np.float32)
    feats[:, :, 8:] = session_features(stamps, open_, close)
    return MarketData(
        dates=stamps.astype("datetime64[s]"),
        tickers=tuple(f"S{i:03d}" for i in range(stocks)),
        close=close,
        features=feats,
        feature_names=tuple(f"ind_{i}" for i in range(8)) + SESSION_FEATURES,
        turbulence=np.zeros(t),
        source="synthetic",
    )


def _ratio(value: float, peer: float, digits: int = 1) -> str:
    return "-" if peer != peer else f"{value / peer:.{digits}f}x"  # peer NaN: not measured


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=1.5, help="minimum timed seconds per row")
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS), help="vector envs to time")
    parser.add_argument("--sync-envs", type=int, default=8, help="envs in the SyncVectorEnv peer")
    parser.add_argument(
        "--data-dir", default=os.environ.get("PADDOCK_DATA_DIR") or str(REPO.parent / "shared" / "data")
    )
    parser.add_argument("--data", choices=("dow30", "5min", "synthetic"), default="dow30", help="see the module doc")
    parser.add_argument("--synthetic-days", type=int, default=252, help="sessions of the synthetic panel")
    args = parser.parse_args()

    torch.set_num_threads(1)
    if args.data == "5min":
        data = load_five_minute(args.data_dir)
    elif args.data == "synthetic":
        start = time.perf_counter()
        data = synthetic_minutes(args.synthetic_days)
        print(
            f"synthetic panel built in {time.perf_counter() - start:.1f} s: features {data.features.nbytes / 2**30:.2f} GiB "
            f"float32, close {data.close.nbytes / 2**30:.2f} GiB float64; peak RSS so far {peak_rss_gib():.2f} GiB"
        )
    else:
        spec = DataSpec(paths=[DOW30_FILE], start="2010-01-01", end="2019-12-31")
        data = load_market_data(spec, data_dir=args.data_dir)
    print(
        f"data: {data.num_stocks} tickers x {data.num_days:,} rows ({data.dates[0]} to {data.dates[-1]}), "
        f"{len(data.feature_names)} features; torch {torch.__version__}; cpu cores {os.cpu_count()}"
    )

    numpy_rate, numpy_cpu = bench_numpy(data, args.seconds)
    if args.data == "synthetic":  # 8 single envs would hold 8 copies of the observation table
        sync_rate = sync_cpu = float("nan")
    else:
        sync_rate, sync_cpu = bench_sync_vector(data, args.sync_envs, args.seconds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"1-minute load average before the env rows: {load:.1f} (other processes share the cores)")
    print()
    print(
        "| env | device | torch threads | num_envs | env-steps/s (wall) | per CPU-second | "
        "vs NumPy env (wall) | vs SyncVectorEnv (wall) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    print(
        f"| FinRL-style NumPy (peer) | cpu | - | 1 | {numpy_rate:,.0f} | {numpy_cpu:,.0f} | 1.0x | "
        f"{_ratio(numpy_rate, sync_rate, 2)} |"
    )
    if sync_rate == sync_rate:  # not measured (NaN) on the synthetic panel
        print(
            f"| SyncVectorEnv over adapter (peer) | cpu | 1 | {args.sync_envs} | {sync_rate:,.0f} | {sync_cpu:,.0f} | "
            f"{sync_rate / numpy_rate:.2f}x | 1.0x |"
        )
    rows = [("cpu", t) for t in args.threads]
    if torch.cuda.is_available():
        configure_device(torch.device("cuda"))  # as in training (TF32; the envs do no matrix products)
        rows.append(("cuda", 1))
    per_cpu_ratios = []
    for name in args.envs:
        for device, threads in rows:
            torch.set_num_threads(threads)
            for size in args.sizes:
                rate, per_cpu = bench_vec(data, size, device, args.seconds, ENVS[name])
                if args.data == "synthetic":
                    print(f"(peak RSS after {name} with {size} envs: {peak_rss_gib():.2f} GiB)", flush=True)
                cpu_text = f"{per_cpu:,.0f}" if device == "cpu" else "-"
                print(
                    f"| {name} | {device} | {threads} | {size} | {rate:,.0f} | {cpu_text} | "
                    f"{rate / numpy_rate:.1f}x | {_ratio(rate, sync_rate)} |",
                    flush=True,
                )
                if device == "cpu" and threads == 1 and size == 1024:
                    per_cpu_ratios.append((name, per_cpu / numpy_cpu))
    print()
    for name, ratio in per_cpu_ratios:
        print(f"{name} at 1,024 envs, 1 thread: {ratio:.1f}x the NumPy env per CPU-second (target >= 20x)")


if __name__ == "__main__":
    main()

"""The demo's data: the Dow-30 and QQQ files found in (or downloaded into) the data folder, and
the demo dataset of the tickers with full history."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.db import transaction

from webapp import engine
from webapp.core.errors import AppError
from webapp.demo.profiles import (
    BENCHMARK_TICKER,
    DATA_END,
    DATA_START,
    DATASET_NAME,
    DOW30_DOWNLOAD_FILE,
    DOW30_FILE,
    DOW30_TICKERS,
    INTRADAY_DATASET_NAME,
    INTRADAY_FILE,
    INTRADAY_TICKERS,
    SPLITS,
    YAHOO_HOST,
)
from webapp.market.models import Dataset
from webapp.market.services import dataset_create_from_files

logger = logging.getLogger(__name__)


@dataclass
class DemoFiles:
    """The demo's data files, relative to the data folder (the benchmark: absolute when
    ``PADDOCK_BENCHMARK_FILE`` lies elsewhere), and what happened to get them."""

    prices: str
    benchmark: str
    messages: list[str] = field(default_factory=list)


def data_dir() -> Path:
    """``PADDOCK_DATA_DIR``."""
    return Path(settings.PADDOCK_DATA_DIR)


def benchmark_file() -> str:
    """``PADDOCK_BENCHMARK_FILE`` relative to ``PADDOCK_DATA_DIR``, or its absolute path when
    it lies elsewhere (``root / benchmark_file()`` is then that path)."""
    path = Path(settings.PADDOCK_BENCHMARK_FILE)
    try:
        return str(path.relative_to(Path(settings.PADDOCK_DATA_DIR)))
    except ValueError:
        return str(path)


def _online(timeout: float = 5.0) -> str | None:
    """``None`` when Yahoo Finance answers a TCP connection, else why not."""
    try:
        with socket.create_connection(YAHOO_HOST, timeout=timeout):
            return None
    except OSError as exc:
        return f"{YAHOO_HOST[0]} cannot be reached ({exc.strerror or exc})"


def _offline_error(root: Path, missing: list[str], reason: str) -> AppError:
    names = ", ".join(missing)
    return AppError(
        f"the demo data is not in PADDOCK_DATA_DIR={root} (missing: {names}) and it cannot be downloaded: "
        f"{reason}. Copy the files there (see docs/guide/demo.md), point PADDOCK_DATA_DIR "
        "at a folder holding them, or connect this machine to the internet and run the demo again.",
        fields={"data": f"missing: {names}"},
    )


def _has_benchmark(path: Path) -> bool:
    """Whether a benchmark file holds QQQ on the first and last days of the test split."""
    try:
        frame = pd.read_csv(path, usecols=lambda c: c.strip().lower() in ("date", "tic"))
    except (OSError, ValueError):
        return False
    frame.columns = [c.strip().lower() for c in frame.columns]
    if "tic" in frame.columns:
        frame = frame[frame["tic"].astype(str).str.upper() == BENCHMARK_TICKER]
    if frame.empty:
        return False
    dates = pd.to_datetime(frame["date"])
    test_start, test_end = (pd.Timestamp(d) for d in SPLITS["test"])
    return dates.min() <= test_start + timedelta(days=7) and dates.max() >= test_end - timedelta(days=7)


def ensure_demo_files(
    root: Path | None = None, *, allow_download: bool = True, say: Callable[[str], None] = logger.info
) -> DemoFiles:
    """Find the Dow-30 and QQQ files in the data folder, downloading what is absent.

    Args:
        root: the data folder (default ``PADDOCK_DATA_DIR``); downloads are written there.
        allow_download: ``False`` never touches the network (absent files are an error).
        say: receives one line per step (the command prints them).

    Returns:
        The file names relative to ``root``.

    Raises:
        AppError: a file is absent and cannot be downloaded (offline, or Yahoo failed), or the
            benchmark file lacks QQQ over the test dates; the message says what to put where.
    """
    root = Path(root or data_dir())
    benchmark_name = benchmark_file()
    benchmark = root / benchmark_name
    files = DemoFiles(prices=DOW30_FILE, benchmark=benchmark_name)
    missing = []
    if not (root / DOW30_FILE).exists():
        if (root / DOW30_DOWNLOAD_FILE).exists():
            files.prices = DOW30_DOWNLOAD_FILE
        else:
            missing.append(DOW30_FILE)
    if not benchmark.exists():
        missing.append(benchmark_name)
    elif not _has_benchmark(benchmark):  # someone else's file: never overwritten
        raise AppError(
            f"{benchmark} does not hold {BENCHMARK_TICKER} prices from {SPLITS['test'][0]} to {SPLITS['test'][1]}, "
            "the backtests' benchmark; move it away to have it downloaded, or replace it",
            fields={"data": f"{benchmark_name}: no {BENCHMARK_TICKER} over the test dates"},
        )
    if not missing:
        return files
    if not allow_download:
        raise _offline_error(root, missing, "downloads are turned off")
    reason = _online()
    if reason is not None:
        raise _offline_error(root, missing, reason)
    if DOW30_FILE in missing:
        say(f"downloading the Dow 30 daily prices {DATA_START}..{DATA_END} from Yahoo Finance")
        info = engine.download_daily_bars(
            DOW30_TICKERS, start=DATA_START, end=DATA_END, out_path=root / DOW30_DOWNLOAD_FILE
        )
        files.prices = DOW30_DOWNLOAD_FILE
        files.messages.append(
            f"downloaded {info.rows} rows of {len(info.tickers)} tickers to {root / DOW30_DOWNLOAD_FILE}"
        )
    if benchmark_name in missing:
        say(f"downloading {BENCHMARK_TICKER} daily prices from Yahoo Finance (the backtests' benchmark)")
        benchmark.parent.mkdir(parents=True, exist_ok=True)
        info = engine.download_daily_bars([BENCHMARK_TICKER], start=DATA_START, end=DATA_END, out_path=benchmark)
        files.messages.append(f"downloaded {info.rows} rows of {BENCHMARK_TICKER} to {benchmark}")
    return files


def full_history_tickers(path: Path) -> tuple[list[str], dict[str, str]]:
    """Split a long price file's tickers into those with rows on its first and last day and
    the others.

    Returns:
        ``(kept, dropped)``: kept tickers sorted; ``dropped`` maps a ticker to its first and last
        day (``"2019-03-20..2022-11-15"``).
    """
    frame = pd.read_csv(path, usecols=["date", "tic"])
    frame["date"] = pd.to_datetime(frame["date"])
    first_day, last_day = frame["date"].min(), frame["date"].max()
    span = frame.groupby("tic")["date"].agg(["min", "max"])
    full = (span["min"] == first_day) & (span["max"] == last_day)
    kept = sorted(str(t) for t in span.index[full])
    dropped = {str(t): f"{row['min'].date()}..{row['max'].date()}" for t, row in span[~full].iterrows()}
    return kept, dropped


def import_demo_dataset(
    owner, *, root: Path | None = None, say: Callable[[str], None] = logger.info, allow_download: bool = True
) -> tuple[Dataset, bool]:
    """The owner's demo dataset: Dow 30 tickers with full history since 2010, created once.

    Args:
        owner: the user.
        root: the data folder (default ``PADDOCK_DATA_DIR``).
        say: progress lines.
        allow_download: fetch absent files from Yahoo Finance.

    Returns:
        ``(dataset, created)``.

    Raises:
        AppError: the files are absent and cannot be downloaded, or the loader rejects them.
    """
    root = Path(root or data_dir())
    files = ensure_demo_files(root, allow_download=allow_download, say=say)
    for line in files.messages:
        say(line)
    existing = Dataset.objects.filter(owner=owner, name=DATASET_NAME).first()
    if existing is not None:
        return existing, False
    kept, dropped = full_history_tickers(root / files.prices)
    notes = [
        f"{tic}: dropped from the demo dataset, its rows cover only {span} (the demo trades tickers "
        f"with full history from {DATA_START[:4]})"
        for tic, span in sorted(dropped.items())
    ]
    with transaction.atomic():
        dataset = dataset_create_from_files(owner=owner, name=DATASET_NAME, paths=[files.prices], tickers=kept)
        if notes:
            dataset.notes = [*notes, *dataset.notes]
            dataset.save(update_fields=["notes"])
    return dataset, True


def import_intraday_dataset(
    owner, *, root: Path | None = None, say: Callable[[str], None] = logger.info
) -> tuple[Dataset, bool]:
    """The owner's 5-minute demo dataset (``demo_setup --intraday``): AAPL, MSFT and NVDA from
    :data:`INTRADAY_FILE`, whose QQQ bars are the backtests' benchmark; created once.

    Never downloads: no free source serves two years of 5-minute bars.

    Returns:
        ``(dataset, created)``.

    Raises:
        AppError: the file is not in the data folder (naming it and the folder), or the loader
            rejects it.
    """
    root = Path(root or data_dir())
    if not (root / INTRADAY_FILE).exists():
        raise AppError(
            f"the intraday demo needs {INTRADAY_FILE} in PADDOCK_DATA_DIR={root} (5-minute bars of AAPL, MSFT, "
            "NVDA and QQQ; see ../shared/data/README.md); copy it there or point PADDOCK_DATA_DIR at a folder "
            "holding it",
            fields={"data": f"missing: {INTRADAY_FILE}"},
        )
    existing = Dataset.objects.filter(owner=owner, name=INTRADAY_DATASET_NAME).first()
    if existing is not None:
        return existing, False
    say(
        f"importing {INTRADAY_FILE} ({', '.join(INTRADAY_TICKERS)}; {BENCHMARK_TICKER} stays in the file as the benchmark)"
    )
    dataset = dataset_create_from_files(
        owner=owner, name=INTRADAY_DATASET_NAME, paths=[INTRADAY_FILE], tickers=list(INTRADAY_TICKERS)
    )
    return dataset, True

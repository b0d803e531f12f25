"""Read daily or intraday OHLCV files into one validated long-layout panel.

Intraday files (several rows per ticker and day) are handled by :mod:`trainer.data.timestamps`
and :mod:`trainer.data.intraday`: their ``date`` becomes naive America/New_York time labelled
at the bar end, and ``panel.attrs["bars"]`` describes the bars. What follows is common to both.

Supported inputs (CSV, CSV.gz or Parquet, chosen by the file suffix):

* **long layout**: one row per ``(date, ticker)``, columns ``date, tic, open, high, low, close,
  [adj_close], volume`` in any order and letter case. ``open/high/low/close`` may be left out
  only when all four ``adj_open/adj_high/adj_low/adj_close`` are present; ``adj_close`` alone
  does not replace ``close`` (the daily factor ``adj_close / close`` is needed to adjust the rest). Common aliases are accepted: ``Date``,
  ``datetime``, ``timestamp``; ``ticker``, ``symbol``; ``Adj Close``, ``adjclose``,
  ``Adjusted_close``; ``vol``.
* **one file per ticker**: the same columns without ``tic``; the ticker is the ``ticker=``
  argument, else the file name up to its first ``_`` or ``.`` (``AAPL.csv`` -> ``AAPL``,
  ``QQQ_daily_eodhd_1999-03-10_2024-04-19.csv`` -> ``QQQ``). A folder path stands for every
  ``*.csv``, ``*.csv.gz``, ``*.parquet`` and ``*.pq`` file in it.

Prices are made split/dividend-adjusted whenever the file allows it, because the agent must
not see a 7:1 split as a -86 % day:

1. ``adj_open/adj_high/adj_low/adj_close`` all present: used as they are;
2. only ``adj_close`` present: ``open/high/low`` are scaled by ``adj_close / close`` (the usual
   Yahoo/EODHD back-adjustment: one factor per day for the whole bar);
3. no adjusted column: raw prices are used and a note says so.

Volume is used as it is (EODHD files already put it on the latest share basis).

Rows are checked by :func:`trainer.data.rows.validate_rows`; row numbers in errors are
1-based data rows (see :mod:`trainer.data.rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from trainer.data.bars import DAILY
from trainer.data.files import (
    _canonical,
    _is_parquet,
    _read_raw,
    check_ticker,
    expand_paths,
    listed,
    shown,
    ticker_from_filename,
)
from trainer.data.intraday import check_options, complete_sessions, intraday_file
from trainer.data.rows import _ROW, PANEL_COLUMNS, PRICE_COLUMNS, _where, split_like_moves, validate_rows
from trainer.errors import ConfigError, DataError
from trainer.limits import DEFAULT_LIMITS, InputLimits


def normalize_frame(
    frame: pd.DataFrame,
    *,
    origin: str,
    file: str | None = None,
    ticker: str | None = None,
    csv_lines: bool = False,
) -> tuple[pd.DataFrame, list[str]]:
    """Rename columns to the canonical names and pick adjusted prices (see the module doc).

    Args:
        frame: rows as read from one source, in source order (row ``i`` is data row ``i + 1``).
        origin: name used in messages, e.g. the file name or ``"yfinance"``.
        file: path put in error details.
        ticker: ticker of every row when ``frame`` has no ticker column.
        csv_lines: whether messages should also give the CSV line number.

    Returns:
        ``(frame, notes)``: columns ``date`` (raw values), ``tic``, ``open, high, low, close,
        volume`` (as read, maybe adjusted) and ``_row`` (1-based data row); notes about the
        adjustment choice.

    Raises:
        DataError: a required column is missing, a column name appears twice after aliasing,
            or the file has no ticker column and no ticker was given.
    """
    frame = frame.reset_index(drop=True)
    if isinstance(frame.columns, pd.MultiIndex):
        raise DataError(f"{origin}: columns are a MultiIndex; flatten it first", file=file)
    canon = [_canonical(c) for c in frame.columns]
    seen: dict[str, str] = {}
    for original, c in zip(frame.columns, canon):
        if c in seen:
            raise DataError(f"{origin}: columns {seen[c]!r} and {original!r} both mean {c!r}", file=file, field=c)
        seen[c] = str(original)
    frame = frame.set_axis(canon, axis=1)
    notes: list[str] = []

    missing = [c for c in ("date", "volume") if c not in frame.columns]
    all_adjusted = all(f"adj_{c}" in frame.columns for c in PRICE_COLUMNS)
    if not all_adjusted:
        # Raw open/high/low/close are required: with adj_close alone, open/high/low could not be
        # put on the same (adjusted) basis as the close, and the indicators mix both.
        missing.extend(c for c in PRICE_COLUMNS if c not in frame.columns)
    if "tic" not in frame.columns and not ticker:
        missing.append("tic")
    if missing:
        hint = (
            " (adj_close cannot stand in for close: open/high/low are adjusted by adj_close / close; give close, "
            "or all of adj_open, adj_high, adj_low, adj_close)"
            if "close" in missing and "adj_close" in frame.columns
            else ""
        )
        header = ",".join(map(str, seen.values()))
        for sep, name in ((";", "semicolon"), ("\t", "tab"), ("|", "pipe")):
            if len(seen) <= 2 and header.count(sep) >= 2:
                hint += (
                    f"; the header looks {name}-separated ({shown(header[:80])}): Paddock reads comma-separated "
                    "files, so save it with ',' as the delimiter"
                )
                break
        raise DataError(
            f"{origin}: missing column(s) {', '.join(missing)}; found {listed((shown(c)[1:-1] for c in seen.values()), 12)}{hint}",
            file=file,
            field=missing[0],
        )

    out = pd.DataFrame({"date": frame["date"]})
    if "tic" in frame.columns:
        out["tic"] = frame["tic"]
    else:
        out["tic"] = ticker

    def ident(i: int) -> dict[str, str]:
        tic = frame["tic"].iloc[i] if "tic" in frame.columns else ticker
        return {"ticker": str(tic), "date": str(frame["date"].iloc[i])[:10]}

    numeric = {}
    for c in ("open", "high", "low", "close", "adj_open", "adj_high", "adj_low", "adj_close", "volume"):
        if c in frame.columns:
            numeric[c] = _to_number(frame[c], c, origin=origin, file=file, csv_lines=csv_lines, ident=ident)

    have_adj = [c for c in PRICE_COLUMNS if f"adj_{c}" in numeric]
    if len(have_adj) == 4:
        for c in PRICE_COLUMNS:
            out[c] = numeric[f"adj_{c}"]
        extra_raw = [c for c in PRICE_COLUMNS if c in numeric]
        for c in extra_raw:  # still validated below, as a broken raw row points at a broken file
            out[f"raw_{c}"] = numeric[c]
        notes.append(f"{origin}: split/dividend-adjusted prices used (adj_open, adj_high, adj_low, adj_close)")
    elif "adj_close" in numeric and "close" in numeric:
        factor = numeric["adj_close"] / numeric["close"]
        for c in ("open", "high", "low"):
            if c not in numeric:
                raise DataError(f"{origin}: missing column {c}", file=file, field=c)
            out[c] = numeric[c] * factor
            out[f"raw_{c}"] = numeric[c]
        out["close"] = numeric["adj_close"]
        out["raw_close"] = numeric["close"]
        notes.append(f"{origin}: open/high/low adjusted by the factor adj_close/close of each day")
    else:  # raw open/high/low/close, all present (checked above)
        for c in PRICE_COLUMNS:
            out[c] = numeric[c]
        if not have_adj:
            notes.append(f"{origin}: no adjusted prices in the file; raw prices used (splits show as jumps)")
    out["volume"] = numeric["volume"]
    out[_ROW] = np.arange(1, len(out) + 1)
    return out, notes


def _to_number(series: pd.Series, column: str, *, origin: str, file: str | None, csv_lines: bool, ident) -> pd.Series:
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        return series.astype("float64")
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        where = ident(i)
        raise DataError(
            f"{_where(origin, i + 1, csv=csv_lines)} ({shown(where['ticker'])[1:-1]} {shown(where['date'])[1:-1]}): "
            f"{column} {shown(series.iloc[i])} is not a number",
            file=file,
            row=i + 1,
            field=column,
            **where,
        )
    return values.astype("float64")


def load_panel(
    paths: str | Path | Sequence[str | Path],
    *,
    tickers: Sequence[str] | None = None,
    ticker: str | None = None,
    timezone: str = "auto",
    bar_label: str = "auto",
    session: str = "regular",
    limits: InputLimits = DEFAULT_LIMITS,
    check_all: bool = False,
) -> pd.DataFrame:
    """Load and validate daily or intraday OHLCV files into one long-layout panel.

    Intraday files (a ticker has several rows a day) go through
    :func:`trainer.data.intraday.prepare_intraday` and :func:`~trainer.data.intraday.complete_sessions`:
    ``date`` becomes naive America/New_York time labelled at the bar **end**, missing bars are
    filled with the previous close (volume 0) and reported, and ``attrs["bars"]`` holds the
    :class:`~trainer.data.intraday.BarInfo` (interval, session, periods per year, missing-bar
    report). Daily panels get :data:`~trainer.data.intraday.DAILY` there and are otherwise
    loaded exactly as before.

    Args:
        paths: a file, a folder (every data file in it, one ticker per file) or a list of both.
            Files without a ticker column take ``ticker`` or their file name's ticker.
        tickers: keep only these tickers (case-insensitive); rows of other tickers are not
            validated (unless ``check_all``), so a file holding many tickers can be used for a
            few of them.
        ticker: ticker of a single file that has no ticker column.
        timezone: zone of intraday stamps without an offset: ``"auto"`` (column name, else a
            guess, reported in the notes), ``"UTC"`` or ``"America/New_York"``.
        bar_label: what intraday stamps mark: ``"auto"`` (detected, reported), ``"start"``, ``"end"``.
        session: ``"regular"`` (intraday bars outside 09:30-16:00 ET are errors) or ``"extended"``.
        limits: a file that decompresses past ``limits.file_bytes`` or holds more than
            ``limits.file_rows`` rows is refused while it is streamed, before it is parsed.
        check_all: validate every row of every file, then keep ``tickers``: what a dataset
            import does, so that no bad row of another ticker is stored with it.

    Returns:
        DataFrame with columns ``date`` (datetime64[ns]), ``tic`` (str, upper case), ``open,
        high, low, close`` (float64 USD, split/dividend-adjusted when the file allows it, see the
        module doc) and ``volume`` (float64 shares), sorted by ``date, tic``. ``attrs["notes"]``
        (list of str) reports adjustment choices and merged duplicates; ``attrs["files"]`` maps
        each ticker to the file it came from; ``attrs["source"]`` names the files.

    Raises:
        DataError: a missing/empty/unreadable file, a missing column, a bad row (see
            :func:`validate_rows` and :func:`~trainer.data.intraday.prepare_intraday`), a
            ticker held by two files with different rows, a requested ticker that no file
            holds, or daily and intraday files (or two intervals) mixed.
        ConfigError: ``ticker`` given while several files lack a ticker column; an unknown
            ``timezone``, ``bar_label`` or ``session``.
    """
    options = check_options(timezone=timezone, bar_label=bar_label, session=session)
    files = expand_paths(paths)
    bars: list = []
    daily_files: list[str] = []
    wanted = None if tickers is None else list(dict.fromkeys(str(t).strip().upper() for t in tickers))
    frames: list[pd.DataFrame] = []
    notes: list[str] = []
    owner: dict[str, str] = {}
    no_tic_files = 0
    for path in files:
        raw = _read_raw(path, limits)
        has_tic = any(_canonical(c) == "tic" for c in raw.columns)
        file_ticker = None
        if not has_tic:
            no_tic_files += 1
            if ticker and no_tic_files > 1:
                raise ConfigError(
                    "ticker= names the ticker of one file, but several files have no ticker column", field="ticker"
                )
            file_ticker = check_ticker(ticker or ticker_from_filename(path), field="ticker", file=str(path))
        csv_lines = not _is_parquet(path)
        frame, file_notes = normalize_frame(
            raw, origin=path.name, file=str(path), ticker=file_ticker, csv_lines=csv_lines
        )
        if wanted is not None and not check_all:
            frame = frame[frame["tic"].astype("string").str.strip().str.upper().isin(wanted).fillna(False).to_numpy()]
            if frame.empty:
                continue
        column = next(str(c) for c in raw.columns if _canonical(c) == "date")
        frame, found = intraday_file(
            frame,
            column=column,
            origin=path.name,
            file=str(path),
            where=partial(_where, path.name, csv=csv_lines),
            **options,
        )
        (bars.append(found) if found else daily_files.append(path.name))
        _check_one_kind(bars, daily_files, path, intraday=bool(found))
        clean = validate_rows(frame, origin=path.name, file=str(path), csv_lines=csv_lines, keep_time=bool(found))
        if wanted is not None and check_all:  # every row was checked; keep the chosen tickers
            clean = clean[clean["tic"].isin(wanted).to_numpy()].reset_index(drop=True)
            if clean.empty:
                continue
        notes.extend(file_notes)
        if any(_canonical(c).startswith("adj_") for c in raw.columns):
            notes.extend(split_like_moves(clean, origin=path.name))
        frames.append(_new_tickers_only(clean, path, frames, owner, notes))

    if wanted is not None:
        _check_requested(wanted, owner, frames, files)
    panel = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(PANEL_COLUMNS))
    panel = panel.sort_values(["date", "tic"], kind="stable").reset_index(drop=True)
    panel.attrs["notes"] = notes
    panel.attrs["files"] = dict(owner)
    panel.attrs["source"] = ", ".join(p.name for p in files)
    if bars and not panel.empty:
        return complete_sessions(panel, bars, session=options["session"])
    panel.attrs["bars"] = DAILY
    return panel


def _check_one_kind(bars: list, daily_files: list[str], path: Path, *, intraday: bool) -> None:
    """Raise DataError (field ``paths``) once daily and intraday files are mixed."""
    if bars and daily_files:
        daily_name = path.name if not intraday else daily_files[0]
        raise DataError(
            f"{daily_name} holds daily bars but {path.name if intraday else 'the files before it'} hold intraday "
            "bars; load daily and intraday files apart",
            file=str(path),
            field="paths",
        )


def _new_tickers_only(
    clean: pd.DataFrame, path: Path, frames: list[pd.DataFrame], owner: dict[str, str], notes: list[str]
) -> pd.DataFrame:
    """``clean`` without the tickers an earlier file (``frames``) already holds, which must have
    exactly the same rows there (a note says they are kept once); records each new ticker's file
    in ``owner``. Raises DataError naming the ticker when the rows differ."""
    keep = np.ones(len(clean), dtype=bool)
    for tic, rows in clean.groupby("tic", sort=True):
        if tic not in owner:
            owner[tic] = path.name
            continue
        earlier = next(f for f in frames if (f["tic"] == tic).any())
        earlier = earlier[earlier["tic"] == tic].reset_index(drop=True)
        if not earlier.equals(rows.reset_index(drop=True)):
            raise DataError(
                f"ticker {tic} is in both {owner[tic]} and {path.name} with different rows; "
                "choose tickers so each comes from one file",
                ticker=tic,
                file=str(path),
            )
        notes.append(f"{tic}: identical rows in {owner[tic]} and {path.name}; kept once")
        keep &= (clean["tic"] != tic).to_numpy()
    return clean[keep]


def _check_requested(wanted: list[str], owner: dict[str, str], frames: list[pd.DataFrame], files: list[Path]) -> None:
    """Raise DataError naming the first requested ticker that no file holds."""
    unknown = [t for t in wanted if t not in owner]
    if unknown:
        held = sorted({t for f in frames for t in f["tic"].unique()})
        raise DataError(
            f"unknown ticker(s) {listed(unknown)}: not in {listed((p.name for p in files), 3)}"
            + (f" (other requested tickers found: {listed(held)})" if held else ""),
            ticker=unknown[0],
            file=str(files[0]) if len(files) == 1 else None,
        )

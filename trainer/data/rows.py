"""Checking one source's normalized rows (:func:`validate_rows`), the panel's column contract
(:data:`PANEL_COLUMNS`), the plausibility bounds of prices and volumes, and a note on one-day
moves of an adjusted close that look like a missed split (:func:`split_like_moves`).

Row numbers in errors (``details["row"]``) are **1-based data rows**: the first row after the
header is row 1. For CSV files the message also gives the file line (``row + 1``; blank lines,
which pandas skips, are not counted).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainer.data.files import TICKER_PATTERN, listed, shown
from trainer.errors import DataError

__all__ = [
    "MAX_PRICE",
    "MAX_SPLIT_NOTES",
    "MAX_VOLUME",
    "PANEL_COLUMNS",
    "PRICE_COLUMNS",
    "SPLIT_RATIOS",
    "SPLIT_TOLERANCE",
    "parse_dates",
    "split_like_moves",
    "validate_rows",
]

PANEL_COLUMNS = ("date", "tic", "open", "high", "low", "close", "volume")
PRICE_COLUMNS = ("open", "high", "low", "close")
_ROW = "_row"  # original 1-based data row, carried until validation is done

MAX_PRICE = 1e7
"""Largest plausible price in USD (Berkshire Hathaway A traded near 7e5); above is an error."""
MAX_VOLUME = 1e13
"""Largest plausible daily volume in shares; above is an error."""
_PRICE_SLACK = 1e-6
"""Relative slack of the close-inside-[low, high] check (rounded adjusted columns)."""


def _where(origin: str, row: int, *, csv: bool) -> str:
    return f"{origin}, row {row} (line {row + 1})" if csv else f"{origin}, row {row}"


def parse_dates(values: pd.Series, *, origin: str, file: str | None, csv_lines: bool, rows: np.ndarray) -> pd.Series:
    """Parse ISO ``YYYY-MM-DD`` dates (a time part after them is dropped) to ``datetime64``.

    Raises:
        DataError: the first unparseable value, naming its row.
    """
    if pd.api.types.is_datetime64_any_dtype(values):
        parsed = values
        if getattr(parsed.dt, "tz", None) is not None:
            parsed = parsed.dt.tz_localize(None)
        parsed = parsed.dt.normalize()
    else:
        text = values.astype("string").str.strip().str.slice(0, 10)
        parsed = pd.to_datetime(text, format="%Y-%m-%d", errors="coerce")
    bad = parsed.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = int(rows[i])
        raise DataError(
            f"{_where(origin, row, csv=csv_lines)}: date {values.iloc[i]!r} is not a YYYY-MM-DD date",
            file=file,
            row=row,
            field="date",
        )
    return parsed.astype("datetime64[ns]")


def validate_rows(
    frame: pd.DataFrame, *, origin: str, file: str | None = None, csv_lines: bool = False, keep_time: bool = False
) -> pd.DataFrame:
    """Check one source's normalized rows and return them sorted by ``(date, tic)``.

    Checks, each raising :class:`DataError` naming file, 1-based row, ticker and date:
    empty ticker; unparseable date; duplicate ``(date, tic)``; a NaN, infinite or non-positive
    open/high/low/close (adjusted and, when present, raw); ``high < low``; NaN or negative volume.

    Args:
        frame: output of :func:`normalize_frame` (maybe filtered to some tickers).
        keep_time: ``date`` already holds intraday bar-end stamps
            (:func:`trainer.data.intraday.prepare_intraday`): kept as they are, not cut to days.

    Returns:
        Columns ``date`` (datetime64[ns], midnight; the bar-end stamp when ``keep_time``),
        ``tic`` (str), ``open, high, low, close, volume`` (float64), sorted by ``date, tic``,
        index reset.
    """
    rows = frame[_ROW].to_numpy()

    def fail(i: int, what: str, column: str | None = None) -> None:
        row = int(rows[i])
        tic = str(frame["tic"].iloc[i])
        day = str(frame["date"].iloc[i])[: 16 if keep_time else 10]
        raise DataError(
            f"{_where(origin, row, csv=csv_lines)} ({shown(tic)[1:-1]} {shown(day)[1:-1]}): {what}",
            file=file,
            row=row,
            ticker=tic,
            date=day,
            field=column,
        )

    tic = frame["tic"]
    tic_text = tic.astype("string").str.strip().str.upper()
    bad = (tic_text.isna() | (tic_text == "")).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = int(rows[i])
        raise DataError(f"{_where(origin, row, csv=csv_lines)}: ticker is empty", file=file, row=row, field="tic")
    bad = ~tic_text.str.fullmatch(TICKER_PATTERN.pattern).fillna(False).to_numpy(dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = int(rows[i])
        raise DataError(
            f"{_where(origin, row, csv=csv_lines)}: ticker {shown(tic.iloc[i])} is not a ticker symbol "
            "(1 to 20 letters, digits, '.', '-', '^' or '=')",
            file=file,
            row=row,
            field="tic",
        )
    frame = frame.assign(tic=tic_text.astype(str).to_numpy())
    if not keep_time:
        frame = frame.assign(date=parse_dates(frame["date"], origin=origin, file=file, csv_lines=csv_lines, rows=rows))

    # raw columns first: a zero raw close makes the derived adjusted prices inf/NaN
    price_cols = [c for c in frame.columns if c.startswith("raw_")] + [c for c in PRICE_COLUMNS]
    for c in price_cols:
        v = frame[c].to_numpy(dtype="float64")
        bad = ~(np.isfinite(v) & (v > 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            name = c.removeprefix("raw_") + (" (raw)" if c.startswith("raw_") else "")
            fail(i, f"{name} is {v[i]:g}; prices must be positive numbers", c.removeprefix("raw_"))
        bad = v > MAX_PRICE
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            name = c.removeprefix("raw_")
            fail(i, f"{name} {v[i]:g} is implausibly large (more than {MAX_PRICE:g} USD a share)", name)
    # raw columns first: their values are the ones the file holds (the adjusted ones are derived)
    for prefix in ("raw_", ""):
        hi, lo, close = f"{prefix}high", f"{prefix}low", f"{prefix}close"
        if hi not in frame.columns or lo not in frame.columns:
            continue
        bad = (frame[hi] < frame[lo]).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            fail(i, f"high {frame[hi].iloc[i]:g} is below low {frame[lo].iloc[i]:g}", "high")
        if close in frame.columns:
            c, h, lw = (frame[k].to_numpy(dtype="float64") for k in (close, hi, lo))
            bad = (c > h * (1 + _PRICE_SLACK)) | (c < lw * (1 - _PRICE_SLACK))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                fail(i, f"close {c[i]:g} is outside the day's range [low {lw[i]:g}, high {h[i]:g}]", "close")
    vol = frame["volume"].to_numpy(dtype="float64")
    bad = ~(np.isfinite(vol) & (vol >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fail(i, f"volume is {vol[i]:g}; it must be a number >= 0", "volume")
    bad = vol > MAX_VOLUME
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fail(i, f"volume {vol[i]:g} is implausibly large (more than {MAX_VOLUME:g} shares a day)", "volume")

    dup = frame.duplicated(["date", "tic"], keep=False).to_numpy()
    if dup.any():
        first = int(np.flatnonzero(dup)[0])
        same = np.flatnonzero(
            dup
            & (frame["date"] == frame["date"].iloc[first]).to_numpy()
            & (frame["tic"] == frame["tic"].iloc[first]).to_numpy()
        )
        others = listed(int(rows[j]) for j in same[1:])
        count = int(dup.sum())
        pairs = f"; {count:,} rows repeat a (date, ticker) pair in all" if count > len(same) else ""
        fail(first, f"duplicate (date, ticker): the same pair is also in row(s) {others}{pairs}", "date")

    out = frame[list(PANEL_COLUMNS)].sort_values(["date", "tic"], kind="stable").reset_index(drop=True)
    return out


SPLIT_RATIOS = (2, 3, 4, 5, 7, 8, 10, 15, 20)
"""Split ratios whose one-day close move (x1/k or xk, within :data:`SPLIT_TOLERANCE`) in an
adjusted column gets a note: the adjustment may have missed a split."""
SPLIT_TOLERANCE = 0.02
MAX_SPLIT_NOTES = 10
"""Split-like moves named one by one; the rest are counted in one more note."""


def split_like_moves(panel: pd.DataFrame, *, origin: str) -> list[str]:
    """Notes on one-day moves of an adjusted close that look like a split the adjustment missed.

    A close that moves by a factor within :data:`SPLIT_TOLERANCE` of ``1/k`` (a k-for-1
    split) or ``k`` (a 1-for-k reverse split), ``k`` in :data:`SPLIT_RATIOS`, from one row of
    a ticker to its next. Real one-day moves of -50 % or +100 % are rare but possible, so this
    is a note naming ticker and date, not an error.

    Args:
        panel: validated rows (``date``, ``tic``, ``close``), sorted by date within a ticker.
        origin: the file's name for the note.
    """
    notes = []
    for tic, rows in panel.groupby("tic", sort=True):
        close = rows["close"].to_numpy(dtype="float64")
        if close.size < 2:
            continue
        ratio = close[1:] / close[:-1]
        for k in SPLIT_RATIOS:
            for target, kind in ((1.0 / k, f"{k}-for-1 split"), (float(k), f"1-for-{k} reverse split")):
                for i in np.flatnonzero(np.abs(ratio / target - 1.0) < SPLIT_TOLERANCE):
                    day = rows["date"].iloc[i + 1]
                    notes.append(
                        f"{origin}: {tic} {pd.Timestamp(day).date()}: the adjusted close moved from "
                        f"{close[i]:g} to {close[i + 1]:g} (x{ratio[i]:.3f}) in one day, like an unadjusted {kind}; "
                        "check the file's split adjustment"
                    )
    if len(notes) > MAX_SPLIT_NOTES:  # one note per move would grow with the file
        notes = notes[:MAX_SPLIT_NOTES] + [
            f"{origin}: {len(notes) - MAX_SPLIT_NOTES:,} more split-like one-day moves of the adjusted close"
        ]
    return notes

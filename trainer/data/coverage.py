"""Missing-data rules: which tickers a range can trade, which days are forward-filled.

Missing data, always reported in ``MarketData.notes``:

* a ticker whose first row is after the range start (late listing):
  ``missing_policy="drop"`` drops it; ``"start_later"`` keeps it and starts the range at the
  first day every kept ticker has;
* a ticker whose last row is before the range end (delisted, or a file that stops early) is
  dropped under both policies: starting later cannot repair it;
* gaps inside a ticker's history of at most ``MAX_FILL_DAYS`` consecutive trading days (e.g.
  REGN 2015-06-09) are forward-filled under both policies: the bar becomes flat at the previous
  adjusted close with volume 0, and the note lists the dates. A longer gap drops the ticker.
* zero-volume days are kept as they are and counted in a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from trainer.data.files import listed
from trainer.errors import DataError
from trainer.util.dates import parse_day

MISSING_POLICIES = ("drop", "start_later")
MAX_FILL_DAYS = 5
"""Longest run of missing trading days inside a ticker's history that is forward-filled."""


def _check_date(value, field_name: str) -> str | None:
    return None if value is None else parse_day(value, field_name)


def _day(value) -> pd.Timestamp | None:
    return None if value is None else pd.Timestamp(str(value)[:10])


def _runs(missing: np.ndarray) -> list[tuple[int, int]]:
    """``[(first, last)]`` index pairs of consecutive True values."""
    if not missing.any():
        return []
    edges = np.diff(np.concatenate(([0], missing.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), ends.tolist()))


def _list_days(days, limit: int = 8, *, width: int = 10) -> str:
    """``days`` as ``"2020-03-16, 2020-03-17 and 3 more"`` (the first ``width`` characters of
    each: 10 for days, 16 for ``YYYY-MM-DD HH:MM`` bars)."""
    text = [str(d)[:width] for d in days]
    return ", ".join(text[:limit]) + (f" and {len(text) - limit} more" if len(text) > limit else "")


def _range_text(lo: pd.Timestamp | None, hi: pd.Timestamp | None, calendar: pd.DatetimeIndex) -> str:
    first = lo.date() if lo is not None else calendar[0].date()
    last = hi.date() if hi is not None else calendar[-1].date()
    return f"{first} to {last}"


def fit_tickers(
    chosen: Sequence[str],
    present: np.ndarray,
    calendar: pd.DatetimeIndex,
    s_idx: int,
    *,
    missing_policy: str,
    named: bool,
    lo: pd.Timestamp | None = None,
    hi: pd.Timestamp | None = None,
    spans: dict | None = None,
) -> tuple[np.ndarray, list[str], pd.Timestamp]:
    """Decide which tickers can be traded over a range: the missing-data rules in one place.

    Every decision is judged against the range (``calendar[s_idx]`` to ``calendar[-1]``), not
    against the first or last row of the file: a ticker whose rows start a day after another's
    is not "late" for a range that starts months later.

    Args:
        chosen: (N,) tickers in column order.
        present: (T, N) bool, ``True`` where a ticker has a row on ``calendar[t]``.
        calendar: (T,) trading days (the union of the tickers' days, up to the range end; days
            before ``s_idx`` are warm-up history).
        s_idx: index of the range's first trading day in ``calendar``.
        missing_policy: ``"drop"`` or ``"start_later"`` (module doc).
        named: the tickers were named by the user: a ticker that does not cover the range is
            an error, never a silent drop.
        lo, hi: the requested range, for messages (``None``: the calendar's ends).
        spans: ``{ticker: (first day, last day)}`` of all its rows, for messages (default: its
            days in ``calendar``).

    Returns:
        ``(keep, notes, range_start)``: (N,) bool mask of kept tickers, one note per decision
        and the range's first day (later than ``calendar[s_idx]`` under ``"start_later"``).

    Raises:
        DataError: ``named`` and a ticker starts after the range start (under ``"drop"``), ends
            before its end, or misses more than ``MAX_FILL_DAYS`` consecutive days in it; the
            message names the ticker, its first and last day and the range.
    """
    keep = np.ones(len(chosen), dtype=bool)
    notes: list[str] = []
    first = present.argmax(axis=0)
    last = len(calendar) - 1 - present[::-1].argmax(axis=0)
    span = _range_text(lo, hi, calendar)

    def refuse(n: int, why: str) -> None:
        tic = chosen[n]
        a, b = (spans or {}).get(tic, (calendar[first[n]], calendar[last[n]]))
        if named:
            raise DataError(
                f"ticker {tic} does not cover the range {span}: {why}; its rows cover "
                f"{pd.Timestamp(a).date()} to {pd.Timestamp(b).date()}. Leave {tic} out of the tickers "
                "or choose dates it covers",
                ticker=tic,
                field="tickers",
            )
        keep[n] = False
        notes.append(f"{tic}: dropped, {why} (rows {pd.Timestamp(a).date()} to {pd.Timestamp(b).date()})")

    for n in range(len(chosen)):
        if last[n] < len(calendar) - 1:
            refuse(
                n,
                f"its last row {calendar[last[n]].date()} is before the range end {calendar[-1].date()} "
                f"(missing_policy={missing_policy!r})",
            )
            continue
        lead = max(first[n], s_idx)  # gaps before the range are warm-up history only
        gaps = _runs(~present[lead : last[n] + 1, n])
        long = [(a, b) for a, b in gaps if b - a + 1 > MAX_FILL_DAYS]
        if long:
            a, b = long[0]
            refuse(
                n,
                f"{b - a + 1} consecutive trading days missing from {calendar[lead + a].date()} to "
                f"{calendar[lead + b].date()} (more than {MAX_FILL_DAYS} are not filled)",
            )
    late = [n for n in range(len(chosen)) if keep[n] and first[n] > s_idx]
    range_start = calendar[s_idx]
    if missing_policy == "drop":
        for n in late:
            refuse(
                n,
                f"its first row {calendar[first[n]].date()} is after the range start {range_start.date()} "
                "(missing_policy='drop')",
            )
    elif late:
        n_last = max(late, key=lambda n: first[n])
        range_start = calendar[first[n_last]]
        notes.append(
            f"range starts {range_start.date()} instead of {calendar[s_idx].date()}, the first day all kept tickers "
            f"have (missing_policy='start_later'; latest: {chosen[n_last]}; late: "
            + listed(f"{chosen[n]} {calendar[first[n]].date()}" for n in late)
            + ")"
        )
    return keep, notes, range_start


@dataclass(frozen=True)
class TickerPlan:
    """Which tickers a range can trade, decided from the ``(date, ticker)`` pairs alone.

    Attributes:
        tickers: kept tickers in column order (the ones actually traded).
        notes: one line per decision (dropped tickers and why, a later range start).
        range_start: first day of the range after the missing-data policy.
        range_end: last trading day of the range.
        gaps: ``{ticker: [YYYY-MM-DD, ...]}`` days inside the range that will be forward-filled.
        warmup_days: trading days before ``range_start`` that indicators use as warm-up.
    """

    tickers: tuple[str, ...]
    notes: tuple[str, ...]
    range_start: pd.Timestamp
    range_end: pd.Timestamp
    gaps: dict
    warmup_days: int

    def all_notes(self) -> list[str]:
        """Every decision, as :func:`build_market_data` words it: drops, fills, warm-up."""
        notes = list(self.notes) + [_fill_note(tic, days) for tic, days in self.gaps.items()]
        if self.warmup_days:
            notes.append(_warmup_note(self.warmup_days, self.range_start))
        return notes


def _warmup_note(days: int, first) -> str:
    return f"indicators and turbulence use {days} trading day(s) before {pd.Timestamp(first).date()} as warm-up"


def _fill_note(tic: str, days) -> str:
    return f"{tic}: forward-filled {len(days)} missing day(s) with the previous adjusted close (volume 0): {_list_days(days)}"


def plan_tickers(
    pairs: pd.DataFrame,
    *,
    tickers: Sequence[str] | None = None,
    start=None,
    end=None,
    missing_policy: str = "drop",
    files: dict | None = None,
) -> TickerPlan:
    """Apply the missing-data rules (module doc) to the days each ticker has rows.

    The same decision :func:`build_market_data` makes, without prices: the web checks a task
    with it when the task is created (``trainer.data.loading.ticker_days`` reads the pairs).

    Args:
        pairs: columns ``date`` (datetime64) and ``tic`` (str), one row per day a ticker has.
        tickers: tickers named by the user, in column order: any that cannot cover the range is
            an error, never a silent drop. ``None``: every ticker in ``pairs`` (sorted); those
            that cannot cover the range are dropped with a note.
        start, end: inclusive ``YYYY-MM-DD`` range; ``None`` = the data's first/last day.
        missing_policy: ``"drop"`` or ``"start_later"``.
        files: ``{ticker: file name}`` for error details.

    Returns:
        :class:`TickerPlan`.

    Raises:
        DataError: an unknown named ticker; a named ticker with no rows in the range or that
            does not cover it (its first/last day and the range are named); no ticker left.
    """
    files = files or {}
    lo, hi = _day(_check_date(start, "start")), _day(_check_date(end, "end"))
    available = sorted(pairs["tic"].unique().tolist())
    if tickers is None:
        chosen = available
    else:
        chosen = list(dict.fromkeys(str(t).strip().upper() for t in tickers))
        unknown = [t for t in chosen if t not in set(available)]
        if unknown:
            raise DataError(
                f"unknown ticker(s) {listed(unknown)}; the data holds {listed(available, 12)}",
                ticker=unknown[0],
                field="tickers",
            )
    if not chosen:
        raise DataError("the data holds no ticker")
    notes: list[str] = []
    df = pairs[pairs["tic"].isin(chosen)]
    if hi is not None:  # the whole end day: an intraday day's bars are stamped after its midnight
        df = df[df["date"] < hi + pd.Timedelta(days=1)]
    in_range = df if lo is None else df[df["date"] >= lo]
    counts = in_range.groupby("tic").size()
    range_text = (
        f"between {lo.date() if lo is not None else 'the start'} and {hi.date() if hi is not None else 'the end'}"
    )
    empty = [tic for tic in chosen if counts.get(tic, 0) == 0]
    for tic in empty:
        rows = pairs[pairs["tic"] == tic]["date"]
        message = f"ticker {tic} has no rows {range_text}; its data covers {rows.min().date()} to {rows.max().date()}"
        if tickers is not None:  # asked for by name: an error, not a silent drop
            raise DataError(message, ticker=tic, file=files.get(tic), field="tickers")
        notes.append(f"{tic}: dropped, {message.removeprefix(f'ticker {tic} ')}")
    if empty:
        chosen = [t for t in chosen if t not in set(empty)]
        if not chosen:
            raise DataError(f"no ticker has rows {range_text}")
        df = df[df["tic"].isin(chosen)]

    present_frame = (
        df.assign(_one=True)
        .pivot_table(index="date", columns="tic", values="_one", aggfunc="any")
        .reindex(columns=chosen)
    )
    present = present_frame.notna().to_numpy()
    calendar = pd.DatetimeIndex(present_frame.index)
    s_idx = 0 if lo is None else int(np.searchsorted(calendar.to_numpy(), lo.to_datetime64()))
    grouped = pairs[pairs["tic"].isin(chosen)].groupby("tic")["date"]
    spans = {tic: (a, b) for tic, a, b in zip(grouped.min().index, grouped.min(), grouped.max())}
    keep, fit_notes, range_start = fit_tickers(
        chosen,
        present,
        calendar,
        s_idx,
        missing_policy=missing_policy,
        named=tickers is not None,
        lo=lo,
        hi=hi,
        spans=spans,
    )
    notes.extend(fit_notes)
    kept = [t for t, k in zip(chosen, keep) if k]
    if not kept:
        raise DataError(
            f"no ticker is left {range_text} after missing_policy={missing_policy!r}: " + "; ".join(notes[-3:])
        )
    # the calendar the kept tickers trade on, and the days of the range each of them misses
    rows = present[:, keep].any(axis=1)
    calendar, present = calendar[rows], present[rows][:, keep]
    in_window = np.asarray(calendar >= range_start)
    gaps = {}
    for n, tic in enumerate(kept):
        missing = ~present[:, n] & in_window
        if missing.any():
            gaps[tic] = [str(d.date()) for d in calendar[missing]]
    warmup = int(np.count_nonzero(~in_window))
    return TickerPlan(tuple(kept), tuple(notes), range_start, calendar[-1], gaps, warmup)


def coverage_notes(pairs: pd.DataFrame) -> list[str]:
    """Notes on tickers that do not span a file's whole calendar, for the upload page.

    The calendar is the union of every ticker's days. A ticker that starts after its first
    day, ends before its last day or misses days inside its own history gets a note naming
    it and the dates; whether that matters is decided later against a task's range
    (:func:`plan_tickers`).

    Args:
        pairs: columns ``date`` (datetime64) and ``tic`` (str).

    Returns:
        One note per such ticker and fact, tickers sorted.
    """
    if pairs.empty:
        return []
    present = pairs.assign(_one=True).pivot_table(index="date", columns="tic", values="_one", aggfunc="any").notna()
    calendar = pd.DatetimeIndex(present.index)
    notes = []
    for tic in sorted(present.columns):
        has = present[tic].to_numpy()
        first, last = int(has.argmax()), len(has) - 1 - int(has[::-1].argmax())
        if first > 0:
            notes.append(f"{tic}: starts {calendar[first].date()}, after the file's first day {calendar[0].date()}")
        if last < len(has) - 1:
            notes.append(f"{tic}: ends {calendar[last].date()}, before the file's last day {calendar[-1].date()}")
        missing = ~has[first : last + 1]
        if missing.any():
            days = calendar[first : last + 1][missing]
            notes.append(f"{tic}: {len(days)} day(s) missing inside its history: {_list_days(days)}")
    return notes

"""Point-in-time universe membership: which tickers were in the index on each day.

A universe drawn at the end of its data (the shared ``dow30_*`` file holds the 2022 members)
trades, in 2010, stocks that only joined later and misses those that left (survivorship bias,
:mod:`trainer.data.survivorship`). A membership file says when each ticker was a member, and
every env, evaluation, backtest and 1/N benchmark then trades, on each day, only that day's
members (:func:`membership_mask` gives the (T, N) mask stored as ``MarketData.members``).

**File format**: CSV (``.csv`` or ``.csv.gz``, UTF-8) with the header ``ticker,from,to``
(any case and order; other columns are refused)::

    ticker,from,to
    AAPL,2015-03-19,
    XOM,1928-10-01,2020-08-28
    CRM,2020-08-31,
    CVX,1930-07-18,1999-10-29
    CVX,2008-02-19,

* ``from`` and ``to`` are ``YYYY-MM-DD`` days, both inclusive: the ticker is a member on every
  day ``d`` with ``from <= d <= to``; an empty ``to`` means it still is.
* A ticker may have several rows (it left and came back); its rows may not overlap.
* A ticker of the data with no row is never a member (never traded).
* A ticker of the file must be in the data panel when any of its rows reaches into the panel's
  range (its prices are needed to trade it; a member without prices is the survivorship the
  file is meant to remove), unless the task chose its tickers (``data.tickers``) and left it
  out. Rows wholly outside the range are ignored.

Day ``t`` of the mask is ``members[t, i] = from_i <= day(t) <= to_i`` (for intraday bars, the
bar's day). The envs trade at day ``t``'s close: a position held from ``t`` to ``t + 1`` needs
``members[t]``, so a ticker that leaves is sold at the close of its first day out.

Errors are :class:`~trainer.errors.DataError` with ``field="data.membership"`` (or the given
field), naming the row (the data row, 1 = the first after the header), the ticker and, for
dates, the column; the file's size is capped by :class:`~trainer.limits.InputLimits`.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer.data.files import check_file_size, check_ticker, listed, shown
from trainer.errors import DataError
from trainer.limits import DEFAULT_LIMITS, InputLimits

__all__ = [
    "COLUMNS",
    "Membership",
    "MembershipRow",
    "membership_mask",
    "parse_membership",
    "read_membership",
    "rows_in_range",
]

#: The columns of a membership file.
COLUMNS = ("ticker", "from", "to")
FIELD = "data.membership"


@dataclass(frozen=True)
class MembershipRow:
    """One period of membership: ``ticker`` is a member from ``start`` to ``end`` (inclusive;
    ``end`` ``None`` = still a member). ``row`` is its data row in the file (1 = first)."""

    row: int
    ticker: str
    start: dt.date
    end: dt.date | None


@dataclass(frozen=True)
class Membership:
    """A validated membership file: its rows (file order) and the name it is known by."""

    rows: tuple[MembershipRow, ...]
    name: str = ""

    @property
    def tickers(self) -> tuple[str, ...]:
        """The file's tickers, each once, in order of first appearance."""
        return tuple(dict.fromkeys(r.ticker for r in self.rows))


def _day(text: str, *, row: int, ticker: str, column: str, field: str) -> dt.date:
    try:
        if len(text) != 10:
            raise ValueError
        return dt.date.fromisoformat(text)
    except ValueError:
        raise DataError(
            f"{field} row {row} ({ticker}): {column} {shown(text)} is not a YYYY-MM-DD date",
            field=field,
            row=row,
            ticker=ticker,
            column=column,
        ) from None


def _header(first: list[str], field: str) -> dict[str, int]:
    names = [c.strip().lower().lstrip("\ufeff") for c in first]
    unknown = [c for c in names if c not in COLUMNS]
    missing = [c for c in COLUMNS if c not in names]
    if unknown or missing or len(set(names)) != len(names):
        raise DataError(
            f"{field}: the header must be ticker,from,to (got {','.join(map(shown, first)) or 'nothing'})",
            field=field,
            row=0,
        )
    return {c: names.index(c) for c in COLUMNS}


def parse_membership(text: str, *, name: str = "", field: str = FIELD) -> Membership:
    """Parse and validate the text of a membership file (module docstring's format).

    Args:
        text: the CSV text.
        name: the file's name, kept in :attr:`Membership.name` for notes.
        field: the field errors name (``data.membership``; the web names its upload field).

    Returns:
        The rows, each validated; a ticker's rows do not overlap.

    Raises:
        DataError: a wrong header, no data row, a row with too few or many cells, a bad ticker,
            a bad date, ``from`` after ``to`` or two overlapping rows of a ticker; ``details``
            hold ``field``, ``row`` and ``ticker`` (and ``column`` for a date).
    """
    reader = csv.reader(io.StringIO(text))
    try:
        first = next(reader, [])
        cols = _header(first, field)
        rows: list[MembershipRow] = []
        for number, cells in enumerate(reader, start=1):
            if not cells or not "".join(cells).strip():
                continue
            if len(cells) != len(COLUMNS):
                raise DataError(
                    f"{field} row {number}: expected 3 cells (ticker,from,to), got {len(cells)}",
                    field=field,
                    row=number,
                )
            try:
                ticker = check_ticker(cells[cols["ticker"]], field=field, row=number)
            except DataError as exc:
                raise DataError(f"{field} row {number}: {exc.message.partition(': ')[2]}", **exc.details) from None
            start = _day(cells[cols["from"]].strip(), row=number, ticker=ticker, column="from", field=field)
            end_text = cells[cols["to"]].strip()
            end = _day(end_text, row=number, ticker=ticker, column="to", field=field) if end_text else None
            if end is not None and start > end:
                raise DataError(
                    f"{field} row {number} ({ticker}): from {start} is after to {end}",
                    field=field,
                    row=number,
                    ticker=ticker,
                )
            rows.append(MembershipRow(number, ticker, start, end))
    except csv.Error as exc:
        raise DataError(f"{field}: not a CSV file ({exc})", field=field) from None
    if not rows:
        raise DataError(f"{field}: the file has no rows after the header ticker,from,to", field=field)
    _check_overlaps(rows, field)
    return Membership(rows=tuple(rows), name=name)


def _check_overlaps(rows: Sequence[MembershipRow], field: str) -> None:
    """Refuse two rows of one ticker that share a day, naming the later row."""
    far = dt.date.max
    by_ticker: dict[str, list[MembershipRow]] = {}
    for r in rows:
        by_ticker.setdefault(r.ticker, []).append(r)
    for ticker, periods in by_ticker.items():
        periods = sorted(periods, key=lambda r: r.start)
        for before, after in zip(periods, periods[1:], strict=False):
            if after.start <= (before.end or far):
                later, earlier = max(before, after, key=lambda r: r.row), min(before, after, key=lambda r: r.row)
                raise DataError(
                    f"{field} row {later.row} ({ticker}): overlaps row {earlier.row} "
                    f"({before.start} to {before.end or 'now'} and {after.start} to {after.end or 'now'})",
                    field=field,
                    row=later.row,
                    ticker=ticker,
                )


def read_membership(
    path: str | Path, *, limits: InputLimits = DEFAULT_LIMITS, field: str = FIELD, name: str | None = None
) -> Membership:
    """Read and validate a membership file (``.csv`` or ``.csv.gz``).

    Args:
        path: the file.
        limits: its decompressed bytes and rows are capped by ``file_bytes`` and ``file_rows``
            (checked while streaming, before it is parsed).
        field: the field errors name.
        name: the name messages show (default: the file's name).

    Raises:
        DataError: a missing or unreadable file (``file`` in ``details``), a file past the
            limits, text that is not UTF-8, or any error of :func:`parse_membership`.
    """
    p = Path(path).expanduser()
    shown_name = name or p.name
    if not p.is_file():
        raise DataError(f"{field}: membership file {p} does not exist", field=field, file=str(p))
    try:
        check_file_size(p, limits)
    except DataError as exc:
        raise DataError(f"{field}: {exc.message}", **{**exc.details, "field": field}) from None
    try:
        opener = gzip.open if p.name.lower().endswith(".gz") else open
        with opener(p, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"{field}: {shown_name} is not a UTF-8 CSV file ({exc})", field=field, file=str(p)) from None
    return parse_membership(text, name=shown_name, field=field)


def rows_in_range(
    membership: Membership,
    tickers: Sequence[str],
    first: object,
    last: object,
    *,
    chosen: Sequence[str] | None = None,
    field: str = FIELD,
) -> tuple[list[tuple[MembershipRow, int]], list[str]]:
    """The rows that reach into ``first..last``, each with its ticker's column in ``tickers``.

    Args:
        membership: a parsed file.
        tickers: (N,) the panel's tickers, in column order.
        first, last: the range's first and last day (``YYYY-MM-DD``, dates or ``datetime64``).
        chosen: the task's own ticker list (``data.tickers``), or ``None``; a file ticker
            outside it is ignored instead of refused.
        field: the field errors name.

    Returns:
        ``(rows, ignored)``: ``(row, column)`` pairs, and the tickers of ignored rows.

    Raises:
        DataError: a file ticker in range that ``tickers`` lacks (naming the row and ticker).
    """
    lo_day, hi_day = np.datetime64(str(first)[:10], "D"), np.datetime64(str(last)[:10], "D")
    column = {str(t).upper(): i for i, t in enumerate(tickers)}
    wanted = None if chosen is None else {str(t).strip().upper() for t in chosen}
    out: list[tuple[MembershipRow, int]] = []
    ignored: list[str] = []
    for r in membership.rows:
        if (r.end is not None and np.datetime64(r.end, "D") < lo_day) or np.datetime64(r.start, "D") > hi_day:
            continue  # wholly outside the range
        i = column.get(r.ticker)
        if i is None:
            if wanted is not None and r.ticker not in wanted:
                ignored.append(r.ticker)
                continue
            raise DataError(
                f"{field} row {r.row} ({r.ticker}): a member from {r.start} to {r.end or 'now'}, but the data has no "
                f"prices of {r.ticker} in {lo_day} to {hi_day} (it holds {listed(tickers)}); add its prices, or "
                "remove the row (a member without prices is the survivorship bias the file is meant to remove)",
                field=field,
                row=r.row,
                ticker=r.ticker,
            )
        out.append((r, i))
    return out, ignored


def membership_mask(
    membership: Membership,
    dates: np.ndarray,
    tickers: Sequence[str],
    *,
    chosen: Sequence[str] | None = None,
    field: str = FIELD,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """The (T, N) tradable mask of a panel, and notes about what the file did.

    Args:
        membership: a parsed file.
        dates: (T,) the panel's dates (``datetime64[D]`` days or intraday bar stamps).
        tickers: (N,) the panel's tickers, in column order.
        chosen, field: as :func:`rows_in_range`.

    Returns:
        ``(members, notes)``: ``members`` (T, N) bool, True where ticker ``i`` is a member on
        day ``t``; ``notes`` one line each (the file in use, tickers never members in range).

    Raises:
        DataError: as :func:`rows_in_range`; or no ticker is a member on any day of the panel
            (every env would hold only cash, and score as if that were a strategy).
    """
    days = np.asarray(dates).astype("datetime64[D]")
    rows, ignored = rows_in_range(membership, tickers, days[0], days[-1], chosen=chosen, field=field)
    mask = np.zeros((len(days), len(tickers)), dtype=bool)
    for r, i in rows:
        hi = np.datetime64(r.end, "D") if r.end is not None else days[-1]
        mask[:, i] |= (days >= np.datetime64(r.start, "D")) & (days <= hi)
    if not mask.any():
        raise DataError(
            f"{field}: none of the {len(tickers)} tickers ({listed(tickers)}) is a member on any day from "
            f"{days[0]} to {days[-1]}, so an agent could only hold cash; choose tickers the file lists",
            field=field,
        )
    per_day = mask.sum(axis=1)
    notes = [
        f"point-in-time universe from {membership.name or 'the membership file'}: "
        f"{int(mask.any(axis=0).sum())} of {len(tickers)} tickers are members on some day, "
        f"{per_day.min()} to {per_day.max()} on each day"
    ]
    never = [t for i, t in enumerate(tickers) if not mask[:, i].any()]
    if never:
        notes.append(f"never a member in the range, so never traded: {listed(never)}")
    if ignored:
        notes.append(f"membership rows of tickers the task left out ignored: {listed(dict.fromkeys(ignored))}")
    return mask, tuple(notes)

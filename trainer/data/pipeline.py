"""From a validated panel to :class:`MarketData`: ticker/range choice, calendar, gaps, features.

``build_market_data`` aligns the chosen tickers on one trading calendar (the union of their
dates), applies the missing-data policy, computes indicators and turbulence and cuts the
chosen range. ``load_market_data`` does the same from a :class:`DataSpec`, with a Parquet cache.

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

Indicators and turbulence of the range's first days use the history before ``start`` (when
the files have it) as warm-up, so a range cut later gives the same rows as slicing a longer
one; nothing after a row's day is used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import stockstats

from trainer.data.indicators import DEFAULT_INDICATORS, compute_indicators, turbulence_index, validate_indicators
from trainer.data.loading import check_ticker, expand_paths, load_panel
from trainer.data.market import MarketData
from trainer.dates import parse_day
from trainer.errors import ConfigError, DataError
from trainer.files import atomic_write_bytes

MISSING_POLICIES = ("drop", "start_later")
MAX_FILL_DAYS = 5
"""Longest run of missing trading days inside a ticker's history that is forward-filled."""

CACHE_FORMAT = 2
"""Bump when the cache layout or any computation changes, so old cache files are ignored."""

_OHLCV = ("open", "high", "low", "close", "volume")


def _check_date(value, field_name: str) -> str | None:
    return None if value is None else parse_day(value, field_name)


@dataclass
class DataSpec:
    """Which market data a task uses; JSON-able through :meth:`to_dict`/:meth:`from_dict`.

    Attributes:
        paths: data files or folders (see :func:`trainer.data.load_panel`); relative paths
            resolve against the ``data_dir`` given to :func:`load_market_data`.
        tickers: tickers to keep, in this column order; ``None`` keeps every ticker (sorted).
        start: first day of the range, ``YYYY-MM-DD`` inclusive; ``None`` = first day of the data.
        end: last day, ``YYYY-MM-DD`` inclusive; ``None`` = last day of the data.
        indicators: stockstats indicator names (default FinRL's eight).
        turbulence: compute FinRL's turbulence index (else it is all 0).
        missing_policy: ``"drop"`` drops late-listing tickers, ``"start_later"`` starts the
            range when every chosen ticker has data (see the module doc).

    Raises:
        ConfigError: on construction, a field of the wrong type or value, naming the field.
    """

    paths: list[str]
    tickers: list[str] | None = None
    start: str | None = None
    end: str | None = None
    indicators: tuple[str, ...] = DEFAULT_INDICATORS
    turbulence: bool = True
    missing_policy: str = "drop"

    def __post_init__(self) -> None:
        if isinstance(self.paths, str | Path):
            self.paths = [str(self.paths)]
        if not isinstance(self.paths, Sequence) or not self.paths:
            raise ConfigError("paths must be a non-empty list of data files", field="paths")
        for i, p in enumerate(self.paths):
            if not isinstance(p, str | Path) or not str(p).strip():
                raise ConfigError(f"paths[{i}] must be a file path", field=f"paths[{i}]")
        self.paths = [str(p) for p in self.paths]
        if self.tickers is not None:
            if isinstance(self.tickers, str) or not isinstance(self.tickers, Sequence) or not self.tickers:
                raise ConfigError("tickers must be a non-empty list of ticker symbols or null", field="tickers")
            for i, t in enumerate(self.tickers):
                if not isinstance(t, str) or not t.strip():
                    raise ConfigError(f"tickers[{i}] must be a ticker symbol", field=f"tickers[{i}]")
                try:
                    check_ticker(t, field=f"tickers[{i}]")
                except DataError as exc:
                    raise ConfigError(exc.message, field=f"tickers[{i}]") from None
            self.tickers = list(dict.fromkeys(t.strip().upper() for t in self.tickers))
        self.start = _check_date(self.start, "start")
        self.end = _check_date(self.end, "end")
        if self.start and self.end and self.start > self.end:
            raise ConfigError(f"end {self.end} is before start {self.start}", field="end")
        self.indicators = validate_indicators(self.indicators)
        if not isinstance(self.turbulence, bool):
            raise ConfigError("turbulence must be true or false", field="turbulence")
        if self.missing_policy not in MISSING_POLICIES:
            raise ConfigError(
                f"missing_policy must be one of {', '.join(MISSING_POLICIES)}, not {self.missing_policy!r}",
                field="missing_policy",
            )

    def to_dict(self) -> dict:
        """Plain JSON-able dict (lists, strings, bools, null)."""
        d = asdict(self)
        d["indicators"] = list(self.indicators)
        return d

    @classmethod
    def from_dict(cls, data: dict, *, prefix: str = "") -> DataSpec:
        """Build and validate a spec from a dict such as :meth:`to_dict` returns.

        Args:
            data: the fields; ``paths`` is required, the rest have defaults.
            prefix: dotted path of this spec inside a bigger config (e.g. ``"data"``), put
                in front of the ``field`` of raised errors.

        Raises:
            ConfigError: not a dict, an unknown key, a missing ``paths`` or an invalid value;
                ``details["field"]`` is the dotted field path.
        """
        dot = f"{prefix}." if prefix else ""
        if not isinstance(data, dict):
            raise ConfigError(f"{prefix or 'data'} must be an object", field=prefix or "data")
        known = {"paths", "tickers", "start", "end", "indicators", "turbulence", "missing_policy"}
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"{dot}{key}: unknown field (expected one of {', '.join(sorted(known))})", field=f"{dot}{key}"
                )
        if "paths" not in data:
            raise ConfigError(f"{dot}paths is required", field=f"{dot}paths")
        try:
            return cls(**data)
        except ConfigError as exc:
            name = exc.details.get("field", "")
            raise ConfigError(
                f"{dot}{exc.message}" if prefix else exc.message, **{**exc.details, "field": f"{dot}{name}"}
            ) from None


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


def _list_days(days, limit: int = 8) -> str:
    text = [str(d)[:10] for d in days]
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
            + ", ".join(f"{chosen[n]} {calendar[first[n]].date()}" for n in late)
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
                f"unknown ticker(s) {', '.join(unknown)}; the data holds {', '.join(available)}",
                ticker=unknown[0],
                field="tickers",
            )
    if not chosen:
        raise DataError("the data holds no ticker")
    notes: list[str] = []
    df = pairs[pairs["tic"].isin(chosen)]
    if hi is not None:
        df = df[df["date"] <= hi]
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


def _check_finite_features(feats: np.ndarray, turb: np.ndarray, dates, tickers, names) -> None:
    """Refuse data whose features hold inf/NaN, naming the first bad value.

    Args:
        feats: (T, N, F) float64 indicators of the range; turb: (T,) turbulence.

    Raises:
        DataError: the first non-finite value (earliest day, then ticker, then indicator) as
            ``ticker``/``date``/``field`` (``features.<indicator>`` or ``turbulence``).
    """
    as32 = feats.astype("float32")  # what the env sees: a finite float64 beyond 3.4e38 overflows
    bad = ~np.isfinite(as32)
    if bad.any():
        t, n, f = (int(i[0]) for i in np.nonzero(bad))
        raise DataError(
            f"indicator {names[f]} of {tickers[n]} on {dates[t].date()} is {feats[t, n, f]} (not a finite float32); "
            "the prices around that day are implausible",
            ticker=tickers[n],
            date=str(dates[t].date()),
            field=f"features.{names[f]}",
        )
    bad_t = ~np.isfinite(turb)
    if bad_t.any():
        t = int(np.flatnonzero(bad_t)[0])
        raise DataError(
            f"turbulence on {dates[t].date()} is {turb[t]}; the prices around that day are implausible",
            date=str(dates[t].date()),
            field="turbulence",
        )


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


def build_market_data(
    panel: pd.DataFrame,
    *,
    tickers: Sequence[str] | None = None,
    start=None,
    end=None,
    indicators: Sequence[str] = DEFAULT_INDICATORS,
    turbulence: bool = True,
    missing_policy: str = "drop",
    source: str | None = None,
) -> MarketData:
    """Align a validated panel on one calendar and compute features for a date range.

    Args:
        panel: output of :func:`trainer.data.load_panel` or
            :func:`trainer.data.download_yfinance` (its ``attrs`` notes are carried over).
        tickers: tickers to keep, in this order; ``None`` keeps all, sorted.
        start, end: inclusive ``YYYY-MM-DD`` range; ``None`` = the data's first/last day.
        indicators: stockstats names, computed per ticker on adjusted OHLCV.
        turbulence: compute FinRL's turbulence index over the kept tickers (else zeros).
        missing_policy: ``"drop"`` or ``"start_later"`` (see the module doc).
        source: description stored in ``MarketData.source`` (default ``attrs["source"]``).

    Returns:
        MarketData with ``close`` (T, N) float64 adjusted close in USD, ``features`` (T, N, F)
        float32 in ``indicators`` order, ``turbulence`` (T,) float64 and notes on everything the
        missing-data policy did.

    Raises:
        ConfigError: unknown ``missing_policy``, an unsupported indicator, ``start`` after ``end``.
        DataError: a requested ticker is not in the panel, a ticker has no row in the range,
            or no ticker survives the policy.
    """
    indicators = validate_indicators(list(indicators))
    if missing_policy not in MISSING_POLICIES:
        raise ConfigError(
            f"missing_policy must be one of {', '.join(MISSING_POLICIES)}, not {missing_policy!r}",
            field="missing_policy",
        )
    lo, hi = _day(_check_date(start, "start")), _day(_check_date(end, "end"))
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"end {hi.date()} is before start {lo.date()}", field="end")
    files: dict = panel.attrs.get("files", {})
    notes: list[str] = list(panel.attrs.get("notes", []))
    source = source if source is not None else panel.attrs.get("source", "")

    plan = plan_tickers(
        panel[["date", "tic"]], tickers=tickers, start=start, end=end, missing_policy=missing_policy, files=files
    )
    notes.extend(plan.notes)
    kept = list(plan.tickers)
    range_start = plan.range_start
    df = panel[panel["tic"].isin(kept)]
    if hi is not None:
        df = df[df["date"] <= hi]
    wide = {c: df.pivot(index="date", columns="tic", values=c).reindex(columns=kept) for c in _OHLCV}

    # rebuild the calendar from the kept tickers only, then forward-fill short gaps
    calendar = wide["close"].index
    arrays = {c: np.array(wide[c].to_numpy(dtype="float64"), copy=True) for c in _OHLCV}
    present = ~np.isnan(arrays["close"])
    first = present.argmax(axis=0)
    close_ff = pd.DataFrame(arrays["close"]).ffill().to_numpy()
    for n, tic in enumerate(kept):
        gap = ~present[:, n]
        gap[: first[n]] = False
        if gap.any():
            arrays["close"][gap, n] = close_ff[gap, n]
            for c in ("open", "high", "low"):
                arrays[c][gap, n] = close_ff[gap, n]
            arrays["volume"][gap, n] = 0.0
            notes.append(_fill_note(tic, calendar[gap]))

    start_pos = int(np.searchsorted(calendar.to_numpy(), range_start.to_datetime64()))
    out_dates = calendar[start_pos:]
    if lo is not None and (out_dates[0] - lo).days > 4:  # more than a holiday weekend
        notes.append(
            f"the data of the kept tickers starts {out_dates[0].date()}, after the requested start {lo.date()}"
        )
    for n, tic in enumerate(kept):
        zero = (arrays["volume"][start_pos:, n] == 0) & present[start_pos:, n]
        if zero.any():
            notes.append(f"{tic}: {int(zero.sum())} zero-volume day(s) kept: {_list_days(out_dates[zero])}")

    feats = np.zeros((len(calendar), len(kept), len(indicators)), dtype="float64")
    for n in range(len(kept)):
        bars = pd.DataFrame({c: arrays[c][first[n] :, n] for c in _OHLCV})
        feats[first[n] :, n, :] = compute_indicators(bars, indicators)
    if turbulence:
        turb = turbulence_index(arrays["close"])
    else:
        turb = np.zeros(len(calendar))
        notes.append("turbulence not computed (all 0)")
    _check_finite_features(feats[start_pos:], turb[start_pos:], out_dates, kept, indicators)
    if start_pos > 0:
        notes.append(_warmup_note(start_pos, out_dates[0]))

    return MarketData(
        dates=out_dates.to_numpy().astype("datetime64[D]"),
        tickers=tuple(kept),
        close=np.ascontiguousarray(arrays["close"][start_pos:]),
        features=np.ascontiguousarray(feats[start_pos:].astype("float32")),
        feature_names=tuple(indicators),
        turbulence=np.ascontiguousarray(turb[start_pos:]),
        notes=tuple(notes),
        source=source,
    )


def _resolve(spec: DataSpec, data_dir) -> list[Path]:
    paths = []
    for p in spec.paths:
        path = Path(p).expanduser()
        if not path.is_absolute() and data_dir is not None:
            path = Path(data_dir) / path
        paths.append(path)
    return expand_paths(paths)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_key(spec: DataSpec, files: Sequence[Path]) -> str:
    """SHA-256 hex of the files' contents (in order, with their names) and the spec's options.

    The names matter because a per-ticker file takes its ticker from its name; the folder does
    not, so moving the data keeps the cache valid.
    """
    options = spec.to_dict()
    options.pop("paths")
    payload = {
        "format": CACHE_FORMAT,
        "stockstats": getattr(stockstats, "__version__", "?"),
        "files": [[f.name, _file_digest(f)] for f in files],
        "options": options,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _write_cache(data: MarketData, path: Path, key: str) -> None:
    t, n = data.close.shape
    columns = {
        "date": pa.array(np.repeat(data.dates, n)),
        "tic": pa.array(np.tile(np.asarray(data.tickers, dtype=object), t), pa.string()),
        "close": pa.array(data.close.reshape(-1)),
        "turbulence": pa.array(np.repeat(data.turbulence, n)),
    }
    for f, name in enumerate(data.feature_names):
        columns[f"f:{name}"] = pa.array(np.ascontiguousarray(data.features[:, :, f]).reshape(-1))
    meta = {
        "format": CACHE_FORMAT,
        "key": key,
        "tickers": list(data.tickers),
        "feature_names": list(data.feature_names),
        "notes": list(data.notes),
        "source": data.source,
    }
    table = pa.table(columns).replace_schema_metadata({"paddock": json.dumps(meta)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def _read_cache(path: Path, key: str) -> MarketData | None:
    try:
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[b"paddock"])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None
    if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
        return None
    n = len(meta["tickers"])
    t = table.num_rows // max(n, 1)
    close = table.column("close").to_numpy().reshape(t, n)
    feats = (
        np.stack([table.column(f"f:{name}").to_numpy().reshape(t, n) for name in meta["feature_names"]], axis=-1)
        if meta["feature_names"]
        else np.zeros((t, n, 0), dtype="float32")
    )
    return MarketData(
        dates=table.column("date").to_numpy()[::n].astype("datetime64[D]"),
        tickers=tuple(meta["tickers"]),
        close=np.ascontiguousarray(close),
        features=np.ascontiguousarray(feats.astype("float32")),
        feature_names=tuple(meta["feature_names"]),
        turbulence=np.ascontiguousarray(table.column("turbulence").to_numpy()[::n]),
        notes=tuple(meta["notes"]),
        source=meta["source"],
    )


def cache_path(spec: DataSpec, *, data_dir=None, cache_dir) -> Path:
    """Where :func:`load_market_data` keeps the Parquet cache of ``spec``.

    Raises:
        DataError: a data file does not exist.
    """
    files = _resolve(spec, data_dir)
    return Path(cache_dir) / f"market-{cache_key(spec, files)[:32]}.parquet"


def load_market_data(spec: DataSpec, *, data_dir=None, cache_dir=None) -> MarketData:
    """Load files, validate, align and compute features as ``spec`` says, with a cache.

    Args:
        spec: the data choice; relative ``paths`` resolve against ``data_dir`` (else the
            current directory).
        data_dir: folder of the data files.
        cache_dir: folder of Parquet cache files (``market-<hash>.parquet``), keyed by the
            SHA-256 of the input files' contents and the spec's options; ``None`` disables the
            cache. A missing, unreadable or stale cache file is rebuilt (written atomically).

    Returns:
        The same :class:`MarketData` as :func:`build_market_data` on :func:`load_panel`.

    Raises:
        DataError: see :func:`load_panel` and :func:`build_market_data`.
    """
    if not isinstance(spec, DataSpec):
        raise ConfigError("spec must be a DataSpec", field="data")
    files = _resolve(spec, data_dir)
    path = None
    if cache_dir is not None:
        key = cache_key(spec, files)
        path = Path(cache_dir) / f"market-{key[:32]}.parquet"
        if path.exists():
            cached = _read_cache(path, key)
            if cached is not None:
                return cached
    panel = load_panel(files, tickers=spec.tickers)
    data = build_market_data(
        panel,
        tickers=spec.tickers,
        start=spec.start,
        end=spec.end,
        indicators=spec.indicators,
        turbulence=spec.turbulence,
        missing_policy=spec.missing_policy,
    )
    if path is not None:
        _write_cache(data, path, key)
    return data

"""From a validated panel to :class:`MarketData`: ticker/range choice, calendar, gaps, features.

``build_market_data`` aligns the chosen tickers on one trading calendar (the union of their
dates), applies the missing-data policy, computes indicators and turbulence and cuts the
chosen range. ``load_market_data`` does the same from a :class:`DataSpec`, with a Parquet cache.

The missing-data rules are in :mod:`trainer.data.coverage`, the spec in :mod:`trainer.data.spec`
and the cache in :mod:`trainer.data.cache`.

Indicators and turbulence of the range's first days use the history before ``start`` (when
the files have it) as warm-up, so a range cut later gives the same rows as slicing a longer
one; nothing after a row's day is used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from trainer.data.cache import _read_cache, _resolve, _write_cache, cache_key
from trainer.data.coverage import (
    MISSING_POLICIES,
    _check_date,
    _day,
    _fill_note,
    _list_days,
    _warmup_note,
    plan_tickers,
)
from trainer.data.indicators import (
    DEFAULT_INDICATORS,
    compute_indicators,
    turbulence_index,
    turbulence_index_batched,
    validate_indicators,
)
from trainer.data.loading import load_panel
from trainer.data.market import MarketData
from trainer.data.membership import Membership, membership_mask, read_membership
from trainer.data.sessions import bar_dates, is_intraday, panel_feature_names, session_features
from trainer.data.spec import DataSpec
from trainer.errors import ConfigError, DataError
from trainer.limits import DEFAULT_LIMITS, InputLimits

__all__ = ["build_market_data", "data_days", "load_market_data"]

_OHLCV = ("open", "high", "low", "close", "volume")


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
        MarketData with ``dates`` (T,) ``datetime64[D]`` (a daily panel) or ``datetime64[s]``
        (an intraday panel: naive exchange time, bar end), ``close`` (T, N) float64 adjusted
        close in USD, ``features`` (T, N, F) float32 in ``indicators`` order (an intraday panel
        appends :data:`~trainer.data.sessions.SESSION_FEATURES`), ``turbulence`` (T,) float64
        (its window counts bars) and notes on everything the missing-data policy did.

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
    if hi is not None:  # the whole end day: an intraday day's bars are stamped after its midnight
        df = df[df["date"] < hi + pd.Timedelta(days=1)]
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
    unit, shown = ("bar", 16) if is_intraday(calendar) else ("day", 10)  # bars listed with their time
    for n, tic in enumerate(kept):
        zero = (arrays["volume"][start_pos:, n] == 0) & present[start_pos:, n]
        if zero.any():
            listed = _list_days(out_dates[zero], width=shown)
            notes.append(f"{tic}: {int(zero.sum())} zero-volume {unit}(s) kept: {listed}")

    feats = np.zeros((len(calendar), len(kept), len(indicators)), dtype="float64")
    for n in range(len(kept)):
        bars = pd.DataFrame({c: arrays[c][first[n] :, n] for c in _OHLCV})
        feats[first[n] :, n, :] = compute_indicators(bars, indicators)
    names = panel_feature_names(indicators, intraday=is_intraday(calendar))
    if is_intraday(calendar):  # bar-of-day and overnight gap (trainer.data.sessions)
        feats = np.concatenate([feats, session_features(calendar, arrays["open"], arrays["close"])], axis=2)
    if turbulence:  # the same index; batched on long intraday panels (bit-identical loop for daily)
        turb = (turbulence_index_batched if is_intraday(calendar) else turbulence_index)(arrays["close"])
    else:
        turb = np.zeros(len(calendar))
        notes.append("turbulence not computed (all 0)")
    _check_finite_features(feats[start_pos:], turb[start_pos:], out_dates, kept, names)
    if start_pos > 0:
        notes.append(_warmup_note(start_pos, out_dates[0]))

    return MarketData(
        dates=bar_dates(out_dates),
        tickers=tuple(kept),
        close=np.ascontiguousarray(arrays["close"][start_pos:]),
        features=np.ascontiguousarray(feats[start_pos:].astype("float32")),
        feature_names=names,
        turbulence=np.ascontiguousarray(turb[start_pos:]),
        notes=tuple(notes),
        source=source,
    )


def load_market_data(
    spec: DataSpec, *, data_dir=None, cache_dir=None, limits: InputLimits = DEFAULT_LIMITS
) -> MarketData:
    """Load files, validate, align and compute features as ``spec`` says, with a cache.

    Args:
        spec: the data choice; relative ``paths`` resolve against ``data_dir`` (else the
            current directory).
        data_dir: folder of the data files.
        cache_dir: folder of Parquet cache files (``market-<hash>.parquet``), keyed by the
            SHA-256 of the input files' contents and the spec's options; ``None`` disables the
            cache. A missing, unreadable or stale cache file is rebuilt (written atomically).
        limits: caps on each file's decompressed size and rows (:class:`trainer.limits.InputLimits`).

    Returns:
        The same :class:`MarketData` as :func:`build_market_data` on :func:`load_panel`; with
        ``spec.membership``, its ``members`` mask (:func:`trainer.data.membership.membership_mask`,
        relative paths resolved against ``data_dir``) and notes.

    Raises:
        DataError: see :func:`load_panel` and :func:`build_market_data`; a bad membership file
            (``field="data.membership"``, with the ``row`` and ``ticker``).
    """
    if not isinstance(spec, DataSpec):
        raise ConfigError("spec must be a DataSpec", field="data")
    files = _resolve(spec, data_dir)
    membership = None
    if spec.membership is not None:  # read first: a bad file fails before seconds of indicators
        where = Path(spec.membership).expanduser()
        if not where.is_absolute() and data_dir is not None:
            where = Path(data_dir) / where
        membership = read_membership(where, limits=limits)
    path = None
    if cache_dir is not None:
        key = cache_key(spec, files)
        path = Path(cache_dir) / f"market-{key[:32]}.parquet"
        if path.exists():
            cached = _read_cache(path, key)
            if cached is not None:
                return _with_membership(cached, membership, spec)
    panel = load_panel(files, tickers=spec.tickers, limits=limits, **spec.loader_options())
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
    return _with_membership(data, membership, spec)


def data_days(
    spec: DataSpec, *, tickers: Sequence[str], data_dir=None, limits: InputLimits = DEFAULT_LIMITS
) -> np.ndarray:
    """The days ``spec``'s files hold for ``tickers``: the whole files, not the range
    ``spec.start`` to ``spec.end`` that :func:`load_market_data` cuts from them, so a task's
    splits are checked against the dataset's own first and last day
    (:func:`trainer.data.splits.check_splits_in_data`), as the web checks them. Reads only the
    date and ticker columns (:func:`trainer.data.files.trading_dates`).

    Returns:
        (D,) sorted unique ``datetime64[D]``.

    Raises:
        DataError: a file cannot be read (as :func:`load_market_data`).
    """
    from trainer.data.files import ticker_days

    pairs = ticker_days(_resolve(spec, data_dir), tickers=tickers, limits=limits)
    return np.unique(pairs["date"].to_numpy().astype("datetime64[D]"))


def _with_membership(data: MarketData, membership: Membership | None, spec: DataSpec) -> MarketData:
    """``data`` with the (T, N) mask of ``membership`` and its notes (unchanged without one)."""
    if membership is None:
        return data
    members, notes = membership_mask(membership, data.dates, data.tickers, chosen=spec.tickers)
    return dataclasses.replace(data, members=members, notes=(*data.notes, *notes))

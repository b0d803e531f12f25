"""Market data: inspect uploaded files, download daily bars, and the processed data each
worker process keeps in memory between generations."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError
from webapp.core.errors import AppError


@dataclass(frozen=True)
class MarketFiles:
    """What a set of daily or intraday price files holds (:func:`inspect_market_files`,
    :func:`download_daily_bars`).

    Attributes:
        tickers: the tickers, sorted.
        start, end: first and last date, ``YYYY-MM-DD``.
        rows: rows of the long layout (one per ticker and day, or bar).
        notes: the loader's report (adjustments, merged duplicates...) and every ticker that
            starts late, ends early or misses days (named with the dates).
        bars: ``trainer.data.intraday.BarInfo.to_dict()``: interval, session, periods per year,
            bar label and time zone (used and detected), half days, missing-bar report.
        survivorship: one line when the universe looks chosen after the data starts
            (``trainer.data.survivorship.survivorship_note``), else ``""``.
    """

    tickers: list[str]
    start: str
    end: str
    rows: int
    notes: list[str]
    bars: dict[str, Any] = field(default_factory=dict)
    survivorship: str = ""


def listed(items: Sequence[Any]) -> str:
    """The first few of ``items`` and a count of the rest (``trainer.data.files.listed``), so a
    message naming a user's list stays short however long the list: ``"A, B, C, D, E and 99,995 more"``."""
    from trainer.data.files import listed as trainer_listed

    return trainer_listed(items)


def input_limits() -> Any:
    """The caps on what one data file or bundle may expand to (``trainer.limits.InputLimits``),
    from the settings ``PADDOCK_MAX_FILE_BYTES``, ``PADDOCK_MAX_FILE_ROWS`` and
    ``PADDOCK_MAX_BUNDLE_BYTES`` (read at each call, so a test's override holds)."""
    from django.conf import settings

    from trainer.limits import InputLimits

    return InputLimits(
        file_bytes=settings.PADDOCK_MAX_FILE_BYTES,
        file_rows=settings.PADDOCK_MAX_FILE_ROWS,
        bundle_bytes=settings.PADDOCK_MAX_BUNDLE_BYTES,
    )


def loader_options(raw: dict[str, Any] | None) -> dict[str, str]:
    """The intraday loader options a user chose (``timezone``, ``bar_label``, ``session``),
    checked, with the defaults (``auto``, ``auto``, ``regular``) left out.

    Raises:
        AppError: an unknown value, naming the option in ``fields``.
    """
    from trainer.data.intraday import check_options
    from trainer.errors import ConfigError

    chosen = {k: v for k, v in (raw or {}).items() if v not in (None, "")}
    unknown = sorted(set(chosen) - {"timezone", "bar_label", "session"})
    if unknown:
        raise AppError(f"{unknown[0]}: unknown loader option", fields={unknown[0]: "unknown option"})
    try:
        checked = check_options(**chosen)
    except ConfigError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc
    defaults = check_options()
    return {k: v for k, v in checked.items() if v != defaults[k]}


def inspect_market_files(
    paths: Sequence[str | Path], *, tickers: Sequence[str] | None = None, options: dict[str, str] | None = None
) -> MarketFiles:
    """Load and validate daily or intraday OHLCV files, every row of them; report what they hold.

    Args:
        paths: absolute file (or folder) paths.
        tickers: keep only these tickers (``None`` = all in the files); the rows of the others
            are validated all the same.
        options: intraday loader options (:func:`loader_options`), e.g. ``{"bar_label": "end"}``.

    Returns:
        :class:`MarketFiles`.

    Raises:
        AppError: the files cannot be used (missing, bad rows, unknown tickers), naming the
            file, row or ticker in ``fields``.
    """
    from trainer.data.bars import bar_info
    from trainer.data.coverage import coverage_notes
    from trainer.data.loading import load_panel

    try:
        # every row of every file is validated, whatever ``tickers`` keeps: a dataset never stores
        # a file with a bad row of a ticker it left out (a later dataset may choose it)
        panel = load_panel(
            [str(p) for p in paths], tickers=tickers, limits=input_limits(), check_all=True, **(options or {})
        )
    except TrainerError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc
    if panel.empty:
        raise AppError("the files hold no rows", fields={"paths": "the files hold no rows"})
    dates = panel["date"]
    bars = bar_info(panel)
    pairs = panel[["date", "tic"]]
    if bars.intraday:  # coverage by day; missing bars inside a day are in the bar report
        pairs = pairs.assign(date=dates.dt.normalize()).drop_duplicates()
    notes = [str(n) for n in panel.attrs.get("notes", [])] + coverage_notes(pairs)
    start, end = dates.min().strftime("%Y-%m-%d"), dates.max().strftime("%Y-%m-%d")
    last_days = {str(t): d.strftime("%Y-%m-%d") for t, d in panel.groupby("tic")["date"].max().items()}
    return MarketFiles(
        tickers=sorted(str(t) for t in panel["tic"].unique()),
        start=start,
        end=end,
        rows=int(len(panel)),
        notes=notes,
        bars=bars.to_dict(),
        survivorship=survivorship_note(paths, start, end, last_days) or "",
    )


def survivorship_note(
    paths: Sequence[str | Path],
    start: Any,
    end: Any,
    last_days: dict[str, str] | None = None,
    membership: str | None = None,
) -> str | None:
    """``trainer.data.survivorship.survivorship_note``: one line when a universe was chosen after
    its data starts (a known membership snapshot, or no ticker ever leaving it), else ``None``;
    with ``membership`` (the name of the dataset's membership file) the point-in-time line."""
    from trainer.data.survivorship import survivorship_note as note

    return note(paths, start, end, last_days, membership=membership)


@dataclass(frozen=True)
class MembershipFile:
    """What a membership file holds: its rows and tickers, checked against a dataset."""

    rows: int
    tickers: list[str]


def check_membership(path: str | Path, *, name: str, tickers: Sequence[str], start: Any, end: Any) -> MembershipFile:
    """Validate a point-in-time membership file (``trainer.data.membership``) for a dataset.

    Args:
        path: the stored file.
        name: the name the user knows it by (messages name it, never the server path).
        tickers, start, end: the dataset's tickers and first and last day; a file ticker that
            is a member within them must be one of ``tickers``.

    Raises:
        AppError: 400 naming the field ``membership``, with ``row`` and ``ticker`` in
            ``details``: a wrong header, a bad date, ``from`` after ``to``, overlapping rows of
            a ticker, a ticker not in the dataset, or a file past the input limits.
    """
    from trainer.data.membership import read_membership, rows_in_range

    try:
        membership = read_membership(path, limits=input_limits(), field="membership", name=name)
        rows_in_range(membership, list(tickers), start, end, field="membership")
    except TrainerError as exc:
        raise AppError.from_trainer(exc).with_names({str(path): name, Path(path).name: name}) from exc
    return MembershipFile(rows=len(membership.rows), tickers=list(membership.tickers))


def check_members_chosen(path: str | Path, *, name: str, tickers: Sequence[str], start: Any, end: Any) -> None:
    """A task on a dataset with a membership file must trade some ticker that is a member
    between ``start`` and ``end`` (its train start and test end): with none, every env would
    hold only cash, and that would be scored as a strategy.

    Raises:
        AppError: 400 naming ``tickers``; or, for a file the trainer now refuses, naming
            ``membership`` as :func:`check_membership`.
    """
    from trainer.data.files import listed
    from trainer.data.membership import read_membership, rows_in_range

    try:
        membership = read_membership(path, limits=input_limits(), field="membership", name=name)
        rows, _ = rows_in_range(membership, list(tickers), start, end, chosen=list(tickers), field="membership")
    except TrainerError as exc:
        raise AppError.from_trainer(exc).with_names({str(path): name, Path(path).name: name}) from exc
    if not rows:
        why = (
            f"none of {listed(list(tickers))} is a member of the index in {name} between {start} and {end}, "
            "so an agent could only hold cash"
        )
        raise AppError(f"tickers: {why}", fields={"tickers": why})


_days_cache: OrderedDict[tuple, Any] = OrderedDict()
_days_lock = threading.Lock()
_DAYS_CACHE_SIZE = 16


def _ticker_days(paths: Sequence[str | Path], tickers: Sequence[str] | None = None) -> Any:
    """``trainer.data.loading.ticker_days`` of the files, kept per process and file version."""
    from trainer.data.files import ticker_days

    key = (
        tuple((str(p), Path(p).stat().st_mtime_ns if Path(p).exists() else 0) for p in paths),
        None if tickers is None else tuple(sorted(tickers)),
    )
    with _days_lock:
        pairs = _days_cache.get(key)
    if pairs is None:
        pairs = ticker_days([str(p) for p in paths], tickers=tickers, limits=input_limits())
        with _days_lock:
            _days_cache[key] = pairs
            while len(_days_cache) > _DAYS_CACHE_SIZE:
                _days_cache.popitem(last=False)
    return pairs


_market_cache: OrderedDict[str, Any] = OrderedDict()
_market_lock = threading.Lock()
_MARKET_CACHE_SIZE = 4


def _market_data(task_spec: Any, *, data_dir: str | None, cache_dir: str | None) -> Any:
    """The task's processed market data, kept in memory between generations of one worker
    process (a generation then starts without re-reading the files)."""
    return _market_data_of(task_spec.data, data_dir=data_dir, cache_dir=cache_dir)


def _market_data_of(data_spec: Any, *, data_dir: str | None, cache_dir: str | None) -> Any:
    """:func:`_market_data` for a ``trainer.data.DataSpec`` (the LRU of this process)."""
    from trainer.data.pipeline import load_market_data

    key = repr(data_spec.to_dict())
    with _market_lock:
        if key in _market_cache:
            _market_cache.move_to_end(key)
            return _market_cache[key]
    data = load_market_data(data_spec, data_dir=data_dir, cache_dir=cache_dir, limits=input_limits())
    with _market_lock:
        _market_cache[key] = data
        while len(_market_cache) > _MARKET_CACHE_SIZE:
            _market_cache.popitem(last=False)
    return data


_serving_cache: Any = None
_serving_lock = threading.Lock()


def serve_act(
    key: Any,
    bundle_path: str | Path,
    body: Any,
    *,
    cache_size: int,
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Answer one act request with the agent's ONNX policy (``trainer.serving.answer``).

    One onnxruntime session per agent is kept in a process-wide LRU of ``cache_size``
    (``trainer.serving.PolicyCache``), reloaded when the bundle file changes; no torch code
    runs. ``{"date": ...}`` requests read the task's data files through the same in-memory
    cache as training.

    Args:
        key: the agent's id (cache key).
        bundle_path: local path of the agent's bundle zip.
        body: the decoded JSON body.
        cache_size: sessions kept (the first call's value sizes the cache).

    Returns:
        The JSON answer (see ``trainer/serving/``).

    Raises:
        TrainerError: bad body (``DataError`` naming the field) or an unreadable bundle.
    """
    global _serving_cache
    from trainer.data.spec import DataSpec
    from trainer.serving.answers import answer
    from trainer.serving.policy import PolicyCache

    with _serving_lock:
        if _serving_cache is None:
            _serving_cache = PolicyCache(cache_size, limits=input_limits())
    policy = _serving_cache.get(key, bundle_path)

    def load_market() -> Any:
        spec = DataSpec.from_dict(policy.config["task"]["data"], prefix="data.")
        return _market_data_of(spec, data_dir=data_dir, cache_dir=cache_dir)

    return answer(policy, body, load_market=load_market)


def download_daily_bars(tickers: Sequence[str], *, start: str, end: str, out_path: str | Path) -> MarketFiles:
    """Download daily bars from Yahoo Finance (``trainer.data.download_yfinance``) into a file.

    The file is a gzipped long CSV ``date, tic, open, high, low, close, volume`` with prices
    already adjusted (the loader reads it back like any other file); it is written atomically
    (``trainer.artifacts.checkpoints.atomic_write_bytes``), so an interrupted download leaves nothing behind.

    Args:
        tickers: Yahoo symbols.
        start, end: inclusive ``YYYY-MM-DD`` range.
        out_path: the ``.csv.gz`` file to write; its folder is created.

    Returns:
        :class:`MarketFiles` of what was written.

    Raises:
        AppError: the download failed (no network, unknown symbol, empty answer), naming why.
    """
    from trainer.data.yahoo import download_yfinance
    from trainer.util.files import atomic_write_bytes

    try:
        panel = download_yfinance(list(tickers), str(start), str(end))
    except TrainerError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc
    except Exception as exc:  # yfinance surfaces network failures as assorted exception types
        raise AppError(
            f"downloading {', '.join(tickers)} from Yahoo Finance failed: {type(exc).__name__}: {exc}",
            fields={"download": str(exc)[:300]},
        ) from exc
    frame = panel[["date", "tic", "open", "high", "low", "close", "volume"]].copy()
    frame["date"] = frame["date"].dt.strftime("%Y-%m-%d")
    buffer = io.BytesIO()
    frame.to_csv(buffer, index=False, compression={"method": "gzip", "mtime": 0})
    atomic_write_bytes(out_path, buffer.getvalue())
    return MarketFiles(
        tickers=sorted(str(t) for t in panel["tic"].unique()),
        start=str(frame["date"].min()),
        end=str(frame["date"].max()),
        rows=int(len(frame)),
        notes=[str(n) for n in panel.attrs.get("notes", [])],
    )

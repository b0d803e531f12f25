"""What a backtest request must satisfy before it is queued: bounds that parse (days, or
moments on an intraday dataset), a range inside the dataset that is held out unless overlap is
allowed, and exactly the agent's tickers. Each check raises a 400 naming its field."""

from __future__ import annotations

from typing import Any

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset


def parse_bound(value: Any, field: str, *, intraday: bool) -> str:
    """A backtest bound as task splits take it (``engine.parse_moment``): ``YYYY-MM-DD``, or
    ``YYYY-MM-DD HH:MM`` exchange time (bar end) on an intraday dataset."""
    text = engine.parse_moment(value, field)
    if len(text) > 10 and not intraday:
        msg = f"{text} has a time of day, but the data is daily; give YYYY-MM-DD"
        raise AppError(f"{field}: {msg}", fields={field: msg})
    return text


def task_split(task, name: str) -> tuple[str, str] | None:
    """A split's ``(start, end)`` bounds as stored (days or ``YYYY-MM-DD HH:MM`` moments)."""
    split = (task.splits or {}).get(name)
    if not split:
        return None
    start, end = (split["start"], split["end"]) if isinstance(split, dict) else (split[0], split[1])
    return engine.parse_moment(start, f"{name}.start"), engine.parse_moment(end, f"{name}.end")


def check_range(*, task, dataset: Dataset, start: Any, end: Any, allow_overlap: bool) -> None:
    """Refuse a backtest range that is empty, outside the dataset, or (unless
    ``allow_overlap``) overlapping the dates the agent trained or was selected on.

    Args:
        start, end: inclusive bounds as task splits take them: days (a start day from its
            00:00, an end day to its end) or ``YYYY-MM-DD HH:MM`` moments (``engine.range_bound``).

    Raises:
        AppError: 400 naming ``start`` or ``end``.
    """
    lo, hi = engine.range_bound(start, end=False, field="start"), engine.range_bound(end, end=True, field="end")
    if hi <= lo or (len(str(start)) == len(str(end)) == 10 and str(end) <= str(start)):
        raise AppError(f"end: {end} must be after start {start}", fields={"end": f"must be after start {start}"})
    data_start, data_end = engine.parse_day(dataset.start_date, "start"), engine.parse_day(dataset.end_date, "end")
    engine.check_window(start, end, first=data_start, last=data_end)  # the rule task splits follow
    if allow_overlap:
        return
    seen = seen_overlap(task, start, end)
    if seen is not None:
        seen_start, seen_end = seen
        msg = (
            f"the range {start} to {end} overlaps the task's train/validation dates "
            f"({seen_start} to {seen_end}); start after {seen_end} for a held-out test, "
            "or allow the overlap explicitly"
        )
        field = "start" if lo >= engine.range_bound(seen_start, end=False, field="start") else "end"
        raise AppError(msg, fields={field: msg, "allow_overlap": "false"})


def seen_overlap(task, start: Any, end: Any) -> tuple[str, str] | None:
    """The task's train-to-validation span when ``[start, end]`` overlaps it, else ``None``.

    A backtest whose range overlaps it is in sample: the agent trained or was selected on
    some of its days (only a range given ``allow_overlap`` can).

    Args:
        task: the agent's ``Task`` (its ``splits``).
        start, end: inclusive bounds as :func:`check_range` takes them.

    Returns:
        ``(seen_start, seen_end)`` as the splits store them, or ``None`` (held out, or the task
        has neither a train nor a validation split).

    Raises:
        AppError: 400 naming ``start`` or ``end`` when a bound is not a day or moment.
    """
    lo, hi = engine.range_bound(start, end=False, field="start"), engine.range_bound(end, end=True, field="end")
    train, validation = task_split(task, "train"), task_split(task, "validation")
    seen = [r for r in (train, validation) if r is not None]
    if not seen:
        return None
    seen_start = min((r[0] for r in seen), key=lambda b: engine.range_bound(b, end=False, field="start"))
    seen_end = max((r[1] for r in seen), key=lambda b: engine.range_bound(b, end=True, field="end"))
    seen_lo = engine.range_bound(seen_start, end=False, field="start")
    seen_hi = engine.range_bound(seen_end, end=True, field="end")
    return (seen_start, seen_end) if lo <= seen_hi and hi >= seen_lo else None


def check_tickers(agent_tickers: list[str], dataset: Dataset, tickers: list[str] | None) -> list[str]:
    """The tickers the backtest trades: the agent's, all present in ``dataset``."""
    if tickers is not None:
        if isinstance(tickers, str):
            tickers = [t for t in tickers.replace(",", " ").split() if t]
        wanted = engine.clean_tickers(tickers)
        unknown = [t for t in wanted if t not in dataset.tickers]
        if unknown:
            msg = f"unknown ticker(s) {', '.join(unknown)}: dataset {dataset.name!r} holds {', '.join(dataset.tickers)}"
            raise AppError(f"tickers: {msg}", fields={"tickers": msg})
        if sorted(wanted) != sorted(agent_tickers):
            msg = (
                f"the agent was trained on {', '.join(agent_tickers)} (from its checkpoint), the request names "
                f"{', '.join(wanted)}; a backtest trades exactly the agent's tickers"
            )
            raise AppError(f"tickers: {msg}", fields={"tickers": msg})
    missing = [t for t in agent_tickers if t not in dataset.tickers]
    if missing:
        msg = f"dataset {dataset.name!r} lacks the agent's ticker(s) {', '.join(missing)}"
        raise AppError(f"tickers: {msg}", fields={"tickers": msg})
    return list(agent_tickers)

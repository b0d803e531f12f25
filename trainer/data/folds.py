"""Walk-forward folds: which days each fold of a study trains, validates and is tested on.

A walk-forward study (Pardo, "The Evaluation and Optimization of Trading Strategies", 2nd ed.
2008, ch. 11; López de Prado, "Advances in Financial Machine Learning", 2018, ch. 7 on purging
and embargo) repeats train -> select -> test over successive test spans and stitches the test
spans into one out-of-sample record. :func:`plan_folds` cuts anchored (expanding) folds by
calendar year: fold ``k`` is tested on the trading days of the years
``first_test_year + k * fold_years`` .. ``+ fold_years - 1`` (the last one ends at ``end``),
validated on the ``validation_days`` trading days before it and trained on every day from
``start`` before that (or only the last ``train_days`` of them: rolling windows). ``gap_days``
trading days are dropped between train and validation and between validation and test (a
purge/embargo: the reward of a day uses the next day's close, and lookback features of the
first days after a boundary overlap the days before it).

Everything is pure and takes the data's trading days; :func:`check_folds` validates any list of
folds (also one written by hand) and names the field at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.data.splits import MIN_SPLIT_DAYS, check_window
from trainer.errors import ConfigError
from trainer.util.dates import parse_day

__all__ = ["DEFAULT_GAP_DAYS", "DEFAULT_VALIDATION_DAYS", "Fold", "check_folds", "check_plan", "plan_folds"]

#: Trading days dropped at each boundary by default (one week).
DEFAULT_GAP_DAYS = 5
#: Trading days of each fold's validation span by default (one year).
DEFAULT_VALIDATION_DAYS = 252
_PARTS = ("train", "validation", "test")


@dataclass(frozen=True)
class Fold:
    """One fold of a walk-forward study; every bound is a trading day ``YYYY-MM-DD`` of the data.

    Attributes:
        index: 0-based position in the study.
        train, validation, test: inclusive ``(first day, last day)`` spans, in this order with
            at least the study's gap between them.
    """

    index: int
    train: tuple[str, str]
    validation: tuple[str, str]
    test: tuple[str, str]

    def splits(self) -> dict[str, dict[str, str]]:
        """The task's split fields for this fold: ``{"train": {"start", "end"}, ...}``."""
        return {name: {"start": getattr(self, name)[0], "end": getattr(self, name)[1]} for name in _PARTS}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ``{"index", "train": {start, end}, "validation": ..., "test": ...}``."""
        return {"index": self.index, **self.splits()}

    @classmethod
    def from_dict(cls, data: Any, *, index: int) -> Fold:
        """Parse :meth:`to_dict`'s form; raises :class:`ConfigError` naming ``folds[i].<part>``."""
        where = f"folds[{index}]"
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected {{train, validation, test}}, got {data!r}", field=where)
        spans = {}
        for name in _PARTS:
            span = data.get(name)
            if not isinstance(span, dict) or "start" not in span or "end" not in span:
                raise ConfigError(f"{where}.{name}: expected {{start, end}}", field=f"{where}.{name}")
            spans[name] = tuple(str(parse_day(span[key], f"{where}.{name}.{key}")) for key in ("start", "end"))
        return cls(index=index, **spans)


def _days(dates: Any) -> np.ndarray:
    days = np.unique(np.asarray(dates).astype("datetime64[D]"))
    if days.size == 0:
        raise ConfigError("the data holds no trading day", field="data")
    return days


def _count(days: np.ndarray, span: tuple[str, str]) -> tuple[int, int]:
    """Index of the first day >= span start and one past the last day <= span end."""
    lo = int(np.searchsorted(days, np.datetime64(span[0], "D"), side="left"))
    hi = int(np.searchsorted(days, np.datetime64(span[1], "D"), side="right"))
    return lo, hi


def check_folds(
    folds: Sequence[Fold],
    dates: Any,
    *,
    gap_days: int = 0,
    minimum: dict[str, int] = MIN_SPLIT_DAYS,
) -> None:
    """Check a study's folds against the data's trading days.

    Args:
        folds: the folds, in order of their test spans.
        dates: (T,) trading days of the data (``datetime64`` or ``YYYY-MM-DD`` strings).
        gap_days: trading days that must lie strictly between train and validation and between
            validation and test.
        minimum: fewest trading days per part (default :data:`~trainer.data.splits.MIN_SPLIT_DAYS`:
            126 train, 20 validation, 20 test).

    Raises:
        ConfigError: no folds (``folds``); a span outside the data or too short
            (``folds[i].<part>.start`` / ``.end``); parts out of order or closer than
            ``gap_days`` (``folds[i].<later part>.start``); a test span overlapping the previous
            fold's (``folds[i].test.start``: the stitched record would count a day twice).
    """
    if not folds:
        raise ConfigError("folds: a study needs at least one fold", field="folds")
    days = _days(dates)
    covers = f"the data covers {days[0]} to {days[-1]}"
    previous_test_end: int | None = None
    for i, fold in enumerate(folds):
        where = f"folds[{i}]"
        bounds = {}
        for name in _PARTS:
            span = getattr(fold, name)
            if np.datetime64(span[0], "D") > days[-1]:
                raise ConfigError(
                    f"{where}.{name}.start: {span[0]} is after the data ({covers})", field=f"{where}.{name}.start"
                )
            if np.datetime64(span[1], "D") < days[0]:
                raise ConfigError(
                    f"{where}.{name}.end: {span[1]} is before the data ({covers})", field=f"{where}.{name}.end"
                )
            lo, hi = _count(days, span)
            need = int(minimum.get(name, 1))
            if hi - lo < need:
                raise ConfigError(
                    f"{where}.{name}.end: the {name} span {span[0]} to {span[1]} holds {max(hi - lo, 0)} trading "
                    f"day(s); it needs at least {need} ({covers})",
                    field=f"{where}.{name}.end",
                )
            bounds[name] = (lo, hi)
        for before, after in (("train", "validation"), ("validation", "test")):
            between = bounds[after][0] - bounds[before][1]
            if between < gap_days:
                raise ConfigError(
                    f"{where}.{after}.start: {getattr(fold, after)[0]} leaves {max(between, 0)} trading day(s) after the "
                    f"{before} span ends {getattr(fold, before)[1]}; the study's gap is {gap_days}"
                    + (" (the spans overlap)" if between < 0 else ""),
                    field=f"{where}.{after}.start",
                )
        if previous_test_end is not None and bounds["test"][0] < previous_test_end:
            raise ConfigError(
                f"{where}.test.start: {fold.test[0]} is inside the previous fold's test span (ending "
                f"{folds[i - 1].test[1]}); test spans must not overlap, or the stitched record counts days twice",
                field=f"{where}.test.start",
            )
        previous_test_end = bounds["test"][1]


def _whole(value: Any, name: str, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise ConfigError(f"{name}: must be a whole number >= {least} (got {value!r})", field=name)
    return int(value)


def check_plan(
    *,
    start: Any,
    end: Any,
    first_test_year: Any,
    fold_years: Any = 1,
    validation_days: Any = DEFAULT_VALIDATION_DAYS,
    gap_days: Any = DEFAULT_GAP_DAYS,
    train_days: Any = None,
    max_folds: Any = None,
) -> tuple[str, str, int, int, int, int, int | None, int | None]:
    """The checks of :func:`plan_folds` that need no data (cheap: run them before loading it).

    Returns:
        ``(start, end, first_test_year, fold_years, validation_days, gap_days, train_days,
        max_folds)``, days as ``YYYY-MM-DD``.

    Raises:
        ConfigError: as :func:`plan_folds`, for the arguments alone.
    """
    lo_day, hi_day = parse_day(start, "start"), parse_day(end, "end")
    if np.datetime64(hi_day, "D") < np.datetime64(lo_day, "D"):
        raise ConfigError(f"end: {hi_day} is before start {lo_day}", field="end")
    first_year = _whole(first_test_year, "first_test_year", least=1)
    years = _whole(fold_years, "fold_years", least=1)
    validation_days = _whole(validation_days, "validation_days", least=MIN_SPLIT_DAYS["validation"])
    gap_days = _whole(gap_days, "gap_days", least=0)
    if train_days is not None:
        train_days = _whole(train_days, "train_days", least=MIN_SPLIT_DAYS["train"])
    if max_folds is not None:
        max_folds = _whole(max_folds, "max_folds", least=1)
    if not int(lo_day[:4]) < first_year <= int(hi_day[:4]):
        raise ConfigError(
            f"first_test_year: {first_year} must lie after the start year {lo_day[:4]} and no later than the end "
            f"year {hi_day[:4]} (the study runs {lo_day} to {hi_day})",
            field="first_test_year",
        )
    return lo_day, hi_day, first_year, years, validation_days, gap_days, train_days, max_folds


def plan_folds(
    dates: Any,
    *,
    start: str,
    end: str,
    first_test_year: int,
    fold_years: int = 1,
    validation_days: int = DEFAULT_VALIDATION_DAYS,
    gap_days: int = DEFAULT_GAP_DAYS,
    train_days: int | None = None,
    max_folds: int | None = None,
) -> list[Fold]:
    """Anchored (expanding) walk-forward folds by calendar year (see the module docstring).

    Args:
        dates: (T,) trading days of the data.
        start, end: the study's first and last day (``YYYY-MM-DD``, inclusive); the first
            fold trains from ``start``, the last fold's test span ends at ``end``.
        first_test_year: calendar year of the first test span.
        fold_years: calendar years per test span (>= 1).
        validation_days: trading days of each validation span (>= 20).
        gap_days: trading days dropped between train and validation and between validation
            and test (>= 0).
        train_days: ``None`` = anchored (train from ``start``); else rolling, the last
            ``train_days`` trading days before the gap (>= 126).
        max_folds: keep only the first this many folds (``None``: every year up to ``end``).

    Returns:
        The folds, in time order; their test spans tile ``first_test_year``-01-01 .. ``end``.

    Raises:
        ConfigError: a malformed argument (``field`` its name); ``start`` / ``end`` outside
            the data (more than 4 calendar days, :func:`~trainer.data.splits.check_window`) or
            inverted; ``first_test_year`` outside ``start``..``end``, or so early
            that the first fold trains on fewer than 126 trading days; a last test span shorter
            than 20 trading days (``end``); any check of :func:`check_folds`.
    """
    lo_day, hi_day, first_year, years, validation_days, gap_days, train_days, max_folds = check_plan(
        start=start,
        end=end,
        first_test_year=first_test_year,
        fold_years=fold_years,
        validation_days=validation_days,
        gap_days=gap_days,
        train_days=train_days,
        max_folds=max_folds,
    )
    days = _days(dates)
    covers = f"the data covers {days[0]} to {days[-1]}"
    if np.datetime64(lo_day, "D") > days[-1]:
        raise ConfigError(f"start: {lo_day} is after the last day of the data ({covers})", field="start")
    if np.datetime64(hi_day, "D") < days[0]:
        raise ConfigError(f"end: {hi_day} is before the first day of the data ({covers})", field="end")
    # a study from 1990 on data from 2010 is refused as a task's split is, not cut to 2010
    check_window("", lo_day, hi_day, first=days[0], last=days[-1])
    inside = days[(days >= np.datetime64(lo_day, "D")) & (days <= np.datetime64(hi_day, "D"))]
    folds: list[Fold] = []
    year = first_year
    while year <= int(hi_day[:4]) and (max_folds is None or len(folds) < max_folds):
        last_year = min(year + years - 1, int(hi_day[:4]))  # the days after end are not in ``inside``
        span = (np.datetime64(f"{year:04d}-01-01", "D"), np.datetime64(f"{last_year:04d}-12-31", "D"))
        t_lo = int(np.searchsorted(inside, span[0], side="left"))
        t_hi = int(np.searchsorted(inside, span[1], side="right"))
        if t_hi - t_lo < MIN_SPLIT_DAYS["test"]:
            cut_by_end = np.datetime64(hi_day, "D") < span[1]
            field = "end" if folds or cut_by_end else "first_test_year"
            raise ConfigError(
                f"{field}: the test span of fold {len(folds)} ({year}) holds {t_hi - t_lo} trading day(s) up to "
                f"{hi_day}; it needs at least {MIN_SPLIT_DAYS['test']} (move it, or leave that year out)",
                field=field,
            )
        v_hi = t_lo - gap_days  # one past the validation's last day
        v_lo = v_hi - validation_days
        tr_hi = v_lo - gap_days
        tr_lo = 0 if train_days is None else max(0, tr_hi - train_days)
        if tr_hi - tr_lo < MIN_SPLIT_DAYS["train"]:
            raise ConfigError(
                f"first_test_year: fold {len(folds)} (test {year}) leaves {max(tr_hi - tr_lo, 0)} trading day(s) to "
                f"train on from {lo_day} ({validation_days} validation days and {gap_days}-day gaps come first); it "
                f"needs at least {MIN_SPLIT_DAYS['train']}: start earlier or test later",
                field="first_test_year",
            )
        folds.append(
            Fold(
                index=len(folds),
                train=(str(inside[tr_lo]), str(inside[tr_hi - 1])),
                validation=(str(inside[v_lo]), str(inside[v_hi - 1])),
                test=(str(inside[t_lo]), str(inside[t_hi - 1])),
            )
        )
        year += years
    check_folds(folds, days, gap_days=gap_days)
    return folds

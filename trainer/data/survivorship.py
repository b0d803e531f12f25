"""Survivorship: is the universe a list of members chosen after the data starts?

A universe picked at a later date than its data starts holds only the stocks that survived to
that date (were still, or newly, in the index then): the ones that fell out, were delisted or
went bankrupt before it are missing, so a backtest over the earlier years is flattered
(survivorship bias; e.g. Elton, Gruber & Blake 1996, "Survivor Bias and Mutual Fund
Performance", for the same effect in funds). Paddock cannot repair a file, but it says so in
one line wherever the data's results are shown.

Detection rule (:func:`survivorship_note`), in order:

0. **A membership file in use.** With a point-in-time membership file
   (:mod:`trainer.data.membership`, the task's ``data.membership``) every day trades only that
   day's members, so the note says so (naming the file) instead of warning.
1. **A known membership snapshot.** The shared files ``dow30_*`` (Dow 30 members as of 2022)
   and ``nasdaq100_*`` (Nasdaq-100 members of the 2023 list; their README says so) are
   snapshots: whenever the data starts before the snapshot's year, the note names the index,
   the year and the first day.
2. **Every ticker survives to the end.** Otherwise, when the data spans more than a year and
   every ticker has a price within :data:`END_SLACK_DAYS` calendar days of the data's last day
   (no stock ever left the universe), the list was most likely drawn at the end: the note says
   so without naming an index.

A universe that loses a ticker before the end (a point-in-time list) gets no note.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["END_SLACK_DAYS", "KNOWN_SNAPSHOTS", "survivorship_note"]

#: File-name prefix -> (index, year of its membership list) of the shared data files.
KNOWN_SNAPSHOTS: dict[str, tuple[str, int]] = {
    "dow30_": ("Dow 30", 2022),
    "nasdaq100_": ("Nasdaq-100", 2023),
}
#: A ticker whose last price is this close to the data's last day counts as surviving to it.
END_SLACK_DAYS = 7


def _day(value: object) -> dt.date:
    return (
        value
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        else dt.date.fromisoformat(str(value)[:10])
    )


def survivorship_note(
    paths: Sequence[str | Path],
    start: object,
    end: object,
    last_days: Mapping[str, object] | None = None,
    membership: str | Path | None = None,
) -> str | None:
    """One line about survivorship bias for a dataset, or ``None`` (module docstring's rule).

    Args:
        paths: the dataset's files (only their names are read).
        start, end: its first and last day (``YYYY-MM-DD`` or dates).
        last_days: each ticker's last day with a price, for rule 2 (``None``: rule 1 only).
        membership: the name (or path) of the membership file in use, for rule 0.

    Returns:
        E.g. ``"Survivorship bias: the universe is the Dow 30 as of 2022, chosen after the data
        starts (2010-01-04); stocks that left it before then are missing, which flatters every
        result before 2022."``; with ``membership``, ``"Point-in-time universe: each day trades
        only the index members of that day (membership file dow30_members.csv)."``
    """
    if membership is not None:
        return (
            "Point-in-time universe: each day trades only the index members of that day "
            f"(membership file {Path(str(membership)).name})."
        )
    first, last = _day(start), _day(end)
    for path in paths:
        name = Path(str(path)).name.lower()
        for prefix, (index, year) in KNOWN_SNAPSHOTS.items():
            if name.startswith(prefix) and first.year < year:
                return (
                    f"Survivorship bias: the universe is the {index} as of {year}, chosen after the data starts "
                    f"({first.isoformat()}); stocks that left it before then are missing, which flatters every "
                    f"result before {year}."
                )
    if last_days and (last - first).days > 365:
        slack = dt.timedelta(days=END_SLACK_DAYS)
        if all(_day(day) >= last - slack for day in last_days.values()):
            return (
                f"Survivorship bias likely: all {len(last_days)} tickers trade until the data's last day "
                f"({last.isoformat()}) and none left the universe since {first.isoformat()}, so the list was "
                "probably chosen at the end; stocks that dropped out before are missing, which flatters the results."
            )
    return None

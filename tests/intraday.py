"""The real 5-minute file as a panel in Paddock's convention, for tests of intraday features.

``intraday_5min_ib_...`` stamps the bar's start in UTC; the panel convention is naive
America/New_York exchange time labelling the bar's end. Converted here by hand so the feature
and env tests do not depend on the loader's detection of conventions (tested apart).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

FIVE_MIN_FILE = "intraday_5min_ib_2024-03-11_2026-08-21.csv.gz"


@lru_cache(maxsize=4)
def _raw(path: str) -> pd.DataFrame:
    return pd.read_csv(path)


def intraday_panel(data_dir: Path, tickers, first_day: str, last_day: str) -> pd.DataFrame:
    """Rows of ``tickers`` whose bar ends fall on ``first_day`` .. ``last_day`` (inclusive).

    Returns:
        Long panel ``date`` (naive New York bar end), ``tic``, ``open, high, low, close``
        (USD, float64), ``volume`` (shares), sorted by date then ticker.
    """
    raw = _raw(str(Path(data_dir) / FIVE_MIN_FILE))
    raw = raw[raw["tic"].isin(list(tickers))]
    start = pd.to_datetime(raw["datetime_utc"]).dt.tz_localize("UTC")
    end = (start + pd.Timedelta(minutes=5)).dt.tz_convert("America/New_York").dt.tz_localize(None)
    panel = pd.DataFrame({"date": end, "tic": raw["tic"]})
    for c in ("open", "high", "low", "close", "volume"):
        panel[c] = raw[c].astype("float64")
    day = panel["date"].dt.normalize()
    panel = panel[(day >= pd.Timestamp(first_day)) & (day <= pd.Timestamp(last_day))]
    return panel.sort_values(["date", "tic"]).reset_index(drop=True)

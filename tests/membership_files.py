"""Small real price files and hand-written membership files for the point-in-time universe tests.

The price file is a cut of the shared Dow-30 file (real prices of AAPL, MSFT and JPM, 2018 and
2019: about 1,500 rows, read in well under a second); the membership files are constructed so
that each rule of ``trainer.data.membership`` shows on a few known days.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

from tests.conftest import DOW30_FILE

TICKERS = ("AAPL", "JPM", "MSFT")

#: AAPL always; MSFT out from 2019-03-01 to 2019-05-31 (it leaves, then comes back); JPM joins
#: on 2019-07-01. Every day of 2018-2019 has 1 to 3 members.
MEMBERSHIP = "ticker,from,to\nAAPL,2000-01-01,\nMSFT,2000-01-01,2019-02-28\nMSFT,2019-06-01,\nJPM,2019-07-01,\n"


@lru_cache(maxsize=1)
def _rows(data_dir: str) -> pd.DataFrame:
    frame = pd.read_csv(Path(data_dir) / DOW30_FILE)
    keep = frame["tic"].isin(TICKERS) & (frame["date"] >= "2018-01-01") & (frame["date"] <= "2019-12-31")
    return frame[keep]


def write_prices(data_dir: Path, folder: Path) -> Path:
    """``folder/dow3_2018_2019.csv``: the real rows of :data:`TICKERS` in 2018-2019."""
    path = Path(folder) / "dow3_2018_2019.csv"
    _rows(str(data_dir)).to_csv(path, index=False)
    return path


def write_membership(folder: Path, text: str = MEMBERSHIP, name: str = "members.csv") -> Path:
    """``folder/name`` holding ``text``."""
    path = Path(folder) / name
    path.write_text(text, encoding="utf-8")
    return path

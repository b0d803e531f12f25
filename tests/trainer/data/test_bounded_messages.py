"""Error messages stay short however large the input: the first few rows, tickers or columns
and a count of the rest, never the whole list."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from trainer.data.coverage import plan_tickers
from trainer.data.files import ticker_days
from trainer.data.loading import load_panel
from trainer.errors import DataError


def test_300000_duplicate_rows_name_the_first_few_and_count_the_rest(dow30_path, tmp_path):
    row = pd.read_csv(dow30_path, nrows=1)
    header, _, line = row.to_csv(index=False).partition("\n")
    path = tmp_path / "dup.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(header + "\n" + line * 300_000)
    assert path.stat().st_size < 200_000  # a small upload
    with pytest.raises(DataError) as exc:
        load_panel(path)
    message = exc.value.message
    assert "duplicate (date, ticker)" in message and "row(s) 2, 3, 4, 5, 6 and 299,994 more" in message
    assert len(message) < 300  # the old message listed every row: 2.1 MB here


def test_thousands_of_unknown_tickers_are_counted_not_listed(dow30_path):
    asked = [f"X{i}" for i in range(5000)] + ["AAPL"]
    with pytest.raises(DataError) as exc:
        load_panel(dow30_path, tickers=asked)
    assert "X0, X1, X2, X3, X4 and 4,995 more" in exc.value.message and len(exc.value.message) < 400
    with pytest.raises(DataError) as exc:
        plan_tickers(ticker_days([dow30_path]), tickers=asked, start="2015-01-02", end="2020-12-31")
    assert "and 4,995 more" in exc.value.message and len(exc.value.message) < 400


def test_a_header_of_thousands_of_columns_is_not_echoed_whole(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{i}" for i in range(10_000)) + "\n" + ",".join("1" for _ in range(10_000)) + "\n")
    with pytest.raises(DataError) as exc:
        load_panel(path)
    assert "missing column(s) date" in exc.value.message and "and 9,988 more" in exc.value.message
    assert len(exc.value.message) < 400

"""Every kind of broken input is a DataError naming the file, row, ticker and date.

Broken files are real Dow-30 rows written to ``tmp_path`` with one defect each. Rows are
1-based data rows (row 1 = the line after the header, so line = row + 1).
"""

from __future__ import annotations

import pandas as pd
import pytest

from trainer.data.loading import load_panel
from trainer.data.pipeline import build_market_data
from trainer.errors import ConfigError, DataError

HEADER = "date,tic,open,high,low,close,adj_close,volume,adj_open,adj_high,adj_low"


@pytest.fixture(scope="module")
def good_lines(dow30_path):
    """The first 12 data lines of the Dow-30 file (AAPL..GS on 2010-01-04), as CSV text."""
    raw = pd.read_csv(dow30_path, nrows=12, dtype=str)
    assert ",".join(raw.columns) == HEADER
    return [",".join(row) for row in raw.itertuples(index=False)]


def _write(tmp_path, lines, name="broken.csv", header=HEADER):
    path = tmp_path / name
    path.write_text("\n".join(([header] if header else []) + lines) + "\n")
    return path


def _edit(line: str, **values) -> str:
    cells = dict(zip(HEADER.split(","), line.split(",")))
    cells.update({k: str(v) for k, v in values.items()})
    return ",".join(cells[c] for c in HEADER.split(","))


def test_the_unbroken_sample_loads(good_lines, tmp_path):
    panel = load_panel(_write(tmp_path, good_lines))
    assert len(panel) == 12


def test_missing_column_is_named_with_the_columns_found(good_lines, tmp_path):
    header = HEADER.replace(",volume", "")
    lines = [",".join(c for i, c in enumerate(line.split(",")) if i != 7) for line in good_lines]
    with pytest.raises(DataError, match="missing column.*volume.*found date, tic") as err:
        load_panel(_write(tmp_path, lines, header=header))
    assert err.value.details["field"] == "volume"
    assert err.value.details["file"].endswith("broken.csv")


def test_unparseable_date_names_its_row_and_line(good_lines, tmp_path):
    lines = list(good_lines)
    lines[4] = _edit(lines[4], date="2010-13-04")
    with pytest.raises(DataError, match=r"row 5 \(line 6\).*'2010-13-04'") as err:
        load_panel(_write(tmp_path, lines))
    assert err.value.details["row"] == 5
    assert err.value.details["field"] == "date"


def test_duplicate_date_and_ticker_names_both_rows(good_lines, tmp_path):
    lines = [*good_lines, good_lines[2]]  # row 13 repeats row 3
    with pytest.raises(DataError, match=r"row 3 .*duplicate.*row\(s\) 13") as err:
        load_panel(_write(tmp_path, lines))
    first = good_lines[2].split(",")
    assert err.value.details == {
        "file": err.value.details["file"],
        "row": 3,
        "ticker": first[1],
        "date": first[0],
        "field": "date",
    }


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("adj_close", "0", "close is 0;"),
        ("adj_low", "-1.5", "low is -1.5"),
        ("adj_open", "", "open is nan"),
        ("close", "0", r"close \(raw\) is 0;"),
    ],
)
def test_non_positive_or_missing_price_names_ticker_date_and_row(good_lines, tmp_path, column, value, message):
    lines = list(good_lines)
    lines[6] = _edit(lines[6], **{column: value})
    with pytest.raises(DataError, match=message) as err:
        load_panel(_write(tmp_path, lines))
    cells = good_lines[6].split(",")
    assert (err.value.details["row"], err.value.details["ticker"], err.value.details["date"]) == (7, cells[1], cells[0])


def test_text_in_a_price_column_is_not_a_number(good_lines, tmp_path):
    lines = list(good_lines)
    lines[1] = _edit(lines[1], adj_high="n/a?")
    with pytest.raises(
        DataError, match=r"row 2 \(line 3\) \(AMGN 2010-01-04\): adj_high 'n/a\?' is not a number"
    ) as err:
        load_panel(_write(tmp_path, lines))
    assert err.value.details["row"] == 2


def test_high_below_low_is_rejected(good_lines, tmp_path):
    lines = list(good_lines)
    cells = dict(zip(HEADER.split(","), lines[9].split(",")))
    lines[9] = _edit(lines[9], adj_high=cells["adj_low"], adj_low=cells["adj_high"])
    with pytest.raises(DataError, match="high .* is below low") as err:
        load_panel(_write(tmp_path, lines))
    assert err.value.details["row"] == 10
    assert err.value.details["ticker"] == cells["tic"]


def test_negative_volume_is_rejected(good_lines, tmp_path):
    lines = list(good_lines)
    lines[0] = _edit(lines[0], volume="-100")
    with pytest.raises(DataError, match="volume is -100") as err:
        load_panel(_write(tmp_path, lines))
    assert err.value.details["row"] == 1


def test_empty_file_and_header_only_file_are_rejected(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="file is empty") as err:
        load_panel(empty)
    assert err.value.details["file"] == str(empty)
    with pytest.raises(DataError, match="no data rows"):
        load_panel(_write(tmp_path, [], name="header_only.csv"))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="does not exist") as err:
        load_panel(tmp_path / "nope.csv.gz")
    assert err.value.details["file"].endswith("nope.csv.gz")


def test_folder_without_data_files_is_rejected(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing here")
    with pytest.raises(DataError, match="holds no"):
        load_panel(tmp_path)


def test_unknown_ticker_is_named_at_load_and_at_build(good_lines, tmp_path, dow30_panel):
    path = _write(tmp_path, good_lines)
    with pytest.raises(DataError, match="unknown ticker.*TSLA") as err:
        load_panel(path, tickers=["AAPL", "TSLA"])
    assert err.value.details["ticker"] == "TSLA"
    with pytest.raises(DataError, match="unknown ticker.*TSLA"):
        build_market_data(dow30_panel, tickers=["AAPL", "TSLA"])


def test_ticker_without_rows_in_the_chosen_range_is_an_error_showing_its_coverage(dow30_panel):
    with pytest.raises(
        DataError, match=r"DOW has no rows between 2012-01-01 and 2015-12-31; its data covers 2019-03-20"
    ) as err:
        build_market_data(dow30_panel, tickers=["AAPL", "DOW"], start="2012-01-01", end="2015-12-31")
    assert err.value.details["ticker"] == "DOW"
    assert err.value.details["file"] == "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


def test_bad_range_and_policy_are_config_errors_naming_the_field(dow30_panel):
    with pytest.raises(ConfigError) as err:
        build_market_data(dow30_panel, missing_policy="interpolate")
    assert err.value.details["field"] == "missing_policy"
    with pytest.raises(ConfigError) as err:
        build_market_data(dow30_panel, start="2020-01-01", end="2019-01-01")
    assert err.value.details["field"] == "end"
    with pytest.raises(ConfigError) as err:
        build_market_data(dow30_panel, start="01/02/2020")
    assert err.value.details["field"] == "start"


def test_parquet_errors_give_the_data_row_without_a_line(dow30_path, tmp_path):
    raw = pd.read_csv(dow30_path, nrows=8)
    raw.loc[3, "adj_close"] = -2.0
    raw.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=r"bad\.parquet, row 4 \(") as err:
        load_panel(tmp_path / "bad.parquet")
    assert "line" not in err.value.message
    assert err.value.details["row"] == 4

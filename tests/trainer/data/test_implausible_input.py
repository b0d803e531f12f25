"""Issue 13, item 4: implausible values and unusable files are caught at import, with messages
that say what is really wrong (file, row, ticker, date, the value as the file has it)."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from trainer.cli.main import main
from trainer.data.files import shown
from trainer.data.loading import load_panel
from trainer.data.pipeline import _check_finite_features, build_market_data
from trainer.data.spec import DataSpec
from trainer.errors import ConfigError, DataError

HEADER = "date,tic,open,high,low,close,volume\n"


def _csv(tmp_path, body: str, name: str = "prices.csv", header: str = HEADER):
    path = tmp_path / name
    path.write_text(header + body, encoding="utf-8")
    return path


def _days(n: int, start: str = "2021-01-04") -> list[str]:
    return [d.strftime("%Y-%m-%d") for d in pd.bdate_range(start, periods=n)]


def test_a_close_outside_the_days_low_high_is_an_error_naming_file_row_ticker_and_date(tmp_path):
    path = _csv(tmp_path, "2021-01-04,AAA,10,11,9,10,100\n2021-01-05,AAA,10,11,9,12.5,100\n")
    with pytest.raises(DataError) as err:
        load_panel(path)
    assert (
        str(err.value)
        == "prices.csv, row 2 (line 3) (AAA 2021-01-05): close 12.5 is outside the day's range [low 9, high 11]"
    )
    assert {k: err.value.details[k] for k in ("row", "ticker", "date", "field")} == {
        "row": 2,
        "ticker": "AAA",
        "date": "2021-01-05",
        "field": "close",
    }


def test_astronomical_prices_and_volumes_are_errors(tmp_path):
    with pytest.raises(DataError, match=r"\(AAA 2021-01-04\): high 1e\+12 is implausibly large"):
        load_panel(_csv(tmp_path, "2021-01-04,AAA,10,1e12,9,10,100\n"))
    with pytest.raises(DataError, match=r"volume 1e\+15 is implausibly large"):
        load_panel(_csv(tmp_path, "2021-01-04,AAA,10,11,9,10,1e15\n"))
    with pytest.raises(DataError, match="volume is inf"):
        load_panel(_csv(tmp_path, "2021-01-04,AAA,10,11,9,10,inf\n"))


def test_errors_quote_the_files_raw_values_not_the_adjusted_ones(tmp_path):
    header = "date,tic,open,high,low,close,adj_close,volume\n"
    # adj_close/close = 0.5 would show high 4.5 and low 5; the file says 9 and 10
    path = _csv(tmp_path, "2021-01-04,AAA,10,9,10,9.5,4.75,100\n", header=header)
    with pytest.raises(DataError, match=r"\(AAA 2021-01-04\): high 9 is below low 10"):
        load_panel(path)


def test_a_move_like_an_unadjusted_split_in_an_adjusted_column_gets_a_note_naming_ticker_and_date(tmp_path):
    header = "date,tic,open,high,low,close,adj_close,volume\n"
    rows = []
    for i, day in enumerate(_days(4)):
        adj = 100.0 if i < 2 else 25.1  # a 4-for-1 split left in the "adjusted" close
        rows.append(f"{day},AAA,{adj},{adj},{adj},{adj},{adj},100\n")
    panel = load_panel(_csv(tmp_path, "".join(rows), header=header))
    notes = [n for n in panel.attrs["notes"] if "split" in n]
    assert len(notes) == 1
    assert notes[0].startswith("prices.csv: AAA 2021-01-06: the adjusted close moved from 100 to 25.1 (x0.251)")
    assert "4-for-1 split" in notes[0]


def test_real_adjusted_files_have_no_split_like_moves(dow30_path):
    assert not [n for n in load_panel(dow30_path).attrs["notes"] if "unadjusted" in n]


@pytest.mark.parametrize(
    ("ticker", "escaped"),
    [("AA PL", "'AA PL'"), ("AA\u202ePL", "'AA\\u202ePL'"), ("A\x07B", "'A\\x07B'"), ("X" * 21, "'" + "X" * 21 + "'")],
)
def test_tickers_outside_the_documented_character_set_name_the_row_and_never_echo_control_characters(
    tmp_path, ticker, escaped
):
    path = _csv(tmp_path, f"2021-01-04,AAA,10,11,9,10,100\n2021-01-04,{ticker},10,11,9,10,100\n")
    with pytest.raises(DataError) as err:
        load_panel(path)
    message = str(err.value)
    assert message.startswith(f"prices.csv, row 2 (line 3): ticker {escaped} is not a ticker symbol")
    assert "\u202e" not in message and "\x07" not in message
    assert err.value.details["row"] == 2


def test_documented_symbols_are_accepted(tmp_path):
    body = "".join(f"2021-01-04,{t},10,11,9,10,100\n" for t in ("BRK.B", "BF-B", "^GSPC", "EURUSD=X"))
    assert sorted(load_panel(_csv(tmp_path, body))["tic"]) == ["BF-B", "BRK.B", "EURUSD=X", "^GSPC"]
    with pytest.raises(ConfigError, match="tickers\\[1\\]: ticker 'A;B' is not a ticker symbol"):
        DataSpec(paths=["x.csv"], tickers=["AAPL", "A;B"])


def test_a_binary_or_non_utf8_file_is_not_a_text_csv_file(tmp_path):
    binary = tmp_path / "prices.csv"
    binary.write_bytes(b"PK\x03\x04\x00\x00binary zip content")
    with pytest.raises(DataError, match=r"^prices.csv: not a text CSV file \(it holds binary data"):
        load_panel(binary)
    latin1 = tmp_path / "latin.csv"
    latin1.write_bytes((HEADER + "2021-01-04,AAA,10,11,9,10,100\n# Soci\xe9t\xe9\n").encode("latin-1"))
    with pytest.raises(DataError, match=r"^latin.csv: not a text CSV file \(byte 0xe9 at offset \d+ is not UTF-8"):
        load_panel(latin1)
    fake_gz = tmp_path / "prices2.csv.gz"
    fake_gz.write_bytes(b"date,tic\n")
    with pytest.raises(DataError, match="not a text CSV file"):
        load_panel(fake_gz)
    real_gz = tmp_path / "prices3.csv.gz"
    with gzip.open(real_gz, "wt") as f:
        f.write(HEADER + "2021-01-04,AAA,10,11,9,10,100\n")
    assert len(load_panel(real_gz)) == 1


def test_a_semicolon_separated_header_gets_a_delimiter_hint(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("date;tic;open;high;low;close;volume\n2021-01-04;AAA;10;11;9;10;100\n")
    with pytest.raises(DataError) as err:
        load_panel(path)
    assert "semicolon-separated" in str(err.value) and "save it with ',' as the delimiter" in str(err.value)


def test_a_value_that_is_not_a_number_names_ticker_and_date_and_quotes_it(tmp_path):
    with pytest.raises(DataError) as err:
        load_panel(_csv(tmp_path, "2021-01-04,AAA,10,11,9,10,100\n2021-01-05,AAA,10,11,9,1O.5,100\n"))
    assert str(err.value) == "prices.csv, row 2 (line 3) (AAA 2021-01-05): close '1O.5' is not a number"
    assert err.value.details["ticker"] == "AAA" and err.value.details["date"] == "2021-01-05"


def test_no_feature_is_ever_inf_or_nan_and_the_first_bad_one_is_named():
    dates = pd.DatetimeIndex(["2021-01-04", "2021-01-05"])
    feats = np.zeros((2, 2, 2))
    feats[1, 1, 0] = np.inf
    feats[1, 0, 1] = 3.5e38  # finite as float64, inf as the env's float32
    with pytest.raises(DataError) as err:
        _check_finite_features(feats, np.zeros(2), dates, ("AAA", "BBB"), ("macd", "rsi_30"))
    assert str(err.value).startswith("indicator rsi_30 of AAA on 2021-01-05 is 3.5e+38")
    assert err.value.details["field"] == "features.rsi_30"


def test_real_data_builds_finite_features(dow30_panel):
    data = build_market_data(dow30_panel, tickers=["AAPL", "KO"], start="2020-01-02", end="2020-12-31")
    assert np.isfinite(data.features).all()


def test_the_cli_refuses_an_implausible_file_with_one_line_and_exit_status_2(tmp_path, capsys):
    body = "".join(f"{d},AAA,10,11,9,10,100\n" for d in _days(3)) + "2021-01-07,AAA,10,11,9,50,100\n"
    path = _csv(tmp_path, body)
    assert main(["train", "--data", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "error: prices.csv, row 4 (line 5) (AAA 2021-01-07): close 50 is outside the day's range [low 9, high 11]\n"
    )


def test_shown_escapes_only_what_must_be_escaped():
    assert shown("AAPL") == "'AAPL'"
    assert shown("A\tB") == "'A\\tB'"
    assert shown("Soci\u00e9t\u00e9") == "'Soci\u00e9t\u00e9'"

"""DataSpec validation/JSON round trip and the Parquet cache of load_market_data."""

from __future__ import annotations

import json
import shutil
import time

import numpy as np
import pytest

from trainer.data.cache import cache_path
from trainer.data.indicators import DEFAULT_INDICATORS
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.errors import ConfigError, DataError

DOW = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


def _same(a, b):
    assert a.tickers == b.tickers and a.feature_names == b.feature_names
    assert a.notes == b.notes and a.source == b.source
    assert np.array_equal(a.dates, b.dates)
    assert np.array_equal(a.close, b.close)
    assert np.array_equal(a.features, b.features)
    assert np.array_equal(a.turbulence, b.turbulence)
    assert a.content_hash() == b.content_hash()


def test_spec_defaults_follow_the_contract():
    spec = DataSpec(paths=[DOW])
    assert spec.indicators == DEFAULT_INDICATORS
    assert spec.turbulence is True and spec.missing_policy == "drop"
    assert spec.tickers is None and spec.start is None and spec.end is None


def test_spec_round_trips_through_json():
    spec = DataSpec(
        paths=[DOW],
        tickers=["aapl", "MSFT"],
        start="2015-01-02",
        end="2016-12-30",
        indicators=["macd", "rsi_30"],
        missing_policy="start_later",
    )
    again = DataSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert again.tickers == ["AAPL", "MSFT"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"missing_policy": "ffill"}, "data.missing_policy"),
        ({"start": "2015-02-30"}, "data.start"),
        ({"start": "2016-01-01", "end": "2015-01-01"}, "data.end"),
        ({"indicators": ["macd", "close_5_s"]}, "data.indicators[1]"),
        ({"tickers": []}, "data.tickers"),
        ({"tickers": ["AAPL", 7]}, "data.tickers[1]"),
        ({"paths": []}, "data.paths"),
        ({"turbulence": "yes"}, "data.turbulence"),
        ({"colour": "red"}, "data.colour"),
    ],
)
def test_bad_spec_fields_are_config_errors_with_the_dotted_field(changes, field):
    with pytest.raises(ConfigError) as err:
        DataSpec.from_dict({"paths": [DOW], **changes}, prefix="data")
    assert err.value.details["field"] == field
    assert err.value.message.startswith(field.split("[")[0])


def test_missing_paths_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        DataSpec.from_dict({"tickers": ["AAPL"]})
    assert err.value.details["field"] == "paths"


def test_relative_paths_resolve_against_data_dir_and_match_the_fixture_data(data_dir, dow30_data):
    data = load_market_data(DataSpec(paths=[DOW]), data_dir=data_dir)
    _same(data, dow30_data)
    assert data.source == DOW


def test_missing_data_file_is_named(tmp_path):
    with pytest.raises(DataError, match="does not exist") as err:
        load_market_data(DataSpec(paths=["nope.csv"]), data_dir=tmp_path)
    assert err.value.details["file"] == str(tmp_path / "nope.csv")


def test_second_load_is_served_from_the_parquet_cache(data_dir, tmp_path):
    spec = DataSpec(paths=[DOW], tickers=["AAPL", "KO", "DOW"], start="2019-01-02", missing_policy="start_later")
    cache = tmp_path / "cache"
    path = cache_path(spec, data_dir=data_dir, cache_dir=cache)
    assert not path.exists()
    t0 = time.perf_counter()
    first = load_market_data(spec, data_dir=data_dir, cache_dir=cache)
    t1 = time.perf_counter()
    assert path.exists() and path.suffix == ".parquet"
    written = path.stat().st_mtime_ns
    second = load_market_data(spec, data_dir=data_dir, cache_dir=cache)
    t2 = time.perf_counter()
    _same(first, second)
    assert path.stat().st_mtime_ns == written  # read, not rewritten
    assert t2 - t1 < t1 - t0
    assert list(cache.iterdir()) == [path]


def test_cache_key_changes_with_options_and_file_contents_but_not_folder(data_dir, tmp_path):
    spec = DataSpec(paths=[DOW], tickers=["AAPL"])
    base = cache_path(spec, data_dir=data_dir, cache_dir=tmp_path)
    assert (
        cache_path(DataSpec(paths=[DOW], tickers=["AAPL"], end="2020-12-31"), data_dir=data_dir, cache_dir=tmp_path)
        != base
    )
    assert (
        cache_path(DataSpec(paths=[DOW], tickers=["AAPL"], turbulence=False), data_dir=data_dir, cache_dir=tmp_path)
        != base
    )
    copy_dir = tmp_path / "copy"
    copy_dir.mkdir()
    shutil.copy(data_dir / DOW, copy_dir / DOW)
    assert cache_path(spec, data_dir=copy_dir, cache_dir=tmp_path) == base
    with open(copy_dir / DOW, "ab") as f:
        f.write(b"\0")
    assert cache_path(spec, data_dir=copy_dir, cache_dir=tmp_path) != base


def test_corrupt_cache_file_is_rebuilt(data_dir, tmp_path):
    spec = DataSpec(paths=[DOW], tickers=["MSFT", "CVX"], start="2020-01-02", end="2020-12-31")
    path = cache_path(spec, data_dir=data_dir, cache_dir=tmp_path)
    path.write_bytes(b"not parquet")
    data = load_market_data(spec, data_dir=data_dir, cache_dir=tmp_path)
    assert data.tickers == ("MSFT", "CVX") and data.num_days == 253
    _same(load_market_data(spec, data_dir=data_dir, cache_dir=tmp_path), data)
    assert path.read_bytes()[:4] == b"PAR1"

"""Session-aware features of intraday panels: bar of day, overnight gap, no look-ahead.

The panel is the real 5-minute file in the panel convention (naive America/New_York bar-end
stamps), see ``tests/intraday.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.intraday import intraday_panel
from trainer.data.indicators import DEFAULT_INDICATORS, turbulence_index, turbulence_index_batched
from trainer.data.pipeline import build_market_data
from trainer.data.sessions import SESSION_FEATURES, is_intraday, session_close_mask, session_index
from trainer.envs.observations import scale_free_market


@pytest.fixture(scope="module")
def panel(data_dir):
    # 2024-03-11 .. 2024-03-22: ten sessions of 78 bars, 780 bars (turbulence's 252-bar
    # window is full from the fourth session on)
    return intraday_panel(data_dir, ["AAPL", "MSFT", "NVDA"], "2024-03-11", "2024-03-22")


@pytest.fixture(scope="module")
def data(panel):
    return build_market_data(panel)


def test_intraday_panel_keeps_bar_times_and_appends_session_features(data):
    assert data.dates.dtype == np.dtype("datetime64[s]")
    assert data.num_days == 780 and data.tickers == ("AAPL", "MSFT", "NVDA")
    assert data.feature_names == DEFAULT_INDICATORS + SESSION_FEATURES
    assert str(data.dates[0]) == "2024-03-11T09:35:00" and str(data.dates[77]) == "2024-03-11T16:00:00"
    assert np.isfinite(data.features).all()
    assert is_intraday(data.dates)
    sessions = session_index(data.dates)
    assert sessions[0] == 0 and sessions[-1] == 9 and np.all(np.bincount(sessions) == 78)
    closes = np.flatnonzero(session_close_mask(data.dates))
    assert [str(data.dates[i])[11:] for i in closes] == ["16:00:00"] * 10


def test_bar_of_day_is_the_sine_and_cosine_of_the_bar_end_minute(data):
    sin, cos = data.feature_names.index("bar_of_day_sin"), data.feature_names.index("bar_of_day_cos")
    for i, minute in ((0, 9 * 60 + 35), (77, 16 * 60), (78, 9 * 60 + 35), (40, 9 * 60 + 30 + 41 * 5)):
        angle = 2 * np.pi * minute / 1440
        assert data.features[i, :, sin] == pytest.approx(np.sin(angle), abs=1e-6)
        assert data.features[i, :, cos] == pytest.approx(np.cos(angle), abs=1e-6)


def test_overnight_gap_is_the_open_over_the_previous_session_close_held_all_session(panel, data):
    gap = data.feature_names.index("overnight_gap")
    assert np.all(data.features[:78, :, gap] == 0)  # the panel's first session has no previous close
    aapl = panel[panel["tic"] == "AAPL"].set_index("date")
    prev_close = aapl.loc[pd.Timestamp("2024-03-11 16:00"), "close"]
    first_open = aapl.loc[pd.Timestamp("2024-03-12 09:35"), "open"]
    expected = first_open / prev_close - 1
    assert expected != 0
    assert data.features[78:156, 0, gap] == pytest.approx(np.full(78, expected), rel=1e-5)
    assert data.features[156, 0, gap] != pytest.approx(expected)


def _perturb_after(panel: pd.DataFrame, cut: pd.Timestamp, seed: int) -> pd.DataFrame:
    """Every bar after ``cut`` gets new prices and volume (a different future)."""
    rng = np.random.default_rng(seed)
    out = panel.copy()
    later = out["date"] > cut
    factor = rng.uniform(0.7, 1.4, size=int(later.sum()))
    for c in ("open", "high", "low", "close"):
        out.loc[later, c] = out.loc[later, c] * factor
    out.loc[later, "volume"] = out.loc[later, "volume"] * rng.uniform(0.1, 10.0, size=int(later.sum()))
    return out


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(5 * 78 - 1, id="last-bar-of-a-session"),
        pytest.param(5 * 78, id="first-bar-of-a-session"),
        pytest.param(5 * 78 + 2, id="third-bar-of-a-session"),
        pytest.param(6 * 78 + 40, id="mid-session"),
    ],
)
def test_no_feature_at_bar_t_depends_on_a_later_bar(panel, data, cut):
    """Rebuild with a different future after bar ``cut``: indicators, session features,
    turbulence and the scale-free observation features up to ``cut`` are unchanged, while
    those after it do change (so the check can fail)."""
    changed = build_market_data(_perturb_after(panel, pd.Timestamp(data.dates[cut]), seed=cut))
    np.testing.assert_array_equal(changed.features[: cut + 1], data.features[: cut + 1])
    np.testing.assert_array_equal(changed.turbulence[: cut + 1], data.turbulence[: cut + 1])
    np.testing.assert_array_equal(
        scale_free_market(changed).features[: cut + 1], scale_free_market(data).features[: cut + 1]
    )
    assert not np.array_equal(changed.features[cut + 1 :], data.features[cut + 1 :])
    assert not np.array_equal(changed.turbulence[cut + 1 :], data.turbulence[cut + 1 :])


def test_a_session_never_sees_the_next_session(panel, data):
    """Every bar of session 5 (its first bars included) is unchanged by any change to session 6
    and later; the overnight gap of session 6 is what changes first."""
    session = session_index(data.dates)
    last_of_5 = int(np.flatnonzero(session == 5)[-1])
    changed = build_market_data(_perturb_after(panel, pd.Timestamp(data.dates[last_of_5]), seed=7))
    np.testing.assert_array_equal(changed.features[session <= 5], data.features[session <= 5])
    gap = data.feature_names.index("overnight_gap")
    assert not np.allclose(changed.features[last_of_5 + 1, :, gap], data.features[last_of_5 + 1, :, gap])


def test_daily_panels_get_no_session_features(dow30_panel):
    data = build_market_data(dow30_panel, tickers=["AAPL", "MSFT"], start="2019-01-02", end="2019-03-29")
    assert data.dates.dtype == np.dtype("datetime64[D]")
    assert data.feature_names == DEFAULT_INDICATORS
    assert not is_intraday(data.dates)


def test_batched_turbulence_equals_finrl_loop_on_bars_with_a_late_ticker(panel):
    close = panel.pivot(index="date", columns="tic", values="close").to_numpy().copy()
    close[:300, 2] = np.nan  # NVDA "lists" at bar 300: windows with missing returns use the loop
    loop, batched = turbulence_index(close), turbulence_index_batched(close)
    assert (loop > 0).sum() > 400
    np.testing.assert_array_equal(loop > 0, batched > 0)
    np.testing.assert_allclose(batched, loop, rtol=1e-9, atol=0)

"""The statistics against 1/N never claim a placebo edge and find a planted one (issue 24, section 4).

Markets from ``benchmarks/synthetic_market.py``: on the placebo (nothing predicts returns) the
signal-tilt baseline must not 'beat' 1/N in at least 19 of 20 seeds; with a planted edge of
information coefficient 0.1 the interval of its Sharpe difference must lie above 0. No training:
this checks the statistics machinery (:func:`trainer.backtest.relative.vs_equal_weight`) alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trainer.backtest.relative import vs_equal_weight
from trainer.data.loading import load_panel
from trainer.selection import equal_weight_returns

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from synthetic_market import generate, signal, signal_tilt_returns, write_csv  # noqa: E402

TWO_YEARS = {"start": "2014-01-01", "end": "2015-12-31"}


def _verdict(market, seed: int) -> dict:
    tilt, ew = signal_tilt_returns(market.close), equal_weight_returns(market.close)
    return vs_equal_weight(tilt, ew, periods_per_year=252, seed=seed, reps=500)


def test_the_placebo_never_looks_like_an_edge():
    verdicts = [_verdict(generate(seed, ic=0.0, **TWO_YEARS), seed)["verdict"] for seed in range(20)]
    assert sum(v == "beats" for v in verdicts) <= 1, verdicts


@pytest.mark.parametrize("seed", range(5))
def test_a_planted_edge_is_found(seed):
    result = _verdict(generate(seed, ic=0.1, **TWO_YEARS), seed)
    assert result["ci95"][0] > 0 and result["verdict"] == "beats"


def test_the_planted_information_coefficient_is_what_the_returns_show():
    market = generate(7, ic=0.1, start="2010-01-04", end="2013-12-31")
    s, r = signal(market.close)[5:-1], market.close[6:] / market.close[5:-1] - 1
    r = r - r.mean(axis=1, keepdims=True)  # the market factor is common to all
    ic = np.mean([np.corrcoef(s[t], r[t])[0, 1] for t in range(len(s))])
    assert ic == pytest.approx(0.1, abs=0.02)


def test_the_generated_file_is_read_by_the_loader(tmp_path):
    market = generate(0, ic=0.05, tickers=4, start="2015-01-01", end="2015-03-31")
    path = write_csv(market, tmp_path / "synthetic.csv.gz")
    frame = load_panel(path)
    assert sorted(frame["tic"].unique()) == list(market.tickers)
    closes = frame.pivot(index="date", columns="tic", values="close").to_numpy()
    assert np.allclose(closes, market.close, rtol=1e-6)
    assert len(pd.unique(frame["date"])) == len(market.dates)


def test_the_planted_edge_pays_its_costs_when_traded_part_way_and_the_placebo_does_not():
    """``benchmarks/planted_edge_penalties.long_run_tilt``: over 20 years at the env's 0.1 % cost,
    the IC 0.05 reversal tilt (strength 1) gains more over cost-free 1/N when it trades half-way
    to its target each day than when it trades fully, and the placebo's tilt only pays costs."""
    from planted_edge_penalties import long_run_tilt

    planted = long_run_tilt(0, 0.05, start="2000-01-03", end="2019-12-31")
    full, half = planted[(1.0, 1.0)], planted[(1.0, 0.5)]
    assert half[0] > full[0] + 0.05 and half[0] > 0.15, planted
    assert half[1] < 0.7 * full[1], planted  # partial adjustment trades less
    placebo = long_run_tilt(0, 0.0, start="2000-01-03", end="2019-12-31")
    assert all(diff < 0.0 for diff, _ in placebo.values()), placebo

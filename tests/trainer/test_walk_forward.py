"""Stitching a study's test spans (trainer.walk_forward), on constructed spans."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainer.walk_forward import SpanReturns, candidate_seed, pbo_of_candidates, stitch


def _span(start: str, days: int, rng, edge: float = 0.0) -> SpanReturns:
    dates = tuple(str(d.date()) for d in pd.bdate_range(start, periods=days))
    ew = rng.normal(0.0004, 0.01, days)
    return SpanReturns(dates=dates, agent=ew + edge + rng.normal(0, 0.002, days), equal_weight=ew, qqq=None)


def test_the_record_is_the_spans_in_order_with_1_over_n_on_the_same_days():
    rng = np.random.default_rng(0)
    spans = [_span("2018-01-02", 250, rng, edge=0.001), _span("2019-01-02", 250, rng, edge=0.001)]
    record = stitch(spans, periods_per_year=252, seed=0)
    assert record["dates"] == list(spans[0].dates + spans[1].dates)
    assert record["returns"] == pytest.approx(np.concatenate([s.agent for s in spans]).tolist())
    assert record["qqq"] is None and record["pbo"]["pbo"] is None  # no candidates given
    assert record["vs_equal_weight"]["verdict"] == "beats"  # 0.1 % a day over 1/N with 0.2 % noise
    growth = np.prod(1 + np.concatenate([s.agent for s in spans])) - 1
    assert record["metrics"]["cumulative_return"] == pytest.approx(growth)


def test_spans_sharing_a_day_are_refused():
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="share a day"):
        stitch([_span("2018-01-02", 30, rng), _span("2018-02-01", 30, rng)], periods_per_year=252)


def test_pbo_columns_are_seed_slots_stitched_over_the_folds():
    rng = np.random.default_rng(2)
    folds = [[_span(f"{y}-01-02", 120, rng, edge=e) for e in (0.0, 0.003, 0.0)] for y in (2018, 2019)]
    record = stitch([f[1] for f in folds], periods_per_year=252, candidates=folds)
    assert record["pbo"]["candidates"] == 3 and record["pbo"]["rows_used"] == 240
    assert record["pbo"]["pbo"] < 0.1  # slot 1 has a real edge in both folds
    short = pbo_of_candidates(rng.normal(size=(10, 3)))
    assert short["blocks"] == 4  # fewer blocks for a short record: 2 rows each at least
    assert pbo_of_candidates(rng.normal(size=(100, 1)))["pbo"] is None


def test_candidate_seeds_never_collide_across_folds():
    seeds = {candidate_seed(7, fold, slot) for fold in range(9) for slot in range(8)}
    assert len(seeds) == 72

"""PBO by CSCV (Bailey, Borwein, López de Prado & Zhu 2017) on constructions whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer.backtest.overfitting import probability_of_backtest_overfitting
from trainer.errors import ConfigError


def test_noise_candidates_give_a_coin_flip():
    # 10 iid-noise candidates: the in-sample best is a random draw out of sample, so its rank
    # is uniform on 1..10 and half of the splits land at or below the median.
    pbos = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        pbos.append(probability_of_backtest_overfitting(rng.normal(0, 0.01, (800, 10)), blocks=10).pbo)
    assert 0.4 < np.mean(pbos) < 0.6  # one sample's PBO varies widely: its splits overlap


def test_one_persistent_edge_among_noise_is_not_overfit():
    rng = np.random.default_rng(1)
    m = rng.normal(0, 0.01, (1000, 8))
    m[:, 3] += 0.004  # a Sharpe of 0.4 a day: best in every half of the sample
    result = probability_of_backtest_overfitting(m, blocks=10)
    assert result.pbo == 0.0
    assert result.combinations == math.comb(10, 5)
    assert np.all(result.logits > 0)


def test_in_sample_best_is_out_of_sample_worst_gives_one():
    # Mirror images whose returns sum to zero over the whole sample: whichever has the higher
    # in-sample mean has the lower out-of-sample mean on every split (the two halves are the
    # same size), so the in-sample winner is the out-of-sample loser: PBO = 1.
    rng = np.random.default_rng(2)
    x, y = rng.normal(0, 0.01, 480), rng.normal(0, 0.01, 480)
    x, y = x - x.mean(), y - y.mean()
    assert probability_of_backtest_overfitting(np.c_[x, -x], blocks=8).pbo == 1.0
    four = probability_of_backtest_overfitting(np.c_[x, -x, y, -y], blocks=8)
    assert four.pbo == 1.0  # the winner's mirror beats it, and one of y, -y does too
    assert four.rows_used == 480 and four.candidates == 4 and four.logits.shape == (70,)


def test_rows_beyond_whole_blocks_are_left_out():
    rng = np.random.default_rng(3)
    result = probability_of_backtest_overfitting(rng.normal(size=(103, 3)), blocks=4)
    assert result.rows_used == 100
    assert set(result.to_dict()) == {"pbo", "logits", "combinations", "blocks", "candidates", "rows_used"}


@pytest.mark.parametrize(
    ("matrix", "blocks", "field", "words"),
    [
        (np.zeros((100, 4)), 5, "blocks", "even"),
        (np.zeros((100, 4)), 0, "blocks", "even"),
        (np.zeros((10, 4)), 8, "blocks", "fewer than 2 rows"),
        (np.zeros((1000, 4)), 22, "blocks", "at most 20"),
        (np.zeros((100, 1)), 4, "returns", "at least 2"),
        (np.zeros(100), 4, "returns", "(T, N) matrix"),
    ],
)
def test_bad_input_is_refused_by_name(matrix, blocks, field, words):
    with pytest.raises(ConfigError) as err:
        probability_of_backtest_overfitting(matrix, blocks=blocks)
    assert err.value.details["field"] == field and words in err.value.message


def test_a_nan_names_its_row_and_candidate():
    m = np.zeros((100, 3))
    m[42, 1] = np.nan
    with pytest.raises(ConfigError, match="row 42, candidate 1") as err:
        probability_of_backtest_overfitting(m, blocks=4)
    assert err.value.details == {"field": "returns", "row": 42}

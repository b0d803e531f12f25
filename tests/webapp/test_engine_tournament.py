"""The engine's door to the leaderboard policy reads each agent's noise from what the web
stores: ``Agent.score_se`` and ``metrics["sub_windows"]`` (which pair agents scored on the same
days); an agent stored before scores had an SE is read with its sub-windows' dispersion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from webapp import engine


def _subs(*sharpes):
    quarters = [("2020-07-01", "2020-09-30"), ("2020-10-01", "2020-12-31")]
    quarters += [("2021-01-04", "2021-03-31"), ("2021-04-01", "2021-06-30")]
    return [{"start": s, "end": e, "sharpe": v} for (s, e), v in zip(quarters, sharpes)]


def test_a_pod_keeps_its_agent_when_the_candidate_is_better_by_less_than_one_paired_se():
    own = _subs(0.9, 0.7, 1.1, 1.3)  # score 1.0
    board = [(7, 1.1, 1, 0.3, _subs(1.0, 1.2, 1.2, 1.8))]  # paired differences 0.1, 0.5, 0.1, 0.5: SE 0.115

    decision = engine.choose_parent(
        board, current=(3, 1.0, 0.3, own), fresh_probability=0.0, rng=np.random.default_rng(0)
    )

    assert decision == engine.ParentDecision("keep_current", 3)
    # without shared windows the unpaired SE sqrt(0.05^2 + 0.05^2) = 0.07 is below the 0.1 gap
    far = [(7, 1.1, 1, 0.05, None)]
    switch = engine.choose_parent(
        far, current=(3, 1.0, 0.05, None), fresh_probability=0.0, rng=np.random.default_rng(0)
    )
    assert switch == engine.ParentDecision("parent", 7)


def test_an_agent_without_a_stored_se_is_read_with_its_sub_windows_and_an_undefined_sharpe_counts_as_zero():
    assert engine.score_se(0.42, _subs(1.0, 2.0, 3.0, 6.0)) == 0.42
    assert engine.score_se(None, _subs(1.0, 2.0, 3.0, 6.0)) == pytest.approx(math.sqrt(14 / 3) / 2)
    assert engine.score_se(None, _subs(1.0, None)) == pytest.approx(0.5)
    assert engine.score_se(None, []) is None


def test_the_one_se_members_are_the_agents_within_the_best_ones_se():
    rows = [(1, 0.5, 1, 0.1, None), (2, 1.0, 2, 0.3, None), (3, 0.8, 3, 0.1, None), (4, None, 4, None, None)]
    assert engine.one_se_member_ids(rows) == [2, 3]

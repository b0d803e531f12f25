"""Leaderboard policy: ranking, parent selection, PBT mutation and pruning."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer.errors import ConfigError
from trainer.mutation import mutate
from trainer.tournament import (
    FRESH,
    KEEP_CURRENT,
    PARENT,
    Entry,
    prune,
    rank,
    select_parent,
    selection_probabilities,
)

BOARD = [Entry("a", 1.0, 0), Entry("b", 2.0, 1), Entry("c", 3.0, 2)]


def test_scores_one_two_three_give_the_podracer_probabilities():
    p = selection_probabilities([1.0, 2.0, 3.0])
    assert p == pytest.approx([0.0626, 0.2129, 0.7245], abs=5e-5)
    assert p.sum() == pytest.approx(1.0)


def test_probabilities_use_the_population_standard_deviation():
    # z-scores with ddof 0 are +-sqrt(3/2); with ddof 1 they would be +-1 and give 0.665 for the best
    z = np.array([-1.0, 0.0, 1.0]) * math.sqrt(1.5)
    expected = np.exp(z) / np.exp(z).sum()
    assert selection_probabilities([1.0, 2.0, 3.0]) == pytest.approx(expected, abs=1e-12)
    assert selection_probabilities([1.0, 2.0, 3.0])[2] != pytest.approx(0.6652, abs=1e-3)


def test_probabilities_do_not_change_when_scores_are_shifted_or_scaled():
    base = selection_probabilities([0.3, -1.2, 2.5, 0.9])
    assert selection_probabilities([10 * s + 7 for s in (0.3, -1.2, 2.5, 0.9)]) == pytest.approx(base, abs=1e-12)


def test_single_entry_and_equal_scores_are_uniform_without_nan():
    assert selection_probabilities([0.7]).tolist() == [1.0]
    p = selection_probabilities([1.5, 1.5, 1.5, 1.5])
    assert p.tolist() == [0.25] * 4
    assert selection_probabilities([]).size == 0


def test_unscored_entries_are_never_picked_unless_nothing_is_scored():
    p = selection_probabilities([None, 1.0, float("nan"), 1.0])
    assert p.tolist() == [0.0, 0.5, 0.0, 0.5]
    assert selection_probabilities([None, None]).tolist() == [0.5, 0.5]


def test_infinite_score_is_a_config_error_naming_the_entry():
    with pytest.raises(ConfigError) as err:
        selection_probabilities([1.0, float("inf")])
    assert err.value.details["field"] == "scores[1]"


def test_new_pod_samples_parents_at_the_selection_frequencies():
    rng = np.random.default_rng(0)
    n = 20_000
    picks = [select_parent(BOARD, current_score=None, fresh_probability=0.0, rng=rng) for _ in range(n)]
    assert all(c.action == PARENT for c in picks)
    freq = np.array([sum(c.parent.agent_id == e.agent_id for c in picks) for e in BOARD]) / n
    assert freq == pytest.approx([0.0626, 0.2129, 0.7245], abs=0.01)


def test_fresh_starts_happen_at_the_fresh_probability():
    rng = np.random.default_rng(1)
    n = 10_000
    fresh = sum(select_parent(BOARD, current_score=None, fresh_probability=0.3, rng=rng).is_fresh for _ in range(n))
    assert fresh / n == pytest.approx(0.3, abs=0.015)
    always = select_parent(BOARD, current_score=5.0, fresh_probability=1.0, rng=rng)
    assert always.action == FRESH


def test_pod_switches_only_to_a_parent_better_than_its_own_agent():
    rng = np.random.default_rng(2)
    n = 10_000
    choices = [select_parent(BOARD, current_score=2.5, fresh_probability=0.0, rng=rng) for _ in range(n)]
    switched = [c for c in choices if c.action == PARENT]
    assert {c.parent.agent_id for c in switched} == {"c"}
    assert len(switched) / n == pytest.approx(0.7245, abs=0.015)
    kept = [c for c in choices if c.keeps_current]
    assert all(c.parent is None and c.candidate.score <= 2.5 for c in kept)


def test_pod_with_an_equal_or_better_agent_keeps_it():
    rng = np.random.default_rng(3)
    for _ in range(200):
        assert select_parent(BOARD, current_score=3.0, fresh_probability=0.0, rng=rng).action == KEEP_CURRENT


def test_empty_board_means_fresh_for_a_new_pod_and_keep_for_a_trained_one():
    rng = np.random.default_rng(4)
    assert select_parent([], current_score=None, fresh_probability=0.0, rng=rng).action == FRESH
    assert select_parent([], current_score=0.1, fresh_probability=0.0, rng=rng).action == KEEP_CURRENT


def test_unscored_pod_agent_switches_to_a_scored_parent():
    rng = np.random.default_rng(5)
    assert select_parent(BOARD, current_score=float("nan"), fresh_probability=0.0, rng=rng).action == PARENT


def test_fresh_probability_outside_zero_one_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        select_parent(BOARD, current_score=None, fresh_probability=1.5, rng=np.random.default_rng())
    assert err.value.details["field"] == "fresh_probability"


def test_rank_orders_by_score_and_breaks_ties_by_age():
    entries = [Entry("new", 2.0, 9), Entry("low", 1.0, 0), Entry("old", 2.0, 3), Entry("none", None, 1)]
    assert [e.agent_id for e in rank(entries, 3)] == ["old", "new", "low"]
    assert [e.agent_id for e in rank(entries, 10)] == ["old", "new", "low", "none"]
    assert rank(entries, 0) == []


def test_pruning_keeps_the_top_entries_never_the_lowest():
    # Regression: ElegantRL's reference code sorted ascending and kept the worst.
    entries = [Entry(i, s, i) for i, s in enumerate([5.0, 1.0, 3.0, 4.0, 2.0])]
    keep, drop = prune(entries, 2)
    assert [e.score for e in keep] == [5.0, 4.0]
    assert [e.score for e in drop] == [3.0, 2.0, 1.0]
    assert min(e.score for e in keep) > max(e.score for e in drop)


def test_pruning_a_tie_keeps_the_older_agent():
    keep, drop = prune([Entry("young", 1.0, 7), Entry("old", 1.0, 2)], 1)
    assert [e.agent_id for e in keep] == ["old"] and [e.agent_id for e in drop] == ["young"]


def test_negative_k_is_a_config_error():
    with pytest.raises(ConfigError):
        prune(BOARD, -1)


HP = {"learning_rate": 3e-4, "batch_size": 512, "gamma": 0.99, "algo_name": "ppo"}
BOUNDS = {"learning_rate": (1e-5, 1e-3), "batch_size": (64, 600), "gamma": (0.9, 0.995)}


def test_mutation_multiplies_by_a_factor_and_stays_within_bounds():
    rng = np.random.default_rng(6)
    seen_lr = set()
    for _ in range(300):
        new, mutations = mutate(HP, BOUNDS, rng=rng)
        for name, (low, high) in BOUNDS.items():
            assert low <= new[name] <= high
        assert new["algo_name"] == "ppo"
        assert isinstance(new["batch_size"], int)
        seen_lr.add(round(new["learning_rate"] / HP["learning_rate"], 12))
        # 0.99 * 0.8 = 0.792 clips up to 0.9; 0.99 * 1.2 = 1.188 clips down to 0.995
        assert new["gamma"] in (0.9, 0.995)
        assert new["batch_size"] in (410, 600)
        for name, (old, value) in mutations.items():
            assert old == HP[name] and value == new[name] and old != value
    assert seen_lr == {0.8, 1.2}
    assert HP["learning_rate"] == 3e-4  # input untouched


def test_mutation_at_a_bound_that_cannot_move_records_no_mutation():
    rng = np.random.default_rng(7)
    _, mutations = mutate({"x": 2.0}, {"x": (2.0, 2.0)}, rng=rng)
    assert mutations == {}


def test_mutation_probability_zero_changes_nothing():
    new, mutations = mutate(HP, BOUNDS, rng=np.random.default_rng(8), probability=0.0)
    assert new == HP and mutations == {}


def test_mutation_rejects_bounds_without_values_and_inverted_bounds():
    rng = np.random.default_rng(9)
    with pytest.raises(ConfigError) as err:
        mutate(HP, {"tau": (0.001, 0.1)}, rng=rng)
    assert err.value.details["field"] == "hyperparameters.tau"
    with pytest.raises(ConfigError) as err:
        mutate(HP, {"gamma": (0.999, 0.9)}, rng=rng)
    assert err.value.details["field"] == "bounds.gamma"
    with pytest.raises(ConfigError):
        mutate(HP, {"algo_name": (0, 1)}, rng=rng)
    with pytest.raises(ConfigError) as err:
        mutate(HP, {"batch_size": (512.2, 512.8)}, rng=rng)
    assert err.value.details["field"] == "bounds.batch_size"


def _walk(start, bounds, steps=200, seed=0):
    """Values visited by ``steps`` successive mutations of one hyperparameter from ``start``."""
    rng = np.random.default_rng(seed)
    hp = {"x": start}
    visited = {start}
    for _ in range(steps):
        before = hp["x"]
        hp, mutations = mutate(hp, {"x": bounds}, factors=(0.8, 1.25), rng=rng)
        assert bounds[0] <= hp["x"] <= bounds[1]
        assert hp["x"] != before and mutations == {"x": [before, hp["x"]]}  # every mutation moves
        visited.add(hp["x"])
    return visited


def test_integer_hyperparameters_move_at_least_one_step_and_zero_leaves_zero():
    # update_epochs=2 and num_minibatches=1 never moved under round(2 * 0.8) / round(1 * 1.25)
    from_two = _walk(2, (1, 100))
    from_one = _walk(1, (1, 64))
    from_zero = _walk(0.0, (0.0, 0.1))
    assert len(from_two) >= 3 and all(isinstance(v, int) for v in from_two)
    assert len(from_one) >= 3 and all(isinstance(v, int) for v in from_one)
    assert len(from_zero) >= 3


def test_single_mutations_follow_the_documented_rules():
    rng = np.random.default_rng(3)
    outcomes = {mutate({"e": 2}, {"e": (1, 100)}, factors=(0.8, 1.25), rng=rng)[0]["e"] for _ in range(50)}
    assert outcomes == {1, 3}
    # at its lower bound 1 a downward draw turns around: always 2
    outcomes = {mutate({"m": 1}, {"m": (1, 8)}, factors=(0.8, 1.25), rng=rng)[0]["m"] for _ in range(50)}
    assert outcomes == {2}
    # 0.0 moves by 1 % of the bound's magnitude, the downward draw turned around at 0
    outcomes = {mutate({"c": 0.0}, {"c": (0.0, 0.1)}, factors=(0.8, 1.25), rng=rng)[0]["c"] for _ in range(50)}
    assert outcomes == {0.001}
    # a symmetric range lets zero go either way
    outcomes = {mutate({"c": 0.0}, {"c": (-0.5, 0.5)}, factors=(0.8, 1.25), rng=rng)[0]["c"] for _ in range(50)}
    assert outcomes == {-0.005, 0.005}

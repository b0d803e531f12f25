"""Leaderboard policy of tournament-based ensemble training (pure functions, no I/O).

ElegantRL-Podracer (Liu et al. 2021, arXiv 2112.05923, section 3) trains a population of
agents in pods. After each generation a pod submits its agent to a leaderboard that keeps the
best ``K``; a pod starting a new generation either starts from scratch or takes an agent from
the leaderboard, sampled with probability growing with its score. Population-based training
(Jaderberg et al., 2017, arXiv 1711.09846, "explore" step) then perturbs the hyperparameters of
the copied agent by a random factor.

Scores are "higher is better" (Paddock uses the validation Sharpe ratio). A score of ``None``
or NaN means "not scored" (e.g. a policy that never traded has no Sharpe ratio): such entries
rank after every scored one and are only sampled when nothing on the board has a score.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.errors import ConfigError

FRESH = "fresh"
KEEP_CURRENT = "keep_current"
PARENT = "parent"


@dataclass(frozen=True)
class Entry:
    """One agent on the leaderboard.

    Attributes:
        agent_id: identifier of the agent (database id, checkpoint name, ...).
        score: evaluation score, higher is better; ``None``/NaN when the agent has none.
        created_seq: creation order; lower means older. Breaks ties between equal scores.
    """

    agent_id: Hashable
    score: float | None
    created_seq: int


@dataclass(frozen=True)
class ParentChoice:
    """What a pod should start its next generation from.

    Attributes:
        action: ``"fresh"`` (new random agent), ``"keep_current"`` (continue the pod's own
            agent) or ``"parent"`` (copy ``parent`` from the leaderboard).
        parent: the chosen leaderboard entry when ``action == "parent"``, else ``None``.
        candidate: the entry that was sampled, also when the pod kept its own better agent
            (``None`` for fresh starts and empty boards); useful for logs.
    """

    action: str
    parent: Entry | None = None
    candidate: Entry | None = None

    @property
    def is_fresh(self) -> bool:
        return self.action == FRESH

    @property
    def keeps_current(self) -> bool:
        return self.action == KEEP_CURRENT


def _score_value(score: Any, field: str) -> float:
    """A score as float; NaN for unscored (None/NaN). Raises ConfigError for inf or non-numbers."""
    if score is None:
        return math.nan
    try:
        value = float(score)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{field} must be a number or None, got {score!r}", field=field) from exc
    if math.isinf(value):
        raise ConfigError(f"{field} must be finite, got {value}", field=field)
    return value


def _sort_key(entry: Entry) -> tuple[int, float, int, str]:
    score = _score_value(entry.score, "score")
    unscored = math.isnan(score)
    return (int(unscored), 0.0 if unscored else -score, int(entry.created_seq), str(entry.agent_id))


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise ConfigError(f"k (leaderboard size) must be a non-negative integer, got {k!r}", field="k")
    return int(k)


def rank(entries: Sequence[Entry], k: int) -> list[Entry]:
    """The best ``k`` entries, best first.

    Order: higher score first; equal scores put the older entry (lower ``created_seq``) first;
    unscored entries come last.

    Args:
        entries: leaderboard entries, in any order.
        k: how many to return (fewer if there are fewer entries).

    Returns:
        Up to ``k`` entries, best first.

    Raises:
        ConfigError: ``k`` is negative or not an integer (``field="k"``), or a score is
            infinite or not a number (``field="score"``).
    """
    k = _check_k(k)
    return sorted(entries, key=_sort_key)[:k]


def prune(entries: Sequence[Entry], k: int) -> tuple[list[Entry], list[Entry]]:
    """Split the board into the best ``k`` entries to keep and the rest to drop.

    The ordering is :func:`rank`'s. (ElegantRL's reference code sorted scores ascending and
    kept the head of the list, i.e. the worst agents; this keeps the best.)

    Args:
        entries: leaderboard entries.
        k: leaderboard capacity.

    Returns:
        ``(keep, drop)``: ``keep`` best first, ``drop`` best first (worst last).

    Raises:
        ConfigError: as :func:`rank`.
    """
    k = _check_k(k)
    ordered = sorted(entries, key=_sort_key)
    return ordered[:k], ordered[k:]


def selection_probabilities(scores: Sequence[float | None]) -> np.ndarray:
    """Probability of picking each entry as a parent: softmax of the z-scored scores.

    ``z = (s - mean(s)) / std(s)`` with the population standard deviation (ddof 0, NumPy's
    default, as in the ElegantRL-Podracer tournament code), then ``p = exp(z) / sum(exp(z))``.
    Scores ``[1, 2, 3]`` give ``[0.0626, 0.2129, 0.7245]``. The result does not change if all
    scores are shifted or scaled by a positive factor.

    Args:
        scores: (K,) scores, higher is better; ``None``/NaN for unscored entries.

    Returns:
        (K,) float64 probabilities summing to 1 (empty for no scores). Equal scores (and a
        single entry) give a uniform distribution; unscored entries get 0 unless nothing is
        scored, in which case the distribution is uniform over all.

    Raises:
        ConfigError: a score is infinite or not a number (``field="scores[i]"``).
    """
    s = np.array([_score_value(x, f"scores[{i}]") for i, x in enumerate(scores)], dtype=np.float64)
    if s.size == 0:
        return s
    scored = ~np.isnan(s)
    if not scored.any():
        return np.full(s.size, 1.0 / s.size)
    values = s[scored]
    std = values.std()
    z = (values - values.mean()) / std if std > 0 else np.zeros_like(values)
    weights = np.exp(z - z.max())  # shifting by max(z) avoids overflow, same softmax
    p = np.zeros(s.size)
    p[scored] = weights / weights.sum()
    return p


def select_parent(
    entries: Sequence[Entry],
    *,
    current_score: float | None,
    fresh_probability: float,
    rng: np.random.Generator,
) -> ParentChoice:
    """Decide what a pod starts its next generation from.

    1. With probability ``fresh_probability`` start fresh (exploration of new seeds).
    2. Otherwise sample a candidate from ``entries`` with :func:`selection_probabilities`.
    3. A pod that has no agent yet (``current_score is None``) takes the candidate (or starts
       fresh if the board is empty). A pod with an agent switches only to a candidate that
       scores strictly higher than its own agent, and otherwise keeps its agent. A pod whose
       own agent is unscored (NaN) switches to any scored candidate.

    Args:
        entries: the leaderboard (normally the top ``K``).
        current_score: score of the pod's current agent, ``None`` when it has none.
        fresh_probability: chance in [0, 1] of a fresh start.
        rng: NumPy random generator; exactly one ``random()`` draw is made, plus one
            ``choice`` draw when a candidate is sampled.

    Returns:
        A :class:`ParentChoice`.

    Raises:
        ConfigError: ``fresh_probability`` outside [0, 1] (``field="fresh_probability"``), or a
            bad score (see :func:`selection_probabilities`).
    """
    fp = _score_value(fresh_probability, "fresh_probability")
    if not 0.0 <= fp <= 1.0:
        raise ConfigError(f"fresh_probability must be in [0, 1], got {fresh_probability!r}", field="fresh_probability")
    has_agent = current_score is not None
    own = _score_value(current_score, "current_score") if has_agent else math.nan
    if rng.random() < fp:
        return ParentChoice(FRESH)
    if not entries:
        return ParentChoice(KEEP_CURRENT if has_agent else FRESH)
    p = selection_probabilities([e.score for e in entries])
    candidate = entries[int(rng.choice(len(entries), p=p))]
    if not has_agent:
        return ParentChoice(PARENT, parent=candidate, candidate=candidate)
    cand = _score_value(candidate.score, "score")
    better = not math.isnan(cand) and (math.isnan(own) or cand > own)
    if better:
        return ParentChoice(PARENT, parent=candidate, candidate=candidate)
    return ParentChoice(KEEP_CURRENT, candidate=candidate)


ZERO_STEP_FRACTION = 0.01
"""A continuous hyperparameter at 0.0 moves by this fraction of ``max(|low|, |high|)``."""


def _perturb(old: Any, factor: float, low: float, high: float) -> Any:
    """One perturbation of ``old`` by ``factor`` within ``[low, high]`` (rules in :func:`mutate`)."""
    direction = (factor > 1.0) - (factor < 1.0)
    if isinstance(old, int | np.integer):
        lo, hi = math.ceil(low), math.floor(high)
        value = int(round(float(old) * factor))
        if value == old:
            value = int(old) + direction
        # rounding could step just outside a fractional bound; pull back inside
        return min(max(value, lo), hi)
    if float(old) == 0.0:
        value = direction * ZERO_STEP_FRACTION * max(abs(low), abs(high))
    else:
        value = float(old) * factor
    return min(max(value, low), high)


def mutate(
    hyperparameters: Mapping[str, Any],
    bounds: Mapping[str, tuple[float, float]],
    *,
    factors: Sequence[float] = (0.8, 1.2),
    rng: np.random.Generator,
    probability: float = 1.0,
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Perturb hyperparameters PBT-style: multiply each by a random factor, clip to bounds.

    For every name in ``bounds`` (in its order), with probability ``probability`` the value is
    multiplied by one of ``factors`` chosen uniformly and clipped to ``[low, high]``
    (Jaderberg et al., 2017, "perturb"). Names not in ``bounds`` are copied unchanged. Three
    rules keep a perturbation from being a silent no-op:

    - **Integers move at least one step.** The scaled value is rounded; when rounding gives
      the old value back (``2 * 0.8 = 1.6 -> 2``, ``1 * 1.25 -> 1``) the value moves one step
      in the factor's direction (factor < 1 down, > 1 up).
    - **Zero leaves zero by an additive step.** A continuous value at 0.0 (``ent_coef``)
      cannot be scaled, so it moves by ``ZERO_STEP_FRACTION`` (1 %) of the bounds' largest
      magnitude ``max(|low|, |high|)`` in the factor's direction; with bounds ``(0, 0.1)``,
      ``0.0 -> 0.001``, and later mutations scale it as usual.
    - **A bound turns the move around.** When clipping to ``[low, high]`` leaves the value
      where it was (an integer at ``high`` drawn upwards), it moves the same way in the other
      direction instead. Only bounds with ``low == high`` (or a zero value with bounds
      ``(0, 0)``) leave a value unchanged.

    Worked example, factors ``(0.8, 1.25)``: ``update_epochs=2`` becomes 1 or 3;
    ``num_minibatches=1`` with bounds ``(1, 8)`` becomes 2 either way; ``ent_coef=0.0`` with
    bounds ``(0, 0.1)`` becomes 0.001.

    Args:
        hyperparameters: current values, e.g. ``{"learning_rate": 3e-4, "batch_size": 512}``.
        bounds: ``{name: (low, high)}`` of the hyperparameters that may change.
        factors: multiplicative perturbations (> 0).
        rng: NumPy random generator.
        probability: chance in [0, 1] that each bounded hyperparameter is perturbed.

    Returns:
        ``(new_hyperparameters, mutations)``: a new dict (the input is not modified) and
        ``{name: [old, new]}`` for each value that actually changed.

    Raises:
        ConfigError: a bounded name is missing from ``hyperparameters`` or not a number,
            ``low > high``, a factor is not positive, or ``probability`` is outside [0, 1]
            (``field`` names the offender, e.g. ``"bounds.learning_rate"``).
    """
    prob = _score_value(probability, "probability")
    if not 0.0 <= prob <= 1.0:
        raise ConfigError(f"probability must be in [0, 1], got {probability!r}", field="probability")
    if len(factors) == 0:
        raise ConfigError("factors must not be empty", field="factors")
    for i, f in enumerate(factors):
        if not _score_value(f, f"factors[{i}]") > 0:
            raise ConfigError(f"factors must be positive, got {f!r}", field=f"factors[{i}]")
    new = dict(hyperparameters)
    mutations: dict[str, list[Any]] = {}
    for name, bound in bounds.items():
        field = f"bounds.{name}"
        try:
            low, high = (float(b) for b in bound)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{field} must be a (low, high) pair of numbers, got {bound!r}", field=field) from exc
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise ConfigError(f"{field} must have finite low <= high, got {bound!r}", field=field)
        if name not in new:
            raise ConfigError(f"hyperparameter {name!r} has bounds but no value", field=f"hyperparameters.{name}")
        old = new[name]
        if isinstance(old, bool) or not isinstance(old, int | float | np.integer | np.floating):
            raise ConfigError(
                f"hyperparameter {name!r} must be a number to mutate, got {old!r}", field=f"hyperparameters.{name}"
            )
        if isinstance(old, int | np.integer) and math.ceil(low) > math.floor(high):
            raise ConfigError(f"{field} holds no whole number for integer {name!r}, got {bound!r}", field=field)
        if rng.random() >= prob:
            continue
        factor = float(factors[int(rng.integers(len(factors)))])
        value = _perturb(old, factor, low, high)
        if value == old and factor != 1.0:
            value = _perturb(old, 1.0 / factor, low, high)  # at a bound: move the other way
        if value != old:
            new[name] = value
            mutations[name] = [old, value]
    return new, mutations

"""Leaderboard policy of tournament-based ensemble training (pure functions, no I/O).

ElegantRL-Podracer (Liu et al. 2021, arXiv 2112.05923, section 3) trains a population of
agents in pods. After each generation a pod submits its agent to a leaderboard that keeps the
best ``K``; a pod starting a new generation either starts from scratch or takes an agent from
the leaderboard, sampled with probability growing with its score. Population-based training
(Jaderberg et al., 2017, arXiv 1711.09846, "explore" step) then perturbs the hyperparameters of
the copied agent by a random factor (:func:`trainer.mutation.mutate`).

Scores are "higher is better" (Paddock uses the validation Sharpe ratio). A score of ``None``
or NaN means "not scored" (e.g. a policy that never traded has no Sharpe ratio): such entries
rank after every scored one and are only sampled when nothing on the board has a score.

Every score carries its noise. A score's standard error (``Entry.se``, from the dispersion of
its validation sub-windows, :func:`trainer.selection.score_standard_error`) and its
per-window scores (``Entry.windows``) decide three things:

* **Parents** are sampled with weights ``exp((score - best) / SE)``
  (:func:`selection_probabilities`): an agent one SE behind the best is ``e`` times less
  likely than the best, however the board's scores are spread.
* **Replacement.** A pod gives up its own agent only for one better by more than one SE of
  the difference (:func:`difference_se`, :func:`beats_by_one_se`): paired when both agents
  were scored on the same windows, ``sqrt(se1^2 + se2^2)`` otherwise.
* **The deliverable** is the ensemble of every agent within one SE of the best
  (:func:`one_se_members`), not the argmax of a noisy board.
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
        se: standard error of ``score`` (same units, >= 0); ``None`` when unknown.
        windows: ``(label, score)`` per validation sub-window, e.g.
            ``(("2021-01-04/2021-03-31", 0.8), ...)``; two entries with the same labels were
            scored on the same days, so their difference has a paired SE. Empty when unknown.
    """

    agent_id: Hashable
    score: float | None
    created_seq: int
    se: float | None = None
    windows: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ParentChoice:
    """What a pod should start its next generation from.

    Attributes:
        action: ``"fresh"`` (new random agent), ``"keep_current"`` (continue the pod's own
            agent) or ``"parent"`` (copy ``parent`` from the leaderboard).
        parent: the chosen leaderboard entry when ``action == "parent"``, else ``None``.
        candidate: the entry that was sampled, also when the pod kept its own better agent
            (``None`` for fresh starts and empty boards); useful for logs.
        difference_se: the SE of ``candidate - current`` the replacement was judged with
            (``None`` when the pod had no agent or no SE was known).
        paired: whether ``difference_se`` is paired (same windows); ``None`` with no SE.
    """

    action: str
    parent: Entry | None = None
    candidate: Entry | None = None
    difference_se: float | None = None
    paired: bool | None = None

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


def _se_value(se: Any, field: str) -> float:
    """An SE as float; NaN when unknown (None). Raises ConfigError when negative or not finite."""
    value = _score_value(se, field)
    if value < 0:
        raise ConfigError(f"{field} must be >= 0, got {se!r}", field=field)
    return value


def selection_probabilities(scores: Sequence[float | None], ses: Sequence[float | None] | None = None) -> np.ndarray:
    """Probability of picking each entry as a parent: ``softmax((s - best) / SE)``.

    ``z_i = (s_i - max(s)) / SE_i`` with ``SE_i`` the entry's standard error, then
    ``p = exp(z) / sum(exp(z))``: the best entry has ``z = 0`` and an entry ``k`` of its own
    SEs behind has ``e^k`` times less weight. An entry without an SE is read with the
    board's spread, the population standard deviation of the scored entries (ddof 0); with no
    SE at all this is the old softmax of the board's z-scores (ElegantRL-Podracer's rule:
    a softmax does not change when every ``z`` shifts by the same amount). An SE of 0 gives an
    entry below the best no weight.

    Worked example: scores ``[1.0, 0.8, 0.2]`` with SEs ``[0.1, 0.2, 0.3]`` give
    ``z = [0, -1, -2.667]`` and ``p = [0.6957, 0.2559, 0.0483]``; without SEs (z-scores of the
    board) ``[1, 2, 3]`` give ``[0.0626, 0.2129, 0.7245]``.

    Args:
        scores: (K,) scores, higher is better; ``None``/NaN for unscored entries.
        ses: (K,) standard errors (>= 0, same units as ``scores``), ``None`` where unknown;
            ``None`` for none known.

    Returns:
        (K,) float64 probabilities summing to 1 (empty for no scores). Equal scores (and a
        single entry) give a uniform distribution over the best; unscored entries get 0
        unless nothing is scored, in which case the distribution is uniform over all.

    Raises:
        ConfigError: a score is infinite or not a number (``field="scores[i]"``), an SE is
            negative, infinite or not a number (``field="ses[i]"``), or ``ses`` has another
            length than ``scores`` (``field="ses"``).
    """
    s = np.array([_score_value(x, f"scores[{i}]") for i, x in enumerate(scores)], dtype=np.float64)
    if ses is None:
        ses = [None] * s.size
    if len(ses) != s.size:
        raise ConfigError(f"ses must have one entry per score ({s.size}), got {len(ses)}", field="ses")
    se = np.array([_se_value(x, f"ses[{i}]") for i, x in enumerate(ses)], dtype=np.float64)
    if s.size == 0:
        return s
    scored = ~np.isnan(s)
    if not scored.any():
        return np.full(s.size, 1.0 / s.size)
    values, spread = s[scored], se[scored]
    spread = np.where(np.isnan(spread), values.std(), spread)
    gap = values - values.max()  # <= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(gap == 0, 0.0, gap / spread)  # gap < 0 with SE 0: -inf, no weight
    weights = np.exp(z)  # z <= 0 with max 0: no overflow
    p = np.zeros(s.size)
    p[scored] = weights / weights.sum()
    return p


def difference_se(a: Entry, b: Entry) -> tuple[float | None, bool | None]:
    """Standard error of ``a.score - b.score``, and whether it is paired.

    Paired when both entries carry per-window scores on the same windows (same labels, at
    least 2): ``std(d, ddof=1) / sqrt(W)`` of the differences ``d_w = a_w - b_w``, which drops
    the noise the two share (a bad quarter for the market is bad for both). Otherwise
    unpaired, ``sqrt(se_a^2 + se_b^2)`` (an unknown SE counts as 0), which ignores that
    correlation and so is usually larger.

    Worked example: windows ``a = (1.0, 2.0, 0.5)``, ``b = (0.6, 1.4, 0.3)`` give
    ``d = (0.4, 0.6, 0.2)``, ``SE = 0.2 / sqrt(3) = 0.1155`` (paired).

    Returns:
        ``(se, paired)``; ``(None, None)`` when neither SE nor shared windows are known.

    Raises:
        ConfigError: a window score or an SE that is not a finite number (``field`` names it).
    """
    labels_a = [label for label, _ in a.windows]
    if len(labels_a) >= 2 and labels_a == [label for label, _ in b.windows]:
        d = np.array(
            [
                _score_value(x, f"windows[{i}]") - _score_value(y, f"windows[{i}]")
                for i, ((_, x), (_, y)) in enumerate(zip(a.windows, b.windows))
            ]
        )
        if not np.isnan(d).any():
            return float(d.std(ddof=1) / math.sqrt(d.size)), True
    se_a, se_b = _se_value(a.se, "se"), _se_value(b.se, "se")
    if math.isnan(se_a) and math.isnan(se_b):
        return None, None
    return math.hypot(0.0 if math.isnan(se_a) else se_a, 0.0 if math.isnan(se_b) else se_b), False


def beats_by_one_se(candidate: Entry, incumbent: Entry) -> tuple[bool, float | None, bool | None]:
    """Whether ``candidate`` is better than ``incumbent`` by more than one SE of the difference.

    ``candidate.score - incumbent.score > SE`` with the SE of :func:`difference_se` (paired
    when possible). A scored candidate beats an unscored incumbent; an unscored candidate
    beats nothing; with no SE known the rule is the plain ``>``. Scores 1.2 vs 1.0 with a
    paired SE of 0.25 keep the incumbent; 1.3 vs 1.0 replace it.

    Returns:
        ``(beats, se, paired)``, the last two as :func:`difference_se` gives them.

    Raises:
        ConfigError: a bad score or SE (``field`` names it).
    """
    cand, own = _score_value(candidate.score, "score"), _score_value(incumbent.score, "current_score")
    if math.isnan(cand):
        return False, None, None
    if math.isnan(own):
        return True, None, None
    se, paired = difference_se(candidate, incumbent)
    return cand - own > (se or 0.0), se, paired


def one_se_members(entries: Sequence[Entry]) -> list[Entry]:
    """The entries within one standard error of the best, best first (the one-SE rule).

    The one-standard-error rule (Breiman, Friedman, Olshen & Stone 1984, "Classification and
    Regression Trees", section 3.4.3; Hastie, Tibshirani & Friedman 2009, "The Elements of
    Statistical Learning", section 7.10): every entry whose score is at least
    ``best - SE_best`` is as good as the best within the noise of the best's own score. The
    ensemble of these members is the run's deliverable, instead of the luckiest of them.

    Worked example: scores ``[1.0 ± 0.3, 0.8, 0.75, 0.5]`` give the first three (``>= 0.7``).
    A best entry without an SE keeps only the entries tied with it.

    Args:
        entries: the leaderboard, any order.

    Returns:
        The members in :func:`rank` order (empty when no entry is scored).

    Raises:
        ConfigError: a bad score or SE (``field`` names it).
    """
    ordered = [e for e in sorted(entries, key=_sort_key) if not math.isnan(_score_value(e.score, "score"))]
    if not ordered:
        return []
    best = ordered[0]
    se = _se_value(best.se, "se")
    floor = float(best.score) - (0.0 if math.isnan(se) else se)
    return [e for e in ordered if float(e.score) >= floor]


def metric_windows(sub_windows: Any) -> tuple[tuple[str, float], ...]:
    """``("start/end", sharpe)`` per stored validation sub-window (``metrics["sub_windows"]``,
    ``[{"start", "end", "sharpe"}, ...]``); an undefined Sharpe counts as 0, as the score counts
    it. Empty when there are none or one entry is unreadable."""
    out = []
    for window in sub_windows or ():
        if not isinstance(window, Mapping):
            return ()
        sharpe = window.get("sharpe")
        out.append((f"{window.get('start')}/{window.get('end')}", 0.0 if sharpe is None else float(sharpe)))
    return tuple(out)


def metric_se(score_se: float | None, sub_windows: Any) -> float | None:
    """The SE a score carries: the stored one, else (a score stored without one) the dispersion
    of its sub-window Sharpe ratios (:func:`trainer.selection.window_standard_error`); ``None``
    when neither is known."""
    if score_se is not None:
        return float(score_se)
    from trainer.selection import window_standard_error

    windows = metric_windows(sub_windows)
    return window_standard_error([v for _, v in windows]) if len(windows) >= 2 else None


def entry_from_metrics(
    agent_id: Hashable, score: float | None, created_seq: int, score_se: float | None, sub_windows: Any
) -> Entry:
    """The :class:`Entry` of a scored agent from what a generation reports and the web stores:
    its ``score``, ``metrics["score_se"]`` and ``metrics["sub_windows"]`` (see
    :func:`metric_se` and :func:`metric_windows`)."""
    return Entry(agent_id, score, created_seq, metric_se(score_se, sub_windows), metric_windows(sub_windows))


def select_parent_for(
    entries: Sequence[Entry], current: Entry | None, *, fresh_probability: float, rng: np.random.Generator
) -> ParentChoice:
    """:func:`select_parent` for a pod whose own agent is ``current`` (``None``: it has none),
    with that agent's score, SE and windows."""
    return select_parent(
        entries,
        current_score=None if current is None else current.score,
        current_se=None if current is None else current.se,
        current_windows=() if current is None else current.windows,
        fresh_probability=fresh_probability,
        rng=rng,
    )


def select_parent(
    entries: Sequence[Entry],
    *,
    current_score: float | None,
    fresh_probability: float,
    rng: np.random.Generator,
    current_se: float | None = None,
    current_windows: Sequence[tuple[str, float]] = (),
) -> ParentChoice:
    """Decide what a pod starts its next generation from.

    1. With probability ``fresh_probability`` start fresh (exploration of new seeds).
    2. Otherwise sample a candidate from ``entries`` with :func:`selection_probabilities`
       (weights ``exp((score - best) / SE)``).
    3. A pod that has no agent yet (``current_score is None``) takes the candidate (or starts
       fresh if the board is empty). A pod with an agent switches only to a candidate better
       by more than one SE of the difference (:func:`beats_by_one_se`; paired when the two
       share windows), and otherwise keeps its agent. A pod whose own agent is unscored (NaN)
       switches to any scored candidate.

    Args:
        entries: the leaderboard (normally the top ``K``).
        current_score: score of the pod's current agent, ``None`` when it has none.
        fresh_probability: chance in [0, 1] of a fresh start.
        rng: NumPy random generator; exactly one ``random()`` draw is made, plus one
            ``choice`` draw when a candidate is sampled.
        current_se: the current agent's SE (``None``: unknown).
        current_windows: the current agent's ``(label, score)`` per window (see :class:`Entry`).

    Returns:
        A :class:`ParentChoice`.

    Raises:
        ConfigError: ``fresh_probability`` outside [0, 1] (``field="fresh_probability"``), or a
            bad score or SE (see :func:`selection_probabilities`).
    """
    fp = _score_value(fresh_probability, "fresh_probability")
    if not 0.0 <= fp <= 1.0:
        raise ConfigError(f"fresh_probability must be in [0, 1], got {fresh_probability!r}", field="fresh_probability")
    has_agent = current_score is not None
    if has_agent:
        _score_value(current_score, "current_score")
        _se_value(current_se, "current_se")
    if rng.random() < fp:
        return ParentChoice(FRESH)
    if not entries:
        return ParentChoice(KEEP_CURRENT if has_agent else FRESH)
    p = selection_probabilities([e.score for e in entries], [e.se for e in entries])
    candidate = entries[int(rng.choice(len(entries), p=p))]
    if not has_agent:
        return ParentChoice(PARENT, parent=candidate, candidate=candidate)
    own = Entry("current", current_score, -1, current_se, tuple((str(k), v) for k, v in current_windows))
    better, se, paired = beats_by_one_se(candidate, own)
    if better:
        return ParentChoice(PARENT, parent=candidate, candidate=candidate, difference_se=se, paired=paired)
    return ParentChoice(KEEP_CURRENT, candidate=candidate, difference_se=se, paired=paired)

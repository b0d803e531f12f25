"""The Probability of Backtest Overfitting (PBO) by combinatorially symmetric cross-validation.

Source: Bailey, Borwein, López de Prado & Zhu, "The Probability of Backtest Overfitting",
Journal of Computational Finance 20(4), 2017 (SSRN 2326253), section 2 ("CSCV").

Given a (T, N) matrix ``M`` of per-period returns of N candidates (strategy configurations,
seeds, agents) on the same T periods:

1. Cut the rows into ``S`` (even) contiguous blocks of ``T // S`` rows each (the last
   ``T mod S`` rows are left out so every block has the same size).
2. For each of the ``C(S, S/2)`` ways to choose ``S/2`` blocks, the chosen blocks form the
   in-sample set ``J`` and the others its complement ``J̄`` (same size; every split is met with
   its mirror, hence "symmetric").
3. Rank the candidates by their in-sample performance ``R_n`` (a per-period Sharpe ratio
   ``mean / std`` of the rows in ``J``, ddof 1); ``n*`` is the in-sample best.
4. ``ω̄ = rank(R̄_{n*}) / (N + 1)``, the relative rank of ``n*``'s out-of-sample performance
   among all candidates' ``R̄`` on ``J̄`` (rank 1 = worst, N = best; ties share their mean rank),
   and its logit ``λ = ln(ω̄ / (1 - ω̄))``.
5. ``PBO = #{λ_c <= 0} / C(S, S/2)``: the share of splits where the in-sample best lands at or
   below the median out of sample (the paper's ``∫_{-∞}^0 f(λ) dλ``).

Read it as: PBO near 0, selecting in-sample finds what holds out of sample; near 0.5, the
selection is as good as a coin (the candidates are indistinguishable noise); near 1, the
in-sample winner is systematically an out-of-sample loser (overfitting). With an odd ``N`` the
median rank is itself counted as ``λ <= 0``, so pure noise gives ``((N + 1) / 2) / N``, a
little above one half.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

from trainer.errors import ConfigError

__all__ = ["DEFAULT_BLOCKS", "MAX_COMBINATIONS", "PBOResult", "probability_of_backtest_overfitting"]

#: Blocks of the paper's examples (S = 16 gives 12,870 splits).
DEFAULT_BLOCKS = 16
#: Most splits computed (C(20, 10) = 184,756 is the largest S allowed); bounds time and memory.
MAX_COMBINATIONS = 200_000


@dataclass(frozen=True)
class PBOResult:
    """Outcome of :func:`probability_of_backtest_overfitting`.

    Attributes:
        pbo: share of splits with logit <= 0, in [0, 1].
        logits: (C,) float64 logits ``λ_c`` of the splits, in the order of
            ``itertools.combinations(range(S), S // 2)``; ``±inf`` never occurs (``ω̄`` lies
            strictly inside (0, 1)).
        combinations: C = C(S, S/2), the number of splits.
        blocks: S.
        candidates: N.
        rows_used: ``S x (T // S)``, the rows the blocks cover (the last ``T mod S`` are left out).
    """

    pbo: float
    logits: np.ndarray
    combinations: int
    blocks: int
    candidates: int
    rows_used: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: every field, logits as a list of floats."""
        return {
            "pbo": self.pbo,
            "logits": [float(x) for x in self.logits],
            "combinations": self.combinations,
            "blocks": self.blocks,
            "candidates": self.candidates,
            "rows_used": self.rows_used,
        }


def _check(returns: Any, blocks: Any) -> np.ndarray:
    m = np.asarray(returns, dtype=np.float64)
    if m.ndim != 2:
        raise ConfigError(f"returns: expected a (T, N) matrix, got shape {m.shape}", field="returns")
    if m.shape[1] < 2:
        raise ConfigError(
            f"returns: PBO compares candidates; got {m.shape[1]} column(s), it needs at least 2", field="returns"
        )
    bad = np.argwhere(~np.isfinite(m))
    if bad.size:
        row, col = (int(x) for x in bad[0])
        raise ConfigError(
            f"returns: row {row}, candidate {col} is {m[row, col]} ({len(bad)} non-finite value(s)); "
            "PBO needs every candidate's return on every period",
            field="returns",
            row=row,
        )
    if isinstance(blocks, bool) or not isinstance(blocks, int | np.integer) or blocks < 2 or blocks % 2:
        raise ConfigError(f"blocks: must be an even integer >= 2 (got {blocks!r})", field="blocks")
    if m.shape[0] < 2 * blocks:
        raise ConfigError(
            f"blocks: {blocks} blocks of {m.shape[0]} period(s) leave fewer than 2 rows per block; "
            f"use at most {m.shape[0] // 2 // 2 * 2} blocks or more periods",
            field="blocks",
        )
    if math.comb(int(blocks), int(blocks) // 2) > MAX_COMBINATIONS:
        raise ConfigError(
            f"blocks: {blocks} blocks make {math.comb(int(blocks), int(blocks) // 2):,} splits, more than "
            f"{MAX_COMBINATIONS:,}; use at most 20",
            field="blocks",
        )
    return m


def _sharpe(total: np.ndarray, squares: np.ndarray, count: int) -> np.ndarray:
    """Per-period Sharpe ``mean / std`` (ddof 1) from sums; a zero spread gives ``±inf`` by the
    mean's sign (a riskless gain beats any risky one) and 0 for a zero mean."""
    mean = total / count
    var = np.maximum(squares / count - mean**2, 0.0) * count / (count - 1)
    std = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(std > 0, mean / np.where(std > 0, std, 1.0), np.sign(mean) * np.inf)
    return np.nan_to_num(ratio, nan=0.0)


def probability_of_backtest_overfitting(returns: Any, *, blocks: int = DEFAULT_BLOCKS) -> PBOResult:
    """PBO of selecting the in-sample best of N candidates, by CSCV (see the module docstring).

    Args:
        returns: (T, N) per-period simple returns (fractions), one column per candidate, all on
            the same T periods, in time order; finite.
        blocks: S, the number of contiguous blocks (even, >= 2, ``T >= 2 S``; at most 20).

    Returns:
        :class:`PBOResult`.

    Raises:
        ConfigError: not a matrix, fewer than 2 candidates, a NaN or infinite value (``field``
            ``"returns"``, ``row`` the first one), ``blocks`` odd, < 2, larger than ``T / 2`` or
            above 20 (``field`` ``"blocks"``).

    Example:
        Two mirror-image candidates whose returns sum to zero over the whole sample: the one
        that wins in-sample loses out of sample on every split, so PBO = 1::

            x = rng.normal(size=400); x -= x.mean()
            probability_of_backtest_overfitting(np.c_[x, -x], blocks=8).pbo  # 1.0
    """
    m = _check(returns, blocks)
    s = int(blocks)
    rows = m.shape[0] // s
    n = m.shape[1]
    cut = m[: rows * s].reshape(s, rows, n)
    block_sum, block_sq = cut.sum(axis=1), (cut**2).sum(axis=1)  # (S, N) each
    combos = np.array(list(itertools.combinations(range(s), s // 2)), dtype=np.intp)  # (C, S/2)
    chosen = np.zeros((len(combos), s), dtype=np.float64)
    np.put_along_axis(chosen, combos, 1.0, axis=1)  # (C, S) 1 = in-sample block
    count = rows * (s // 2)
    in_sample = _sharpe(chosen @ block_sum, chosen @ block_sq, count)  # (C, N)
    rest = 1.0 - chosen
    out_sample = _sharpe(rest @ block_sum, rest @ block_sq, count)  # (C, N)
    best = np.argmax(in_sample, axis=1)  # (C,) first maximum on ties
    ranks = rankdata(out_sample, axis=1, method="average")  # 1 = worst out of sample
    omega = ranks[np.arange(len(combos)), best] / (n + 1)
    logits = np.log(omega / (1.0 - omega))
    return PBOResult(
        pbo=float(np.mean(logits <= 0.0)),
        logits=logits,
        combinations=len(combos),
        blocks=s,
        candidates=n,
        rows_used=rows * s,
    )

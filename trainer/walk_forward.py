"""Walk-forward studies: train and select per fold, test on the next span, stitch the test spans.

A study is a task plus folds (:mod:`trainer.data.folds`). In each fold every **candidate** (one
freshly trained agent per seed slot ``k = 0 .. K-1``, seed ``seed + 1000 * fold + k``) trains on
the fold's train span; the one with the best validation score (the task's selection rule) is
the fold's **selected agent**; all candidates are then run over the fold's test span, starting
with the initial cash on its first day (so the first day of each span has no return).

The **out-of-sample record** is the selected agents' daily net returns over the test spans, one
after the other, with equal weight's (the cost-free, daily-rebalanced 1/N of the same tickers,
:func:`trainer.selection.equal_weight_returns`) and QQQ's on exactly the same days; its metrics
are :func:`trainer.backtest.metrics.compute_metrics` of the stitched returns and its
``vs_equal_weight`` is :func:`trainer.backtest.relative.vs_equal_weight` against 1/N.

**PBO** (:mod:`trainer.backtest.overfitting`) is computed over the (T, K) matrix whose column
``k`` is seed slot ``k``'s test-span returns stitched over all folds (T = every test return day
of the study): the question it answers is whether picking the slot that looked best on part of
the out-of-sample days picks one that is also good on the rest, or a lucky one. It needs
``K >= 2`` and at least 4 return days; the blocks are the largest even number <= 16 that leaves
2 days a block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.backtest.engine import run_backtest
from trainer.backtest.metrics import compute_metrics
from trainer.backtest.overfitting import DEFAULT_BLOCKS, probability_of_backtest_overfitting
from trainer.backtest.relative import vs_equal_weight
from trainer.data.folds import Fold
from trainer.data.market import MarketData
from trainer.data.timestamps import infer_periods_per_year
from trainer.envs.observations import FeatureStats
from trainer.errors import TrainerError
from trainer.selection import equal_weight_returns
from trainer.task import TaskSpec
from trainer.util.jsonable import finite_or_none

__all__ = [
    "SpanReturns",
    "candidate_seed",
    "checkpoint_span_returns",
    "fold_report",
    "fold_task",
    "pbo_of_candidates",
    "relative_or_note",
    "run_study",
    "stitch",
]


@dataclass(frozen=True)
class SpanReturns:
    """Daily returns of one agent over one span, with the baselines on the same days.

    Attributes:
        dates: (T,) ``YYYY-MM-DD`` strings, the days the returns fall on (a span's days but its first).
        agent: (T,) float64 simple net returns (after the task's costs), fractions.
        equal_weight: (T,) float64 returns of the cost-free, daily-rebalanced 1/N portfolio.
        qqq: (T,) float64 QQQ returns, or ``None`` without a benchmark covering the span.
        turnover: (T,) float64 the agent's turnover on each day's trade (value traded / value),
            or ``None`` where it was not recorded.
    """

    dates: tuple[str, ...]
    agent: np.ndarray
    equal_weight: np.ndarray
    qqq: np.ndarray | None = None
    turnover: np.ndarray | None = None


def candidate_seed(seed: int, fold: int, slot: int) -> int:
    """The training seed of candidate ``slot`` in fold ``fold`` of a study seeded ``seed``."""
    return int(seed) + 1000 * int(fold) + int(slot)


def fold_task(task: Mapping[str, Any], fold: Fold) -> dict[str, Any]:
    """The task dict of one fold: ``task`` with its train/validation/test set to the fold's spans."""
    return {**dict(task), **fold.splits()}


def checkpoint_span_returns(
    checkpoint: str | Path | Mapping[str, Any],
    market: MarketData,
    *,
    split: str = "test",
    benchmark_returns: pd.Series | None = None,
    device: str = "cpu",
) -> SpanReturns:
    """Run a checkpoint's deterministic policy over a split of its task (the backtest loop).

    Args:
        checkpoint: a checkpoint file or an already loaded checkpoint dict.
        market: the task's loaded panel (covering the split).
        split: ``"test"`` (default) or ``"validation"``.
        benchmark_returns: QQQ's daily returns indexed by day (covering the split's days but its
            first), or ``None``.
        device: torch device of the env.

    Returns:
        :class:`SpanReturns` over the split.

    Raises:
        BundleError: the checkpoint does not rebuild; DataError / ConfigError: as
        :func:`trainer.backtest.engine.run_backtest`.
    """
    state = checkpoint if isinstance(checkpoint, Mapping) else load_checkpoint(checkpoint)
    task = TaskSpec.from_dict(state["task"])
    agent = build_agent(dict(state), device=device)
    stats = FeatureStats.from_dict(state["feature_stats"]) if state.get("feature_stats") else None
    start, end = task.split(split)
    tickers = list(state["observation_layout"]["tickers"])
    result = run_backtest(
        lambda obs: agent.act(obs, deterministic=True),
        market,
        task.env,
        start=start,
        end=end,
        tickers=tickers,
        device=device,
        feature_stats=stats,
        policy_name=f"the {split} run of {state.get('algorithm', 'agent')}",
    )
    values = result.daily["account_value"].to_numpy(np.float64)
    window = market.slice(start, end, name=split)
    columns = [list(window.tickers).index(t) for t in tickers]
    dates = tuple(str(d.date()) for d in result.daily.index[1:])
    qqq = None
    if benchmark_returns is not None:
        aligned = benchmark_returns.reindex(pd.DatetimeIndex(dates))
        qqq = aligned.to_numpy(np.float64) if aligned.notna().all() else None
    return SpanReturns(
        dates=dates,
        agent=values[1:] / values[:-1] - 1.0,
        equal_weight=equal_weight_returns(
            window.close[:, columns], None if window.members is None else window.members[:, columns]
        ),
        qqq=qqq,
        turnover=result.daily["turnover"].to_numpy(np.float64)[:-1],
    )


def relative_or_note(returns: np.ndarray, benchmark: np.ndarray, *, periods_per_year: int, seed: int) -> dict:
    """:func:`~trainer.backtest.relative.vs_equal_weight`, or ``{"verdict": None, "note": why}``
    when the series is too short for it (a clear note instead of an error: the rest stands)."""
    try:
        return vs_equal_weight(returns, benchmark, periods_per_year=periods_per_year, seed=seed)
    except (TrainerError, ValueError) as exc:
        return {"verdict": None, "note": f"n/a ({getattr(exc, 'message', str(exc))})"}


def pbo_of_candidates(matrix: np.ndarray) -> dict[str, Any]:
    """PBO over a (T, K) matrix of candidates' stitched test returns (see the module docstring).

    Returns:
        :meth:`~trainer.backtest.overfitting.PBOResult.to_dict` plus ``definition`` (one
        sentence), or ``{"pbo": None, "note": why}`` with fewer than 2 candidates or 4 days.
    """
    m = np.asarray(matrix, dtype=np.float64)
    definition = (
        "CSCV (Bailey, Borwein, López de Prado & Zhu 2017) over the test-span daily returns of every "
        "candidate the study trained, one column per seed slot stitched over the folds"
    )
    if m.ndim != 2 or m.shape[1] < 2 or m.shape[0] < 4:
        return {"pbo": None, "definition": definition, "note": "n/a (needs at least 2 candidates and 4 test days)"}
    blocks = min(DEFAULT_BLOCKS, m.shape[0] // 2 // 2 * 2)
    return {**probability_of_backtest_overfitting(m, blocks=blocks).to_dict(), "definition": definition}


def _metrics(dates: Sequence[str], returns: np.ndarray, qqq: np.ndarray | None, ppy: int) -> dict[str, Any]:
    index = pd.DatetimeIndex(list(dates), name="date")
    bench = pd.Series(qqq, index=index) if qqq is not None else None
    return compute_metrics(pd.Series(returns, index=index), bench, periods_per_year=ppy)


def stitch(
    spans: Sequence[SpanReturns],
    *,
    periods_per_year: int,
    seed: int = 0,
    candidates: Sequence[Sequence[SpanReturns]] = (),
) -> dict[str, Any]:
    """The out-of-sample record of a study from its folds' test spans, in fold order.

    Args:
        spans: the selected agent's :class:`SpanReturns` of each fold (test spans must not share a day).
        periods_per_year: annualisation (252 for daily data).
        seed: seed of the bootstrap in ``vs_equal_weight``.
        candidates: optional, per fold, every candidate's test :class:`SpanReturns` in seed-slot
            order (the same number in every fold), for PBO.

    Returns:
        ``{"dates", "returns", "equal_weight", "qqq" (list or None), "metrics",
        "equal_weight_metrics", "vs_equal_weight", "pbo"}``; lists of floats, JSON-able.

    Raises:
        ValueError: no spans, or two spans share a day.
    """
    if not spans:
        raise ValueError("a study's record needs at least one fold")
    dates = [d for s in spans for d in s.dates]
    if len(set(dates)) != len(dates):
        raise ValueError("the folds' test spans share a day; the record would count it twice")
    agent = np.concatenate([s.agent for s in spans])
    ew = np.concatenate([s.equal_weight for s in spans])
    qqq = np.concatenate([s.qqq for s in spans]) if all(s.qqq is not None for s in spans) else None
    record: dict[str, Any] = {
        "dates": dates,
        "returns": [finite_or_none(x) for x in agent],
        "equal_weight": [finite_or_none(x) for x in ew],
        "qqq": [finite_or_none(x) for x in qqq] if qqq is not None else None,
        "metrics": _metrics(dates, agent, qqq, periods_per_year),
        "equal_weight_metrics": _metrics(dates, ew, qqq, periods_per_year),
        "vs_equal_weight": relative_or_note(agent, ew, periods_per_year=periods_per_year, seed=seed),
    }
    if candidates:
        slots = {len(c) for c in candidates}
        if len(slots) != 1:
            raise ValueError("every fold needs the same number of candidates for PBO")
        matrix = np.column_stack([np.concatenate([fold[k].agent for fold in candidates]) for k in range(slots.pop())])
        record["pbo"] = pbo_of_candidates(matrix)
    else:
        record["pbo"] = pbo_of_candidates(np.zeros((0, 0)))
    return record


def fold_report(fold: Fold, span: SpanReturns, *, periods_per_year: int, seed: int = 0) -> dict[str, Any]:
    """One fold's test figures: metrics of the selected agent's span and ``vs_equal_weight``."""
    return {
        **fold.to_dict(),
        "test_metrics": _metrics(span.dates, span.agent, span.qqq, periods_per_year),
        "vs_equal_weight": relative_or_note(
            span.agent, span.equal_weight, periods_per_year=periods_per_year, seed=seed
        ),
    }


def run_study(
    task: Mapping[str, Any],
    folds: Sequence[Fold],
    market: MarketData,
    *,
    train: Callable[[dict[str, Any], int, Path], Any],
    candidates: int,
    out: Path,
    seed: int = 0,
    benchmark_returns: pd.Series | None = None,
    device: str = "cpu",
    on_fold: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run a whole study in this process (the CLI's ``walk-forward``).

    Args:
        task: the task dict (its own splits are replaced fold by fold).
        folds: from :func:`trainer.data.folds.plan_folds`.
        market: the loaded panel covering every fold.
        train: ``train(fold_task_dict, seed, checkpoint_path) -> GenerationResult`` (a bound
            :func:`trainer.pod.run_generation`).
        candidates: K >= 1 agents per fold.
        out: folder of the checkpoints (``fold-<i>/candidate-<k>.pt``).
        seed: the study's seed (:func:`candidate_seed`).
        benchmark_returns: QQQ's daily returns over the study, or ``None``.
        on_fold: called with each fold's report when it is done.

    Returns:
        ``{"folds": [...], "out_of_sample": stitched record, "pbo": ...}`` (see :func:`stitch`);
        each fold has its ranges, ``candidates`` (seed, validation score, checkpoint),
        ``selected`` (its candidate index, seed, score, checkpoint), ``test_metrics`` and
        ``vs_equal_weight``.
    """
    ppy = infer_periods_per_year(market.dates)
    reports, selected_spans, all_spans = [], [], []
    for fold in folds:
        task_f = fold_task(task, fold)
        trained = []
        for k in range(candidates):
            s = candidate_seed(seed, fold.index, k)
            result = train(task_f, s, out / f"fold-{fold.index}" / f"candidate-{k}.pt")
            trained.append(
                {"candidate": k, "seed": s, "score": result.score, "checkpoint": str(result.checkpoint_path)}
            )
        best = max(range(len(trained)), key=lambda i: (trained[i]["score"], -i))
        spans = [
            checkpoint_span_returns(c["checkpoint"], market, benchmark_returns=benchmark_returns, device=device)
            for c in trained
        ]
        report = {
            **fold_report(fold, spans[best], periods_per_year=ppy, seed=seed),
            "candidates": trained,
            "selected": trained[best],
        }
        reports.append(report)
        selected_spans.append(spans[best])
        all_spans.append(spans)
        if on_fold is not None:
            on_fold(report)
    record = stitch(selected_spans, periods_per_year=ppy, seed=seed, candidates=all_spans)
    pbo = record.pop("pbo")
    return {"folds": reports, "out_of_sample": record, "pbo": pbo}

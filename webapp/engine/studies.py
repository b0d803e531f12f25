"""Walk-forward studies: plan a study's folds on a task's data and stitch the folds' test spans
(``trainer.data.folds`` and ``trainer.walk_forward``), in the web's plain types."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError
from trainer.util.jsonable import to_jsonable
from webapp.core.errors import AppError, without_field_name
from webapp.engine.backtests import BENCHMARK_TICKER, _benchmark_close, benchmark_path_for
from webapp.engine.market import _market_data_of

#: The fields of a study's plan, with their defaults (``trainer.data.folds.plan_folds``).
PLAN_DEFAULTS = {"fold_years": 1, "validation_days": 252, "gap_days": 5, "train_days": None, "max_folds": None}


def _data_spec(task: dict[str, Any], start: str, end: str) -> Any:
    from trainer.data.spec import DataSpec

    return DataSpec.from_dict({**task["data"], "start": start, "end": end}, prefix="data")


def check_study_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The checks of a plan that need no data (``trainer.data.folds.check_plan``).

    Raises:
        AppError: 400 naming the field (``first_test_year``, ``gap_days``...).
    """
    from trainer.data.folds import check_plan

    try:
        start, end, first, years, val, gap, train_days, max_folds = check_plan(**{**PLAN_DEFAULTS, **plan})
    except TrainerError as exc:
        field = str(exc.details.get("field") or "plan")
        raise AppError(exc.message, fields={field: without_field_name(field, exc.message)}) from None
    return {
        "start": start,
        "end": end,
        "first_test_year": first,
        "fold_years": years,
        "validation_days": val,
        "gap_days": gap,
        "train_days": train_days,
        "max_folds": max_folds,
    }


def plan_study_folds(
    task: dict[str, Any], plan: dict[str, Any], *, data_dir: str | None, cache_dir: str | None
) -> list[dict[str, Any]]:
    """The folds of a study on ``task``'s data (``trainer.data.folds.plan_folds``).

    Args:
        task: the base task's ``TaskSpec`` dict (``webapp.runs.selectors.runs.task_spec``).
        plan: ``start``, ``end``, ``first_test_year`` and optionally ``fold_years``,
            ``validation_days``, ``gap_days``, ``train_days``, ``max_folds``.

    Returns:
        ``[{"index", "train": {"start", "end"}, "validation": ..., "test": ...}, ...]``.

    Raises:
        AppError: 400 naming the field of ``plan`` at fault (or ``data`` when the files fail).
    """
    from trainer.data.folds import plan_folds

    plan = check_study_plan(plan)
    try:
        market = _market_data_of(_data_spec(task, plan["start"], plan["end"]), data_dir=data_dir, cache_dir=cache_dir)
        folds = plan_folds(market.dates, **plan)
    except TrainerError as exc:
        field = str(exc.details.get("field") or "data")
        raise AppError(exc.message, fields={field: without_field_name(field, exc.message)}) from None
    return [fold.to_dict() for fold in folds]


def stitch_study(
    *,
    task: dict[str, Any],
    plan: dict[str, Any],
    folds: Sequence[dict[str, Any]],
    benchmark_path: str | Path | None,
    data_dir: str | None,
    cache_dir: str | None,
    seed: int = 0,
) -> dict[str, Any]:
    """The out-of-sample record of a finished study (``trainer.walk_forward.stitch``).

    Args:
        task: the base task's ``TaskSpec`` dict.
        plan: the study's plan (``start``, ``end``...).
        folds: in fold order, ``{"fold": fold dict, "candidates": [{"agent", "score",
            "checkpoint" (local file)}, ...]}``, candidates best validation score first; the
            first is the fold's selected agent. PBO's column ``k`` is each fold's ``k``-th best
            (the fewest candidates any fold has set the number of columns).

    Returns:
        JSON-able ``{"folds": [...], "out_of_sample": {...}, "pbo": {...}}``: each fold with its
        ranges, ``selected`` (agent id and score), ``candidates``, ``test_metrics`` and
        ``vs_equal_weight``; the stitched record's ``dates``, ``returns``, ``equal_weight``,
        ``qqq``, metrics and ``vs_equal_weight``.

    Raises:
        trainer.errors.TrainerError: a checkpoint or the data cannot be used.
    """
    import pandas as pd

    from trainer.data.folds import Fold
    from trainer.data.timestamps import infer_periods_per_year
    from trainer.walk_forward import checkpoint_span_returns, fold_report, stitch

    market = _market_data_of(_data_spec(task, plan["start"], plan["end"]), data_dir=data_dir, cache_dir=cache_dir)
    qqq = None
    if benchmark_path is not None:
        path = benchmark_path_for(task["data"]["paths"], default=benchmark_path, data_dir=data_dir)
        if path.exists():
            close = _benchmark_close(path, BENCHMARK_TICKER)
            qqq = close.pct_change().dropna()
            qqq.index = pd.DatetimeIndex(qqq.index).normalize()
    ppy = infer_periods_per_year(market.dates)
    width = min(len(f["candidates"]) for f in folds)
    reports, selected, every = [], [], []
    for item in folds:
        fold = Fold.from_dict(item["fold"], index=int(item["fold"]["index"]))
        spans = [
            checkpoint_span_returns(c["checkpoint"], market, benchmark_returns=qqq) for c in item["candidates"][:width]
        ]
        best = item["candidates"][0]
        reports.append(
            {
                **fold_report(fold, spans[0], periods_per_year=ppy, seed=seed),
                "selected": {"agent": best["agent"], "score": best["score"]},
                "candidates": [{"agent": c["agent"], "score": c["score"]} for c in item["candidates"]],
            }
        )
        selected.append(spans[0])
        every.append(spans)
    record = stitch(selected, periods_per_year=ppy, seed=seed, candidates=every)
    pbo = record.pop("pbo")
    return to_jsonable({"folds": reports, "out_of_sample": record, "pbo": pbo})

"""Reads of the studies app: a user's studies, one study with its folds' runs, its chart."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import QuerySet

from webapp.core.errors import AppError
from webapp.studies.models import Study, StudyFold


def study_list(*, user) -> QuerySet[Study]:
    """The user's studies, newest first."""
    return Study.objects.filter(owner=user).select_related("task", "budget")


def study_get(*, user, study_id: int) -> Study:
    """One of the user's studies.

    Raises:
        AppError: 404 when it does not exist or is another user's.
    """
    study = study_list(user=user).filter(pk=study_id).first()
    if study is None:
        raise AppError("study not found", status=404)
    return study


def study_folds(study: Study) -> list[StudyFold]:
    """The study's folds in order, with their runs."""
    return list(StudyFold.objects.filter(study=study).select_related("run").order_by("index"))


def study_equity_figure(study: Study) -> dict[str, Any] | None:
    """The Plotly figure of the stitched record: growth of 1 USD for the selected agents, 1/N
    (cost-free, rebalanced daily) and QQQ on the same out-of-sample days; ``None`` before it is done."""
    record = (study.result or {}).get("out_of_sample")
    if not record:
        return None
    lines = [("selected agents", record["returns"]), ("1/N", record["equal_weight"]), ("QQQ", record.get("qqq"))]
    data = []
    for name, returns in lines:
        if not returns:
            continue
        growth = np.cumprod(1.0 + np.nan_to_num(np.asarray(returns, dtype=np.float64)))
        data.append({"type": "scatter", "mode": "lines", "name": name, "x": record["dates"], "y": growth.tolist()})
    starts = [f["test"]["start"] for f in study.result.get("folds", [])[1:]]
    return {
        "data": data,
        "layout": {
            "title": {"text": "Out-of-sample record (test spans stitched)"},
            "yaxis": {"title": {"text": "growth of 1 USD"}},
            "shapes": [
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": s,
                    "x1": s,
                    "y0": 0,
                    "y1": 1,
                    "line": {"dash": "dot", "width": 1},
                }
                for s in starts
            ],
            "margin": {"t": 40, "r": 10},
            "legend": {"orientation": "h"},
        },
    }

"""Metrics out, for the tools users already keep: a run's training curves, validation scores
and hyperparameters written as TensorBoard event files (tensorboardX's ``SummaryWriter``) or
logged to an MLflow tracking store (``mlflow``'s client; a local ``file:`` folder works).

Layout, the same in both: the run is one TensorBoard folder / one MLflow run (its task's
hyperparameters, seed, kind, algorithm and provenance as parameters; each agent's validation
score against the run's agent count, and the best score); each generation that recorded a
curve is a sub-folder / nested MLflow run whose metrics are the curve's points against
``total_env_steps`` (the line's env steps, the x axis of the run page's curves).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from webapp.runs.models import Agent, Run
from webapp.runs.selectors import curves


def run_params(run: Run) -> dict[str, Any]:
    """The run's parameters, flat: ``hp.<name>`` (the task's hyperparameters), ``env.<name>``,
    seed, kind, algorithm, splits and provenance (``code_version``, ``torch``, ``numpy``,
    ``data_sha256``); lists and ``None`` as text."""
    task = run.task
    found = run.provenance or {}
    params: dict[str, Any] = {
        "run_id": run.pk,
        "kind": task.kind,
        "algorithm": task.algorithm,
        "seed": run.seed,
        "num_pods": run.num_pods,
        "generation_steps": run.generation_steps,
        "leaderboard_size": run.leaderboard_size,
        "fresh_probability": run.fresh_probability,
        "code_version": found.get("code_version", ""),
        "torch": (found.get("packages") or {}).get("torch", ""),
        "numpy": (found.get("packages") or {}).get("numpy", ""),
        "data_sha256": found.get("data_sha256") or "",
    }
    for split in ("train", "validation", "test"):
        params[f"{split}"] = f"{task.splits[split]['start']}..{task.splits[split]['end']}"
    params.update({f"hp.{k}": v for k, v in sorted((task.hyperparameters or {}).items())})
    params.update({f"env.{k}": v for k, v in sorted((task.env or {}).items())})
    return {
        k: (v if isinstance(v, int | float | str) and not isinstance(v, bool) else str(v)) for k, v in params.items()
    }


def _curves(run: Run) -> list[dict[str, Any]]:
    return curves.run_curves(run, list(curves.METRICS))["curves"]


def _scores(run: Run) -> list[tuple[int, float]]:
    """``(created_seq, score)`` of every trained agent with a score, in order."""
    rows = Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED, score__isnull=False).order_by("created_seq")
    return list(rows.values_list("created_seq", "score"))


def _curve_name(curve: dict[str, Any]) -> str:
    return f"gen-{curve['generation_id']}-pod-{curve['pod']}"


def export_tensorboard(run: Run, out_dir: str | Path) -> Path:
    """Write the run's event files under ``out_dir/run-<id>/`` and return that folder.

    ``scores/validation`` (each agent's score, step = its order in the run), ``scores/best``,
    the hyperparameters through ``add_hparams`` (the best score as its metric), and one
    sub-folder per generation with ``train/<metric>`` against ``total_env_steps``.
    """
    from tensorboardX import SummaryWriter

    root = Path(out_dir) / f"run-{run.pk}"
    with SummaryWriter(logdir=str(root)) as writer:
        for seq, score in _scores(run):
            writer.add_scalar("scores/validation", score, global_step=seq)
        if run.best_score is not None:
            writer.add_scalar("scores/best", run.best_score, global_step=0)
        best = {"hparam/best_score": run.best_score if run.best_score is not None else float("nan")}
        writer.add_hparams(run_params(run), best, name="hparams")
    for curve in _curves(run):
        points = curve["points"]
        with SummaryWriter(logdir=str(root / _curve_name(curve))) as writer:
            for name in curves.METRICS:
                for step, value in zip(points["total_env_steps"], points.get(name) or []):
                    if value is not None:
                        writer.add_scalar(f"train/{name}", value, global_step=int(step))
    return root


def export_mlflow(run: Run, tracking_uri: str, *, experiment: str = "paddock") -> str:
    """Log the run to the MLflow store at ``tracking_uri`` (e.g. ``file:/path/mlruns``) in
    ``experiment`` (created when absent); returns the MLflow run id of the Paddock run.

    Each generation's curve is a nested MLflow run (tag ``mlflow.parentRunId``) named
    ``gen-<id>-pod-<index>``; metrics are logged in batches.
    """
    with _file_store_allowed(tracking_uri):
        return _log_mlflow(run, tracking_uri, experiment)


@contextlib.contextmanager
def _file_store_allowed(tracking_uri: str):
    """MLflow 3 refuses its (maintained, not developed) file store unless
    ``MLFLOW_ALLOW_FILE_STORE`` is set; a local folder is what a user without a tracking
    server has, so it is allowed for this export only and the variable restored after."""
    if not tracking_uri.startswith("file:") and "://" in tracking_uri:
        yield
        return
    previous = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["MLFLOW_ALLOW_FILE_STORE"]
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = previous


def _log_mlflow(run: Run, tracking_uri: str, experiment: str) -> str:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    parent = client.create_run(experiment_id, run_name=run.name, tags={"paddock.run_id": str(run.pk)})
    parent_id = parent.info.run_id
    params = [Param(k, str(v)[:6000]) for k, v in run_params(run).items()]
    metrics = [Metric("validation_score", float(score), 0, int(seq)) for seq, score in _scores(run)]
    if run.best_score is not None:
        metrics.append(Metric("best_score", float(run.best_score), 0, 0))
    for start in range(0, max(len(params), len(metrics)), 100):
        client.log_batch(parent_id, metrics=metrics[start : start + 100], params=params[start : start + 100])
    for curve in _curves(run):
        child = client.create_run(
            experiment_id,
            run_name=_curve_name(curve),
            tags={"mlflow.parentRunId": parent_id, "paddock.generation_id": str(curve["generation_id"])},
        )
        points = curve["points"]
        batch = [
            Metric(name, float(value), 0, int(step))
            for name in curves.METRICS
            for step, value in zip(points["total_env_steps"], points.get(name) or [])
            if value is not None
        ]
        for start in range(0, len(batch), 1000):
            client.log_batch(child.info.run_id, metrics=batch[start : start + 1000])
        client.log_batch(child.info.run_id, tags=[RunTag("paddock.pod", str(curve["pod"]))])
        client.set_terminated(child.info.run_id)
    client.set_terminated(parent_id)
    return parent_id

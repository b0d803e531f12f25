"""Cross-run comparison (reads): each run's best score against the env steps it trained,
every agent's hyperparameters and score for parallel coordinates, and the runs' settings
side by side (rows marked where they differ)."""

from __future__ import annotations

from typing import Any

from webapp.runs.models import Agent, Run
from webapp.runs.selectors.payloads import score_note

MAX_RUNS = 8


def score_curves(runs: list[Run]) -> list[dict[str, Any]]:
    """Per run: the best validation score so far after each trained agent (ensembles are not
    counted), against the env steps the run had trained by then (``{"run_id", "name",
    "env_steps": [...], "best": [...], "score_note"}``; ``score_note`` is
    ``score_note``: why the run's scores are noise, or "")."""
    out = []
    for run in runs:
        steps, best, xs, ys = 0, None, [], []
        rows = (
            Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED)
            .order_by("created_seq")
            .values_list("generation__env_steps", "score")
        )
        for own, score in rows:
            steps += int(own or 0)
            if score is not None and (best is None or score > best):
                best = score
            if best is not None:
                xs.append(steps)
                ys.append(best)
        out.append({"run_id": run.pk, "name": run.name, "env_steps": xs, "best": ys, "score_note": score_note(run)})
    return out


def agent_dimensions(runs: list[Run]) -> dict[str, Any]:
    """Every trained agent of the runs (an ensemble has no hyperparameters of its own) as a line
    of a parallel-coordinates chart: the numeric hyperparameters whose values differ between
    agents, then the score; ``run_index`` colours each line by its run."""
    agents = list(
        Agent.objects.filter(run__in=runs, kind=Agent.Kind.TRAINED, score__isnull=False).values_list(
            "run_id", "hyperparameters", "score"
        )
    )
    index = {run.pk: i for i, run in enumerate(runs)}
    keys: dict[str, set] = {}
    for _, hp, _ in agents:
        for key, value in (hp or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                keys.setdefault(key, set()).add(float(value))
    varying = sorted(k for k, values in keys.items() if len(values) > 1)
    dims = [{"label": k, "values": [float((hp or {}).get(k, float("nan"))) for _, hp, _ in agents]} for k in varying]
    dims.append({"label": "score", "values": [float(s) for _, _, s in agents]})
    return {"dimensions": dims, "run_index": [index[r] for r, _, _ in agents], "runs": [r.name for r in runs]}


def settings_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """The runs' settings and their task's, one row per setting: ``{"key", "values", "differs"}``:
    kind, algorithm, seed, the three splits, what produced the run (code version, torch and
    numpy versions, data hash; ``Run.provenance``), tournament settings, env and
    hyperparameters."""
    flat: list[dict[str, Any]] = []
    for run in runs:
        found = run.provenance or {}
        packages = found.get("packages") or {}
        splits = run.task.splits
        row = {
            "kind": run.task.kind,
            "algorithm": run.task.algorithm,
            "seed": run.seed,
            "tickers": ", ".join(run.task.tickers),
            "train": f"{splits['train']['start']} – {splits['train']['end']}",
            "validation": f"{splits['validation']['start']} – {splits['validation']['end']}",
            "test": f"{splits['test']['start']} – {splits['test']['end']}",
            "code version": found.get("code_version", "–"),
            "torch": packages.get("torch", "–"),
            "numpy": packages.get("numpy", "–"),
            "data SHA-256": found.get("data_sha256") or "–",
            "pods": run.num_pods,
            "env steps per generation": run.generation_steps,
            "leaderboard size": run.leaderboard_size,
            "chance of a fresh agent": run.fresh_probability,
            "mutation": ", ".join(sorted((run.mutation or {}).get("bounds") or {})) or "none",
            "budget": run.budget.name,
            "status": run.status,
            "best score": None if run.best_score is None else round(run.best_score, 3),
        }
        row.update({f"env.{k}": v for k, v in sorted((run.task.env or {}).items())})
        row.update({f"hyperparameters.{k}": v for k, v in sorted((run.task.hyperparameters or {}).items())})
        flat.append(row)
    keys = list(dict.fromkeys(k for row in flat for k in row))
    out = []
    for key in keys:
        values = [row.get(key, "–") for row in flat]
        out.append({"key": key, "values": values, "differs": len({repr(v) for v in values}) > 1})
    return out

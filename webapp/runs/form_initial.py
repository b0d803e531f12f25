"""What the New run form starts with: a blank form (the settings the learning-quality study
chose, and splits cut from the chosen dataset or the demo's) or a clone of a run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from webapp.runs.models import Run
from webapp.runs.portfolio_fields import DYNAMICS_DEFAULTS, dynamics_initial

#: The stock-trading env settings the form has a field for (same names as ``Task.env``).
STOCK_ENV_FIELDS = ("initial_cash", "hmax", "buy_cost_pct", "sell_cost_pct", "reward_scaling", "turbulence_threshold")


#: Where a blank form cuts a chosen dataset's range: the fractions of its days before the
#: validation and the test split (70 % train, 15 % validation, 15 % test).
SPLIT_FRACTIONS = (0.70, 0.85)


def blank_initial(dataset=None, *, demo_splits: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """A blank New run form: the portfolio task with the settings the learning-quality study
    chose on validation (log-return reward, the recommended no-trade band, mean - std of the
    quarterly Sharpe ratios; the field initials), and splits: for a chosen ``dataset``, its
    own range cut at :data:`SPLIT_FRACTIONS` with all of its tickers; otherwise
    ``demo_splits`` (the demo task's) when given."""
    initial: dict[str, Any] = {"kind": "portfolio"}
    if dataset is not None:
        start, end = dataset.start_date, dataset.end_date
        span = (end - start).days
        cut1 = start + timedelta(days=int(span * SPLIT_FRACTIONS[0]))
        cut2 = start + timedelta(days=int(span * SPLIT_FRACTIONS[1]))
        bounds_ = {
            "train": (start, cut1),
            "validation": (cut1 + timedelta(days=1), cut2),
            "test": (cut2 + timedelta(days=1), end),
        }
        initial.update({"dataset": dataset.pk, "tickers": ", ".join(dataset.tickers)})
        for split, (low, high) in bounds_.items():
            initial[f"{split}_start"], initial[f"{split}_end"] = low.isoformat(), high.isoformat()
    elif demo_splits:
        for split, (low, high) in demo_splits.items():
            initial[f"{split}_start"], initial[f"{split}_end"] = low, high
    return initial


def initial_from_run(run: Run) -> dict[str, Any]:
    """Form values that recreate ``run`` ("Clone run")."""
    task = run.task
    initial: dict[str, Any] = {
        "name": f"{run.name} (clone)",
        "dataset": task.dataset_id,
        "tickers": ", ".join(task.tickers),
        "algorithm": task.algorithm,
        "algorithms": list(task.algorithms or [])[1:],
        "algorithm_hyperparameters": dict(task.algorithm_hyperparameters or {}),
        "hyperparameters": task.hyperparameters,
        "kind": task.kind,
        "selection_rule": (task.selection or {}).get("rule", "mean_minus_std"),
        "budget": run.budget_id,
        "num_pods": run.num_pods,
        "generation_steps": run.generation_steps,
        "leaderboard_size": run.leaderboard_size,
        "fresh_probability": run.fresh_probability,
        "mutation": run.mutation,
        "seed": run.seed,
    }
    for split in ("train", "validation", "test"):
        initial[f"{split}_start"] = task.splits[split]["start"]
        initial[f"{split}_end"] = task.splits[split]["end"]
    initial.update(_env_initial(task.kind, task.env))
    return initial


#: The env settings each kind's form fields show, as ``{env key: form field}``.
_ENV_FORM_FIELDS = {
    "stock_trading": {key: key for key in STOCK_ENV_FIELDS},
    "portfolio": {"initial_cash": "initial_cash", "cost_pct": "buy_cost_pct", "reward": "reward"},
}


def _env_initial(kind: str, env: dict[str, Any]) -> dict[str, Any]:
    """Form values of a task's env: only its own kind's fields (a portfolio's ``reward_scaling``
    is not the stock-trading field of that name, which keeps its default), every other setting
    of the env carried in ``env_extra`` under its kind, so the clone trains as the task did."""
    shown = _ENV_FORM_FIELDS.get(kind, _ENV_FORM_FIELDS["stock_trading"])
    initial: dict[str, Any] = {field: env[key] for key, field in shown.items() if key in env}
    initial["flatten_at_close"] = bool(env.get("flatten_at_close"))
    if kind == "portfolio":
        initial.setdefault("reward", "log_return")
        initial["rebalance_band"] = env.get("rebalance_band", 0.0)  # a clone trades as the task did
        initial.update(dynamics_initial(env))
    taken = {*shown, "flatten_at_close"}
    if kind == "portfolio":  # shown in their own fields
        taken |= {"rebalance_band", *DYNAMICS_DEFAULTS}
    initial["env_extra"] = {kind: {k: v for k, v in env.items() if k not in taken}}
    return initial

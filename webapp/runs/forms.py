"""Forms of the runs pages: new (or cloned) run, run list filters, pod count, budgets.

The form checks types and shapes (and, for numbers, the trainer's bounds, :mod:`.bounds`); the
trainer's config classes (through ``services``) check values, and their errors come back next
to the field they name (:meth:`RunForm.add_app_error`, :mod:`.form_errors`). The values a
blank or cloned form starts with are :mod:`.form_initial`'s.
"""

from __future__ import annotations

import math
from typing import Any

from django import forms

from webapp import engine
from webapp.core.errors import AppError
from webapp.core.forms import BoundedJSONField
from webapp.core.query import ID_MAX
from webapp.runs import bounds
from webapp.runs.algorithms import default_mutation, form_hyperparameters
from webapp.runs.form_errors import depends_on_failed, field_error_text, form_field_for
from webapp.runs.form_initial import STOCK_ENV_FIELDS
from webapp.runs.models import ClusterBudget, Run
from webapp.runs.portfolio_fields import PortfolioDynamicsFields, dynamics_env
from webapp.runs.selectors import lineage
from webapp.runs.selectors.budgets import budget_queryset, users_for_budgets
from webapp.runs.selectors.runs import dataset_queryset
from webapp.runs.services.common import DEFAULT_GENERATION_STEPS, default_generation_steps


def _bounded(field_class, bound: bounds.Bound, *, help_text: str = "", **kwargs):
    """A number field labelled in words, with the bound as the input's min/max and its range
    in the help text (the services enforce the same ``bounds`` table, for the API too)."""
    attrs: dict[str, Any] = {"step": "1" if bound.integer else "any"}
    if not bound.low_open:
        attrs["min"] = bound.low
    if math.isfinite(bound.high) and not bound.high_open:
        attrs["max"] = bound.high
    widget = forms.NumberInput(attrs=attrs)
    text = f"{help_text} {bound.text()}.".strip()
    return field_class(label=bound.label, help_text=text, widget=widget, validators=[bound.validator()], **kwargs)


class SplitBoundField(forms.CharField):
    """A split bound: a day ``YYYY-MM-DD`` for any dataset, or ``YYYY-MM-DD HH:MM`` (exchange
    time, America/New_York, compared with bar-end stamps) for an intraday dataset; the clean
    value is that text (``engine.parse_moment``). Whether a time of day fits the dataset is
    checked by :meth:`RunForm.clean`."""

    widget = forms.TextInput

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=19, **kwargs)
        self.widget.attrs.update(
            {
                "placeholder": "YYYY-MM-DD",
                "pattern": r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?",
                "title": "YYYY-MM-DD, or YYYY-MM-DD HH:MM (exchange time) for an intraday dataset",
                "class": "split-bound",
            }
        )

    def to_python(self, value):
        text = super().to_python(value)
        if text in self.empty_values:
            return text
        try:
            return engine.parse_moment(text, "date")
        except AppError:
            raise forms.ValidationError(
                "Enter a date YYYY-MM-DD (or YYYY-MM-DD HH:MM, exchange time, for an intraday dataset)."
            ) from None


def _date(label: str) -> SplitBoundField:
    return SplitBoundField(label=label)


class RunForm(PortfolioDynamicsFields, forms.Form):
    """Everything a new run needs: task (data, splits, env, algorithm) and tournament."""

    name = forms.CharField(max_length=200, required=False, help_text="Defaults to the task name.")
    dataset = forms.ModelChoiceField(
        queryset=None,
        help_text="Daily or intraday OHLCV data; upload one on the Datasets page (with an index membership file, "
        "its tasks trade each day's members only). Split dates of an intraday dataset may carry a time, "
        "YYYY-MM-DD HH:MM (exchange time, bar end).",
    )
    tickers = forms.CharField(
        required=False, help_text="Comma-separated subset of the dataset's tickers; empty = all of them."
    )
    train_start = _date("Train from")
    train_end = _date("Train to")
    validation_start = _date("Validation from")
    validation_end = _date("Validation to")
    test_start = _date("Test from")
    test_end = _date("Test to")

    kind = forms.ChoiceField(
        label="Task",
        choices=[
            ("stock_trading", "Stock trading (whole-share trades, FinRL's MDP)"),
            ("portfolio", "Portfolio allocation (target weights; a zero action holds equal weights)"),
        ],
        initial="portfolio",
        required=False,
        help_text="Portfolio tasks use the initial cash and the buy cost as the cost of turnover; "
        "shares per trade, sell cost, reward scaling and turbulence apply to stock trading only.",
    )
    reward = forms.ChoiceField(
        label="Portfolio reward",
        choices=[
            ("log_return", "Log return"),
            ("excess_log_return", "Log return over equal weight"),
            ("differential_sharpe", "Differential Sharpe ratio (Moody & Saffell 2001)"),
        ],
        initial="log_return",
        required=False,
        help_text="Portfolio tasks only.",
    )
    selection_rule = forms.ChoiceField(
        label="Validation score",
        choices=[
            ("mean_minus_std", "Mean - std of the Sharpe ratios of 4 validation quarters"),
            ("worst_window", "Worst Sharpe ratio of 4 validation quarters"),
            ("full_sharpe", "Sharpe ratio of the whole validation window"),
        ],
        initial="mean_minus_std",
        required=False,
        help_text="How generations are ranked; scoring sub-windows keeps one lucky stretch from deciding.",
    )
    initial_cash = _bounded(forms.FloatField, bounds.ENV["initial_cash"], initial=1e6, help_text="Starting cash, USD.")
    hmax = _bounded(
        forms.IntegerField,
        bounds.ENV["hmax"],
        initial=100,
        help_text="Stock trading only: shares bought or sold per unit of action.",
    )
    buy_cost_pct = _bounded(
        forms.FloatField,
        bounds.ENV["buy_cost_pct"],
        initial=1e-3,
        help_text="Cost of buys; for a portfolio task, the cost of all turnover.",
    )
    sell_cost_pct = _bounded(
        forms.FloatField, bounds.ENV["sell_cost_pct"], initial=1e-3, help_text="Stock trading only: cost of sells."
    )
    reward_scaling = _bounded(
        forms.FloatField,
        bounds.ENV["reward_scaling"],
        initial=1e-4,
        help_text="Stock trading only: multiplier of the daily change of value (USD).",
    )
    turbulence_threshold = _bounded(
        forms.FloatField,
        bounds.ENV["turbulence_threshold"],
        required=False,
        help_text="Stock trading only: sell everything on days at or above this turbulence; empty = never.",
    )
    rebalance_band = _bounded(
        forms.FloatField,
        bounds.PORTFOLIO_ENV["rebalance_band"],
        required=False,
        initial=engine.recommended_rebalance_band,
        help_text="Portfolio tasks only: a stock's weight is rebalanced only when it is more than this "
        "fraction of value from its target (below 1/N; 0 = every day). Chosen on validation "
        "(docs/results/learning-quality.md).",
    )
    env_extra = BoundedJSONField(
        required=False,
        widget=forms.HiddenInput,
        help_text="A clone's env settings the form has no field for: {kind: {name: value}}, applied to that kind.",
    )
    flatten_at_close = forms.BooleanField(
        required=False,
        label="Flatten at the session close",
        help_text="Intraday datasets only: hold no position overnight (everything sold, or all cash, "
        "on each session's last bar).",
    )

    algorithm = forms.ChoiceField(
        choices=[(a, a.upper()) for a in engine.algorithms()],
        help_text="Starts with the task kind's default (direct for portfolio, PPO for stock trading; "
        "docs/default-selection.md).",
    )
    hyperparameters = BoundedJSONField(
        required=False,  # {} (or an empty box) is every default, not a missing field
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        help_text="JSON object of the algorithm's settings; keys left out keep their defaults.",
    )
    algorithms = forms.MultipleChoiceField(
        choices=[(a, a.upper()) for a in engine.algorithms()],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Mixed tournament",
        help_text="Other algorithms fresh pods may train, round-robin by pod index (pod 0 the algorithm above). "
        "Children keep their parent's algorithm. None ticked = the algorithm above alone.",
    )
    algorithm_hyperparameters = BoundedJSONField(
        required=False,
        label="Their settings",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text='JSON object per ticked algorithm, e.g. {"sac": {"actor_learning_rate": 0.001}}. Each takes '
        "these values, then the settings above that it shares (num_envs, gamma, hidden_sizes...), then its "
        "defaults.",
    )

    budget = forms.ModelChoiceField(queryset=None, help_text="The compute this run draws on.")
    num_pods = _bounded(
        forms.IntegerField, bounds.RUN["num_pods"], initial=2, help_text="Generations trained at once (one GPU each)."
    )
    generation_steps = _bounded(
        forms.IntegerField,
        bounds.RUN["generation_steps"],
        initial=DEFAULT_GENERATION_STEPS,
        help_text="At least one PPO rollout (num_envs x rollout_steps); starts with the algorithm's default "
        "(2M for direct).",
    )
    leaderboard_size = _bounded(
        forms.IntegerField, bounds.RUN["leaderboard_size"], initial=5, help_text="The agents kept on the leaderboard."
    )
    fresh_probability = _bounded(
        forms.FloatField,
        bounds.RUN["fresh_probability"],
        initial=0.1,
        help_text="That a generation starts from a new random agent.",
    )
    mutation = BoundedJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text='PBT mutation: {"bounds": {name: [low, high]}, "factors": [0.8, 1.25]}; {} = none.',
    )
    seed = _bounded(forms.IntegerField, bounds.RUN["seed"], initial=0)
    seeds = _bounded(
        forms.IntegerField,
        bounds.SEEDS,
        initial=1,
        required=False,
        help_text="Run this configuration with N seeds (seed, seed + 1, ...): a group whose mean and 95 % interval "
        "each run's page shows.",
    )
    start_now = forms.BooleanField(required=False, initial=True, label="Start at once")

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = dataset_queryset(user=user)
        self.fields["budget"].queryset = budget_queryset(user=user).filter(owner=user, ended_at__isnull=True)
        if not self.is_bound:  # a new task of the form's kind starts with that kind's default configuration
            kind = self.initial.get("kind") or self.fields["kind"].initial
            algorithm = self.initial.setdefault("algorithm", engine.default_algorithm(kind))
            hyperparameters = self.initial.setdefault("hyperparameters", form_hyperparameters(algorithm))
            self.initial.setdefault("mutation", default_mutation(algorithm))
            if "generation_steps" not in self.initial:
                self.initial["generation_steps"] = default_generation_steps(algorithm, hyperparameters)

    def clean(self):
        data = super().clean()
        dataset = data.get("dataset")
        if dataset is not None and not dataset.intraday:
            for split in ("train", "validation", "test"):
                for side in ("start", "end"):
                    key = f"{split}_{side}"
                    if len(data.get(key) or "") > 10:
                        self.add_error(
                            key,
                            f"{dataset.name} holds daily bars: give a date YYYY-MM-DD (a time of day needs an "
                            "intraday dataset)",
                        )
        if data.get("kind") == "portfolio":
            self._refuse_stock_trading_settings(data)
        return data

    def _refuse_stock_trading_settings(self, data: dict[str, Any]) -> None:
        """A portfolio task has one cost on turnover (Buy cost) and no shares, turbulence stop or
        value-change reward: a stock-trading field changed from its default is named, not dropped
        without a word (the API refuses them as unknown env settings)."""
        for name in ("sell_cost_pct", "hmax", "reward_scaling", "turbulence_threshold"):
            value, default = data.get(name), self.fields[name].initial
            if value is None or value == default:
                continue
            if name == "sell_cost_pct":
                message = "a portfolio task charges one cost on all turnover: set it as Buy cost"
            else:
                message = "stock trading only: a portfolio task has no such setting"
            self.add_error(name, f"{message} (got {value:g}; leave {default if default is not None else 'it empty'})")

    def clean_hyperparameters(self) -> dict:
        value = self.cleaned_data.get("hyperparameters")
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Enter a JSON object, e.g. {"learning_rate": 0.0003}.')
        return value

    def clean_algorithm_hyperparameters(self) -> dict:
        value = self.cleaned_data.get("algorithm_hyperparameters") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Enter a JSON object, e.g. {"sac": {"tau": 0.01}}.')
        return value

    def clean_env_extra(self) -> dict:
        value = self.cleaned_data.get("env_extra") or {}
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise forms.ValidationError('Enter a JSON object of objects, e.g. {"portfolio": {"dsr_eta": 0.02}}.')
        return value

    def clean_mutation(self) -> dict:
        value = self.cleaned_data.get("mutation") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError("Enter a JSON object.")
        return value

    def clean_tickers(self) -> list[str]:
        raw = self.cleaned_data.get("tickers") or ""
        tickers = [t.strip().upper() for t in raw.replace(";", ",").split(",") if t.strip()]
        if raw.strip() and not tickers:  # ",,," names no ticker: not "all of them" by accident
            raise forms.ValidationError("Name at least one ticker, or leave the field empty for all of them.")
        return tickers

    def task_kwargs(self) -> dict[str, Any]:
        """Arguments of ``services.task_create`` (besides the owner)."""
        d = self.cleaned_data
        return {
            "dataset": d["dataset"],
            "name": d["name"] or f"{d['dataset'].name} {d['algorithm']}",
            "tickers": d["tickers"] or None,
            "splits": {s: [d[f"{s}_start"], d[f"{s}_end"]] for s in ("train", "validation", "test")},
            "env": self._env(),
            "algorithm": d["algorithm"],
            "hyperparameters": d["hyperparameters"],
            "algorithms": [d["algorithm"], *(a for a in d.get("algorithms") or [] if a != d["algorithm"])],
            "algorithm_hyperparameters": d.get("algorithm_hyperparameters") or {},
            "kind": d.get("kind") or "stock_trading",
            "selection": {"rule": d.get("selection_rule") or "mean_minus_std"},
        }

    def partial_task_kwargs(self) -> tuple[dict[str, Any], set[str]] | None:
        """After ``is_valid()`` failed: :meth:`task_kwargs` of the fields that parsed (a split
        with an unparsed bound is ``None``: the services check it as missing, and no order
        against it), and the splits whose bounds did not parse, so that the services can still
        check the rest in the same round. ``None`` without a
        dataset (nothing to check the task against)."""
        d = self.cleaned_data
        if d.get("dataset") is None:
            return None
        broken = {s for s in ("train", "validation", "test") if not (d.get(f"{s}_start") and d.get(f"{s}_end"))}
        kwargs = {
            "dataset": d["dataset"],
            "name": d.get("name") or f"{d['dataset'].name} {d.get('algorithm') or self._kind_default()}",
            "tickers": d.get("tickers") or None,
            "splits": {
                s: None if s in broken else [d[f"{s}_start"], d[f"{s}_end"]] for s in ("train", "validation", "test")
            },
            "env": self._env(),
            "algorithm": d.get("algorithm") or self._kind_default(),
            "hyperparameters": d.get("hyperparameters") if "hyperparameters" in d else {},
            "kind": d.get("kind") or "stock_trading",
            "selection": {"rule": d.get("selection_rule") or "mean_minus_std"},
        }
        return kwargs, broken

    def _kind_default(self) -> str:
        return engine.default_algorithm(self.cleaned_data.get("kind") or "stock_trading")

    def _env(self) -> dict[str, Any]:
        d = self.cleaned_data
        if d.get("kind") == "portfolio":
            env = {"reward": d.get("reward") or "log_return"}
            if d.get("initial_cash") is not None:
                env["initial_cash"] = d["initial_cash"]
            if d.get("buy_cost_pct") is not None:
                env["cost_pct"] = d["buy_cost_pct"]
            if d.get("rebalance_band") is not None:
                env["rebalance_band"] = d["rebalance_band"]
            env.update(dynamics_env(d))
        else:
            env = {k: d[k] for k in STOCK_ENV_FIELDS if d.get(k) is not None}
        if d.get("flatten_at_close"):
            env["flatten_at_close"] = True
        extra = (d.get("env_extra") or {}).get(d.get("kind") or "stock_trading") or {}
        return {**{k: v for k, v in extra.items() if k not in env}, **env}

    def run_kwargs(self) -> dict[str, Any]:
        """Arguments of ``services.run_create`` (besides owner and task)."""
        d = self.cleaned_data
        return {
            "budget": d["budget"],
            "name": d["name"],
            "num_pods": d["num_pods"],
            "generation_steps": d["generation_steps"],
            "leaderboard_size": d["leaderboard_size"],
            "fresh_probability": d["fresh_probability"],
            "mutation": d["mutation"],
            "seed": d["seed"],
        }

    def add_app_error(self, exc: AppError, *, skip_splits: set[str] | None = None) -> None:
        """Show a service error once, next to the field it names (dotted names are mapped),
        in the form's words: ``train.end: 2010-01-01 is before train.start 2019-12-31``
        shows under "Train to" as ``2010-01-01 is before the training start 2019-12-31``.

        ``skip_splits`` (the second half of a round whose fields already failed): errors about
        those splits (checked with placeholders) and about fields that already show an error
        are left out, as are errors of fields that read a field which failed
        (:data:`~webapp.runs.form_errors.DEPENDS_ON`), so nothing is said twice or about a value
        the user did not give."""
        placed = False
        for name, message in exc.fields.items():
            name = name.removeprefix("splits.")  # the form has one field per split bound
            target = form_field_for(name, self.fields)
            placed = True
            if skip_splits is not None:
                if name.partition(".")[0] in skip_splits or (target is not None and target in self.errors):
                    continue
                if depends_on_failed(name, self.errors):
                    continue
            self.add_error(target, field_error_text(name, target, str(message)))
        if not placed:
            self.add_error(None, exc.message)


class RunFilterForm(forms.Form):
    """Filters of the runs list (GET)."""

    status = forms.ChoiceField(choices=[("", "Any status"), *Run.Status.choices], required=False)
    algorithm = forms.ChoiceField(
        choices=[("", "Any algorithm"), *((a, a.upper()) for a in engine.algorithms())], required=False
    )
    q = forms.CharField(required=False, label="Search", widget=forms.TextInput(attrs={"placeholder": "name or id"}))
    tag = forms.CharField(required=False, label="Tag", widget=forms.TextInput(attrs={"placeholder": "tag"}))
    archived = forms.BooleanField(required=False, label="archived runs")


class ScaleForm(forms.Form):
    num_pods = forms.IntegerField(min_value=1, label="Pods")


class BudgetForm(forms.ModelForm):
    """Staff: create a budget and assign it to a user."""

    class Meta:
        model = ClusterBudget
        fields = [
            "name",
            "owner",
            "max_concurrent_pods",
            "gpu_hours_cap",
            "env_step_cap",
            "max_wall_clock_s",
            "deadline",
        ]
        widgets = {"deadline": forms.DateTimeInput(attrs={"type": "datetime-local"})}
        help_texts = {"gpu_hours_cap": "GPU or CPU time the pods may train, in hours."}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["owner"].queryset = users_for_budgets()
        # The bounds the services enforce, as labels, ranges and input limits; a field checked
        # here never reaches the model's database constraints (whose messages are raw).
        for name, bound in bounds.BUDGET.items():
            field = self.fields[name]
            field.label = bound.label
            field.help_text = f"{field.help_text} {bound.text()}; empty = no limit.".strip()
            field.validators = [*bounds.drop_range_validators(field.validators), bound.validator()]
            field.widget.attrs.update({"min": bound.low, "max": bound.high})
        self.fields["max_concurrent_pods"].help_text = f"{bounds.BUDGET['max_concurrent_pods'].text()}."


class AgentFilterForm(forms.Form):
    """Filters and sort of a run's all-agents table (GET)."""

    sort = forms.ChoiceField(choices=[(k, k) for k in lineage.SORTS], required=False)
    # Bounded above too: a number beyond SQLite's 64-bit INTEGER was a 500 at the query.
    pod = forms.IntegerField(min_value=0, max_value=int(bounds.RUN["num_pods"].high) - 1, required=False, label="Pod")
    generation = forms.IntegerField(min_value=1, max_value=ID_MAX, required=False, label="Generation (depth)")
    lineage = forms.IntegerField(min_value=1, max_value=ID_MAX, required=False, label="Line of agent #")
    min_score = forms.FloatField(required=False, label="Score at least")
    leaderboard = forms.BooleanField(required=False, label="on the leaderboard only")

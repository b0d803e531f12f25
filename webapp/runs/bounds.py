"""Bounds of every number a user sets on a task, run or budget, enforced by the services (so
the pages' forms and the API answer alike, with every error at once) and copied into the
forms' ``min``/``max`` attributes and labels.

The env settings' limits are the trainer's (``EnvConfig.BOUNDS``, ``PortfolioConfig.BOUNDS``,
read through :func:`webapp.engine.env_bounds`): this module only adds the labels the pages
show, so a setting added to a config class gets its bounds here without a line of its own,
and the web and the trainer cannot refuse different values. The seed's bound is the trainer's
too (``trainer.util.bounds.SEED``, the command line's ``--seed``). Run and budget settings
belong to the web (no trainer config has them) and are declared here. Every value is checked
by the trainer's one :class:`~trainer.util.bounds.Bound` (:func:`webapp.engine.bound_error`),
so every range is said in the same words.

The limits are far outside anything that trains well and exist so that a typo is an error
naming the field, not a budget spent on hundreds of useless agents (initial cash 1e300 made
every agent score 0) or a database error (0 pods). Hyperparameters are bounded by the
trainer's config classes (``PPOConfig.validate``...); :func:`hyperparameter_errors` collects
every one of their errors instead of the first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator

from webapp import engine
from webapp.core.errors import AppError, fields_message


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low_open``: ``low < value``; ``high_open``: ``value < high``);
    ``integer``: whole numbers only; ``nullable``: ``None`` is allowed. The limits as
    :class:`trainer.util.bounds.Bound` takes them, plus the ``label`` the pages show."""

    label: str
    low: float
    high: float = math.inf
    integer: bool = False
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False
    unit: str = ""

    def limits(self) -> dict[str, Any]:
        """The limits without the label (the keyword arguments of the trainer's ``Bound``)."""
        return {k: v for k, v in asdict(self).items() if k != "label"}

    def error(self, value: Any) -> str | None:
        """Why ``value`` is out of bounds (``"must be at least 1 and at most 256, got 0"``), or
        ``None``. Integers of any length are compared exactly (a 400-digit one is too large)."""
        return engine.bound_error(self.limits(), value)

    def text(self) -> str:
        """The range in words, for help texts: ``"1 to 256"``."""
        return engine.bound_text(self.limits())

    def validator(self) -> Callable[[Any], None]:
        """A validator of a form or serializer field raising :meth:`error`'s one message, so the
        field states the whole range whichever end is crossed (Django's ``MinValueValidator(0)``
        said "greater than or equal to 0" where 0 is refused too, and a model column's 64-bit
        maximum came out as "<= 9223372036854775807")."""

        def check(value: Any) -> None:
            why = self.error(value)
            if why:
                raise ValidationError(why, code="out_of_bounds")

        return check


def drop_range_validators(validators: list) -> list:
    """``validators`` without the min/max ones a model column or a field's ``min_value`` adds
    (their messages state another range than the :meth:`Bound.validator` that replaces them)."""
    return [v for v in validators if not isinstance(v, MinValueValidator | MaxValueValidator)]


#: The labels of env settings on the pages (keys of ``Task.env``), per kind where they differ;
#: a setting without one is labelled by its name (``dsr_eta`` -> ``"Dsr eta"``).
_ENV_LABELS: dict[str, str] = {
    "initial_cash": "Initial cash (USD)",
    "hmax": "Max shares per trade",
    "buy_cost_pct": "Buy cost (fraction, 0.001 = 0.1 %)",
    "sell_cost_pct": "Sell cost (fraction, 0.001 = 0.1 %)",
    "reward_scaling": "Reward scaling (per USD of value change)",
    "turbulence_threshold": "Turbulence threshold",
    "episode_length": "Steps per episode",
}
_KIND_LABELS: dict[str, dict[str, str]] = {
    "portfolio": {
        "cost_pct": "Cost of turnover (fraction, 0.001 = 0.1 %)",
        "reward_scaling": "Reward scaling",
        "rebalance_band": "No-trade band",
        "trade_rate": "Trade rate (fraction of the way to the target per day)",
        "execution_lag": "Execution lag (days)",
    }
}


def _env_table(kind: str) -> dict[str, Bound]:
    """The bounds of kind ``kind``'s env settings: the trainer's limits with the pages' labels."""
    labels = {**_ENV_LABELS, **_KIND_LABELS.get(kind, {})}
    return {
        name: Bound(labels.get(name) or name.replace("_", " ").capitalize(), **limits)
        for name, limits in engine.env_bounds(kind).items()
    }


#: The env bounds of each task kind, generated from the trainer's config classes.
ENV_BY_KIND: dict[str, dict[str, Bound]] = {kind: _env_table(kind) for kind in engine.env_kinds()}
#: The stock-trading env (``EnvConfig``), keys of ``Task.env``.
ENV: dict[str, Bound] = ENV_BY_KIND["stock_trading"]
#: The portfolio env (``PortfolioConfig``), keys of ``Task.env``; the cash and cost limits are
#: the stock-trading ones (the New run form's buy cost is a portfolio task's ``cost_pct``).
PORTFOLIO_ENV: dict[str, Bound] = ENV_BY_KIND["portfolio"]
#: A run's tournament settings.
RUN: dict[str, Bound] = {
    "num_pods": Bound("Pods (generations at once)", 1, 256, integer=True),
    "generation_steps": Bound("Env steps per generation", 1, 1_000_000_000, integer=True),
    "leaderboard_size": Bound("Leaderboard size (K)", 1, 1_000, integer=True),
    "fresh_probability": Bound("Chance of a fresh agent", 0, 1),
    "seed": Bound("Seed", **engine.seed_bound()),  # the trainer's, the command line's --seed too
}
#: How many runs of one configuration "run with N seeds" makes.
SEEDS = Bound("Seeds (runs of this configuration)", 1, 32, integer=True)
#: A budget's limits (``None`` = no limit, not checked).
BUDGET: dict[str, Bound] = {
    "max_concurrent_pods": Bound("Pods at once", 1, 1_024, integer=True),
    "gpu_hours_cap": Bound("Device hours cap", 0, 1_000_000, low_open=True),
    "max_wall_clock_s": Bound("Wall clock per run (s)", 1, 366 * 86_400, integer=True),
    "env_step_cap": Bound("Env steps", 1, 10**15, integer=True),
}


def errors(values: Mapping[str, Any], table: Mapping[str, Bound], *, prefix: str = "") -> dict[str, str]:
    """Every out-of-bounds value of ``values`` (keys missing or ``None`` are skipped), as
    ``{prefix + name: why}``."""
    out = {}
    for name, bound in table.items():
        value = values.get(name)
        if value is None:
            continue
        why = bound.error(value)
        if why:
            out[prefix + name] = why
    return out


#: Most field errors one response carries; the rest are counted (20,000 unknown
#: hyperparameters gave an 11 MB 400).
MAX_FIELD_ERRORS = 20


def raise_all(fields: Mapping[str, str], *, status: int = 400) -> None:
    """Raise one ``AppError`` carrying every field error, at most :data:`MAX_FIELD_ERRORS` of
    them and a ``more_errors`` count of the rest (no-op when there is none)."""
    if fields:
        shown = dict(list(fields.items())[:MAX_FIELD_ERRORS])
        if len(fields) > MAX_FIELD_ERRORS:
            shown["more_errors"] = f"{len(fields) - MAX_FIELD_ERRORS:,} more errors not shown"
        raise AppError(fields_message(shown), fields=shown, status=status)


def collect(fields: dict[str, str], check, *args, **kwargs) -> Any:
    """Run ``check``; merge the fields of an ``AppError`` it raises into ``fields`` (so later
    checks still run and every error comes back at once). Returns ``check``'s result or None."""
    try:
        return check(*args, **kwargs)
    except AppError as exc:
        fields.update({k: str(v) for k, v in (exc.fields or {}).items()} or {"non_field_errors": exc.message})
        return None


def hyperparameter_errors(algorithm: str, hyperparameters: Mapping[str, Any], validate) -> dict[str, str]:
    """Every hyperparameter error: each key is validated alone with the defaults for the rest
    (``validate(algorithm, {key: value})`` raises ``AppError``), so three bad keys give three
    errors; cross-field checks run afterwards, on the whole dict."""
    out: dict[str, str] = {}
    for done, (key, value) in enumerate(hyperparameters.items()):
        if len(out) > MAX_FIELD_ERRORS:  # enough to show; the rest are not checked one by one
            out["hyperparameters"] = f"{len(hyperparameters) - done:,} more keys not checked"
            break
        collect(out, validate, algorithm, {key: value})
    return out

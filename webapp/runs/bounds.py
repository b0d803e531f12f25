"""Bounds of every number a user sets on a task, run or budget: one table, enforced by the
services (so the pages' forms and the API answer alike, with every error at once) and copied
into the forms' ``min``/``max`` attributes and labels.

The limits are far outside anything that trains well and exist so that a typo is an error
naming the field, not a budget spent on hundreds of useless agents (initial cash 1e300 made
every agent score 0) or a database error (0 pods). Hyperparameters are bounded by the
trainer's config classes (``PPOConfig.validate``...); :func:`hyperparameter_errors` collects
every one of their errors instead of the first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webapp.core.errors import AppError


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low_open``: ``low < value``); ``integer``: whole numbers only."""

    label: str
    low: float
    high: float
    integer: bool = False
    low_open: bool = False
    unit: str = ""

    def error(self, value: Any) -> str | None:
        """Why ``value`` is out of bounds, or ``None``.

        Integers are compared exactly, never through ``float``: JSON allows integers of any
        length, and one of 400 digits has no float (``OverflowError``); it is simply too large.
        """
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number, got {_shown(value)}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if self.integer and isinstance(value, float) and not value.is_integer():
            return f"must be a whole number, got {value!r}"
        too_low = value <= self.low if self.low_open else value < self.low
        if too_low or value > self.high:
            low = f"more than {_num(self.low)}" if self.low_open else f"at least {_num(self.low)}"
            return f"must be {low} and at most {_num(self.high)}{self.unit}, got {_num(value)}"
        return None

    def text(self) -> str:
        """The range in words, for help texts: ``"1 to 256"``."""
        if self.low_open:
            return f"more than {_num(self.low)}, at most {_num(self.high)}{self.unit}"
        return f"{_num(self.low)} to {_num(self.high)}{self.unit}"


def _num(value: float) -> str:
    """``10000000000.0`` -> ``"10,000,000,000"``, ``1e300`` -> ``"1e+300"``, ``0.1`` -> ``"0.1"``;
    an integer too long for a float is shown by its length (``"a 400-digit number"``)."""
    if isinstance(value, int) and abs(value) >= 10**100:
        return f"a {len(str(abs(value)))}-digit number"
    if float(value).is_integer() and abs(value) < 1e13:
        return f"{int(value):,}"
    return f"{value:g}"


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error message must not grow with the input)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: The stock-trading env (``EnvConfig``), keys of ``Task.env``.
ENV: dict[str, Bound] = {
    "initial_cash": Bound("Initial cash (USD)", 100, 1e10, unit=" USD"),
    "hmax": Bound("Max shares per trade", 1, 1_000_000, integer=True),
    "buy_cost_pct": Bound("Buy cost (fraction, 0.001 = 0.1 %)", 0, 0.1),
    "sell_cost_pct": Bound("Sell cost (fraction, 0.001 = 0.1 %)", 0, 0.1),
    "reward_scaling": Bound("Reward scaling (per USD of value change)", 0, 1, low_open=True),
    "turbulence_threshold": Bound("Turbulence threshold", 0, 1e6, low_open=True),
}
#: The portfolio env (``PortfolioConfig``), keys of ``Task.env``: the same limits as the
#: stock-trading fields they match (the New run form's buy cost is a portfolio task's
#: ``cost_pct``), so the form and the API refuse the same values for both kinds.
PORTFOLIO_ENV: dict[str, Bound] = {
    "initial_cash": ENV["initial_cash"],
    "cost_pct": Bound("Cost of turnover (fraction, 0.001 = 0.1 %)", ENV["buy_cost_pct"].low, ENV["buy_cost_pct"].high),
    "reward_scaling": Bound("Reward scaling", ENV["reward_scaling"].low, ENV["reward_scaling"].high, low_open=True),
    "trade_rate": Bound("Trade rate (fraction of the way to the target per day)", 0, 1, low_open=True),
    "execution_lag": Bound("Execution lag (days)", 0, 1, integer=True),
}
#: The env bounds of each task kind.
ENV_BY_KIND: dict[str, dict[str, Bound]] = {"stock_trading": ENV, "portfolio": PORTFOLIO_ENV}
#: A run's tournament settings.
RUN: dict[str, Bound] = {
    "num_pods": Bound("Pods (generations at once)", 1, 256, integer=True),
    "generation_steps": Bound("Env steps per generation", 1, 1_000_000_000, integer=True),
    "leaderboard_size": Bound("Leaderboard size (K)", 1, 1_000, integer=True),
    "fresh_probability": Bound("Chance of a fresh agent", 0, 1),
    "seed": Bound("Seed", 0, 2**31 - 1, integer=True),
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


def raise_all(fields: Mapping[str, str], *, status: int = 400) -> None:
    """Raise one ``AppError`` carrying every field error (no-op when there is none)."""
    if not fields:
        return
    items = list(fields.items())
    if len(items) == 1:
        message = f"{items[0][0]}: {items[0][1]}"
    else:
        message = f"{len(items)} fields are invalid: " + "; ".join(f"{k}: {v}" for k, v in items)
    raise AppError(message, fields=dict(fields), status=status)


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
    for key, value in hyperparameters.items():
        collect(out, validate, algorithm, {key: value})
    return out
